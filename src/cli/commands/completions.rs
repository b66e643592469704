//! `completions <shell>`: a completion script for bash, zsh or fish, generated from the
//! command-line definitions, plus run-id completion for every subcommand that takes a run.
//! Run ids come from `git tabellio __complete-runs` (see [`COMPLETE_RUNS`]), which lists the
//! ledger refs' names and reads nothing else, so completing stays fast and works on a ledger
//! this version cannot parse.

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
    let runs = commands_taking_a_run(&crate::cli::full_command(Cli::command())).join(" ");
    let script = match args.shell {
        Shell::Bash => format!("{script}\n{}", bash_extra(&runs)),
        Shell::Zsh => zsh_with_runs(&script),
        Shell::Fish => format!("{script}{}", fish_extra(&runs)),
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

/// Run ids for operands of `runs`' commands, `_git_tabellio` for git's completion (which calls
/// `_git_<command>` with the words of the whole `git …` line), and the binary's own
/// `complete` line pointing at the run-aware function.
fn bash_extra(runs: &str) -> String {
    format!(
        r#"
# Run ids, from the ledger refs of the repository being completed in.
__git_tabellio_runs() {{
    if declare -F __git >/dev/null; then
        __git tabellio __complete-runs
    else
        git tabellio __complete-runs 2>/dev/null
    fi
}}

# Complete `git-tabellio <words>` ($1: the program, $2: the word, $3: the word before), adding
# run ids where a subcommand takes one.
__git_tabellio_complete() {{
    local sub="" w i
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in -*) ;; *) sub="$w"; break ;; esac
    done
    _git__tabellio "$@"
    # clap lists operands as placeholders such as `[RUN]`: never a word to insert.
    local keep=() r
    for r in "${{COMPREPLY[@]}}"; do
        case "$r" in \[*|\<*) ;; *) keep+=("$r") ;; esac
    done
    COMPREPLY=("${{keep[@]}}")
    case " {runs} " in
        *" $sub "*)
            if [[ -n "$sub" && "$2" != -* && "$3" != -m && "$3" != --message ]]; then
                local id
                while IFS= read -r id; do
                    [[ "$id" == "$2"* ]] && COMPREPLY+=("$id")
                done < <(__git_tabellio_runs)
            fi
            ;;
    esac
}}
complete -F __git_tabellio_complete -o bashdefault -o default {BIN}

# git's bash completion calls `_git_tabellio` for `git tabellio …`; the words before
# `tabellio` (`git`, `-C <dir>`, …) are git's, so complete as if `git-tabellio` were typed.
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
}}
"#
    )
}

/// zsh: every `run` operand (but `start`'s, a new id) completes run ids instead of files.
/// The helper goes before the script's last block, which calls the completion function the
/// first time the file is autoloaded.
fn zsh_with_runs(script: &str) -> String {
    const HELPER: &str = r#"# Run ids, from the ledger refs of the repository being completed in.
(( $+functions[_git_tabellio_runs] )) ||
_git_tabellio_runs() {
    local -a ids
    ids=(${(f)"$(git tabellio __complete-runs 2>/dev/null)"})
    _describe -t runs 'run id' ids
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
        } else {
            out.push_str(line);
        }
        out.push('\n');
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
