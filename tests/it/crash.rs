//! Crash injection: `start` and both promote modes killed (SIGKILL) at random points, then
//! repaired with the tool's own documented steps (the crash table of `docs/storage.md`), and
//! the invariants checked: the target is either where it was or exactly at the validated
//! commit, the ledger agrees with it, no evidence is lost, and `git fsck --strict` is clean.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::util::*;

const ROUNDS: u32 = 8;

/// A delay of up to 25 ms (most of a command's life here), different every call (no random generator needed).
fn random_delay(round: u32) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    let mixed = (nanos ^ u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % 25_000;
    Duration::from_micros(mixed)
}

/// Run `args` and return once it passes, removing each stale lock it names first (the
/// documented `rm`); the last refusal when it does not pass for another reason.
fn with_stale_locks_removed(t: &TestEnv, args: &[&str]) -> Run {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    for _ in 0..6 {
        let r = t.tab(&all);
        if r.code == 0 {
            return r;
        }
        let message = r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Some((_, rest)) = message.split_once("is locked: ") else {
            return r;
        };
        let lock = rest.trim_end_matches(" exists");
        std::fs::remove_file(lock).unwrap_or_else(|e| panic!("rm {lock}: {e}\n{}", r.desc));
    }
    panic!("{args:?} kept finding locks");
}

/// Kill `args` after a random delay (it may also have finished by then).
fn killed(t: &TestEnv, args: &[&str], round: u32) {
    let mut child = t.spawn_tab(args);
    std::thread::sleep(random_delay(round));
    let _ = child.kill();
    let _ = child.wait();
}

fn no_lock_files_left(t: &TestEnv) {
    let out = t.command("find", &t.repo.join(".git"), &["-name", "*.lock"]);
    out.ok();
    assert_eq!(out.stdout.trim(), "", "lock files left after the repair");
}

#[test]
fn start_killed_anywhere_is_repaired_by_the_documented_steps() {
    for round in 0..ROUNDS {
        let t = TestEnv::new();
        killed(&t, &["start", "r1", "--task", "t"], round);
        // The documented repair: the same start again (it completes a torn start), removing a
        // stale lock it names; a run whose worktree was left unusable is abandoned and cleaned.
        let r = with_stale_locks_removed(&t, &["start", "r1", "--task", "t"]);
        if r.code != 0 {
            assert_eq!(r.code, 2, "{}", r.desc);
            let (code, st) = t.tab_json(&["status", "r1"]);
            assert_eq!(code, 0, "{st}");
            if st["next_action"]["action"] == "abandon" {
                t.tab(&["abandon", "r1"]).ok();
                t.tab(&["cleanup", "r1", "--force"]).ok();
            } else {
                assert_eq!(st["state"], "active", "{st}");
                assert!(t.worktree("r1").join(".git").is_file(), "{st}");
            }
        }
        t.git(&["worktree", "list"]).ok();
        no_lock_files_left(&t);
        t.fsck();
    }
}

/// Kill a promotion of a completed run at random points; repair; check the invariants.
fn promote_killed_anywhere(t: &TestEnv, round: u32) {
    let validated = t.git_out(&["rev-parse", "tabellio/r1"]);
    let base = t.git_out(&["rev-parse", "main"]);
    killed(t, &["promote", "r1"], round);
    // Right after the kill: the target is where it was or exactly at the validated commit,
    // and a ledger that says promoted has the target there.
    let main = t.git_out(&["rev-parse", "main"]);
    assert!(main == base || main == validated, "main at {main}");
    let ledger = t.git_out(&["show", "refs/tabellio/runs/r1:run.json"]);
    let ledger: serde_json::Value = serde_json::from_str(&ledger).unwrap();
    if ledger["state"] == "promoted" {
        assert_eq!(main, validated);
    } else {
        assert_eq!(ledger["state"], "completed");
    }
    // The documented repair: promote again (it completes an interrupted promotion or a
    // half-moved worktree), removing a stale lock it names.
    with_stale_locks_removed(t, &["promote", "r1"]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), validated);
    assert_eq!(t.tab_json(&["status", "r1"]).1["state"], "promoted");
    t.tab(&["verify", &validated]).ok();
    no_lock_files_left(t);
    t.fsck();
}

#[test]
fn a_ref_only_promote_killed_anywhere_is_repaired_by_the_documented_steps() {
    for round in 0..ROUNDS {
        let t = TestEnv::ref_only();
        t.completed_run("r1", "a.txt");
        promote_killed_anywhere(&t, round);
    }
}

#[test]
fn a_checked_out_promote_killed_anywhere_is_repaired_by_the_documented_steps() {
    for round in 0..ROUNDS {
        let t = TestEnv::new();
        for i in 0..20 {
            t.write(&format!("f{i}.txt"), "old\n");
        }
        t.commit_all("files");
        t.tab(&["start", "r1", "--task", "t"]).ok();
        let wt = t.worktree("r1");
        for i in 0..20 {
            write_file(&wt.join(format!("f{i}.txt")), &format!("new {i}\n"));
        }
        t.commit_all_in(&wt, "change");
        t.tab(&["finish", "r1", "--", "true"]).ok();
        promote_killed_anywhere(&t, round);
        assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    }
}
