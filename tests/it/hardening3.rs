//! Corrupt refs, part two: `status` reports a ledger or notes ref that cannot be read, with the
//! exact commands that repair it, and `abandon` gives up a run whose ledger is not a ledger.

use crate::util::*;

const LEDGER: &str = "refs/tabellio/runs/r1";

/// A blob (`README.md` of main), a tree (main's) and an unrelated commit (main itself).
fn corrupt_targets(t: &TestEnv) -> [(&'static str, String); 3] {
    [
        ("blob", t.git_out(&["rev-parse", "main:README.md"])),
        ("tree", t.git_out(&["rev-parse", "main^{tree}"])),
        ("commit", t.git_out(&["rev-parse", "main"])),
    ]
}

/// Start `r1` from main, with no commit of its own, then point its ledger at a blob.
fn run_with_its_ledger_at_a_blob(t: &TestEnv) {
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let blob = t.git_out(&["rev-parse", "main:README.md"]);
    t.git(&["update-ref", LEDGER, &blob]).ok();
}

fn refs(t: &TestEnv) -> String {
    t.git_out(&["for-each-ref"])
}

/// Run a repair command `status` printed (`git …`), in the main worktree.
fn run_repair(t: &TestEnv, command: &str) {
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "git", "{command}");
    if words[1] == "tabellio" {
        t.tab(&words[2..]).ok();
    } else {
        t.git(&words[1..]).ok();
    }
}

#[test]
fn status_reports_a_ledger_at_a_blob_a_tree_or_an_unrelated_commit_with_its_repairs() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    for (kind, target) in corrupt_targets(&t) {
        t.git(&["update-ref", LEDGER, &target]).ok();
        let before = refs(&t);
        for cwd in [t.repo.clone(), wt.clone()] {
            // Named, and (inside the run's worktree) found by its directory.
            let args: &[&str] = if cwd == wt {
                &["--json", "status"]
            } else {
                &["--json", "status", "r1"]
            };
            let r = t.tab_in(&cwd, args);
            r.ok();
            let v = r.json();
            assert_eq!(v["ok"], true, "{}", r.desc);
            assert_eq!(v["run"], serde_json::Value::Null, "{kind}");
            assert_eq!(v["state"], serde_json::Value::Null, "{kind}");
            assert_eq!(v["run_id"], "r1", "{kind}");
            assert_eq!(v["next_action"]["action"], "repair", "{kind}");
            assert_eq!(v["next_action"]["blocking"], true, "{kind}");
            assert_eq!(v["next_action"]["command"], "git tabellio abandon r1");
            assert_eq!(
                v["allowed_actions"],
                serde_json::json!(["abandon", "cleanup"])
            );
            let bad = &v["unreadable_refs"][0];
            assert_eq!(bad["ref"], LEDGER, "{kind}");
            assert_eq!(bad["target"], target.as_str(), "{kind}");
            assert_eq!(bad["object"], kind, "{kind}");
            assert!(bad["message"].as_str().unwrap().contains(LEDGER), "{v}");
            assert_eq!(
                bad["repair"],
                serde_json::json!([
                    "git tabellio abandon r1",
                    "git tabellio cleanup r1 --force",
                    format!("git update-ref -d {LEDGER} {target}"),
                ]),
                "{kind}"
            );
            assert!(v["workspace"].as_str().unwrap().ends_with("r1"), "{v}");
        }
        let human = t.tab(&["status", "r1"]);
        human.ok();
        for want in [
            "run r1: unreadable",
            LEDGER,
            "git tabellio abandon r1",
            "git tabellio cleanup r1 --force",
            "git update-ref -d",
            "next: repair (blocking)",
        ] {
            assert!(human.stdout.contains(want), "{want}: {}", human.desc);
        }
        // `list` reports it too; neither wrote anything.
        let list = t.tab_json(&["list"]).1;
        assert_eq!(list["unreadable"][0]["run_id"], "r1");
        assert_eq!(list["unreadable"][0]["ref"], LEDGER);
        assert_eq!(
            list["unreadable"][0]["repair"][0],
            "git tabellio abandon r1"
        );
        assert!(t.tab(&["list"]).stdout.contains("git tabellio status r1"));
        assert_eq!(refs(&t), before, "{kind}: status or list wrote");
    }
    // The last repair it names works as printed: the ledger goes, the run is not found.
    let (_, v) = t.tab_json(&["status", "r1"]);
    run_repair(&t, v["unreadable_refs"][0]["repair"][2].as_str().unwrap());
    t.tab(&["status", "r1"]).code(5);
}

