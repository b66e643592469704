//! `status` and `list` with a ledger or notes ref that cannot be read: reported (exit 0), never an
//! error, with the exact commands that repair it, a notes ref's last good value from its reflog
//! first. The refusals of the commands that need such a ref: `corruption`.

use crate::corruption::{refs, LEDGER};
use crate::util::*;

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
    for (kind, target) in t.corrupt_targets() {
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
        for (kind, target) in t.corrupt_targets().into_iter().take(2) {
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
