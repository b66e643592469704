//! The loop's agent command as the user typed it: a relative path resolved where it was typed,
//! and an agent that cannot be run refused before the run changes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

/// A repository whose policy requires `value.txt` to say `2`, with run `r1` started and a
/// subdirectory `sub` in the main worktree to type commands in.
fn repo_with_a_run() -> TestEnv {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("test", &["grep", "-qx", "2", "value.txt"])]));
    t.tab(&["start", "r1", "--task", "make value.txt say 2"])
        .ok();
    std::fs::create_dir_all(t.repo.join("sub")).unwrap();
    t
}

/// An executable `sh` script at `path` writing `2` to `value.txt` (in the run worktree).
fn write_agent(path: &Path) {
    write_file(path, "#!/bin/sh\necho 2 > value.txt\n");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `git tabellio <args>` through git's dispatcher, in `cwd`.
fn git_tabellio(t: &TestEnv, cwd: &Path, args: &[&str]) -> Run {
    let mut all = vec!["tabellio"];
    all.extend_from_slice(args);
    t.git_in(cwd, &all)
}

#[test]
fn a_relative_agent_path_is_resolved_where_it_was_typed() {
    let t = repo_with_a_run();
    // `<test dir>/agent.sh`: `../../agent.sh` from `<test dir>/repo/sub`.
    let agent = t.path().join("agent.sh");
    write_agent(&agent);
    let sub = t.repo.join("sub");
    let r = git_tabellio(&t, &sub, &["--json", "loop", "r1", "--", "../../agent.sh"]);
    r.ok();
    let out = r.json();
    assert_eq!(out["run"]["state"], "completed", "{}", r.desc);
    // The ledger names the program that ran, not a path that depends on where it was typed.
    let stored = &out["run"]["loop"]["agent"]["argv"];
    let want = std::fs::canonicalize(&agent).unwrap();
    assert_eq!(stored[0], want.display().to_string(), "{out:#}");
    assert_eq!(out["run"]["loop"]["agent"]["redacted"], false, "{out:#}");

    // `--help` says so.
    let help = t.tab(&["loop", "--help"]);
    assert!(
        help.stdout
            .contains("is resolved against the directory you run `loop` in"),
        "{}",
        help.desc
    );
}

#[test]
fn an_agent_that_cannot_be_run_is_refused_before_the_run_changes() {
    let t = repo_with_a_run();
    let sub = t.repo.join("sub");
    let repo = std::fs::canonicalize(&t.repo).unwrap();
    let not_executable = t.path().join("plain.sh");
    write_file(&not_executable, "#!/bin/sh\n");
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cases: [(&str, String, &str); 4] = [
        // Typed, what the message must name, and why.
        (
            "../agent.sh",
            repo.join("agent.sh").display().to_string(),
            "No such file",
        ),
        (
            "../../plain.sh",
            std::fs::canonicalize(&not_executable)
                .unwrap()
                .display()
                .to_string(),
            "not executable",
        ),
        ("../", format!("{}/sub/..", repo.display()), "not a file"),
        (
            "no-such-agent-on-path",
            "no-such-agent-on-path".into(),
            "not found on PATH",
        ),
    ];
    for (typed, looked_for, why) in cases {
        let before = t.git_out(&["for-each-ref", "--format=%(objectname) %(refname)"]);
        let r = git_tabellio(&t, &sub, &["--json", "loop", "r1", "--", typed]);
        r.code(2);
        let e = &r.json()["error"];
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(&looked_for), "{typed}: {}", r.desc);
        assert!(message.contains(why), "{typed}: {}", r.desc);
        assert!(
            e["hint"].as_str().is_some_and(|h| !h.is_empty()),
            "{typed}: {}",
            r.desc
        );
        let after = t.git_out(&["for-each-ref", "--format=%(objectname) %(refname)"]);
        assert_eq!(before, after, "{typed}: the refusal wrote something");
        let run = t.ledger_record("refs/tabellio/runs/r1");
        assert_eq!(run["state"], "active", "{typed}");
        assert_eq!(run["loop"], Value::Null, "{typed}");
    }
    // The human error says the same on stderr, with the hint.
    let r = git_tabellio(&t, &sub, &["loop", "r1", "--", "../agent.sh"]);
    r.code(2);
    assert!(r.stderr.contains("error: the agent command"), "{}", r.desc);
    assert!(r.stderr.contains("hint: "), "{}", r.desc);
}
