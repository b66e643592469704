//! Refs and records that are not what they should be: a ledger or notes ref at a blob, a tree or
//! an unrelated commit is refused by name with its repair, and a run whose ledger is not a ledger
//! is given up by `abandon` and `cleanup --force`; a run record with a field nobody defined is
//! refused; a damaged index is named with the way out. What `status` and `list` report about
//! such refs: `unreadable_refs`.

use crate::util::*;

pub(crate) const LEDGER: &str = "refs/tabellio/runs/r1";

/// Start `r1` from main, with no commit of its own, then point its ledger at a blob.
fn run_with_its_ledger_at_a_blob(t: &TestEnv) {
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let blob = t.git_out(&["rev-parse", "main:README.md"]);
    t.git(&["update-ref", LEDGER, &blob]).ok();
}

pub(crate) fn refs(t: &TestEnv) -> String {
    t.git_out(&["for-each-ref"])
}

/// `run` is refused with exit 3, naming `refname` and saying how to repair it.
#[track_caller]
fn refused_naming(t: &TestEnv, args: &[&str], refname: &str) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = t.tab(&all);
    r.code(3);
    let v = r.json();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    let hint = v["error"]["hint"].as_str().unwrap_or_default();
    assert!(message.contains(refname), "{}", r.desc);
    assert!(hint.contains("git update-ref"), "{}", r.desc);
}

#[test]
fn a_ledger_ref_at_a_blob_a_tree_or_an_unrelated_commit_is_refused_by_name() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let ledger = "refs/tabellio/runs/r1";
    let good = t.git_out(&["rev-parse", ledger]);
    for (kind, target) in t.corrupt_targets() {
        t.git(&["update-ref", ledger, &target]).ok();
        for args in [&["log", "r1"][..], &["promote", "r1"], &["finish", "r1"]] {
            refused_naming(&t, args, ledger);
        }
        assert_eq!(
            t.git_out(&["rev-parse", ledger]),
            target,
            "{kind}: rewritten"
        );
    }
    // The repair the hint names works.
    t.git(&["update-ref", ledger, &good]).ok();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn a_notes_ref_at_a_blob_or_a_tree_is_refused_by_name() {
    let t = TestEnv::with_readme_policy();
    t.tab(&["validate"]).ok();
    let evidence = "refs/notes/tabellio/evidence";
    let good = t.git_out(&["rev-parse", evidence]);
    for (kind, target) in t.corrupt_targets().into_iter().take(2) {
        t.git(&["update-ref", evidence, &target]).ok();
        refused_naming(&t, &["verify"], evidence);
        refused_naming(&t, &["evidence", "HEAD"], evidence);
        refused_naming(&t, &["validate"], evidence);
        assert_eq!(
            t.git_out(&["rev-parse", evidence]),
            target,
            "{kind}: rewritten"
        );
    }
    t.git(&["update-ref", evidence, &good]).ok();
    t.tab(&["verify"]).ok();

    // The checkpoint notes, read and written by `checkpoint`.
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    let checkpoints = "refs/notes/tabellio/checkpoints";
    for (_, target) in t.corrupt_targets().into_iter().take(2) {
        t.git(&["update-ref", checkpoints, &target]).ok();
        refused_naming(&t, &["checkpoint", "r1"], checkpoints);
    }
}

#[test]
fn a_run_record_with_an_unknown_field_is_refused_like_evidence() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let main = t.git_out(&["rev-parse", "main"]);
    t.forge_ledger("r1", "tabellio: forged", |run| {
        run["approved_by"] = serde_json::json!("nobody");
    });
    for args in [&["log", "r1"][..], &["promote", "r1"]] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = t.tab(&all);
        r.code(3);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("approved_by"), "{}", r.desc);
    }
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    // A nested record too.
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    t.forge_ledger("r1", "tabellio: forged", |run| {
        run["validated"]["signed"] = serde_json::json!(true);
    });
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    assert!(r.stdout.contains("signed"), "{}", r.desc);
}

