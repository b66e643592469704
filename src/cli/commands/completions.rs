//! `completions <shell>`: a completion script for bash, zsh or fish, generated from the
//! command-line definitions, plus run-id completion for every subcommand that takes a run and
//! check-name completion after `--check`. Run ids come from `git tabellio __complete-runs`
//! (see [`COMPLETE_RUNS`]), which lists the ledger refs' names and reads nothing else, so
//! completing stays fast and works on a ledger this version cannot parse; check names from
//! `git tabellio __complete-checks` ([`COMPLETE_CHECKS`]), the checks of the policy committed
//! at `HEAD` of the worktree completed in.

use clap::CommandFactory;
use serde_json::json;

use tabellio::{Error, Result};

use crate::cli::{Cli, Ctx, Output};

/// The shells `completions` writes scripts for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    /// Also completes `git tabellio …` inside git's own bash completion.
    Bash,
    /// Also completes `git tabellio …` inside zsh's git completion.
    Zsh,
    /// fish's git completion hands `git tabellio …` to this script.
    Fish,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    pub shell: Shell,
}

/// The binary's name: completions attach to it, and git runs it for `git tabellio`.
const BIN: &str = "git-tabellio";

pub fn cmd_completions(_ctx: &Ctx, args: &CompletionsArgs) -> Result<Output> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut cmd, BIN, &mut script);
    let script = String::from_utf8(script)
        .map_err(|e| Error::internal("the completion script is not UTF-8").caused_by(e))?;
    let full = crate::cli::full_command(Cli::command());
    let runs = commands_taking_a_run(&full).join(" ");
    let checks = commands_with_check(&full).join(" ");
    let valued = options_taking_a_value(&full).join(" ");
    let script = match args.shell {
        Shell::Bash => format!(
            "{}\n{}",
            bash_function_names(&script),
            bash_extra(&runs, &checks, &valued)
        ),
        Shell::Zsh => zsh_with_runs(&script),
        Shell::Fish => format!(
            "{}{}{}",
            fish_checks(&script),
            fish_operand_values(&full),
            fish_extra(&runs)
        ),
    };
    Ok(Output::new(json!({ "script": script }), script))
}

/// The subcommands whose operand is an existing run's id (an argument named `run`; `start`'s
/// names a new run).
fn commands_taking_a_run(cmd: &clap::Command) -> Vec<String> {
    cmd.get_subcommands()
        .filter(|s| s.get_name() != "start")
        .filter(|s| s.get_positionals().any(|a| a.get_id() == "run"))
        .map(|s| s.get_name().to_string())
        .collect()
}

/// The subcommands with a `--check <name>` option: its values are the policy's check names.
fn commands_with_check(cmd: &clap::Command) -> Vec<String> {
    cmd.get_subcommands()
        .filter(|s| s.get_arguments().any(|a| a.get_long() == Some("check")))
        .map(|s| s.get_name().to_string())
        .collect()
}

