//! Hardening, round three: the loop's agent path as typed, records from a newer version, and
//! reflogs in a reftable repository.

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

/// Append a commit to `r1`'s ledger whose `run.json` (as stored now, `tabellio.run/v2`) is
/// changed by `edit`, the rest of the tree kept: a ledger a newer version wrote.
fn ledger_from_the_future(t: &TestEnv, edit: impl FnOnce(&mut Value)) {
    let ledger = "refs/tabellio/runs/r1";
    let mut run: Value =
        serde_json::from_str(&t.git_out(&["show", &format!("{ledger}:run.json")])).unwrap();
    assert_eq!(run["schema"], "tabellio.run/v2");
    edit(&mut run);
    let json = serde_json::to_string_pretty(&run).unwrap();
    let blob = t.command_with_input(
        "git",
        &t.repo,
        &[],
        &["hash-object", "-w", "--stdin"],
        &json,
    );
    blob.ok();
    let mut entries: String = t
        .git_out(&["ls-tree", ledger])
        .lines()
        .filter(|l| !l.ends_with("\trun.json"))
        .map(|l| format!("{l}\n"))
        .collect();
    entries.push_str(&format!("100644 blob {}\trun.json\n", blob.stdout.trim()));
    let tree = t.command_with_input("git", &t.repo, &[], &["mktree"], &entries);
    tree.ok();
    let parent = t.git_out(&["rev-parse", ledger]);
    let commit = t.git_out(&[
        "commit-tree",
        tree.stdout.trim(),
        "-p",
        &parent,
        "-m",
        "future",
    ]);
    t.git(&["update-ref", ledger, &commit, &parent]).ok();
}

/// A command on a run whose ledger a newer version wrote is refused, naming the schema (and
/// the field it does not know), with the hint to upgrade, and writes nothing.
#[track_caller]
fn refused_as_from_a_newer_version(t: &TestEnv, wants: &[&str]) {
    let before = t.git_out(&["for-each-ref"]);
    let r = t.tab(&["--json", "checkpoint", "r1"]);
    r.code(3);
    let e = &r.json()["error"];
    let message = e["message"].as_str().unwrap();
    for want in wants {
        assert!(message.contains(want), "{want}: {}", r.desc);
    }
    assert!(
        e["hint"].as_str().unwrap().contains("upgrade git-tabellio"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out(&["for-each-ref"]), before);
    // `status` reports it (exit 0) with the same words.
    let (code, v) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{v}");
    let reason = v["unreadable_refs"][0]["message"].as_str().unwrap();
    for want in wants {
        assert!(reason.contains(want), "{want}: {v}");
    }
}

#[test]
fn a_ledger_from_a_newer_version_is_refused_naming_its_schema() {
    let t = repo_with_a_run();
    let good = t.git_out(&["rev-parse", "refs/tabellio/runs/r1"]);
    // An addition this version does not know, in the schema it does.
    ledger_from_the_future(&t, |run| {
        run["merge_train"] = serde_json::json!({"slot": 3})
    });
    refused_as_from_a_newer_version(
        &t,
        &[
            "tabellio.run/v2",
            "`merge_train`",
            "written by a newer version",
        ],
    );
    // A schema this version does not know.
    t.git(&["update-ref", "refs/tabellio/runs/r1", &good]).ok();
    ledger_from_the_future(&t, |run| run["schema"] = "tabellio.run/v3".into());
    refused_as_from_a_newer_version(&t, &["\"tabellio.run/v3\"", "upgrade git-tabellio"]);
}

#[test]
fn evidence_from_a_newer_version_is_named_with_a_hint_to_upgrade() {
    let t = repo_with_a_run();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "value.txt", "2\n");
    t.tab_in(&wt, &["finish"]).ok();
    let head = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    let line = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    let mut record: Value = serde_json::from_str(&line).unwrap();
    let mut v2 = record.clone();
    v2["schema"] = "tabellio.evidence/v2".into();
    record["attestation"] = "future".into();
    let cases = [
        (v2, vec!["unknown schema \"tabellio.evidence/v2\""]),
        (
            record,
            vec![
                "tabellio.evidence/v1",
                "`attestation`",
                "written by a newer version",
            ],
        ),
    ];
    for (future, wants) in cases {
        t.forge_evidence(&head, &format!("{future}\n"));
        let r = t.tab(&["evidence", &head]);
        r.ok();
        for want in &wants {
            assert!(r.stdout.contains(want), "{want}: {}", r.desc);
        }
        assert!(
            r.stdout.contains("hint: ") && r.stdout.contains("upgrade"),
            "{}",
            r.desc
        );
        let (_, v) = t.tab_json(&["evidence", &head]);
        let problem = v["records"][0]["problem"].as_str().unwrap();
        assert!(problem.contains(wants[0]), "{v}");
    }
}
