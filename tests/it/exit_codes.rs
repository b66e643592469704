//! The contract of every command's ending, from outside the built binary: the exit code, and the
//! `--json` envelope (`ok`, `error.code`, `error.exit_code`) of a success, a negative verdict and
//! each kind of error, as docs/cli.md ("Exit codes", "JSON output") states them. Every expected
//! value is written here, never taken from the code under test.

use serde_json::Value;

use crate::util::*;

/// `git-tabellio --json <args>` in the main worktree: it exits `code` and prints one object with
/// `"ok": ok`.
#[track_caller]
fn json_ending(t: &TestEnv, args: &[&str], code: i32, ok: bool) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = t.tab(&all);
    r.code(code);
    let v = r.json();
    assert_eq!(v["ok"], ok, "{}", r.desc);
    v
}

/// `args` fails with exit `code` and the error `name`, in JSON (the four fields, a message) and
/// in text (`error: …` on stderr, nothing on stdout).
#[track_caller]
fn fails_as(t: &TestEnv, args: &[&str], code: i32, name: &str) {
    let v = json_ending(t, args, code, false);
    let error = v["error"].as_object().expect("an error object");
    assert_eq!(error["code"], name, "{v}");
    assert_eq!(error["exit_code"], code, "{v}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(error["hint"].is_string() || error["hint"].is_null(), "{v}");
    let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "exit_code", "hint", "message"], "{v}");

    let r = t.tab(args);
    r.code(code);
    assert!(r.stderr.starts_with("error: "), "{}", r.desc);
    assert_eq!(r.stdout, "", "{}", r.desc);
}

#[test]
fn success_and_a_negative_verdict_exit_0_and_1_and_both_are_ok() {
    let t = TestEnv::new();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    // No evidence yet: verify's verdict is negative, the command did its job.
    let v = json_ending(&t, &["verify", &head], 1, true);
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "missing", "{v}");
    t.tab(&["verify", &head]).code(1);
    // A failing check: validate records the failure and exits 1, still ok.
    let v = json_ending(&t, &["validate", "--check", "unit", "--", "false"], 1, true);
    assert!(v.get("error").is_none(), "{v}");
    // A passing one: exit 0, and verify now says so with exit 0.
    json_ending(&t, &["validate", "--check", "unit", "--", "true"], 0, true);
    let v = json_ending(&t, &["verify", &head], 0, true);
    assert!(v.get("error").is_none(), "{v}");
    t.tab(&["verify", &head]).ok();
}

#[test]
fn usage_errors_exit_2() {
    let t = TestEnv::new();
    // Found by the command-line parser, and by the library.
    fails_as(&t, &["no-such-command"], 2, "usage");
    fails_as(&t, &["status", "a..b"], 2, "usage");
    fails_as(&t, &["verify", "HEAD^{tree}"], 2, "usage");
}

/// An argument that is not UTF-8 is a usage error (exit 2) wherever it stands, never a panic.
#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let t = TestEnv::new();
    let bad = std::ffi::OsStr::from_bytes(b"\xff");
    for args in [vec![bad], vec![std::ffi::OsStr::new("--json"), bad]] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(&args).current_dir(&t.repo);
        hermetic(&mut cmd, &t.home);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn refusals_exit_3() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    t.tab(&["abandon", "r1"]).ok();
    // An abandoned run is terminal.
    fails_as(&t, &["abandon", "r1"], 3, "refused");
    fails_as(&t, &["promote", "r1"], 3, "refused");
}

#[test]
fn conflicts_exit_4() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    // main moves after the run validated: promote would not be a fast-forward of it.
    let tip = t.git_out(&["rev-parse", "main"]);
    let tree = t.git_out(&["rev-parse", "main^{tree}"]);
    let moved = t.git_out(&["commit-tree", &tree, "-p", &tip, "-m", "elsewhere"]);
    t.git(&["update-ref", "refs/heads/main", &moved, &tip]).ok();
    fails_as(&t, &["promote", "r1"], 4, "conflict");
}

#[test]
fn what_is_not_there_exits_5() {
    let t = TestEnv::new();
    fails_as(&t, &["status", "nope"], 5, "not_found");
    fails_as(&t, &["evidence", "no-such-rev"], 5, "not_found");
}