/// Every option spelling (`-m`, `--message`) of any subcommand that takes a value: the word
/// after one is that value, never a run id.
fn options_taking_a_value(cmd: &clap::Command) -> Vec<String> {
    let mut out: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|s| s.get_arguments())
        .filter(|a| !a.is_positional() && a.get_action().takes_values())
        .flat_map(|a| {
            let short = a.get_short().map(|c| format!("-{c}"));
            let long = a.get_long().map(|l| format!("--{l}"));
            short.into_iter().chain(long)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// clap_complete names the bash functions of a binary with a `-` in its name two ways: the
/// words it has seen become `git__tabellio__subcmd__land`, the `case` arm that completes them
/// `git__subcmd__tabellio__subcmd__land`, so no arm ever matched and nothing below the command
/// names completed. The arms get the names the words are given.
fn bash_function_names(script: &str) -> String {
    let seen = BIN.replace('-', "__");
    let arm = BIN.replace('-', "__subcmd__");
    script.replace(&arm, &seen)
}

/// Run ids for operands of `runs`' commands (not after one of the `valued` options), check
/// names after `--check` of `checks`' commands, `_git_tabellio` for git's completion (which
/// calls `_git_<command>` with the words of the whole `git …` line), and the binary's own
/// `complete` line pointing at the run-aware function.
fn bash_extra(runs: &str, checks: &str, valued: &str) -> String {
    format!(
        r#"
# Run ids (`__complete-runs`) or check names (`__complete-checks`), from the repository being
# completed in (after git's `-C <dir>` when git's completion calls us).
__git_tabellio_list() {{
    if declare -F __git >/dev/null; then
        __git tabellio "$1"
    else
        git tabellio "$1" 2>/dev/null
    fi
}}

# Complete `git-tabellio <words>` ($1: the program, $2: the word, $3: the word before), adding
# run ids where a subcommand takes one and check names after `--check`.
__git_tabellio_complete() {{
    local sub="" w i id
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in -*) ;; *) sub="$w"; break ;; esac
    done
    if [[ "$3" == --check ]]; then
        case " {checks} " in
            *" $sub "*)
                COMPREPLY=()
                while IFS= read -r id; do
                    [[ "$id" == "$2"* ]] && COMPREPLY+=("$id")
                done < <(__git_tabellio_list __complete-checks)
                return 0
                ;;
        esac
    fi
    _git__tabellio "$@"
    # clap lists operands as placeholders such as `[RUN]`: never a word to insert. Options are
    # offered once the word starts with `-`, as git's own completion does.
    local keep=() r
    for r in "${{COMPREPLY[@]}}"; do
        case "$r" in
            \[*|\<*) ;;
            -*) [[ "$2" == -* ]] && keep+=("$r") ;;
            *) keep+=("$r") ;;
        esac
    done
    COMPREPLY=("${{keep[@]}}")
    case " {runs} " in
        *" $sub "*)
            case " {valued} " in *" $3 "*) return 0 ;; esac
            if [[ -n "$sub" && "$2" != -* ]]; then
                while IFS= read -r id; do
                    [[ "$id" == "$2"* ]] && COMPREPLY+=("$id")
                done < <(__git_tabellio_list __complete-runs)
            fi
            ;;
    esac
}}
complete -F __git_tabellio_complete -o bashdefault -o default {BIN}

