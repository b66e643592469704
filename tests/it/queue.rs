//! The landing queue in refs: `enqueue`, `queue`, a bare `land` taking the queue, `land
//! --enqueue`, entries removed in the landing's own transaction, entries travelling with `sync`
//! and `land --remote`, and two enqueuers racing.

use serde_json::Value;

use crate::util::*;

/// A repository whose `main` requires the check `ok` (`true`), with `main` checked out nowhere,
/// and the completed runs `ids` (each adds `<id>.txt`).
fn repo_with_runs(ids: &[&str]) -> TestEnv {
    let t = TestEnv::ref_only();
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("ok", &["true"])]));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    for id in ids {
        t.started_run(id, &format!("{id}.txt"));
        t.tab(&["finish", id]).ok();
    }
    t
}

fn queue_refs(t: &TestEnv) -> Vec<String> {
    t.git_out(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/tabellio/queue/",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

fn queued_runs(j: &Value) -> Vec<String> {
    j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["run"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn enqueue_writes_an_entry_commit_and_queue_lists_priority_first() {
    let t = repo_with_runs(&["r1", "r2", "r3"]);
    let (code, j) = t.tab_json(&["enqueue", "r1", "r2"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["result"], "queued", "{j}");
    let (code, j) = t.tab_json(&["enqueue", "r3", "--priority"]);
    assert_eq!(code, 0, "{j}");

    // Stock git reads the entry: a root commit whose tree holds entry.json.
    let name = "refs/tabellio/queue/main/r1";
    let text = t.git_out(&["show", &format!("{name}:entry.json")]);
    let entry: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(entry["schema"], "tabellio.queue/v1");
    assert_eq!(entry["run"], "r1");
    assert_eq!(entry["target"], "refs/heads/main");
    assert_eq!(
        entry["head"],
        t.git_out(&["rev-parse", "tabellio/r1"]).as_str()
    );
    assert_eq!(entry["priority"], false);
    assert!(
        entry["enqueued_by"].as_str().unwrap().contains('<'),
        "{entry}"
    );
    assert!(
        entry["enqueued_at"].as_str().unwrap().ends_with('Z'),
        "{entry}"
    );
    assert_eq!(t.git_out(&["rev-list", "--count", name]), "1");

    let (code, q) = t.tab_json(&["queue", "--target", "main"]);
    assert_eq!(code, 0, "{q}");
    assert_eq!(queued_runs(&q), ["r3", "r1", "r2"], "{q}");
    let positions: Vec<u64> = q["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [1, 2, 3]);
    assert_eq!(q["entries"][0]["state"], "waiting", "{q}");
    assert_eq!(q["entries"][0]["entry"]["priority"], true, "{q}");
    assert!(q["entries"][2]["estimated_wait_s"].is_u64(), "{q}");
    t.fsck();
}

#[test]
fn enqueue_refuses_bad_runs_and_writes_nothing() {
    let t = repo_with_runs(&["r1"]);
    t.started_run("busy", "busy.txt");
    let before = t.snapshot();
    // One run that is not completed refuses the whole command.
    let r = t.tab(&["enqueue", "r1", "busy"]);
    assert_eq!(r.code, 3, "{}", r.desc);
    assert!(r.stderr.contains("busy"), "{}", r.desc);
    assert_eq!(t.tab(&["enqueue", "nope"]).code, 5);
    assert_eq!(t.tab(&["enqueue", "../x"]).code, 2);
    assert_eq!(t.tab(&["enqueue", "r1", "--target", "other"]).code, 3);
    assert_eq!(t.tab(&["enqueue"]).code, 2);
    assert_eq!(t.tab(&["enqueue", "r1", "--remote", "nowhere"]).code, 5);
    assert_eq!(t.snapshot(), before);
}

#[test]
fn enqueue_again_keeps_the_entry_and_its_place() {
    let t = repo_with_runs(&["r1", "r2"]);
    t.tab(&["enqueue", "r1", "r2"]).ok();
    let before = t.git_out(&["rev-parse", "refs/tabellio/queue/main/r1"]);
    let (code, j) = t.tab_json(&["enqueue", "r1", "--priority"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["result"], "already_queued", "{j}");
    assert_eq!(
        t.git_out(&["rev-parse", "refs/tabellio/queue/main/r1"]),
        before
    );
    let (_, q) = t.tab_json(&["queue"]);
    assert_eq!(queued_runs(&q), ["r1", "r2"], "{q}");
}

#[test]
fn bare_land_lands_the_queue_in_order_and_removes_its_entries_in_the_same_transaction() {
    let t = repo_with_runs(&["r1", "r2", "r3"]);
    t.tab(&["enqueue", "r2"]).ok();
    t.tab(&["enqueue", "r1"]).ok();
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let landed: Vec<&str> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    // Only the queue, in its order; r3 was not queued and waits.
    assert_eq!(landed, ["r2", "r1"], "{j}");
    assert_eq!(
        t.ledger_record("refs/tabellio/runs/r3")["state"],
        "completed"
    );
    let subjects = t.git_out(&["log", "--format=%s", "-2", "main"]);
    assert_eq!(
        subjects.lines().collect::<Vec<_>>(),
        ["edit r1.txt", "edit r2.txt"]
    );
    assert!(queue_refs(&t).is_empty(), "{:?}", queue_refs(&t));
    // One transaction: the queue refs went in the very reflog entry that moved main (files
    // backend: the deleted refs' logs are gone, so the landing message is the witness).
    let msg = t.git_out(&["reflog", "-1", "--format=%gs", "main"]);
    assert_eq!(msg, "tabellio: land r2 r1");
    t.fsck();
    // With the queue empty, a bare land takes every completed run again.
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["run_id"], "r3", "{j}");
}

#[test]
fn land_enqueue_queues_then_lands_and_a_landed_entry_is_swept() {
    let t = repo_with_runs(&["r1", "r2"]);
    t.tab(&["enqueue", "r2"]).ok();
    // r2 lands by promote, not through the queue: its entry is done, not waiting.
    t.tab(&["promote", "r2"]).ok();
    let (_, q) = t.tab_json(&["queue"]);
    assert_eq!(q["entries"][0]["state"], "done", "{q}");
    let (code, j) = t.tab_json(&["land", "--enqueue", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["run_id"], "r1", "{j}");
    assert_eq!(j["runs"][0]["result"], "landed", "{j}");
    assert!(queue_refs(&t).is_empty(), "{:?}", queue_refs(&t));
    assert_eq!(t.tab(&["land", "--enqueue"]).code, 2);
}

#[test]
fn two_enqueuers_of_one_run_leave_one_entry() {
    let t = repo_with_runs(&["r1"]);
    let kids = (0..4)
        .map(|_| t.spawn_tab(&["--json", "enqueue", "r1"]))
        .collect();
    let exits = race(kids);
    let mut queued = Vec::new();
    for e in &exits {
        assert_eq!(e.code, 0, "{} {}", e.stdout, e.stderr);
        let j: Value = serde_json::from_str(&e.stdout).unwrap();
        if j["runs"][0]["result"] == "queued" {
            queued.push(j["runs"][0]["entry"].clone());
        }
    }
    // One process creates the entry; another that wrote the very same entry (the same
    // millisecond: the same commit) is accepted by git's create-only update as having made it.
    assert!(!queued.is_empty(), "one process creates the entry");
    assert!(
        queued.iter().all(|e| *e == queued[0]),
        "only one entry is ever created: {queued:?}"
    );
    let there = t.git(&["cat-file", "blob", "refs/tabellio/queue/main/r1:entry.json"]);
    let there: Value = serde_json::from_str(there.stdout.trim()).unwrap();
    assert_eq!(there["enqueued_at"], queued[0]["enqueued_at"]);
    assert_eq!(queue_refs(&t), ["refs/tabellio/queue/main/r1"]);
}

#[test]
fn entries_travel_with_sync_and_land_remote_removes_them_everywhere() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    a.commit_policy(&policy(&[("ok", &["true"])]));
    a.git(&["push", "-q"]).ok();
    a.start_with_commit("q1", "q1.txt", "x\n");
    a.tab(&["finish", "q1"]).ok();
    let (code, j) = a.tab_json(&["enqueue", "q1", "--remote", "origin"]);
    assert_eq!(code, 0, "{j}");
    let entry = "refs/tabellio/queue/main/q1";
    assert_eq!(
        server.git_out(&["rev-parse", entry]),
        a.git_out(&["rev-parse", entry])
    );
    // The other clone gets the entry (and the run) with sync.
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    assert_eq!(
        b.git_out(&["rev-parse", entry]),
        a.git_out(&["rev-parse", entry])
    );
    let (_, q) = b.tab_json(&["queue"]);
    assert_eq!(queued_runs(&q), ["q1"], "{q}");

    // Landing on the server removes the server's entry in the same atomic push.
    let (code, j) = a.tab_json(&["land", "--remote", "origin", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["result"], "landed", "{j}");
    assert!(server.git(&["rev-parse", "--verify", "-q", entry]).code != 0);
    assert!(a.git(&["rev-parse", "--verify", "-q", entry]).code != 0);
    // b's copy goes at its next sync: the run landed, so the entry is not pushed back.
    b.tab(&["sync"]).ok();
    assert!(b.git(&["rev-parse", "--verify", "-q", entry]).code != 0);
    assert!(server.git(&["rev-parse", "--verify", "-q", entry]).code != 0);
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}
