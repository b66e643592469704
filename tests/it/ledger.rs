//! Run ledgers that grow with what changed: the task text stored once, history entries one
//! file each, and ledgers written the old way (the whole record in `run.json`) still read.

use std::collections::BTreeSet;

use crate::util::*;

/// A task text of `len` bytes that compression cannot shrink (hex of a hash chain).
fn incompressible_task(len: usize) -> String {
    let mut out = String::from("Do the big thing\n");
    let mut seed = b"tabellio".to_vec();
    while out.len() < len {
        use sha2::Digest;
        seed = sha2::Sha256::digest(&seed).to_vec();
        out.push_str(&hex(&seed));
        out.push('\n');
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The objects reachable from `rev`.
fn objects_of(t: &TestEnv, rev: &str) -> BTreeSet<String> {
    t.git_out(&["rev-list", "--objects", rev])
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// Bytes on disk of `objects` (loose objects: their compressed files).
fn disk_size(t: &TestEnv, objects: &BTreeSet<String>) -> u64 {
    let input: String = objects.iter().map(|o| format!("{o}\n")).collect();
    let r = t.command_with_input(
        "git",
        &t.repo,
        &[],
        &["cat-file", "--batch-check=%(objectsize:disk)"],
        &input,
    );
    r.ok();
    r.stdout
        .lines()
        .map(|l| l.trim().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn checkpoints_of_a_large_task_add_bytes_for_what_changed_only() {
    let t = TestEnv::new();
    let task = incompressible_task(100 * 1024);
    let file = t.path().join("task.md");
    write_file(&file, &task);
    t.tab(&["start", "r1", "--task-file", file.to_str().unwrap()])
        .ok();
    let wt = t.worktree("r1");
    let ledger = "refs/tabellio/runs/r1";
    let task_blob = t.git_out(&["rev-parse", &format!("{ledger}:task.txt")]);
    let before = objects_of(&t, ledger);
    assert!(disk_size(&t, &before) > 50 * 1024, "the task is stored");
    for i in 0..20 {
        t.commit_file_in(&wt, &format!("f{i}.txt"), &format!("{i}\n"));
        t.tab_in(&wt, &["checkpoint", "-m", &format!("step {i}")])
            .ok();
    }
    let after = objects_of(&t, ledger);
    let added: BTreeSet<String> = after.difference(&before).cloned().collect();
    let bytes = disk_size(&t, &added);
    // 20 transitions: each adds run.json, one history entry, the trees above it and a commit.
    // Rewriting the task every time would add 20 x 100 KB (2 MB) or more.
    assert!(bytes < 64 * 1024, "20 checkpoints added {bytes} bytes");
    assert_eq!(
        t.git_out(&["rev-parse", &format!("{ledger}:task.txt")]),
        task_blob,
        "the task blob is reused"
    );
    assert_eq!(
        t.git_out(&["show", &format!("{ledger}:task.txt")]),
        task.trim()
    );
    // Stock git reads it, and what it reads is what tabellio reports.
    let run = t.ledger_record(ledger);
    assert_eq!(run["task"]["text"], task.as_str());
    assert_eq!(run["checkpoints"].as_array().unwrap().len(), 20);
    assert_eq!(run["checkpoints"][19]["summary"], "step 19");
    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["run"], run);
    let stored: serde_json::Value =
        serde_json::from_str(&t.git_out(&["show", &format!("{ledger}:run.json")])).unwrap();
    assert_eq!(stored["schema"], "tabellio.run/v2");
    assert_eq!(stored["history"]["checkpoints"], 20);
    t.fsck();
}

/// A ledger written by the first version (one commit, the whole record in `run.json`) is read
/// as it is, and the next transition writes the new layout on top of it.
#[test]
fn a_ledger_written_the_old_way_is_read_and_extended() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "Old task\n\nwith details"])
        .ok();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "a.txt", "a\n");
    t.tab_in(&wt, &["checkpoint", "-m", "first"]).ok();
    let ledger = "refs/tabellio/runs/r1";
    let record = t.ledger_record(ledger);
    assert_eq!(record["checkpoints"].as_array().unwrap().len(), 1);

    // The same record as the first version wrote it: a root commit whose tree holds run.json.
    let path = t.path().join("old-run.json");
    write_file(&path, &serde_json::to_string_pretty(&record).unwrap());
    let blob = t.git_out(&["hash-object", "-w", path.to_str().unwrap()]);
    let mktree = t.command_with_input(
        "git",
        &t.repo,
        &[],
        &["mktree"],
        &format!("100644 blob {blob}\trun.json\n"),
    );
    mktree.ok();
    let old = t.git_out(&[
        "commit-tree",
        mktree.stdout.trim(),
        "-m",
        "tabellio: checkpoint r1: (none) -> active",
    ]);
    let current = t.git_out(&["rev-parse", ledger]);
    t.git(&["update-ref", ledger, &old, &current]).ok();

    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["run"], record);

    t.commit_file_in(&wt, "b.txt", "b\n");
    t.tab_in(&wt, &["checkpoint", "-m", "second"]).ok();
    assert_eq!(t.git_out(&["rev-parse", &format!("{ledger}^")]), old);
    let stored: serde_json::Value =
        serde_json::from_str(&t.git_out(&["show", &format!("{ledger}:run.json")])).unwrap();
    assert_eq!(stored["schema"], "tabellio.run/v2");
    let now = t.ledger_record(ledger);
    assert_eq!(now["task"]["text"], "Old task\n\nwith details");
    let summaries: Vec<&str> = now["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries, ["first", "second"]);
    // `log` reads both layouts.
    let (code, log) = t.tab_json(&["log", "r1"]);
    assert_eq!(code, 0, "{log}");
    t.tab_in(&wt, &["finish", "--", "true"]).ok();
    t.tab(&["promote", "r1"]).ok();
    t.fsck();
}