# git's bash completion calls `_git_tabellio` for `git tabellio …` (loading this file first,
# as bash-completion loads a command's file, when it is not loaded yet); the words before
# `tabellio` (`git`, `-C <dir>`, …) are git's, so complete as if `git-tabellio` were typed.
# git completes with `-o nospace`: a word that is complete gets its space here, as git's own
# completions do, and file names keep bash's file-name handling.
_git_tabellio() {{
    local i idx=-1
    for (( i = 1; i < COMP_CWORD; i++ )); do
        if [[ "${{COMP_WORDS[i]}}" == tabellio ]]; then idx=$i; break; fi
    done
    (( idx < 0 )) && return
    local -a COMP_WORDS=({BIN} "${{COMP_WORDS[@]:idx+1}}")
    local COMP_CWORD=$(( COMP_CWORD - idx ))
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    __git_tabellio_complete {BIN} "$cur" "$prev"
    local r files=0
    for r in "${{COMPREPLY[@]}}"; do
        [[ -e "$r" ]] && files=1
    done
    if (( files )); then
        compopt -o filenames 2>/dev/null
    elif (( ${{#COMPREPLY[@]}} )); then
        COMPREPLY=("${{COMPREPLY[@]/%/ }}")
    fi
}}
"#
    )
}

/// zsh: every `run` operand (but `start`'s, a new id) completes run ids instead of files, and
/// `--check` the policy's check names. The helpers go before the script's last block, which calls the completion function the
/// first time the file is autoloaded.
fn zsh_with_runs(script: &str) -> String {
    const HELPER: &str = r#"# Run ids, from the ledger refs of the repository being completed in.
(( $+functions[_git_tabellio_runs] )) ||
_git_tabellio_runs() {
    local -a ids
    ids=(${(f)"$(git tabellio __complete-runs 2>/dev/null)"})
    _describe -t runs 'run id' ids
}

# Check names, from the policy committed at HEAD.
(( $+functions[_git_tabellio_checks] )) ||
_git_tabellio_checks() {
    local -a names
    names=(${(f)"$(git tabellio __complete-checks 2>/dev/null)"})
    _describe -t checks 'check' names
}

"#;
    let mut out = String::new();
    let mut section = "";
    for line in script.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("(start)") {
            section = "start";
        } else if trimmed.starts_with('(') && trimmed.ends_with(')') {
            section = "";
        }
        if trimmed.starts_with("if [ \"$funcstack[1]\"") {
            out.push_str(HELPER);
        }
        let is_run = trimmed.starts_with("'::run") || trimmed.starts_with("':run");
        if is_run && section != "start" {
            out.push_str(&line.replace(":_default'", ":_git_tabellio_runs'"));
        } else if trimmed.starts_with("'*--check=[") {
            out.push_str(&line.replace(":_default'", ":_git_tabellio_checks'"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// fish: `--check` takes the policy's check names (instead of files).
fn fish_checks(script: &str) -> String {
    script
        .lines()
        .map(|line| match line.strip_suffix(" -r") {
            Some(head) if line.contains(" -l check ") => {
                format!("{head} -x -a \"(git tabellio {COMPLETE_CHECKS} 2>/dev/null)\"\n")
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

/// fish: the values of a subcommand's operand that takes one of a fixed set (`completions
/// <shell>`), which clap_complete leaves out of fish scripts.
fn fish_operand_values(cmd: &clap::Command) -> String {
    let mut out = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            if !values.is_empty() {
                out.push_str(&format!(
                    "complete -c {BIN} -n \"__fish_git_tabellio_using_subcommand {}\" -f -a \"{}\"\n",
                    sub.get_name(),
                    values.join(" ")
                ));
            }
        }
    }
    out
}

/// fish: run ids after any of `runs`' commands.
fn fish_extra(runs: &str) -> String {
    format!(
        r#"
# Run ids, from the ledger refs of the repository being completed in.
complete -c {BIN} -n "__fish_seen_subcommand_from {runs}" -f -a "(git tabellio __complete-runs 2>/dev/null)" -d 'run'
"#
    )
}

/// The first argument that asks for [`complete_runs`]. It is no clap subcommand, because
/// clap_complete offers hidden subcommands like any other, and people never type it.
pub const COMPLETE_RUNS: &str = "__complete-runs";

/// One run id a line, from the names of the ledger refs (nothing is parsed), for completion
/// scripts; outside a repository, nothing.
pub fn complete_runs(ctx: &Ctx) -> Result<Output> {
    let ids: Vec<String> = match ctx.store() {
        Ok(store) => store
            .list_ledgers()?
            .into_iter()
            .map(|(id, _)| id)
            .collect(),
        Err(_) => Vec::new(),
    };
    let human: String = ids.iter().map(|id| format!("{id}\n")).collect();
    Ok(Output::new(json!({ "runs": ids }), human))
}

/// The first argument that asks for [`complete_checks`], like [`COMPLETE_RUNS`].
pub const COMPLETE_CHECKS: &str = "__complete-checks";

/// The names of the checks the policy committed at `HEAD` defines, one a line, for completion
/// scripts (`--check <TAB>`); nothing outside a repository, without a policy, or when the
/// policy cannot be read.
pub fn complete_checks(ctx: &Ctx) -> Result<Output> {
    let names: Vec<String> = ctx
        .store()
        .ok()
        .and_then(|store| {
            let head = store.head().ok()?.id?;
            tabellio::store::policy::policy_at(store, head).ok()?
        })
        .map(|policy| policy.checks.into_keys().collect())
        .unwrap_or_default();
    let human: String = names.iter().map(|n| format!("{n}\n")).collect();
    Ok(Output::new(json!({ "checks": names }), human))
}
