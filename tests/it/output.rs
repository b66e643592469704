//! What people read: progress lines while checks run (off a terminal, as in a CI log), colour
//! and its switches, check output's escape sequences kept off the terminal, and failures that
//! say why and what next (pinned with snapshots, durations, ids and paths normalised).

use std::ffi::OsStr;

use crate::util::*;

/// A check that prints colour and sets the terminal title before it fails.
const NOISY_FAILURE: &str = r#"print "\e[31mboom\e[0m \e]0;pwned\a tail\n\e[2Jcleared\n"; exit 3"#;

/// `text` with what differs between runs replaced: the test directory, object ids (12 hex
/// digits or more), times (`1.6s`, `1m30s`, `2021 ms`) and RFC 3339 stamps.
fn normalise(t: &TestEnv, text: &str) -> String {
    let text = text.replace(&t.path().display().to_string(), "<tmp>");
    let lines: Vec<String> = text.split('\n').map(normalise_line).collect();
    lines.join("\n")
}

fn normalise_line(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let core = word.trim_end_matches([')', ',']);
        let rest = &word[core.len()..];
        let is_ms = words.get(i + 1).is_some_and(|w| w.starts_with("ms"));
        let digits = !core.is_empty() && core.bytes().all(|b| b.is_ascii_digit());
        if is_duration(core) || (is_ms && digits) {
            out.push(format!("<t>{rest}"));
        } else {
            out.push(hex_runs(word));
        }
    }
    out.join(" ")
}

/// `0.4s`, `12s`, `1m30s`, `2h05m00s`.
fn is_duration(word: &str) -> bool {
    word.len() >= 2
        && word.ends_with('s')
        && word.starts_with(|c: char| c.is_ascii_digit())
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'h' | 'm' | 's'))
}

fn hex_runs(word: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in word.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() >= 12 { "<hex>" } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// Consecutive equal lines once (heartbeats: how many fit depends on the machine's load).
fn dedup_lines(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.dedup();
    lines.join("\n") + "\n"
}

fn tab_env(t: &TestEnv, cwd: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    t.command_with_env(BIN, cwd, &env, args)
}

#[test]
fn a_failed_check_says_why_where_its_output_is_and_what_next() {
    let t = TestEnv::new();
    t.started_run("r1", "a.txt");
    let r = t.tab(&["finish", "r1", "--", "perl", "-e", NOISY_FAILURE]);
    r.code(1);
    // The check's escape sequences never reach the terminal, its text does.
    assert!(!r.stdout.contains('\x1b'), "{}", r.desc);
    assert!(r.stdout.contains("  | boom  tail\n"), "{}", r.desc);
    insta::assert_snapshot!("finish_failed_check", normalise(&t, &r.stdout));

    let context = t.tab(&["context", "r1"]);
    context.ok();
    assert!(!context.stdout.contains('\x1b'), "{}", context.desc);
    assert!(context.stdout.contains("boom  tail"), "{}", context.desc);
}

#[test]
fn a_failed_validate_says_why_and_where() {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("unit", &["perl", "-e", NOISY_FAILURE])]));
    let r = t.tab(&["validate"]);
    r.code(1);
    insta::assert_snapshot!("validate_failed_check", normalise(&t, &r.stdout));
}

#[test]
fn missing_required_checks_are_the_reason_when_every_check_that_ran_passed() {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("unit", &["true"]), ("lint", &["true"])]));
    t.started_run("r1", "a.txt");
    let r = t.tab(&["finish", "r1", "--check", "unit"]);
    r.code(1);
    insta::assert_snapshot!("finish_missing_required", normalise(&t, &r.stdout));
}

#[test]
fn the_plan_gate_is_the_reason_and_its_fix_the_next_command() {
    let t = TestEnv::new();
    t.commit_hygiene_policy();
    let wt = t.started_run("r1", "a.txt");
    write_file(&wt.join("plans/done.md"), "# Plan\n\n- [x] done\n");
    t.commit_all_in(&wt, "plans");
    let r = t.tab(&["finish", "r1"]);
    r.code(1);
    insta::assert_snapshot!("finish_plan_gate", normalise(&t, &r.stdout));
}

