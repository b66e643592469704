//! Every refusal exits with the contract's code and changes nothing: refs and worktrees are
//! compared before and after.

use crate::util::*;

#[track_caller]
fn refused(t: &TestEnv, cwd: &std::path::Path, args: &[&str], code: i32) -> serde_json::Value {
    let before = t.snapshot();
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = t.tab_in(cwd, &all);
    r.code(code);
    let j = r.json();
    assert_eq!(j["ok"], false, "{}", r.desc);
    assert!(
        !j["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{}",
        r.desc
    );
    assert_eq!(
        before,
        t.snapshot(),
        "refused command changed refs or worktrees\n{}",
        r.desc
    );
    j
}

#[test]
fn malformed_run_ids_are_usage_errors() {
    let t = TestEnv::new();
    let long = "a".repeat(300);
    let ids = [
        "..",
        "a..b",
        "a/b",
        "x.lock",
        "-rf",
        ".hidden",
        "_lead",
        "trail.",
        "sp ace",
        "new\nline",
        "bell\u{7}",
        "tab\tx",
        "é",
        "ünï",
        "a:b",
        "a~1",
        "a^2",
        "a?",
        "a*",
        "a[1]",
        "back\\slash",
        "@",
        "a@{1}",
        &long,
        "",
    ];
    for id in ids {
        // `start -- <id>` so ids like -rf reach us as the positional argument.
        let j = refused(&t, &t.repo, &["start", "--task", "t", "--", id], 2);
        assert_eq!(j["error"]["code"], "usage", "{id:?}");
        refused(&t, &t.repo, &["status", "--", id], 2);
    }
}

#[test]
fn start_refusals() {
    let t = TestEnv::new();
    refused(
        &t,
        &t.repo,
        &["start", "r1", "--task", "t", "--base", "nope"],
        5,
    );
    refused(&t, &t.repo, &["start", "r1", "--task", "  "], 2);
    refused(
        &t,
        &t.repo,
        &["start", "r1", "--task", "t", "--actor", "robot:x"],
        2,
    );
    refused(
        &t,
        &t.repo,
        &["start", "r1", "--task", "t", "--branch", "bad..name"],
        2,
    );
    refused(
        &t,
        &t.repo,
        &["start", "r1", "--task", "t", "--branch", "main"],
        2,
    );
    refused(
        &t,
        &t.repo,
        &["start", "r1", "--task-file", "/nonexistent/task.md"],
        2,
    );
    t.tab(&["start", "r1", "--task", "t"]).ok();
    refused(&t, &t.repo, &["start", "r1", "--task", "t"], 2);
    // A worktree directory in the way is found before anything is written.
    write_file(&t.worktree("r9").join("junk"), "x");
    refused(&t, &t.repo, &["start", "r9", "--task", "t"], 3);
}

#[test]
fn unknown_runs_are_not_found() {
    let t = TestEnv::new();
    for args in [
        &["status", "nope"][..],
        &["finish", "nope", "--", "true"],
        &["checkpoint", "nope"],
        &["abandon", "nope"],
        &["cleanup", "nope"],
        &["log", "nope"],
    ] {
        refused(&t, &t.repo, args, 5);
    }
    refused(&t, &t.repo, &["evidence", "no-such-rev"], 5);
}

/// `refs/tabellio/runs/a` holding `"run_id": "zz"`: refused when read, before anything
/// is written under either name.
#[test]
fn a_ledger_naming_another_run_is_refused() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("a", "a.txt", "a\n");
    t.forge_ledger("a", "edited by hand", |run| run["run_id"] = "zz".into());
    for (cwd, args) in [
        (&t.repo, &["checkpoint", "a"][..]),
        (&t.repo, &["finish", "a", "--", "true"]),
        (&t.repo, &["abandon", "a"]),
    ] {
        let j = refused(&t, cwd, args, 3);
        let message = j["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("refs/tabellio/runs/a") && message.contains("\"zz\""),
            "{args:?}: {message}"
        );
        let hint = j["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("edited by hand"), "{hint}");
    }
    // status reports it instead, named or from the run's worktree, with the ways out.
    for (cwd, args) in [
        (&t.repo, &["--json", "status", "a"][..]),
        (&wt, &["--json", "status"]),
    ] {
        let r = t.tab_in(cwd, args);
        r.ok();
        let bad = &r.json()["unreadable_refs"][0];
        let message = bad["message"].as_str().unwrap();
        assert!(
            message.contains("refs/tabellio/runs/a") && message.contains("\"zz\""),
            "{args:?}: {message}"
        );
        assert!(
            bad["repair"].to_string().contains("cleanup a --force"),
            "{bad}"
        );
    }
    let (code, list) = t.tab_json(&["list"]);
    assert_eq!(code, 0, "{list}");
    assert_eq!(list["runs"], serde_json::json!([]));
    assert_eq!(list["unreadable"][0]["run_id"], "a");
}