#[test]
fn abandon_replaces_a_ledger_that_is_not_a_ledger_and_cleanup_finishes_the_job() {
    for (i, kind) in ["blob", "tree", "commit"].into_iter().enumerate() {
        let t = TestEnv::new();
        let wt = t.start_with_commit("r1", "a.txt", "a\n");
        let target = t.corrupt_targets()[i].1.clone();
        t.git(&["update-ref", LEDGER, &target]).ok();
        let branch = t.git_out(&["rev-parse", "refs/heads/tabellio/r1"]);
        let before = refs(&t);
        let r = t.tab(&["--json", "abandon", "r1", "-m", "gave up"]);
        r.ok();
        let v = r.json();
        assert_eq!(v["run"]["state"], "abandoned", "{kind}: {v}");
        assert_eq!(v["replaced_ledger"]["ref"], LEDGER, "{v}");
        assert_eq!(v["replaced_ledger"]["target"], target.as_str(), "{v}");
        assert_eq!(v["replaced_ledger"]["object"], kind, "{v}");
        let reason = v["run"]["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("gave up") && reason.contains(&target),
            "{v}"
        );
        // Only the ledger moved, to a one-commit ledger that reads.
        let after = refs(&t);
        let changed: Vec<&str> = after.lines().filter(|l| !before.contains(l)).collect();
        assert_eq!(changed.len(), 1, "{after}");
        assert!(changed[0].ends_with(LEDGER), "{after}");
        assert_eq!(t.git_out(&["rev-list", "--count", LEDGER]), "1");
        let run: serde_json::Value =
            serde_json::from_str(&t.git_out(&["show", &format!("{LEDGER}:run.json")])).unwrap();
        assert_eq!(run["state"], "abandoned");
        assert_eq!(run["base"]["commit"], "");
        assert_eq!(run["branch"], "refs/heads/tabellio/r1");
        t.fsck();
        // Abandon's own contract: worktree and branch stay; status says cleanup.
        assert!(wt.exists());
        assert_eq!(t.git_out(&["rev-parse", "refs/heads/tabellio/r1"]), branch);
        let (code, st) = t.tab_json(&["status", "r1"]);
        assert_eq!(code, 0, "{st}");
        assert_eq!(st["state"], "abandoned");
        assert_eq!(st["next_action"]["action"], "cleanup", "{st}");
        assert!(t.tab(&["status", "r1"]).stdout.contains("base: unknown\n"));
        // Nothing to tell an agent about a run nobody knows the base of: refused, not exit 70.
        t.tab(&["context", "r1"]).code(3);
        let log = t.tab_json(&["log", "r1"]).1;
        assert_eq!(log["log"].as_array().map(Vec::len), Some(1), "{log}");
        // A second abandon is the usual refusal of a terminal run.
        t.tab(&["abandon", "r1"]).code(3);
        // The branch has a commit on no other branch: cleanup keeps it without --force.
        let kept = refs(&t);
        t.tab(&["cleanup", "r1"]).code(3);
        assert_eq!(refs(&t), kept);
        t.tab(&["cleanup", "r1", "--force"]).ok();
        assert!(!wt.exists());
        assert!(!refs(&t).contains("refs/heads/tabellio/r1"));
        t.fsck();
    }
}

#[test]
fn abandon_of_a_replaced_ledger_with_nothing_unmerged_cleans_up_without_force() {
    let t = TestEnv::new();
    run_with_its_ledger_at_a_blob(&t);
    t.tab(&["abandon", "r1"]).ok();
    // The branch is at main's commit: on another branch, so nothing is lost.
    t.tab(&["cleanup", "r1"]).ok();
    assert!(!t.worktree("r1").exists());
    t.fsck();
}