/// The `next:` lines of `status r1`.
fn next_of_status(t: &TestEnv) -> String {
    let r = t.tab(&["status", "r1"]);
    r.ok();
    let at = r
        .stdout
        .find("next:")
        .unwrap_or_else(|| panic!("{}", r.desc));
    normalise(t, &r.stdout[at..])
}

#[test]
fn status_says_what_next_in_each_state() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let mut states = format!("## active, nothing committed\n{}", next_of_status(&t));
    t.commit_file_in(&t.worktree("r1"), "a.txt", "a\n");
    states.push_str(&format!("\n## active\n{}", next_of_status(&t)));
    t.tab(&["finish", "r1", "--", "false"]).code(1);
    states.push_str(&format!("\n## validation_failed\n{}", next_of_status(&t)));
    t.tab(&["finish", "r1", "--", "true"]).ok();
    states.push_str(&format!("\n## completed\n{}", next_of_status(&t)));
    insta::assert_snapshot!("status_next_actions", states);
}

#[test]
fn off_a_terminal_each_check_gets_a_start_line_heartbeats_and_its_outcome() {
    let t = TestEnv::new();
    let slow: &[&str] = &["perl", "-e", "select(undef, undef, undef, 1.6)"];
    t.commit_policy(&policy(&[("slow", slow), ("quick", &["true"])]));
    t.started_run("r1", "a.txt");
    let beat = [("TABELLIO_HEARTBEAT_SECS", "1")];
    let r = tab_env(&t, &t.repo, &beat, &["finish", "r1"]);
    r.ok();
    assert!(r.stderr.contains("running slow … 1s\n"), "{}", r.desc);
    insta::assert_snapshot!(
        "progress_off_terminal",
        dedup_lines(&normalise(&t, &r.stderr))
    );

    // `validate` shows the same; `--json` and `-q` show none.
    let validate = |flags: &[&str]| {
        let args = [flags, &["validate", "tabellio/r1", "--no-reuse"]].concat();
        tab_env(&t, &t.repo, &beat, &args)
    };
    let r = validate(&[]);
    r.ok();
    assert!(r.stderr.starts_with("running slow …\n"), "{}", r.desc);
    let r = validate(&["--json"]);
    r.ok();
    assert_eq!(r.stderr, "", "{}", r.desc);
    r.json();
    let r = validate(&["-q"]);
    r.ok();
    let printed = (r.stdout.as_str(), r.stderr.as_str());
    assert_eq!(printed, ("", ""), "{}", r.desc);
}

#[test]
fn colour_only_when_forced_and_not_vetoed() {
    let t = TestEnv::new();
    t.started_run("r1", "a.txt");
    let failing = ["finish", "r1", "--", "perl", "-e", NOISY_FAILURE];
    let red = "\x1b[31mfailed\x1b[0m";

    // A pipe gets none.
    let r = tab_env(&t, &t.repo, &[], &failing);
    r.code(1);
    assert!(
        !r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'),
        "{}",
        r.desc
    );

    // Forced: our colours, never the check's own sequences.
    let r = tab_env(&t, &t.repo, &[("CLICOLOR_FORCE", "1")], &failing);
    r.code(1);
    assert!(r.stdout.contains(red), "{}", r.desc);
    assert!(r.stderr.contains(red), "{}", r.desc);
    assert!(r.stdout.contains("  | boom  tail\n"), "{}", r.desc);
    for theirs in ["\x1b]", "\x1b[31mboom", "\x1b[2J"] {
        assert!(!r.stdout.contains(theirs), "{theirs:?} in {}", r.desc);
    }
    // `--json` never (the check's own output is in it, escaped as JSON escapes it).
    let r = tab_env(
        &t,
        &t.repo,
        &[("CLICOLOR_FORCE", "1")],
        &[&["--json"], &failing[..]].concat(),
    );
    r.code(1);
    assert!(
        !r.stdout.contains('\x1b') && r.stderr.is_empty(),
        "{}",
        r.desc
    );
    assert_eq!(r.json()["verdict"], "failed");

    // NO_COLOR wins over CLICOLOR_FORCE.
    let both = [("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")];
    let r = tab_env(&t, &t.repo, &both, &failing);
    r.code(1);
    assert!(
        !r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'),
        "{}",
        r.desc
    );

    // So does git's color.ui=never, and color.tabellio over color.ui.
    t.git(&["config", "color.ui", "never"]).ok();
    let r = tab_env(&t, &t.repo, &[("CLICOLOR_FORCE", "1")], &failing);
    r.code(1);
    assert!(!r.stdout.contains('\x1b'), "{}", r.desc);
    t.git(&["config", "color.tabellio", "auto"]).ok();
    let r = tab_env(&t, &t.repo, &[("CLICOLOR_FORCE", "1")], &failing);
    r.code(1);
    assert!(r.stdout.contains(red), "{}", r.desc);

    // Errors: `error:` red and the hint dimmed.
    let r = tab_env(&t, &t.repo, &[("CLICOLOR_FORCE", "1")], &["status", "nope"]);
    r.code(5);
    assert!(r.stderr.starts_with("\x1b[31merror:\x1b[0m "), "{}", r.desc);
}