/// `refs/tabellio/runs/b` pointing at run `a`'s ledger commit (a ref copied by hand): a
/// command that reads both, `a` first, still refuses `b`'s as the ledger of another run.
#[test]
fn a_ledger_ref_copied_under_another_name_is_refused_after_the_real_one() {
    let t = TestEnv::new();
    t.completed_run("a", "a.txt");
    let tip = t.git_out(&["rev-parse", "refs/tabellio/runs/a"]);
    t.git(&["update-ref", "refs/tabellio/runs/b", &tip]).ok();
    // Every look across the runs in one command (`a` first), the second copying what the first read.
    let store = tabellio::store::Store::open(&t.repo).expect("open");
    for _ in 0..2 {
        let read: Vec<String> = store
            .readable_ledgers()
            .unwrap()
            .map(|l| l.record.run_id)
            .collect();
        assert_eq!(read, ["a"]);
    }
    let (code, list) = t.tab_json(&["list"]);
    assert_eq!(code, 0, "{list}");
    assert_eq!(list["runs"][0]["run_id"], "a", "{list}");
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["unreadable"][0]["run_id"], "b", "{list}");
    let (_, status) = t.tab_json(&["status"]);
    assert_eq!(status["by_state"]["unreadable"], 1, "{status}");
    // A bare `land` reads every ledger for its queue and again for the runs waiting elsewhere:
    // `b` is never taken for `a`.
    let (code, landed) = t.tab_json(&["land"]);
    assert_eq!(code, 0, "{landed}");
    assert_eq!(landed["runs"].as_array().map(Vec::len), Some(1), "{landed}");
    assert_eq!(landed["runs"][0]["run_id"], "a", "{landed}");
}

#[test]
fn dirty_untracked_and_switched_worktrees_are_refused() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    // Tracked change.
    write_file(&wt.join("a.txt"), "changed\n");
    let j = refused(&t, &wt, &["checkpoint"], 3);
    assert!(j["error"]["message"].as_str().unwrap().contains("a.txt"));
    refused(&t, &wt, &["finish", "--", "true"], 3);
    t.git_in(&wt, &["checkout", "--", "a.txt"]).ok();
    // Untracked file.
    write_file(&wt.join("new.txt"), "n\n");
    refused(&t, &wt, &["checkpoint"], 3);
    refused(&t, &t.repo, &["finish", "r1", "--", "true"], 3);
    std::fs::remove_file(wt.join("new.txt")).unwrap();
    // Switched branch.
    t.git_in(&wt, &["switch", "-q", "-c", "elsewhere"]).ok();
    let before = t.snapshot();
    let r = t.tab(&["--json", "checkpoint", "r1"]);
    r.code(3);
    assert_eq!(before, t.snapshot());
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["next_action"]["action"], "switch-branch");
    assert_eq!(st["next_action"]["blocking"], true);
    t.git_in(&wt, &["switch", "-q", "tabellio/r1"]).ok();
    t.tab(&["checkpoint", "r1"]).ok();
}

#[test]
fn nothing_to_checkpoint_or_finish_on_the_base() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    refused(&t, &t.repo, &["checkpoint", "r1"], 3);
    refused(&t, &t.repo, &["finish", "r1", "--", "true"], 3);
    refused(&t, &t.repo, &["finish", "r1"], 3);
}