#[test]
fn status_reports_a_ledger_record_it_cannot_use_without_offering_abandon() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    t.forge_ledger("r1", "tabellio: forged", |run| {
        run["approved_by"] = serde_json::json!("nobody");
    });
    let before = refs(&t);
    let (code, v) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["next_action"]["action"], "repair");
    assert_eq!(v["allowed_actions"], serde_json::json!(["cleanup"]));
    let bad = &v["unreadable_refs"][0];
    assert_eq!(bad["object"], "commit");
    assert!(
        bad["message"].as_str().unwrap().contains("approved_by"),
        "{v}"
    );
    let repair = bad["repair"].to_string();
    assert!(!repair.contains("abandon"), "{v}");
    // abandon does not write over a record someone wrote: refused, nothing written.
    let r = t.tab(&["--json", "abandon", "r1"]);
    r.code(3);
    assert!(r.stdout.contains(LEDGER), "{}", r.desc);
    assert_eq!(refs(&t), before);
}

#[test]
fn abandon_replaces_a_ledger_that_is_not_a_ledger_and_cleanup_finishes_the_job() {
    for (i, kind) in ["blob", "tree", "commit"].into_iter().enumerate() {
        let t = TestEnv::new();
        let wt = t.start_with_commit("r1", "a.txt", "a\n");
        let target = corrupt_targets(&t)[i].1.clone();
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

#[test]
fn status_reports_a_notes_ref_at_a_blob_or_a_tree_and_its_reflog_repair_works() {
    let t = TestEnv::ref_only();
    let wt = t.started_run("r1", "a.txt");
    t.tab(&["checkpoint", "r1"]).ok();
    t.commit_file_in(&wt, "b.txt", "b\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    let healthy = refs(&t);
    let cases = [
        "refs/notes/tabellio/evidence",
        "refs/notes/tabellio/checkpoints",
        "refs/notes/tabellio/approvals",
    ];
    for notes in cases {
        for (kind, target) in corrupt_targets(&t).into_iter().take(2) {
            let good = t.git(&["rev-parse", "-q", "--verify", notes]).stdout;
            t.git(&["update-ref", notes, &target]).ok();
            let before = refs(&t);
            let (code, v) = t.tab_json(&["status", "r1"]);
            assert_eq!(code, 0, "{notes} {kind}: {v}");
            assert_eq!(v["state"], "completed", "{v}");
            assert_eq!(v["next_action"]["action"], "repair", "{notes} {kind}: {v}");
            assert_eq!(v["next_action"]["blocking"], true);
            let bad = &v["unreadable_refs"][0];
            assert_eq!(bad["ref"], notes, "{v}");
            assert_eq!(bad["object"], kind, "{v}");
            let repair: Vec<&str> = bad["repair"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(v["next_action"]["command"], repair[0], "{v}");
            assert_eq!(
                repair.last().copied(),
                Some(format!("git update-ref -d {notes} {target}").as_str()),
                "{v}"
            );
            // Only what needs no notes is offered meanwhile.
            assert_eq!(v["allowed_actions"], serde_json::json!(["abandon"]), "{v}");
            let human = t.tab(&["status", "r1"]);
            assert!(human.stdout.contains(notes), "{}", human.desc);
            assert!(human.stdout.contains("repair:"), "{}", human.desc);
            // The commands that need the ref refuse (exit 3), naming it, and write nothing.
            if notes.ends_with("evidence") {
                let r = t.tab(&["--json", "promote", "r1"]);
                r.code(3);
                assert!(r.stdout.contains(notes), "{}", r.desc);
            }
            assert_eq!(refs(&t), before, "{notes} {kind}");
            // git keeps a reflog of notes refs: the first repair restores the last good value.
            let good = good.trim();
            if good.is_empty() {
                assert_eq!(repair.len(), 1, "{v}");
            } else {
                assert_eq!(
                    repair[0],
                    format!("git update-ref {notes} {good} {target}"),
                    "{v}"
                );
            }
            run_repair(&t, repair[0]);
            assert_eq!(refs(&t), healthy, "{notes} {kind}: not repaired");
            let (_, v) = t.tab_json(&["status", "r1"]);
            assert_eq!(v["next_action"]["action"], "promote", "{v}");
            assert!(v.get("unreadable_refs").is_none(), "{v}");
        }
    }
    t.tab(&["promote", "r1"]).ok();
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
