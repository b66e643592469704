//! The validation runner from the outside: timeouts with grandchildren, missing executables,
//! huge output, redaction, and a finish killed in the middle.

use std::time::{Duration, Instant};

use crate::util::*;

#[test]
fn timeout_kills_the_whole_process_group() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let pidfile = t.path().join("grandchild.pid");
    // perl forks a grandchild that would outlive its parent; both must die.
    let script = format!("if (my $p = fork) {{ open F, '>', '{}'; print F $p; close F; sleep 300 }} else {{ sleep 300 }}", pidfile.display());
    let started = Instant::now();
    let r = t.tab(&[
        "--json",
        "finish",
        "r1",
        "--timeout",
        "1",
        "--",
        "perl",
        "-e",
        &script,
    ]);
    r.code(1);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the runner waited for the grandchild"
    );
    let j = r.json();
    assert_eq!(j["evidence"][0]["status"], "timed_out");
    assert_eq!(j["evidence"][0]["stopped"]["command"], "timed_out");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    // Gone, or a zombie waiting for a reaper (a container's PID 1 may never reap it).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("");
    assert!(
        stat.is_empty() || state == "Z",
        "grandchild {pid} survived the timeout: {stat}"
    );
}

#[test]
fn a_missing_executable_is_a_failed_attempt() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let r = t.tab(&[
        "--json",
        "finish",
        "r1",
        "--",
        "definitely-not-a-command-xyz",
    ]);
    r.code(1);
    let j = r.json();
    assert_eq!(j["evidence"][0]["status"], "error");
    assert_eq!(j["evidence"][0]["stopped"]["command"], "not_found");
    assert_eq!(j["run"]["state"], "validation_failed");
}

#[test]
fn shell_metacharacters_are_data() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let marker = t.path().join("pwned");
    let evil = format!("; touch {} #", marker.display());
    let r = t.tab(&[
        "--json", "finish", "r1", "--", "echo", &evil, "$(id)", "`id`",
    ]);
    r.ok();
    assert!(!marker.exists());
    assert!(r.json()["evidence"][0]["output"]["excerpt"]
        .as_str()
        .unwrap()
        .contains("$(id)"));
}

#[test]
fn huge_output_is_hashed_and_truncated_with_bounded_memory() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let out = t.command(
        "/usr/bin/time",
        &t.repo,
        &[
            "-f",
            "maxrss_kb=%M",
            BIN,
            "--json",
            "finish",
            "r1",
            "--",
            "head",
            "-c",
            "300000000",
            "/dev/zero",
        ],
    );
    let stderr = &out.stderr;
    assert_eq!(out.code, 0, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let o = &j["evidence"][0]["output"];
    assert_eq!(o["bytes"], 300_000_000u64);
    assert_eq!(o["truncated"], true);
    assert!(o["excerpt"].as_str().unwrap().len() < 20_000);
    let rss: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .expect("rss");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB for 300 MB of output");
}

#[test]
fn planted_secrets_are_redacted_in_stored_output() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let r = t.tab(&[
        "--json",
        "finish",
        "r1",
        "--",
        "echo",
        "token:",
        token,
        "Authorization: Bearer sekritsekrit123",
    ]);
    r.ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    assert!(!note.contains(token), "{note}");
    assert!(!note.contains("sekritsekrit123"), "{note}");
    assert!(note.contains("[REDACTED]"));
    assert!(
        r.json()["evidence"][0]["output"]["redactions"]
            .as_u64()
            .unwrap()
            >= 2
    );
}

#[test]
fn finish_killed_mid_validation_leaves_the_run_finishable() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let before = t.snapshot();
    let started = t.path().join("started");
    // The check announces itself, then sleeps; we kill finish once it is running.
    let mut child = t.spawn_tab(&[
        "finish",
        "r1",
        "--",
        "perl",
        "-e",
        &format!("open F, '>', '{}'; close F; sleep 60", started.display()),
    ]);
    wait_for_file(&started);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(before, t.snapshot(), "a killed finish wrote something");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "active");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    t.fsck();
}

#[test]
fn secrets_passed_on_the_command_line_are_redacted_from_its_output() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let r = t.tab(&[
        "--json",
        "finish",
        "r1",
        "--",
        "echo",
        "--token=supersecret123",
        "and",
        "supersecret123",
    ]);
    r.ok();
    let j = r.json();
    let rec = &j["evidence"][0];
    assert_eq!(
        rec["check"]["argv"],
        serde_json::json!(["echo", "--token=[REDACTED]", "and", "[REDACTED]"])
    );
    assert!(
        !rec["output"]["excerpt"]
            .as_str()
            .unwrap()
            .contains("supersecret123"),
        "{rec}"
    );
}

#[test]
fn short_command_line_secrets_are_redacted_from_output_too() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let r = t.tab(&[
        "--json", "finish", "r1", "--", "echo", "--token", "Zq9xK2", "again", "Zq9xK2",
    ]);
    r.ok();
    let rec = &r.json()["evidence"][0];
    assert!(!rec.to_string().contains("Zq9xK2"), "{rec}");
}
