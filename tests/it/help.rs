//! Help as git users expect it: manual pages that `git tabellio --help` opens, completion
//! scripts for bash (inside git's own completion too), zsh and fish, and a description for
//! every command and flag.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{hermetic, path_with_binary, TestEnv, BIN};

/// `<prefix>/bin/git-tabellio`, the built binary linked (or copied) there, as `cargo install
/// --root <prefix>` would place it.
fn installed_binary(t: &TestEnv) -> PathBuf {
    let bin = t.path().join("prefix").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("git-tabellio");
    if std::fs::hard_link(BIN, &exe).is_err() {
        std::fs::copy(BIN, &exe).unwrap();
    }
    exe
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// The `.TH` header of a roff page: its title and section.
fn th_header(page: &str) -> (String, String) {
    let line = page
        .lines()
        .find(|l| l.starts_with(".TH "))
        .unwrap_or_else(|| panic!("no .TH line in:\n{page}"));
    let mut words = line.split_whitespace().skip(1);
    (
        words.next().unwrap().to_string(),
        words.next().unwrap().to_string(),
    )
}

#[test]
fn man_prints_the_main_page_as_roff() {
    let t = TestEnv::new();
    let r = t.tab(&["man"]);
    r.ok();
    assert_eq!(
        th_header(&r.stdout),
        ("git-tabellio".into(), "1".into()),
        "{}",
        r.desc
    );
    assert!(
        r.stdout.contains("git\\-tabellio\\-finish(1)"),
        "{}",
        r.desc
    );
    let (code, j) = t.tab_json(&["man"]);
    assert_eq!(code, 0);
    assert!(j["page"].as_str().unwrap().starts_with(".ie"), "{j}");
}

#[test]
fn installed_man_pages_open_through_git_help() {
    let t = TestEnv::new();
    let exe = installed_binary(&t);
    let prefix = t.path().join("prefix");
    let man1 = prefix.join("share").join("man").join("man1");

    // Without a directory: next to the binary's prefix, where `man` looks for PATH's commands.
    let r = t.command(exe.to_str().unwrap(), &t.repo, &["man", "--install"]);
    r.ok();
    let main_page = man1.join("git-tabellio.1");
    let finish_page = man1.join("git-tabellio-finish.1");
    for page in [
        &main_page,
        &finish_page,
        &man1.join("git-tabellio-plans-status.1"),
    ] {
        assert!(
            r.stdout.contains(&format!("wrote {}", page.display())),
            "{}",
            r.desc
        );
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.file_stem().unwrap().to_str().unwrap();
        assert_eq!(th_header(&text), (name.to_string(), "1".into()));
        // Examples set line by line, not filled into one paragraph.
        assert!(
            text.contains(".SH EXAMPLES\n.nf\n  git tabellio "),
            "{text}"
        );
    }
    // Scripts run only by completion have no page.
    assert!(!man1.join("git-tabellio-__complete-runs.1").exists());
    // Written by rename: no temporary file is left, and installing again replaces the pages.
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&man1)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let first = names();
    assert!(first.iter().all(|n| n.ends_with(".1")), "{first:?}");
    t.command(exe.to_str().unwrap(), &t.repo, &["man", "--install"])
        .ok();
    assert_eq!(names(), first);

    // `git tabellio --help` is git's: it runs `man git-tabellio`, found from PATH alone.
    if !on_path("man") {
        eprintln!("no `man` on this machine: checked the pages' headers only");
        return;
    }
    let mut cmd = Command::new("git");
    cmd.args(["-c", "help.format=man", "tabellio", "--help"])
        .current_dir(&t.repo);
    hermetic(&mut cmd, &t.home);
    let path = format!("{}:{}", exe.parent().unwrap().display(), path_with_binary());
    cmd.env("PATH", path)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env_remove("MANPATH");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("SYNOPSIS")
            && stdout.contains("git-tabellio-finish(1)"),
        "git tabellio --help: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_install_into_a_place_that_cannot_be_written_is_a_usage_error() {
    let t = TestEnv::new();
    let (code, j) = t.tab_json(&["man", "--install", "/dev/null/man1"]);
    assert_eq!(code, 2, "{j}");
    assert_eq!(j["error"]["code"], "usage");
    assert!(
        j["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--install <dir>"),
        "{j}"
    );
}

#[test]
fn the_json_usage_hint_names_a_help_command_that_works() {
    let t = TestEnv::new();
    let (code, j) = t.tab_json(&["start"]);
    assert_eq!(code, 2);
    let hint = j["error"]["hint"].as_str().unwrap();
    // The first command in backquotes, run through git as a person would paste it.
    let command = hint.split('`').nth(1).unwrap();
    let argv: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&argv[..2], ["git", "tabellio"], "{hint}");
    let r = t.git(&argv[1..]);
    r.ok();
    assert!(
        r.stdout.contains("Usage:") && r.stdout.contains("finish"),
        "{}",
        r.desc
    );
}

fn completion_script(t: &TestEnv, shell: &str) -> PathBuf {
    let r = t.tab(&["completions", shell]);
    r.ok();
    let path = t.path().join(format!("completion.{shell}"));
    std::fs::write(&path, &r.stdout).unwrap();
    path
}

#[test]
fn completion_scripts_are_valid_for_their_shells() {
    let t = TestEnv::new();
    let bash = completion_script(&t, "bash");
    t.command("bash", t.path(), &["-n", bash.to_str().unwrap()])
        .ok();
    let text = std::fs::read_to_string(&bash).unwrap();
    assert!(
        text.contains("_git_tabellio()"),
        "no function for git's completion"
    );
    for (shell, marker) in [
        ("zsh", "#compdef git-tabellio"),
        ("fish", "complete -c git-tabellio"),
    ] {
        let script = completion_script(&t, shell);
        let text = std::fs::read_to_string(&script).unwrap();
        assert!(text.contains(marker), "{shell}:\n{text}");
        assert!(
            text.contains("__complete-runs"),
            "{shell} completes no run ids"
        );
        if on_path(shell) {
            t.command(shell, t.path(), &["-n", script.to_str().unwrap()])
                .ok();
        }
    }
}