#[test]
fn finish_without_checks_is_a_usage_error() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let j = refused(&t, &t.repo, &["finish", "r1"], 2);
    assert!(j["error"]["hint"].as_str().unwrap().contains("--"));
    refused(&t, &t.repo, &["finish", "r1", "--timeout", "5"], 2);
}

#[test]
fn an_invalid_compression_level_refuses_finish_before_its_checks_run() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let ran = t.path().join("check-ran");
    let touch = ran.to_str().unwrap();
    // git itself refuses the level at every command, so refs are compared with it unset.
    let before = t.snapshot();
    t.git(&["config", "core.compression", "42"]).ok();
    let r = t.tab(&["--json", "finish", "r1", "--", "touch", touch]);
    r.code(2);
    let j = r.json();
    // Unset from outside the repository, by the file's path: git in the repository refuses.
    t.git_in(
        t.path(),
        &[
            "config",
            "--file",
            t.repo.join(".git/config").to_str().unwrap(),
            "--unset",
            "core.compression",
        ],
    )
    .ok();
    assert_eq!(before, t.snapshot(), "a refused finish wrote nothing");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("core.compression"),
        "{j}"
    );
    assert!(j["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("git config core.compression 1"));
    assert!(!ran.exists(), "the check did not run");
    t.tab(&["finish", "r1", "--", "touch", touch]).ok();
    assert!(ran.exists());
}

#[test]
fn wrong_states_are_refused() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    t.tab(&["abandon", "r1"]).ok();
    refused(&t, &t.repo, &["finish", "r1", "--", "true"], 3);
    refused(&t, &t.repo, &["checkpoint", "r1"], 3);
    refused(&t, &t.repo, &["abandon", "r1"], 3);
    t.start_with_commit("r2", "b.txt", "b\n");
    refused(&t, &t.repo, &["cleanup", "r2"], 3);
}

#[test]
fn validation_that_mutates_the_workspace_fails_the_attempt() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    let branch_before = t.git_out(&["rev-parse", "tabellio/r1"]);
    // A check that dirties the tree (exit 0 all the same).
    let r = t.tab_in(&wt, &["--json", "finish", "--", "touch", "leftover.txt"]);
    r.code(1);
    let j = r.json();
    assert_eq!(j["evidence"][0]["stopped"]["tabellio"], "workspace_mutated");
    assert_eq!(j["evidence"][0]["exit_code"], 0);
    assert_eq!(j["run"]["state"], "validation_failed");
    std::fs::remove_file(wt.join("leftover.txt")).unwrap();
    // A check that commits.
    let r = t.tab_in(
        &wt,
        &[
            "--json",
            "finish",
            "--",
            "git",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "sneaky",
        ],
    );
    r.code(1);
    assert_eq!(
        r.json()["evidence"][0]["stopped"]["tabellio"],
        "workspace_mutated"
    );
    assert_eq!(r.json()["evidence"][0]["commit"], branch_before);
    t.git_in(&wt, &["reset", "-q", "--hard", &branch_before])
        .ok();
    // A check that switches branches.
    let r = t.tab_in(
        &wt,
        &[
            "--json", "finish", "--", "git", "switch", "-q", "-c", "other",
        ],
    );
    r.code(1);
    assert_eq!(
        r.json()["evidence"][0]["stopped"]["tabellio"],
        "workspace_mutated"
    );
}

#[test]
fn revisions_that_are_not_commits_are_usage_errors_with_plain_messages() {
    let t = TestEnv::new();
    let j = refused(&t, &t.repo, &["validate", "HEAD^{tree}", "--", "true"], 2);
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("names a tree, not a commit"),
        "{j}"
    );
    refused(&t, &t.repo, &["evidence", "HEAD:README.md"], 2);
    let j = refused(&t, &t.repo, &["verify", "no-such-rev"], 5);
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(!msg.contains("Message {"), "debug text in {msg:?}");
}

