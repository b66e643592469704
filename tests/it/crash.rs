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
pub fn with_stale_locks_removed(t: &TestEnv, args: &[&str]) -> Run {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    // A killed landing can leave a lock on the target and on each run's branch and ledger.
    for _ in 0..16 {
        let r = t.tab(&all);
        // A landing names a lock in its way as an error, or (the summary it notes after the
        // landing, never a failed landing) as a warning.
        let message = match r.code {
            0 => r.json()["summary_warning"].as_str().map(str::to_string),
            _ => r.json()["error"]["message"].as_str().map(str::to_string),
        };
        let message = match (r.code, message) {
            (0, None) => return r,
            (_, message) => message.unwrap_or_default(),
        };
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

pub(crate) fn no_lock_files_left(t: &TestEnv) {
    // `tabellio/tmp/.lock` is the scratch worktrees' flock file: a lock only while a process
    // holds it open, never one a killed process leaves held.
    let out = t.command(
        "find",
        &t.repo.join(".git"),
        &["-name", "*.lock", "-not", "-path", "./tabellio/tmp/.lock"],
    );
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

/// Trials per ref backend of the killed-`land` (and killed-`gc`) tests: `TABELLIO_CRASH_TRIALS` (200 for a
/// thorough run), else a number CI affords.
pub(crate) fn land_trials() -> u32 {
    crash_trials(10)
}

/// `TABELLIO_CRASH_TRIALS`, else `default` (what CI affords for the test asking).
pub(crate) fn crash_trials(default: u32) -> u32 {
    std::env::var("TABELLIO_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A delay of up to `max_ms`, different every call.
pub(crate) fn random_delay_up_to(round: u32, max_ms: u64) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    let mixed = (nanos ^ u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % (max_ms * 1000);
    Duration::from_micros(mixed)
}

/// `land` of three runs killed (SIGKILL) anywhere: restacking, validating, in its transaction,
/// moving a checked-out target's files. The documented repair is `land` again (removing a stale
/// lock it names); afterwards every run is `promoted` exactly when the target holds its landed
/// commit, no run's change landed twice, the target's tip verifies, and `git fsck --strict` is
/// clean.
/// Three completed runs of `main`, each adding its own file: `main` checked out (odd rounds)
/// or checked out nowhere (even rounds).
fn three_runs_to_land(round: u32) -> TestEnv {
    let t = if round.is_multiple_of(2) {
        TestEnv::ref_only()
    } else {
        TestEnv::new()
    };
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("ok", &["true"])]));
    if round.is_multiple_of(2) {
        t.git(&["switch", "-q", "elsewhere"]).ok();
    }
    let runs = ["r1", "r2", "r3"];
    for id in runs {
        t.tab(&["start", id, "--task", "t", "--base", "main"]).ok();
        t.commit_file_in(&t.worktree(id), &format!("{id}.txt"), &format!("{id}\n"));
        t.tab(&["finish", id]).ok();
    }
    t
}

#[test]
fn land_killed_anywhere_is_repaired_by_landing_again() {
    // How long an uninterrupted landing takes, with each kind of target.
    let span: Vec<u64> = (0..2)
        .map(|kind| {
            let t = three_runs_to_land(kind);
            let started = std::time::Instant::now();
            t.tab(&["land", "r1", "r2", "r3"]).ok();
            (started.elapsed().as_millis() as u64).max(1)
        })
        .collect();
    for round in 0..land_trials() {
        let t = three_runs_to_land(round);
        let runs = ["r1", "r2", "r3"];
        let base = t.git_out(&["rev-parse", "main"]);
        let mut child = t.spawn_tab(&["land", "r1", "r2", "r3"]);
        // Anywhere in the landing's life, and sometimes after it: up to one and a half times as
        // long as an uninterrupted one took.
        std::thread::sleep(random_delay_up_to(round, span[round as usize % 2] * 3 / 2));
        let _ = child.kill();
        let _ = child.wait();
        // What the kill left: the target moved while a ledger still says completed is the torn
        // state the rerun must finish.
        let moved = t.git_out(&["rev-parse", "main"]) != base;
        let promoted = runs
            .iter()
            .filter(|id| {
                t.ledger_record(&format!("refs/tabellio/runs/{id}"))["state"] == "promoted"
            })
            .count();
        let left = match (moved, promoted) {
            (false, 0) => "before the transaction",
            (true, 3) => "after the transaction",
            _ => "torn",
        };
        eprintln!("round {round}: killed {left}");
        // The documented repair: land again, removing a stale lock it names.
        let r = with_stale_locks_removed(&t, &["land", "r1", "r2", "r3"]);
        assert_eq!(r.code, 0, "round {round}: {}", r.desc);
        let main = t.git_out(&["rev-parse", "main"]);
        for id in runs {
            let rec = t.ledger_record(&format!("refs/tabellio/runs/{id}"));
            assert_eq!(rec["state"], "promoted", "round {round}: {id}: {rec}");
            let landed = rec["landed"]
                .as_str()
                .or_else(|| rec["promotion"]["new"].as_str())
                .unwrap_or_else(|| panic!("round {round}: {id} names no landed commit: {rec}"));
            let on_target = t.git(&["merge-base", "--is-ancestor", landed, &main]);
            assert_eq!(
                on_target.code, 0,
                "round {round}: {id}'s {landed} not on main"
            );
            // Its change landed once.
            let touching = t.git_out(&[
                "log",
                "--format=%H",
                &format!("{base}..{main}"),
                "--",
                &format!("{id}.txt"),
            ]);
            assert_eq!(
                touching.lines().count(),
                1,
                "round {round}: {id}: {touching}"
            );
            // Its worktree moved with its branch, even from half-way through a killed move.
            assert_eq!(
                t.git_out_in(&t.worktree(id), &["status", "--porcelain"]),
                "",
                "round {round}: {id}'s worktree is where its branch is"
            );
        }
        t.tab(&["verify", "main"]).ok();
        if round % 2 == 1 {
            assert_eq!(
                t.git_out(&["status", "--porcelain", "--untracked-files=no"]),
                "",
                "round {round}: the checked-out target's worktree is where main is"
            );
        }
        no_lock_files_left(&t);
        t.fsck();
    }
}

/// The torn state a landing killed inside its transaction leaves with the files backend, made
/// by hand: the target moved, the first run recorded, the second run's branch moved but not
/// its ledger, the third run neither. `land` again records both as landed (the commit each
/// landed as, its worktree moved with its branch), lands nothing twice, and `fsck` is clean.
#[test]
fn a_landing_torn_between_its_ref_writes_is_finished_by_landing_again() {
    if ref_format() == "reftable" {
        // A reftable transaction is one rename: a landing is never torn there, and the repair
        // (which reads the target's reflog for the landing of the run) is not needed.
        return;
    }
    for kind in 0..2 {
        let t = three_runs_to_land(kind);
        let before: Vec<(String, String)> = ["r2", "r3"]
            .iter()
            .map(|id| {
                let ledger = format!("refs/tabellio/runs/{id}");
                (ledger.clone(), t.git_out(&["rev-parse", &ledger]))
            })
            .collect();
        let r3_head = t.git_out(&["rev-parse", "refs/heads/tabellio/r3"]);
        let base = t.git_out(&["rev-parse", "main"]);
        t.tab(&["land", "r1", "r2", "r3"]).ok();
        let landed: Vec<String> = ["r1", "r2", "r3"]
            .iter()
            .map(|id| {
                t.ledger_record(&format!("refs/tabellio/runs/{id}"))["landed"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        // Tear it: r2's and r3's ledgers back to `completed`, r3's branch back too, and r3's
        // worktree back at its validated head.
        for (ledger, old) in &before {
            t.git(&["update-ref", ledger, old]).ok();
        }
        t.git(&["update-ref", "refs/heads/tabellio/r3", &r3_head])
            .ok();
        t.git_in(&t.worktree("r3"), &["reset", "-q", "--hard", &r3_head])
            .ok();
        let (code, j) = t.tab_json(&["land", "--target", "main"]);
        assert_eq!(code, 0, "{j}");
        for (i, id) in ["r2", "r3"].iter().enumerate() {
            let r = j["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["run_id"] == *id)
                .unwrap_or_else(|| panic!("{id} in {j}"));
            assert_eq!(r["result"], "already_landed", "{j}");
            let rec = t.ledger_record(&format!("refs/tabellio/runs/{id}"));
            assert_eq!(rec["state"], "promoted", "{rec}");
            assert_eq!(rec["landed"], landed[i + 1].as_str(), "{rec}");
            assert_eq!(
                t.git_out(&["rev-parse", &format!("refs/heads/tabellio/{id}")]),
                landed[i + 1]
            );
            assert_eq!(
                t.git_out_in(&t.worktree(id), &["status", "--porcelain"]),
                "",
                "{id}'s worktree moved with its branch"
            );
        }
        let main = t.git_out(&["rev-parse", "main"]);
        assert_eq!(main, landed[2], "nothing landed again");
        assert_eq!(
            t.git_out(&["rev-list", "--count", &format!("{base}..{main}")]),
            "3"
        );
        t.tab(&["verify", "main"]).ok();
        t.fsck();
    }
}

/// `rewind --force` killed (SIGKILL) anywhere loses nothing: the uncommitted work is on disk or
/// in the snapshot of a checkpoint the ledger keeps, and the same command, run again (after the
/// documented `rm` of a lock the kill left), finishes the rewind.
#[test]
fn a_rewind_killed_anywhere_loses_nothing_and_finishes_when_run_again() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    for value in ["one", "two"] {
        write_file(&wt.join("a.txt"), &format!("{value}\n"));
        t.commit_all_in(&wt, value);
        t.tab(&["checkpoint", "r1"]).ok();
    }
    for round in 0..ROUNDS {
        let work = format!("work {round}\n");
        let new = format!("new{round}.txt");
        write_file(&wt.join("a.txt"), &work);
        write_file(&wt.join(&new), &work);
        let (target, content) = [("1", "one\n"), ("2", "two\n")][round as usize % 2];
        killed(&t, &["rewind", "--force", "r1", target], round);
        with_stale_locks_removed(&t, &["rewind", "--force", "r1", target]).ok();
        let run = t.ledger_record("refs/tabellio/runs/r1");
        let kept = run["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["snapshot"].as_str())
            .any(|s| {
                let shown = t.git(&["show", &format!("{s}:{new}")]);
                shown.code == 0 && shown.stdout == work
            });
        assert!(
            kept,
            "round {round}: the uncommitted work is in no snapshot"
        );
        let a = std::fs::read_to_string(wt.join("a.txt")).unwrap();
        assert_eq!(a, content, "round {round}");
        assert!(!wt.join(&new).exists(), "round {round}");
        assert_eq!(
            t.git_out_in(&wt, &["status", "--porcelain"]),
            "",
            "round {round}"
        );
    }
    no_lock_files_left(&t);
    t.fsck();
}

/// A landing killed while it moved the checked-out `main` toward its run's files (the kill
/// timed by a slow smudge filter on `b/`), then another run promoted first, onto another tree:
/// the killed move's files are put back, not taken for someone's changes, and the promotion
/// goes through; the killed landing's run lands after it. Someone's own edit of those files,
/// or their own file where the killed move added one, is refused and never overwritten.
#[test]
fn a_move_killed_toward_one_tree_is_put_back_by_a_move_to_another() {
    let t = TestEnv::new();
    t.write("a/x", "1\n");
    t.write("b/x", "1\n");
    t.commit_policy(&policy(&[("ok", &["true"])]));
    t.started_run("ra", "a/1");
    t.tab(&["finish", "ra"]).ok();
    let wt = t.started_run("rb", "b/2");
    t.commit_file_in(&wt, "b/x", "rb\n");
    t.tab(&["finish", "rb"]).ok();
    t.git(&["config", "filter.slow.smudge", "sleep 1; cat"])
        .ok();
    t.git(&["config", "filter.slow.clean", "cat"]).ok();
    write_file(&t.repo.join(".git/info/attributes"), "b/** filter=slow\n");
    // Killed once `b/2` is written and `b/x` is being written (files go in path order).
    let mut child = t.spawn_tab(&["land", "rb", "--target", "main"]);
    let started = std::time::Instant::now();
    let read = |p: &str| std::fs::read_to_string(t.repo.join(p)).unwrap_or_default();
    while !(read("b/2") == "rb\n" && read("b/x") != "1\n") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the move never began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let base = t.git_out(&["rev-parse", "main"]);
    let (left_x, left_2) = (read("b/x"), read("b/2"));
    let refs = t.snapshot();
    for (path, theirs) in [("b/x", "mine\n"), ("b/2", "mine too\n")] {
        let was = read(path);
        t.write(path, theirs);
        let r = crate::crash::with_stale_locks_removed(&t, &["promote", "ra"]);
        assert_eq!(r.code, 3, "{}", r.desc);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(path),
            "{}",
            r.desc
        );
        assert_eq!(read(path), theirs);
        assert_eq!(t.snapshot(), refs);
        t.write(path, &was);
    }
    assert_eq!((read("b/x"), read("b/2")), (left_x, left_2));
    let r = crate::crash::with_stale_locks_removed(&t, &["promote", "ra"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    assert_ne!(t.git_out(&["rev-parse", "main"]), base);
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    assert_eq!(read("b/x"), "1\n");
    let r = crate::crash::with_stale_locks_removed(&t, &["land", "rb", "--target", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    assert_eq!(
        (read("b/x"), read("b/2"), read("a/1")),
        ("rb\n".into(), "rb\n".into(), "ra\n".into())
    );
    t.tab(&["verify", "main"]).ok();
    crate::crash::no_lock_files_left(&t);
    t.fsck();
}