#[test]
fn complete_runs_lists_the_ledger_refs() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "one"]).ok();
    t.tab(&["start", "fix-2", "--task", "two"]).ok();
    let r = t.tab(&["__complete-runs"]);
    r.ok();
    assert_eq!(r.stdout, "fix-2\nr1\n", "{}", r.desc);
    // Outside any repository there is nothing to complete, and nothing to complain about.
    let r = t.tab_in(Path::new("/"), &["__complete-runs"]);
    r.ok();
    assert_eq!(r.stdout, "");
    let r = t.tab_in(Path::new("/"), &["__complete-checks"]);
    r.ok();
    assert_eq!(r.stdout, "");
    // Without a policy there are no checks to name.
    let r = t.tab(&["__complete-checks"]);
    r.ok();
    assert_eq!(r.stdout, "", "{}", r.desc);
    // A script-only command: not offered to people, nor by any completion script.
    let r = t.tab(&["-h"]);
    assert!(!r.stdout.contains("__complete-runs"), "{}", r.desc);
    for shell in ["bash", "zsh", "fish"] {
        let script = t.tab(&["completions", shell]).stdout;
        // Named only where a script asks for the list (or in a comment), never as a candidate.
        let offered = script
            .lines()
            .filter(|l| l.contains("__complete-runs") || l.contains("__complete-checks"))
            .filter(|l| {
                !l.contains("git tabellio __complete-")
                    && !l.contains("__git_tabellio_list __complete-")
                    && !l.trim_start().starts_with('#')
            })
            .collect::<Vec<_>>();
        assert!(offered.is_empty(), "{shell}: {offered:#?}");
    }
}

/// The test driver: bash sources the completion script (and git's own completion when given),
/// sets the words as the shell would, completes, and prints the candidates one a line.
const DRIVER: &str = r#"
if [[ -n "$GIT_COMPLETION" ]]; then source "$GIT_COMPLETION"; fi
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
if [[ -n "$GIT_COMPLETION" ]]; then __git_wrap__git_main; else _git_tabellio; fi
(( ${#COMPREPLY[@]} )) && printf '%s\n' "${COMPREPLY[@]}"
exit 0
"#;

#[test]
fn bash_completes_subcommands_and_run_ids_inside_git() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "one"]).ok();
    t.tab(&["start", "fix-2", "--task", "two"]).ok();
    let script = completion_script(&t, "bash");
    let driver = t.path().join("driver.bash");
    std::fs::write(&driver, DRIVER).unwrap();
    let complete_in = |cwd: &Path, git_completion: &str, words: &[&str]| -> Vec<String> {
        let mut args = vec![driver.to_str().unwrap(), script.to_str().unwrap()];
        args.extend_from_slice(words);
        let env = [("GIT_COMPLETION", std::ffi::OsStr::new(git_completion))];
        let r = t.command_with_env("bash", cwd, &env, &args);
        r.ok();
        r.stdout.lines().map(str::to_string).collect()
    };
    let complete =
        |git_completion: &str, words: &[&str]| complete_in(&t.repo, git_completion, words);
    // git completes with `-o nospace`: each complete word carries its space.
    assert_eq!(
        complete("", &["git", "tabellio", "st"]),
        ["start ", "status "]
    );
    for sub in ["status", "finish", "promote", "abandon", "cleanup"] {
        assert_eq!(
            complete("", &["git", "tabellio", sub, ""]),
            ["fix-2 ", "r1 "],
            "{sub}"
        );
    }
    assert_eq!(
        complete("", &["git", "tabellio", "finish", "f"]),
        ["fix-2 "]
    );
    // A new run's id is the person's to choose.
    assert!(complete("", &["git", "tabellio", "start", ""]).is_empty());

    // Through git's own completion, which calls `_git_tabellio`, after git's `-C <dir>`.
    let git_completion = Path::new("/usr/share/bash-completion/completions/git");
    if !git_completion.is_file() {
        eprintln!("git's bash completion is not installed: checked `_git_tabellio` alone");
        return;
    }
    let gc = git_completion.to_str().unwrap();
    let repo = t.repo.to_str().unwrap();
    let got = complete_in(
        t.path(),
        gc,
        &["git", "-C", repo, "tabellio", "abandon", "r"],
    );
    assert_eq!(got, ["r1 "]);
    let got = complete(gc, &["git", "tabellio", "comp"]);
    assert_eq!(got, ["completions "]);
}

/// The command names in the `Commands:` section of a help text (clap's `help` left out).
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every help text people read is pinned: a change to one is a deliberate snapshot update
/// (`cargo insta review`, or `INSTA_UPDATE=always cargo test`), never an accident.
#[test]
fn help_texts_are_pinned() {
    let t = TestEnv::new();
    let mut pending = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let r = t.tab(&args);
        r.ok();
        let name = if path.is_empty() {
            "git-tabellio".to_string()
        } else {
            format!("git-tabellio-{}", path.join("-"))
        };
        insta::assert_snapshot!(name, r.stdout);
        seen += 1;
        for sub in commands_in(&r.stdout) {
            let mut next = path.clone();
            next.push(sub);
            pending.push(next);
        }
    }
    // The tool, its 23 commands and the nested plans status/reconcile and hooks install.
    assert!(seen >= 27, "only {seen} help texts");
}
