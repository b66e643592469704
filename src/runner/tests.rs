//! The runner end to end: real processes, timeouts, process groups and output capture.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::sys::process;

fn check(argv: &[&str], timeout: Duration) -> CheckCommand {
    CheckCommand {
        name: "t".into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        timeout,
    }
}

fn perl(script: &str, timeout: Duration) -> CheckCommand {
    check(&["perl", "-e", script], timeout)
}

fn run(cmd: &CheckCommand, opts: &RunOptions) -> RunOutcome {
    match run_command(cmd, opts) {
        Ok(outcome) => outcome,
        Err(err) => panic!("run {:?} in {:?}: {err}", cmd.argv, opts.cwd),
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("tabellio-validate-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits (bounded) for `pid` to exit, whoever its parent is. A zombie counts as gone.
fn assert_process_ends(pid: libc::pid_t) {
    let gone = process::wait_gone(pid, Duration::from_secs(10))
        .unwrap_or_else(|err| panic!("watch process {pid}: {err}"));
    assert!(gone, "process {pid} still running after the run returned");
}

fn kill_process(pid: libc::pid_t) {
    process::kill(pid, libc::SIGKILL);
}

fn first_line_pid(outcome: &RunOutcome) -> libc::pid_t {
    let text = String::from_utf8_lossy(&outcome.stdout_tail);
    text.lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in stdout: {outcome:?}"))
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn exit_zero_passes() {
    let outcome = run(&check(&["true"], secs(30)), &RunOptions::default());
    assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
    assert_eq!(outcome.stop, CommandStop::Exited);
    assert_eq!((outcome.exit_code, outcome.signal), (Some(0), None));
    assert_eq!(outcome.output.bytes, 0);
    assert!(!outcome.pipes_held_open);
    assert!(outcome.finished_at >= outcome.started_at);
}

#[test]
fn nonzero_exit_fails_and_both_streams_are_captured() {
    let cmd = perl(
        r#"$|=1; print "out\n"; print STDERR "err\n"; exit 3"#,
        secs(30),
    );
    let outcome = run(&cmd, &RunOptions::default());
    assert_eq!(outcome.status, CheckStatus::Failed, "{outcome:?}");
    assert_eq!(outcome.stop, CommandStop::Exited);
    assert_eq!((outcome.exit_code, outcome.signal), (Some(3), None));
    assert_eq!(outcome.output.bytes, 8);
    assert!(outcome.output.excerpt.contains("out\n"), "{outcome:?}");
    assert!(outcome.output.excerpt.contains("err\n"), "{outcome:?}");
    assert!(!outcome.output.truncated);
}

#[test]
fn missing_executable_is_not_found_not_an_error() {
    let cmd = check(&["tabellio-no-such-command-5d1c"], secs(30));
    let outcome = run(&cmd, &RunOptions::default());
    assert_eq!(outcome.status, CheckStatus::Error);
    assert_eq!(outcome.stop, CommandStop::NotFound);
    assert_eq!((outcome.exit_code, outcome.signal), (None, None));
    assert!(outcome.output.excerpt.contains("not found"), "{outcome:?}");
    assert_eq!(outcome.output.bytes, outcome.output.excerpt.len() as u64);
}

#[test]
fn non_executable_file_is_a_spawn_failure() {
    let dir = TempDir::new();
    let script = dir.0.join("script");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write script");
    let path = script.to_str().expect("utf-8 temp path");
    let outcome = run(&check(&[path], secs(30)), &RunOptions::default());
    assert_eq!(outcome.status, CheckStatus::Error);
    assert_eq!(outcome.stop, CommandStop::SpawnFailed);
    assert_eq!(outcome.exit_code, None);
    assert!(
        outcome.output.excerpt.contains("Permission denied"),
        "{outcome:?}"
    );
}

#[test]
fn missing_working_directory_is_a_spawn_failure_not_a_missing_command() {
    let dir = TempDir::new();
    let opts = RunOptions {
        cwd: dir.0.join("gone"),
        ..RunOptions::default()
    };
    let outcome = run(&check(&["true"], secs(30)), &opts);
    assert_eq!(outcome.stop, CommandStop::SpawnFailed, "{outcome:?}");
    assert_eq!(outcome.status, CheckStatus::Error);
    assert!(outcome.output.excerpt.contains("working directory"));
    assert!(!outcome.output.excerpt.contains("gone"), "no local paths");
}

#[test]
fn empty_argv_is_an_error() {
    let err = run_command(&check(&[], secs(1)), &RunOptions::default());
    assert!(matches!(err, Err(RunError::EmptyArgv { .. })), "{err:?}");
}

#[test]
fn death_by_signal_fails_with_the_signal() {
    let outcome = run(
        &perl(r#"kill "KILL", $$"#, secs(30)),
        &RunOptions::default(),
    );
    assert_eq!(outcome.status, CheckStatus::Failed, "{outcome:?}");
    assert_eq!(outcome.stop, CommandStop::Signaled);
    assert_eq!(
        (outcome.exit_code, outcome.signal),
        (None, Some(libc::SIGKILL))
    );
}

#[test]
fn timeout_terminates_the_whole_group() {
    // The grandchild sleeps too; it shares the group and must die with it.
    let cmd = perl(
        r#"$|=1; my $p = fork(); if ($p == 0) { sleep 600; exit 0 } print "$p\n"; sleep 600"#,
        secs(1),
    );
    let opts = RunOptions {
        grace: secs(1),
        keep_stdout_tail: 64,
        ..RunOptions::default()
    };
    let clock = Instant::now();
    let outcome = run(&cmd, &opts);
    assert!(clock.elapsed() < secs(60), "took {:?}", clock.elapsed());
    assert_eq!(outcome.status, CheckStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.stop, CommandStop::TimedOut);
    assert_eq!(outcome.signal, Some(libc::SIGTERM));
    assert_eq!(outcome.exit_code, None);
    assert!(!outcome.pipes_held_open);
    assert_process_ends(first_line_pid(&outcome));
}

#[test]
fn timeout_escalates_to_sigkill_when_sigterm_is_ignored() {
    let cmd = perl(r#"$SIG{TERM} = "IGNORE"; sleep 600"#, secs(1));
    let opts = RunOptions {
        grace: Duration::from_millis(300),
        ..RunOptions::default()
    };
    let outcome = run(&cmd, &opts);
    assert_eq!(outcome.status, CheckStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.signal, Some(libc::SIGKILL));
}

#[test]
fn background_grandchild_holding_stdout_is_killed_when_the_check_exits() {
    // One grandchild dies of SIGTERM, the other ignores it (the disposition is set before
    // the fork, so there is no race) and needs the SIGKILL after the grace.
    for ignore_term in ["", r#"$SIG{TERM} = "IGNORE";"#] {
        let script = format!(
            r#"$|=1; {ignore_term} my $p = fork();
               if ($p == 0) {{ sleep 600; exit 0 }} print "$p\n"; exit 0"#
        );
        let opts = RunOptions {
            grace: Duration::from_millis(500),
            keep_stdout_tail: 64,
            ..RunOptions::default()
        };
        let clock = Instant::now();
        let outcome = run(&perl(&script, secs(300)), &opts);
        assert!(clock.elapsed() < secs(60), "took {:?}", clock.elapsed());
        assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
        assert!(!outcome.pipes_held_open, "{outcome:?}");
        assert_process_ends(first_line_pid(&outcome));
    }
}

#[test]
fn a_process_that_left_the_group_cannot_hold_us() {
    // The grandchild moves to its own group (out of our reach) and keeps stdout open for a
    // while; the parent waits until it has moved, then exits.
    let script = r#"$|=1; pipe(my $r, my $w); my $p = fork();
        if ($p == 0) { close $r; setpgrp(0, 0); close $w; sleep 120; exit 0 }
        close $w; my $ignored = <$r>; print "$p\n"; exit 0"#;
    let opts = RunOptions {
        grace: Duration::from_millis(200),
        keep_stdout_tail: 64,
        ..RunOptions::default()
    };
    let clock = Instant::now();
    let outcome = run(&perl(script, secs(300)), &opts);
    let elapsed = clock.elapsed();
    let pid = first_line_pid(&outcome);
    kill_process(pid);
    assert!(elapsed < secs(60), "took {elapsed:?}");
    assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
    assert!(outcome.pipes_held_open, "{outcome:?}");
    assert_process_ends(pid);
}

#[test]
fn huge_output_is_hashed_in_full_with_bounded_memory() {
    const TOTAL: u64 = 300_000_000;
    let before = peak_rss_kib();
    let total = TOTAL.to_string();
    let cmd = check(&["head", "-c", &total, "/dev/zero"], secs(600));
    let outcome = run(&cmd, &RunOptions::default());
    let after = peak_rss_kib();
    assert_eq!(outcome.status, CheckStatus::Passed, "{:?}", outcome.status);
    assert_eq!(outcome.output.bytes, TOTAL);
    assert!(outcome.output.truncated);
    let growth_mib = after.saturating_sub(before) / 1024;
    assert!(growth_mib < 64, "peak RSS grew by {growth_mib} MiB");

    let mut expected = OutputCapture::new(0);
    let zeros = vec![0u8; 1 << 20];
    let mut left = TOTAL;
    while left > 0 {
        let n = left.min(zeros.len() as u64);
        expected.push(&zeros[..n as usize]);
        left -= n;
    }
    let expected = expected.finish(&Redactor::default());
    assert_eq!(outcome.output.sha256, expected.sha256);
    let kept = outcome.output.excerpt.matches('\0').count();
    assert_eq!(kept, 16 * 1024, "head + tail bytes in the excerpt");
}

#[test]
fn long_output_keeps_a_third_head_and_two_thirds_tail() {
    let cmd = perl(
        // One stream: the order of chunks across stdout and stderr is only approximate.
        r#"print "A" x 10000; print "B" x 100000; print "C" x 10000"#,
        secs(60),
    );
    let opts = RunOptions {
        excerpt_cap: 3000,
        ..RunOptions::default()
    };
    let outcome = run(&cmd, &opts);
    assert_eq!(outcome.output.bytes, 120_000);
    assert!(outcome.output.truncated);
    let expected = format!(
        "{}\n[... tabellio: 117000 bytes omitted ...]\n{}",
        "A".repeat(1000),
        "C".repeat(2000)
    );
    assert_eq!(outcome.output.excerpt, expected);
}

#[test]
fn planted_secrets_are_redacted_but_hashed() {
    let cmd = perl(
        r#"print "value=$ENV{TABELLIO_TEST_TOKEN}\n"; print "gh=ghp_", "a" x 30, "\n""#,
        secs(60),
    );
    let opts = RunOptions {
        env_add: vec![("TABELLIO_TEST_TOKEN".into(), "hunter2-very-secret".into())],
        ..RunOptions::default()
    };
    let outcome = run(&cmd, &opts);
    assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
    assert_eq!(outcome.output.excerpt, "value=[REDACTED]\ngh=[REDACTED]\n");
    assert_eq!(outcome.output.redactions, 2);
    let raw = format!("value=hunter2-very-secret\ngh=ghp_{}\n", "a".repeat(30));
    assert_eq!(outcome.output.bytes, raw.len() as u64);
    let raw_summary = excerpt_of(raw.as_bytes(), 1 << 20, &Redactor::default());
    assert_eq!(outcome.output.sha256, raw_summary.sha256);
}

#[test]
fn repository_locating_variables_are_scrubbed_even_from_env_add() {
    let mut env_add: Vec<(String, String)> = scrubbed_env_keys()
        .iter()
        .map(|key| (key.to_string(), "/tabellio-should-not-see".to_string()))
        .collect();
    env_add.push(("TABELLIO_TEST_VISIBLE".into(), "yes".into()));
    env_add.push(("GIT_CEILING_DIRECTORIES".into(), "/kept".into()));
    let opts = RunOptions {
        env_add,
        excerpt_cap: 1 << 20,
        ..RunOptions::default()
    };
    let outcome = run(&check(&["env"], secs(60)), &opts);
    let env = &outcome.output.excerpt;
    assert!(!outcome.output.truncated);
    assert!(
        env.lines().any(|l| l == "TABELLIO_TEST_VISIBLE=yes"),
        "{env}"
    );
    assert!(
        env.lines().any(|l| l == "GIT_CEILING_DIRECTORIES=/kept"),
        "{env}"
    );
    for key in scrubbed_env_keys() {
        let prefix = format!("{key}=");
        assert!(
            !env.lines().any(|l| l.starts_with(&prefix)),
            "{key} leaked: {env}"
        );
    }
    assert!(!env.contains("tabellio-should-not-see"), "{env}");
}

#[test]
fn scrubbed_keys_are_the_repository_locating_ones() {
    let keys = scrubbed_env_keys();
    for key in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
    ] {
        assert!(keys.contains(&key), "{key}");
    }
    assert!(!keys.contains(&"GIT_CEILING_DIRECTORIES"));
}

#[test]
fn runs_in_cwd_with_stdin_at_dev_null() {
    let dir = TempDir::new();
    let opts = RunOptions {
        cwd: dir.0.clone(),
        ..RunOptions::default()
    };
    let outcome = run(&check(&["pwd", "-P"], secs(60)), &opts);
    let canonical = std::fs::canonicalize(&dir.0).expect("canonicalize");
    assert_eq!(
        Path::new(outcome.output.excerpt.trim_end()),
        canonical.as_path()
    );
    // `$PWD` is where the check runs, not the directory we were started from.
    let outcome = run(&check(&["printenv", "PWD"], secs(60)), &opts);
    assert_eq!(outcome.output.excerpt, format!("{}\n", dir.0.display()));
    // `cat` would block on an inherited or piped stdin; /dev/null ends it at once.
    let outcome = run(&check(&["cat"], secs(60)), &opts);
    assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
    assert_eq!(outcome.output.bytes, 0);
    let outcome = run(&perl(r#"exit(-t STDIN ? 1 : 0)"#, secs(60)), &opts);
    assert_eq!(outcome.status, CheckStatus::Passed, "stdin is a terminal");
}

#[test]
fn stdout_tail_holds_stdout_only() {
    let cmd = perl(
        r#"$|=1; print STDERR "noise\n"; print "x" x 1000; print "DONE\n";
           print STDERR "more noise\n""#,
        secs(60),
    );
    let opts = RunOptions {
        keep_stdout_tail: 5,
        ..RunOptions::default()
    };
    let outcome = run(&cmd, &opts);
    assert_eq!(outcome.stdout_tail, b"DONE\n");
    assert_eq!(outcome.output.bytes, 6 + 1000 + 5 + 11);
    let none = run(&cmd, &RunOptions::default());
    assert!(none.stdout_tail.is_empty());
}

#[test]
fn enum_strings() {
    let stops = [
        (CommandStop::Exited, "exited"),
        (CommandStop::Signaled, "signaled"),
        (CommandStop::TimedOut, "timed_out"),
        (CommandStop::NotFound, "not_found"),
        (CommandStop::SpawnFailed, "spawn_failed"),
    ];
    for (stop, text) in stops {
        assert_eq!(stop.as_str(), text);
    }
    let statuses = [
        (CheckStatus::Passed, "passed"),
        (CheckStatus::Failed, "failed"),
        (CheckStatus::TimedOut, "timed_out"),
        (CheckStatus::Error, "error"),
    ];
    for (status, text) in statuses {
        assert_eq!(status.to_string(), text);
    }
    let defaults = RunOptions::default();
    assert_eq!(defaults.excerpt_cap, 16 * 1024);
    assert_eq!(defaults.grace, secs(2));
    assert_eq!(
        (defaults.stream, defaults.keep_stdout_tail),
        (Stream::Quiet, 0)
    );
}

/// Records every progress event as a line.
struct Recorder {
    interval: Option<Duration>,
    events: std::sync::Mutex<Vec<String>>,
}

impl Observer for Recorder {
    fn interval(&self) -> Option<Duration> {
        self.interval
    }
    fn observe(&self, event: Progress<'_>) {
        let line = match event {
            Progress::Started { name } => format!("started {name}"),
            Progress::Output { name, chunk } => {
                format!("output {name} {}", String::from_utf8_lossy(chunk))
            }
            Progress::Running { name, elapsed } => {
                format!("running {name} {}", elapsed.as_millis())
            }
            Progress::Finished { name, outcome } => {
                format!("finished {name} {:?}", outcome.map(|o| o.status))
            }
        };
        self.events.lock().unwrap().push(line);
    }
}

fn recorder(interval: Option<Duration>) -> &'static Recorder {
    Box::leak(Box::new(Recorder {
        interval,
        events: std::sync::Mutex::new(Vec::new()),
    }))
}

#[test]
fn an_observer_sees_start_output_ticks_and_end_in_order() {
    let rec = recorder(Some(Duration::from_millis(100)));
    let opts = RunOptions {
        stream: Stream::Observed(rec),
        ..RunOptions::default()
    };
    let cmd = perl(
        r#"$|=1; print "a\n"; select(undef, undef, undef, 0.8); print "b\n""#,
        secs(60),
    );
    let outcome = run(&cmd, &opts);
    assert_eq!(outcome.output.excerpt, "a\nb\n");
    let events = rec.events.lock().unwrap().clone();
    assert_eq!(
        events.first().map(String::as_str),
        Some("started t"),
        "{events:?}"
    );
    assert_eq!(
        events.last().map(String::as_str),
        Some("finished t Some(Passed)"),
        "{events:?}"
    );
    let output: String = events
        .iter()
        .filter_map(|e| e.strip_prefix("output t "))
        .collect();
    assert_eq!(output, "a\nb\n", "{events:?}");
    let ticks: Vec<u128> = events
        .iter()
        .filter_map(|e| e.strip_prefix("running t ")?.parse().ok())
        .collect();
    // 800 ms of sleep at a 100 ms interval: a few ticks (a loaded machine may skip some).
    assert!(ticks.len() >= 2, "{events:?}");
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
    assert!(ticks.iter().all(|&ms| ms >= 100), "{ticks:?}");
}

#[test]
fn an_observer_without_an_interval_gets_no_ticks_and_sees_a_command_that_never_started() {
    let rec = recorder(None);
    let opts = RunOptions {
        stream: Stream::Observed(rec),
        ..RunOptions::default()
    };
    run(&perl("select(undef, undef, undef, 0.2)", secs(60)), &opts);
    run(&check(&["tabellio-no-such-command"], secs(60)), &opts);
    let events = rec.events.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "started t",
            "finished t Some(Passed)",
            "started t",
            "finished t Some(Error)"
        ]
    );
}