/// What a terminal shows of `git-tabellio <args>` run in `t.repo` under a pseudo-terminal
/// (stdin, stdout and stderr all on it), through Python's `pty.spawn` (no shell). `None` when
/// there is no `python3` to make the terminal.
fn on_a_terminal(t: &TestEnv, env: &[(&str, &str)], args: &[&str]) -> Option<String> {
    let python = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("python3"))
            .find(|f| f.is_file())
    })?;
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", "import pty, sys; pty.spawn(sys.argv[1:])", BIN])
        .args(args)
        .current_dir(&t.repo)
        .stdin(std::process::Stdio::null());
    hermetic(&mut cmd, &t.home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run python3's pty.spawn");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_terminal_gets_live_output_under_a_status_line_and_colour() {
    let t = TestEnv::new();
    let slow: &[&str] = &[
        "perl",
        "-e",
        "$|=1; print qq(hello\\n); select(undef, undef, undef, 1.5)",
    ];
    t.commit_policy(&policy(&[("slow", slow)]));
    t.started_run("r1", "a.txt");
    let Some(screen) = on_a_terminal(&t, &[], &["finish", "r1"]) else {
        eprintln!("no python3: the terminal path is covered by the renderer's unit tests only");
        return;
    };
    // The status line (dimmed), the check's output under it, the line cleared at the end, the
    // verdict in colour; no log lines.
    for want in [
        "\x1b[2mrunning slow … 0s\x1b[0m",
        "[slow] hello\r\n",
        "\r\x1b[2K",
        "\x1b[32mpassed\x1b[0m",
    ] {
        assert!(screen.contains(want), "{want:?} not in {screen:?}");
    }
    assert!(!screen.contains("running slow …\r\n"), "{screen:?}");

    // NO_COLOR: the same status line, without colour.
    let screen = on_a_terminal(&t, &[("NO_COLOR", "1")], &["finish", "r1", "--no-reuse"])
        .expect("python3 was there a moment ago");
    assert!(screen.contains("running slow … "), "{screen:?}");
    assert!(screen.contains("[slow] hello\r\n"), "{screen:?}");
    assert!(
        !screen.contains("\x1b[3") && !screen.contains("\x1b[2m"),
        "{screen:?}"
    );
}

#[test]
fn land_and_loop_show_their_checks_and_the_agent_running() {
    let t = TestEnv::runs_to_land("unit", &["a", "b"]);
    t.tab(&["land", "a"]).ok();
    // `b`, replayed onto `a`, is a new tree: its check runs in the scratch worktree.
    let r = t.tab(&["land", "b"]);
    r.ok();
    assert!(r.stderr.contains("running unit …\n"), "{}", r.desc);
    assert!(r.stderr.contains("passed unit (exit 0) in "), "{}", r.desc);

    t.tab(&["start", "r1", "--task", "t", "--base", "main"])
        .ok();
    let r = t.tab(&["loop", "r1", "--max-loops", "1", "--", "true"]);
    assert!(r.stderr.contains("running agent …\n"), "{}", r.desc);
    assert!(r.stderr.contains("passed agent (exit 0) in "), "{}", r.desc);
}