/// A v2 ledger whose history lost an entry (edited with stock git) is refused, not misread, by
/// every command that reads the whole record; `list`, which reads `run.json` alone, lists it.
#[test]
fn a_ledger_tree_missing_a_history_entry_is_refused() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "a.txt", "a\n");
    t.tab_in(&wt, &["checkpoint"]).ok();
    let ledger = "refs/tabellio/runs/r1";
    let entries = t.git_out(&["ls-tree", ledger]);
    let kept: String = entries
        .lines()
        .filter(|l| !l.ends_with("\thistory"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mktree = t.command_with_input("git", &t.repo, &[], &["mktree"], &kept);
    mktree.ok();
    let parent = t.git_out(&["rev-parse", ledger]);
    let commit = t.git_out(&[
        "commit-tree",
        mktree.stdout.trim(),
        "-p",
        &parent,
        "-m",
        "edited",
    ]);
    t.git(&["update-ref", ledger, &commit, &parent]).ok();
    // Commands that need the record refuse, naming what is wrong.
    let r = t.tab(&["--json", "log", "r1"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("history.checkpoints"), "{message}");
    // `status` reports it as an unreadable ledger, with the repairs.
    let (code, status) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["next_action"]["action"], "repair", "{status}");
    let reported = status["unreadable_refs"][0]["message"].as_str().unwrap();
    assert!(reported.contains("history.checkpoints"), "{reported}");
    let (code, list) = t.tab_json(&["list"]);
    assert_eq!(code, 0, "{list}");
    assert_eq!(list["unreadable"], serde_json::json!([]), "{list}");
    assert_eq!(list["runs"][0]["run_id"], "r1", "{list}");
    assert_eq!(list["runs"][0]["state"], "active", "{list}");
    assert_eq!(
        list["runs"][0]["branch"], "refs/heads/tabellio/r1",
        "{list}"
    );
}
