//! Completion as people get it: each shell's script installed where the documentation says,
//! the shell's own machinery loading it (bash-completion's loader, zsh's `compinit` and
//! `$fpath`, fish's completion path) and git's own completion in front for `git tabellio
//! <TAB>`. bash's completion functions are called as bash calls them; zsh completes on a
//! pseudo-terminal of its own (its `zpty` module); fish answers `complete -C`. A shell that is
//! not installed is skipped with a message (CI installs all three).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::util::*;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// A repository with a policy defining the checks `lint` and `test`, and the runs `r1` and
/// `fix-2`.
fn repo_with_runs() -> TestEnv {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("lint", &["true"]), ("test", &["true"])]));
    t.tab(&["start", "r1", "--task", "one"]).ok();
    t.tab(&["start", "fix-2", "--task", "two"]).ok();
    t
}

/// `program args…` in `cwd`, hermetic, with the XDG directories inside the test's HOME.
fn shell(t: &TestEnv, cwd: &Path, program: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(cwd);
    hermetic(&mut cmd, &t.home);
    cmd.env("XDG_DATA_HOME", t.home.join(".local/share"))
        .env_remove("XDG_DATA_DIRS")
        .env_remove("BASH_COMPLETION_USER_DIR")
        .env_remove("ZDOTDIR")
        .env("TERM", "dumb");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        desc: format!(
            "{program} {args:?} in {cwd:?}\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Run the install steps the documentation gives (`sh -c`, in the test's HOME).
fn install(t: &TestEnv, steps: &str) {
    shell(t, &t.repo, "sh", &["-c", steps]).ok();
}

/// The candidates a driver printed: a `== <line>` header, then one `[candidate]` a line.
fn candidates(output: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        if let Some(typed) = line.strip_prefix("== ") {
            current = Some(typed.to_string());
            out.insert(typed.to_string(), Vec::new());
        } else if let (Some(typed), Some(word)) = (
            &current,
            line.trim_end()
                .strip_prefix('[')
                .and_then(|l| l.strip_suffix(']')),
        ) {
            out.get_mut(typed).unwrap().push(word.to_string());
        }
    }
    out
}

/// What each line completes to, sorted, as a table of `line => candidates` to compare whole.
fn table(got: &BTreeMap<String, Vec<String>>, want: &[(&str, &[&str])]) -> (String, String) {
    let show = |line: &str, words: &mut Vec<String>| {
        words.sort();
        format!("{line:?} => {words:?}\n")
    };
    let mut g = String::new();
    let mut w = String::new();
    for (line, words) in want {
        let mut have = got.get(*line).cloned().unwrap_or_default();
        g.push_str(&show(line, &mut have));
        let mut expected: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        w.push_str(&show(line, &mut expected));
    }
    (g, w)
}

/// bash: each argument is a command line with the cursor at its end. The command's completion
/// is loaded as bash-completion loads it on the first <TAB> (git's for `git …`, ours for
/// `git-tabellio …`, and ours again from git's, for `git tabellio …`), then called as bash
/// calls it.
const BASH_DRIVER: &str = r#"
source /usr/share/bash-completion/bash_completion
for line in "$@"; do
    read -ra COMP_WORDS <<< "$line"
    [[ "$line" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="$line"; COMP_POINT=${#line}
    cmd="${COMP_WORDS[0]}"
    complete -p "$cmd" >/dev/null 2>&1 || _completion_loader "$cmd"
    spec=$(complete -p "$cmd")
    func="${spec##*-F }"; func="${func%% *}"
    COMPREPLY=()
    "$func" "$cmd" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    echo "== $line"
    for r in "${COMPREPLY[@]}"; do printf '[%s]\n' "$r"; done
done
"#;

/// The bash install step of README.md and docs/cli.md.
const BASH_INSTALL: &str = "mkdir -p ~/.local/share/bash-completion/completions && \
     git tabellio completions bash > ~/.local/share/bash-completion/completions/git-tabellio";

#[test]
fn bash_completes_flags_values_nested_commands_runs_and_checks_through_git() {
    let bash_completion = Path::new("/usr/share/bash-completion/bash_completion");
    let git_completion = Path::new("/usr/share/bash-completion/completions/git");
    if !bash_completion.is_file() || !git_completion.is_file() {
        eprintln!("skipped: bash-completion or git's bash completion is not installed");
        return;
    }
    let t = repo_with_runs();
    install(&t, BASH_INSTALL);
    let driver = t.path().join("driver.bash");
    std::fs::write(&driver, BASH_DRIVER).unwrap();
    let repo = t.repo.to_str().unwrap();
    let dash_c = format!("git -C {repo} tabellio status ");
    // Through git, every complete word gets its space (git completes with `-o nospace`).
    let want: &[(&str, &[&str])] = &[
        ("git tabellio lan", &["land "]),
        ("git tabellio land --t", &["--target "]),
        (
            "git tabellio land --s",
            &["--squash ", "--sign-key ", "--stats "],
        ),
        ("git tabellio hooks i", &["install "]),
        ("git tabellio completions ", &["bash ", "fish ", "zsh "]),
        ("git tabellio context --format ", &["json ", "markdown "]),
        ("git tabellio finish --check ", &["lint ", "test "]),
        ("git tabellio validate --check t", &["test "]),
        ("git tabellio finish ", &["fix-2 ", "r1 "]),
        ("git tabellio cleanup --force ", &["fix-2 ", "r1 "]),
        (
            "git-tabellio land --s",
            &["--squash", "--sign-key", "--stats"],
        ),
        ("git-tabellio loop --check ", &["lint", "test"]),
        ("git-tabellio status f", &["fix-2"]),
    ];
    let mut lines: Vec<&str> = want.iter().map(|(l, _)| *l).collect();
    lines.push(&dash_c);
    let mut args = vec!["--norc", "--noprofile", driver.to_str().unwrap()];
    args.extend(&lines);
    let r = shell(&t, &t.repo, "bash", &args);
    r.ok();
    let got = candidates(&r.stdout);
    let (g, w) = table(&got, want);
    assert_eq!(g, w, "{}", r.desc);
    // git's `-C <dir>`: the runs of that repository, completed from elsewhere.
    let r = shell(
        &t,
        t.path(),
        "bash",
        &["--norc", "--noprofile", driver.to_str().unwrap(), &dash_c],
    );
    let got = candidates(&r.stdout);
    assert_eq!(got[&dash_c], ["fix-2 ", "r1 "], "{}", r.desc);
}

/// zsh: each argument is a command line; an interactive `zsh -f` on a pseudo-terminal of its
/// own (`zpty`) loads the completion system with `~/.zfunc` on `$fpath` as docs/cli.md says,
/// gets the line and a <TAB>, and prints every candidate its completion adds.
const ZSH_DRIVER: &str = r#"
zmodload zsh/zpty || { print -u2 'zsh has no zpty module'; exit 3 }
init=$HOME/capture-init.zsh
cat > $init <<'EOF'
PROMPT=
fpath=(~/.zfunc $fpath)
autoload -Uz compinit && compinit -u -d ~/.zcompdump
bindkey '^I' complete-word
null-line() { echo -E - $'\0' }
compprefuncs=(null-line)
comppostfuncs=(null-line exit)
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
compadd() {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "$@"
        return $?
    fi
    typeset -a __hits
    builtin compadd -A __hits "$@"
    local h
    for h in $__hits; do echo -E - "[$h]"; done
}
echo ok
EOF
for typed in "$@"; do
    zpty z zsh -f -i
    zpty -w z "source $init"
    repeat 50; do
        zpty -r z line
        [[ $line == ok* ]] && break
    done
    zpty -w -n z "$typed"$'\t'
    print -r -- "== $typed"
    integer tog=0
    while zpty -r z line; do
        if [[ $line == *$'\0'* ]]; then
            (( tog++ )) && break || continue
        fi
        (( tog )) && print -r -- "${line%$'\r'}"
    done
    zpty -d z
done
"#;

#[test]
fn zsh_completes_flags_values_nested_commands_runs_and_checks_through_git() {
    if !on_path("zsh") || !on_path("timeout") {
        eprintln!("skipped: zsh (or coreutils' timeout) is not installed");
        return;
    }
    let t = repo_with_runs();
    install(
        &t,
        "mkdir -p ~/.zfunc && git tabellio completions zsh > ~/.zfunc/_git-tabellio",
    );
    let driver = t.path().join("driver.zsh");
    std::fs::write(&driver, ZSH_DRIVER).unwrap();
    let want: &[(&str, &[&str])] = &[
        ("git tabellio lan", &["land"]),
        ("git tabellio hooks ", &["help", "install"]),
        ("git tabellio completions ", &["bash", "fish", "zsh"]),
        ("git tabellio context --format ", &["json", "markdown"]),
        ("git tabellio finish --check ", &["lint", "test"]),
        ("git tabellio status ", &["fix-2", "r1"]),
        ("git-tabellio loop --check ", &["lint", "test"]),
    ];
    let mut args = vec!["60", "zsh", "-f", driver.to_str().unwrap()];
    args.extend(want.iter().map(|(l, _)| *l));
    args.push("git tabellio land --");
    let r = shell(&t, &t.repo, "timeout", &args);
    if r.code == 3 {
        eprintln!("skipped: {}", r.stderr.trim());
        return;
    }
    r.ok();
    let got = candidates(&r.stdout);
    let (g, w) = table(&got, want);
    assert_eq!(g, w, "{}", r.desc);
    let flags = &got["git tabellio land --"];
    for flag in ["--target", "--squash", "--dry-run"] {
        assert!(flags.iter().any(|f| f == flag), "{flag}: {}", r.desc);
    }
}

/// The fish install steps of docs/cli.md: the script, and the line that hands `git tabellio`
/// to it where fish's git completion does not (fish 3.6 registers `git-tabellio` under its
/// file name, `git git-tabellio`).
const FISH_INSTALL: &str = "mkdir -p ~/.config/fish/completions ~/.config/fish/conf.d && \
     git tabellio completions fish > ~/.config/fish/completions/git-tabellio.fish && \
     echo \"complete -c git -f -n '__fish_git_using_command tabellio' -a '(__fish_git_complete_custom_command tabellio)'\" \
     > ~/.config/fish/conf.d/git-tabellio.fish";

#[test]
fn fish_completes_flags_values_nested_commands_runs_and_checks_through_git() {
    if !on_path("fish") {
        eprintln!("skipped: fish is not installed");
        return;
    }
    let t = repo_with_runs();
    install(&t, FISH_INSTALL);
    let want: &[(&str, &[&str])] = &[
        ("git tabellio lan", &["land"]),
        ("git tabellio land --t", &["--target"]),
        ("git tabellio hooks ", &["help", "install"]),
        ("git tabellio completions ", &["bash", "fish", "zsh"]),
        ("git tabellio context --format ", &["json", "markdown"]),
        ("git tabellio finish --check ", &["lint", "test"]),
        ("git tabellio status ", &["fix-2", "r1"]),
        ("git-tabellio loop --check ", &["lint", "test"]),
    ];
    let mut script = String::new();
    for (line, _) in want {
        script.push_str(&format!(
            "echo '== {line}'; for c in (complete -C '{line}'); echo \"[\"(string split -f1 \\t -- $c)\"]\"; end\n"
        ));
    }
    let r = shell(&t, &t.repo, "fish", &["-c", &script]);
    r.ok();
    let got = candidates(&r.stdout);
    let (g, w) = table(&got, want);
    assert_eq!(g, w, "{}", r.desc);
}
