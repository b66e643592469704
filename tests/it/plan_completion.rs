//! The completion record: when a run lands (`promote`, `land`), its ledger records which items
//! of its own plan are done, with the evidence that backs each; `status` and `export` show it.
//! And a loop whose agent says DONE while the run's plan has open items does not complete.

use serde_json::Value;

use crate::util::*;

/// A repository whose policy requires `ok` (`true`), with a backlog plan that is nobody's run.
fn repo() -> TestEnv {
    let t = TestEnv::new();
    t.write("plans/backlog.md", "- [ ] someday\n");
    t.commit_policy(&policy(&[("ok", &["true"])]));
    t
}

/// Write `plan` in run `run`'s worktree at `path`, commit it and finish: the commit.
fn tick(t: &TestEnv, run: &str, path: &str, plan: &str) -> String {
    let wt = t.worktree(run);
    write_file(&wt.join(path), plan);
    t.commit_all_in(&wt, &format!("plan: {path}"));
    t.tab(&["finish", run]).ok();
    t.git_out_in(&wt, &["rev-parse", "HEAD"])
}

/// The digests of the evidence records noted on `commit`.
fn record_digests(t: &TestEnv, commit: &str) -> Vec<String> {
    let (code, j) = t.tab_json(&["evidence", commit]);
    assert_eq!(code, 0, "{j:#}");
    j["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["record"]["digest"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn promote_records_each_done_item_with_the_evidence_that_first_validated_it() {
    let t = repo();
    t.tab(&["start", "r1", "--task", "build the feature"]).ok();
    let plan = "plans/feature.md";
    let c1 = tick(
        &t,
        "r1",
        plan,
        "# Feature\n- [x] parse\n- [ ] print\n- [ ] docs\n",
    );
    let c2 = tick(
        &t,
        "r1",
        plan,
        "# Feature\n- [x] parse\n- [x] print\n- [ ] docs\n",
    );
    t.tab(&["promote", "r1"]).ok();

    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st:#}");
    let c = &st["run"]["completion"];
    assert_eq!(c["commit"], c2.as_str(), "{c:#}");
    // The backlog plan at the base is not the run's.
    assert_eq!(c["plans"], serde_json::json!([plan]), "{c:#}");
    assert_eq!((c["done"].as_u64(), c["open"].as_u64()), (Some(2), Some(1)));
    let items = c["items"].as_array().unwrap();
    let by_task = |task: &str| -> &Value { items.iter().find(|i| i["task"] == task).unwrap() };
    for (task, commit) in [("parse", &c1), ("print", &c2)] {
        let item = by_task(task);
        assert_eq!(item["done"], true, "{item:#}");
        let backing = &item["backed_by"];
        assert_eq!(backing["commit"], commit.as_str(), "{task}: {item:#}");
        assert_eq!(backing["evidence"][0]["check"], "ok", "{item:#}");
        let record = backing["evidence"][0]["record"].as_str().unwrap();
        assert!(
            record_digests(&t, commit).iter().any(|d| d == record),
            "{task}: the backing record is one noted on {commit}"
        );
    }
    assert_eq!(by_task("docs")["done"], false);
    assert!(by_task("docs").get("backed_by").is_none());

    let human = t.tab(&["status", "r1"]);
    assert!(
        human.stdout.contains("completion: 2/3 plan items done"),
        "{}",
        human.desc
    );
    let (code, doc) = t.tab_json(&["export", "r1"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["document"]["run"]["completion"], *c, "{doc:#}");
    // Stock git reads it from the ledger.
    assert_eq!(t.ledger_record("refs/tabellio/runs/r1")["completion"], *c);
    t.fsck();
}

#[test]
fn a_landed_run_records_its_completion_and_a_run_without_a_plan_none() {
    let t = repo();
    t.tab(&["start", "r1", "--task", "finish plans_completed/done.md"])
        .ok();
    t.tab(&["start", "r2", "--task", "no plan here"]).ok();
    let c1 = tick(&t, "r1", "plans_completed/done.md", "- [x] all of it\n");
    let wt2 = t.worktree("r2");
    write_file(&wt2.join("other.txt"), "x\n");
    t.commit_all_in(&wt2, "other");
    t.tab(&["finish", "r2"]).ok();
    // The target moves first: r1 lands as a restacked copy.
    t.write("main.txt", "moved\n");
    t.commit_all("main moves");
    let (code, j) = t.tab_json(&["land", "r1", "r2"]);
    assert_eq!(code, 0, "{j:#}");
    let r1 = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(r1["state"], "promoted");
    let c = &r1["completion"];
    assert_eq!(c["commit"], r1["landed"], "{c:#}");
    assert_eq!(c["plans"], serde_json::json!(["plans_completed/done.md"]));
    assert_eq!(c["items"][0]["backed_by"]["commit"], c1.as_str(), "{c:#}");
    let r2 = t.ledger_record("refs/tabellio/runs/r2");
    assert_eq!(r2["state"], "promoted");
    assert!(r2.get("completion").is_none(), "{r2:#}");
    t.fsck();
}

#[test]
fn a_loop_whose_agent_says_done_with_open_plan_items_does_not_complete() {
    let t = repo();
    t.tab(&["start", "r1", "--task", "work through plans/steps.md"])
        .ok();
    // The plan the task names was written before the run, on its base.
    let wt = t.worktree("r1");
    write_file(&wt.join("plans/steps.md"), "- [ ] one\n- [ ] two\n");
    t.commit_all_in(&wt, "the plan");
    let lazy = crate::harness::agent(
        &t,
        "lazy.py",
        "open('plans/steps.md', 'w').write('- [x] one\\n- [ ] two\\n')\nprint('DONE')",
    );
    let lazy = lazy.to_str().unwrap();
    let (code, out) = t.tab_json(&["loop", "r1", "--max-loops", "4", "--", lazy]);
    assert_eq!(code, 1, "{out:#}");
    let l = &out["run"]["loop"];
    assert_eq!(out["run"]["state"], "blocked", "{out:#}");
    assert_eq!(l["done_reason"], "claimed_not_validated", "{l:#}");
    assert_eq!(l["why_harness_stopped"], "repeated_state", "{l:#}");
    let first = &l["history"][0]["evaluate"];
    assert_eq!(first["verdict"], "failed", "{first:#}");
    assert!(
        first["missing_evidence"]
            .as_array()
            .unwrap()
            .contains(&"plan".into()),
        "{first:#}"
    );
    let gate = first["plan_gate"].as_str().unwrap();
    assert!(
        gate.starts_with("plan: open items in plans/steps.md: \"two\""),
        "{gate}"
    );
    assert!(
        out["run"]["reason"].as_str().unwrap().contains("plan"),
        "{out:#}"
    );

    let done = crate::harness::agent(
        &t,
        "done.py",
        "open('plans/steps.md', 'w').write('- [x] one\\n- [x] two\\n')\nprint('DONE')",
    );
    let done = done.to_str().unwrap();
    let (code, out) = t.tab_json(&["loop", "r1", "--max-loops", "2", "--", done]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["run"]["state"], "completed", "{out:#}");
    assert_eq!(out["run"]["loop"]["done_reason"], "validated");
}