/// The replacement is compare-and-swap on the value that was diagnosed: when someone else
/// repaired (or changed) the ref in between, abandon is a conflict and writes nothing.
#[test]
fn abandon_of_an_unreadable_ledger_loses_a_race_without_writing() {
    use tabellio::lifecycle::abandon::abandon_unreadable;
    use tabellio::run::unreadable::diagnose_ledger;

    let t = TestEnv::for_lib();
    run_with_its_ledger_at_a_blob(&t);
    let env = t.env();
    let bad = diagnose_ledger(&env.store, "r1")
        .expect("diagnosed")
        .expect("unreadable");
    // Another process moves the ref after the diagnosis.
    let tree = t.git_out(&["rev-parse", "main^{tree}"]);
    t.git(&["update-ref", LEDGER, &tree]).ok();
    let before = refs(&t);
    let refusal = tabellio::Error::refused("unreadable");
    let e = abandon_unreadable(&env, &bad, None, refusal).expect_err("the ref moved");
    assert_eq!(e.exit_code(), 4, "{e}");
    assert_eq!(refs(&t), before);
}

#[test]
fn cleanup_force_removes_the_worktree_and_branch_of_a_run_whose_ledger_is_unreadable() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    let listed = |t: &TestEnv| t.git_out(&["worktree", "list", "--porcelain"]);
    let entry = format!("worktree {}", wt.display());
    assert!(listed(&t).contains(&entry), "{}", listed(&t));
    let ledger = "refs/tabellio/runs/r1";
    let tree = t.git_out(&["rev-parse", "main^{tree}"]);
    t.git(&["update-ref", ledger, &tree]).ok();
    // Without --force, cleanup refuses and names the way out.
    let r = t.tab(&["--json", "cleanup", "r1"]);
    r.code(3);
    let hint = r.json()["error"]["hint"].as_str().unwrap().to_string();
    assert!(hint.contains("cleanup r1 --force"), "{}", r.desc);
    let r = t.tab(&["--json", "cleanup", "r1", "--force"]);
    r.ok();
    let v = r.json();
    assert_eq!(v["deleted_branch"], "refs/heads/tabellio/r1", "{v}");
    assert_eq!(
        v["ledger_left"],
        format!("git update-ref -d {ledger}"),
        "{v}"
    );
    assert!(!wt.exists());
    assert_eq!(
        t.git(&["rev-parse", "-q", "--verify", "tabellio/r1"]).code,
        1
    );
    assert_eq!(
        t.git_out(&["rev-parse", ledger]),
        tree,
        "the ledger was touched"
    );
    // The step it names finishes the job.
    t.git(&["update-ref", "-d", ledger]).ok();
    t.tab(&["list"]).ok();
    t.git(&["worktree", "prune"]).ok();
    // The run's worktree path, not "r1" anywhere: the temporary directory's random name can
    // hold those two letters.
    assert!(!listed(&t).contains(&entry), "{}", listed(&t));
    t.fsck();
}

#[test]
fn a_damaged_index_in_the_run_worktree_is_named_with_the_way_out() {
    let t = TestEnv::ref_only();
    let wt = t.started_run("r1", "a.txt");
    let index = std::path::PathBuf::from(t.git_out_in(
        &wt,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    ));
    std::fs::write(&index, b"DIRC not an index").expect("write index");
    let before = t.snapshot();
    for args in [&["status"][..], &["checkpoint"], &["finish", "--", "true"]] {
        let r = t.tab_in(&wt, args);
        r.code(70);
        assert!(r.stderr.contains("could not read the index"), "{}", r.desc);
        assert!(r.stderr.contains("git reset"), "{}", r.desc);
        assert_eq!(t.snapshot(), before, "{args:?} wrote something");
    }
    // The way out the hint gives.
    std::fs::remove_file(&index).expect("remove index");
    t.git_in(&wt, &["reset", "-q"]).ok();
    t.tab_in(&wt, &["checkpoint"]).ok();
}