#[test]
fn a_worktree_deleted_by_hand_is_a_refusal_and_cleanup_recovers() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("q8", "a.txt", "a\n");
    std::fs::remove_dir_all(&wt).unwrap();
    let j = refused(&t, &t.repo, &["checkpoint", "q8"], 3);
    assert!(
        j["error"]["message"].as_str().unwrap().contains("missing"),
        "{j}"
    );
    refused(&t, &t.repo, &["finish", "q8", "--", "true"], 3);
    let (_, st) = t.tab_json(&["status", "q8"]);
    assert_eq!(st["live"]["worktree_exists"], false);
    assert_eq!(st["next_action"]["action"], "abandon");
    assert_eq!(st["allowed_actions"], serde_json::json!(["abandon"]));
    t.tab(&["abandon", "q8"]).ok();
    t.tab(&["cleanup", "q8", "--force"]).ok();
    assert!(!t.git_out(&["worktree", "list"]).contains("q8"));
    assert!(
        t.git(&["rev-parse", "--verify", "-q", "refs/heads/tabellio/q8"])
            .code
            != 0
    );
    let (_, st) = t.tab_json(&["status", "q8"]);
    assert_eq!(st["allowed_actions"], serde_json::json!([]));
    assert_eq!(st["next_action"]["action"], "none");
}

#[test]
fn an_unreadable_ledger_does_not_hide_the_run_you_are_in() {
    let t = TestEnv::new();
    t.tab(&["start", "b9", "--task", "t", "--branch", "feat/b9"])
        .ok();
    // Another ledger that cannot be read, sorting before b9.
    t.git(&[
        "update-ref",
        "refs/tabellio/runs/a-alias",
        "refs/tabellio/runs/b9",
    ])
    .ok();
    let r = t.tab_in(&t.worktree("b9"), &["--json", "status"]);
    r.ok();
    assert_eq!(r.json()["run"]["run_id"], "b9");
    // In the main worktree: the overview, with the other ledger named as unreadable (not its
    // error instead of the overview).
    let (code, j) = t.tab_json(&["status"]);
    assert_eq!(code, 0, "{j}");
    let runs = j["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .any(|r| r["run_id"] == "b9" && r["state"] == "active"),
        "{j}"
    );
    assert!(
        runs.iter().any(|r| r["run_id"] == "a-alias"
            && r["unreadable"].is_string()
            && r["state"].is_null()),
        "{j}"
    );
}

#[test]
fn json_usage_errors_name_what_is_missing() {
    let t = TestEnv::new();
    let j = refused(&t, &t.repo, &["hooks"], 2);
    assert_eq!(j["error"]["code"], "usage");
    let j = refused(&t, &t.repo, &["start", "a2"], 2);
    assert!(
        j["error"]["message"].as_str().unwrap().contains("--task"),
        "{j}"
    );
    // `--json` after `--` belongs to the check, not to us.
    let r = t.tab(&["finish", "nope", "--", "grep", "--json", "x"]);
    r.code(5);
    assert!(
        r.stdout.is_empty() && r.stderr.contains("error:"),
        "{}",
        r.desc
    );
}

#[test]
fn allowed_actions_follow_the_live_repository() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert!(st["allowed_actions"]
        .as_array()
        .unwrap()
        .contains(&"promote".into()));
    // A detached run worktree: nothing that needs the worktree, but promote needs only the
    // run branch, which still holds the validated commit.
    t.git_in(&wt, &["checkout", "-q", "--detach"]).ok();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(
        st["allowed_actions"],
        serde_json::json!(["promote", "abandon"]),
        "{st}"
    );
    t.git_in(&wt, &["switch", "-q", "tabellio/r1"]).ok();
    write_file(&wt.join("late.txt"), "x");
    t.commit_all_in(&wt, "late");
    let (_, st) = t.tab_json(&["status", "r1"]);
    let allowed = st["allowed_actions"].as_array().unwrap();
    assert!(
        !allowed.contains(&"promote".into()) && allowed.contains(&"finish".into()),
        "{st}"
    );
}

#[test]
fn a_branch_that_would_clash_with_another_as_a_directory_is_refused_up_front() {
    let t = TestEnv::new();
    t.tab(&["start", "r2", "--branch", "feature/deep/x", "--task", "t"])
        .ok();
    let j = refused(
        &t,
        &t.repo,
        &["start", "r7", "--branch", "feature", "--task", "t"],
        2,
    );
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("feature/deep/x"),
        "{j}"
    );
    t.git(&["branch", "tabellio"]).ok();
    refused(&t, &t.repo, &["start", "m1", "--task", "t"], 2);
}

#[test]
fn a_switched_run_worktree_still_names_its_run() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("w", "a.txt", "a\n");
    t.git_in(&wt, &["checkout", "-q", "--detach"]).ok();
    let r = t.tab_in(&wt, &["--json", "status"]);
    r.ok();
    assert_eq!(r.json()["run"]["run_id"], "w");
    assert_eq!(r.json()["next_action"]["action"], "switch-branch");
}

#[test]
fn escape_sequences_in_a_task_do_not_reach_the_terminal() {
    let t = TestEnv::new();
    t.tab(&["start", "e1", "--task", "\u{1b}[2J\u{1b}]0;pwned\u{7}x"])
        .ok();
    let r = t.tab(&["list"]);
    r.ok();
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{7}'),
        "{:?}",
        r.stdout
    );
    // The task itself is kept verbatim.
    let (_, st) = t.tab_json(&["status", "e1"]);
    assert_eq!(st["run"]["task"]["text"], "\u{1b}[2J\u{1b}]0;pwned\u{7}x");
}

/// A run ref pointing at a loose object that does not inflate: an internal error whose message
/// already carries gix's whole cause chain, so nothing is said twice.
#[test]
fn a_corrupt_ledger_commit_is_an_internal_error_that_says_its_cause_once() {
    let t = TestEnv::new();
    let id = "1111111111111111111111111111111111111111";
    let git = t.repo.join(".git");
    write_file(&git.join("objects/11").join(&id[2..]), "not zlib at all");
    write_file(&git.join("refs/tabellio/runs/a"), &format!("{id}\n"));
    let r = t.tab(&["status", "a"]);
    r.code(70);
    assert!(
        r.stderr
            .starts_with(&format!("error: could not read commit {id}: ")),
        "{}",
        r.desc
    );
    assert!(
        r.stderr.contains("Could not decode zip stream"),
        "{}",
        r.desc
    );
    assert!(!r.stderr.contains("caused by:"), "{}", r.desc);
    let (code, j) = t.tab_json(&["status", "a"]);
    assert_eq!(code, 70);
    assert_eq!(j["error"]["code"], "internal");
    assert!(j["error"].get("causes").is_none(), "{j}");
}

/// A head that descends from the run's newest checkpoint descends from its base, so only the
/// commits since that checkpoint are walked; a branch rewritten past the checkpoint (an amend)
/// is still checked against the base itself, and one rewritten away from the base is refused
/// however many checkpoints the run has.
#[test]
fn a_run_branch_rewritten_away_from_its_base_is_refused_after_its_checkpoints() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    for step in ["one", "two"] {
        write_file(&wt.join(format!("{step}.txt")), step);
        t.commit_all_in(&wt, step);
        t.tab_in(&wt, &["checkpoint"]).ok();
    }
    // Amended: beside the newest checkpoint, still on the base.
    t.git_in(&wt, &["commit", "-q", "--amend", "-m", "two, amended"])
        .ok();
    let amended = t.tab_in(&wt, &["--json", "checkpoint"]);
    amended.ok();
    assert_eq!(amended.json()["recorded"], true);

    let tree = t.git_out_in(&wt, &["rev-parse", "HEAD^{tree}"]);
    let orphan = t.git_out_in(&wt, &["commit-tree", &tree, "-m", "orphan"]);
    t.git_in(&wt, &["reset", "-q", "--hard", &orphan]).ok();
    for args in [&["checkpoint"][..], &["finish", "--", "true"]] {
        let j = refused(&t, &wt, args, 3);
        let message = j["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("does not descend from the run's base"),
            "{message}"
        );
    }
}
