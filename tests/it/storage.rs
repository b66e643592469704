//! Storage edge cases: SHA-256, bare repositories, reftable (also bare and with SHA-256), an
//! unknown ref format, stale locks, and racing writers.

use crate::lifecycle::assert_no_local_paths;
use crate::util::*;

#[test]
fn sha256_repository_full_path() {
    let t = TestEnv::with_init(&["init", "-q", "-b", "main", "--object-format=sha256"]);
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab_in(&wt, &["checkpoint"]).ok();
    let r = t.tab_in(&wt, &["--json", "finish", "--", "true"]);
    r.ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    assert_eq!(head.len(), 64);
    assert_eq!(r.json()["run"]["validated"]["commit"], head);
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    assert!(note.contains(&head));
    t.fsck();
    assert_no_local_paths(&t);
}

#[test]
fn bare_repository_keeps_worktrees_in_the_git_dir() {
    let src = TestEnv::new();
    let bare = src.bare_clone();
    let r = src.tab_in(&bare, &["--json", "start", "r1", "--task", "t"]);
    r.ok();
    let wt = bare.join("tabellio").join("worktrees").join("r1");
    assert_eq!(r.json()["workspace"], wt.display().to_string());
    write_file(&wt.join("x"), "x");
    src.commit_all_in(&wt, "x");
    src.tab_in(&bare, &["finish", "r1", "--", "true"]).ok();
    let st = src.tab_in(&wt, &["--json", "status"]);
    st.ok();
    assert_eq!(st.json()["state"], "completed");
    let fsck = src.git_in(&bare, &["fsck", "--strict", "--no-progress"]);
    fsck.ok();
}

/// `start` … `promote` on a reftable repository: every ref in the reftable stack (none loose,
/// which git would ignore), stock git reads what we wrote, and fsck is clean.
fn reftable_full_path(t: &TestEnv) {
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab_in(&wt, &["checkpoint"]).ok();
    let r = t.tab_in(&wt, &["--json", "finish", "--", "true"]);
    r.ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    assert_eq!(r.json()["run"]["validated"]["commit"], head);
    let st = t.tab_in(&wt, &["--json", "status"]);
    st.ok();
    assert_eq!(st.json()["state"], "completed", "{}", st.desc);
    t.tab(&["promote", "r1"]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    let ledger = t.git_out(&["log", "-1", "--format=%s", "refs/tabellio/runs/r1"]);
    assert!(ledger.contains("promote"), "{ledger}");
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    assert!(note.contains(&head));
    assert!(!t.repo.join(".git/refs/tabellio").exists());
    assert!(!t.repo.join(".git/refs/notes").exists());
    t.fsck();
    assert_no_local_paths(t);
}

#[test]
fn reftable_repository_full_path() {
    let t = TestEnv::with_init(&["init", "-q", "-b", "main", "--ref-format=reftable"]);
    reftable_full_path(&t);
}

#[test]
fn sha256_reftable_repository_full_path() {
    let t = TestEnv::with_init(&[
        "init",
        "-q",
        "-b",
        "main",
        "--ref-format=reftable",
        "--object-format=sha256",
    ]);
    reftable_full_path(&t);
    assert_eq!(t.git_out(&["rev-parse", "main"]).len(), 64);
}

#[test]
fn bare_reftable_repository_keeps_worktrees_in_the_git_dir() {
    let src = TestEnv::new();
    let bare = src.path().join("bare.git");
    let (from, to) = (src.repo.to_str().unwrap(), bare.to_str().unwrap());
    src.git(&["clone", "-q", "--bare", "--ref-format=reftable", from, to])
        .ok();
    src.tab_in(&bare, &["start", "r1", "--task", "t"]).ok();
    let wt = bare.join("tabellio").join("worktrees").join("r1");
    write_file(&wt.join("x"), "x");
    src.commit_all_in(&wt, "x");
    src.tab_in(&bare, &["finish", "r1", "--", "true"]).ok();
    let st = src.tab_in(&wt, &["--json", "status"]);
    st.ok();
    assert_eq!(st.json()["state"], "completed", "{}", st.desc);
    src.tab_in(&bare, &["promote", "r1"]).ok();
    let head = src.git_out_in(&wt, &["rev-parse", "HEAD"]);
    assert_eq!(src.git_out_in(&bare, &["rev-parse", "main"]), head);
    src.git_in(&bare, &["fsck", "--strict", "--no-progress"])
        .ok();
}

#[test]
fn an_unknown_ref_format_is_refused_before_any_write() {
    let t = TestEnv::new();
    t.git(&["config", "core.repositoryFormatVersion", "1"]).ok();
    // git itself refuses such a repository, so the state is read from the files directly.
    let config = t.repo.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[extensions]\n\trefStorage = shelves\n");
    std::fs::write(&config, text).unwrap();
    let r = t.tab(&["--json", "start", "r1", "--task", "t"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("shelves"), "{}", r.desc);
    assert!(!t.repo.join(".tabellio").exists());
    assert!(!t.repo.join(".git/refs/tabellio").exists());
}

#[test]
fn a_stale_lock_is_named_with_how_to_clear_it() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    let lock = t.repo.join(".git/refs/tabellio/runs/r1.lock");
    std::fs::write(&lock, "").unwrap();
    let before = t.snapshot();
    let r = t.tab_in(&wt, &["--json", "checkpoint"]);
    r.code(4);
    let j = r.json();
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains("r1.lock"), "{msg}");
    assert!(j["error"]["hint"].as_str().unwrap().contains("rm "), "{j}");
    assert_eq!(before, t.snapshot());
    std::fs::remove_file(&lock).unwrap();
    t.tab_in(&wt, &["checkpoint"]).ok();
}

#[test]
fn concurrent_finishes_of_different_runs_keep_every_record() {
    let t = TestEnv::new();
    let n = 8;
    for i in 0..n {
        t.start_with_commit(&format!("r{i}"), &format!("f{i}.txt"), &format!("{i}\n"));
    }
    let finishes = (0..n).map(|i| t.spawn_tab(&["finish", &format!("r{i}"), "--", "true"]));
    for out in race(finishes.collect()) {
        assert!(out.code == 0, "{}", out.stderr);
    }
    for i in 0..n {
        let head = t.git_out(&["rev-parse", &format!("tabellio/r{i}")]);
        let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
        assert!(
            note.contains(&format!("\"run_id\":\"r{i}\"")),
            "record of r{i} lost"
        );
    }
    t.fsck();
}

#[test]
fn racing_finishes_of_one_run_conflict_instead_of_overwriting() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let finishes = (0..4).map(|_| t.spawn_tab(&["finish", "r1", "--", "true"]));
    let codes: Vec<i32> = race(finishes.collect()).iter().map(|e| e.code).collect();
    assert!(codes.iter().all(|c| *c == 0 || *c == 4), "{codes:?}");
    let wins = codes.iter().filter(|c| **c == 0).count();
    assert!(wins >= 1, "{codes:?}");
    // Every winner extended the chain once; no write was lost or forked.
    let transitions = t.git_out(&["rev-list", "--count", "refs/tabellio/runs/r1"]);
    assert_eq!(transitions.parse::<usize>().unwrap(), 1 + wins);
    t.fsck();
}

/// A promotion (target and ledger in one transaction) killed with SIGKILL at a different moment
/// each round, on reftable: both refs read in one `for-each-ref` (one snapshot of the stack)
/// are either both old or both new. The files backend cannot promise this (its crash table
/// has a "target moved, ledger not yet" row); reftable commits a transaction with one rename.
#[test]
fn a_promotion_killed_anywhere_on_reftable_moves_both_refs_or_neither() {
    let t = TestEnv::with_init(&["init", "-q", "-b", "main", "--ref-format=reftable"]);
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    // One promotion left alone says how long one takes here; the kills are spread over that
    // and a little beyond (a kill after the end finds everything new).
    t.completed_run("whole", "whole.txt");
    let began = std::time::Instant::now();
    t.tab(&["promote", "whole"]).ok();
    let life = began.elapsed();
    let (mut old, mut new) = (0, 0);
    for round in 0..12u32 {
        let id = format!("k{round}");
        t.completed_run(&id, &format!("{id}.txt"));
        let ledger_ref = format!("refs/tabellio/runs/{id}");
        let base = t.git_out(&["rev-parse", "main"]);
        let validated = t.git_out(&["rev-parse", &format!("tabellio/{id}")]);
        let ledger = t.git_out(&["rev-parse", &ledger_ref]);
        let mut child = t.spawn_tab(&["promote", &id]);
        std::thread::sleep(life * (round + 1) / 8);
        let _ = child.kill();
        let _ = child.wait();
        let refs = t.git_out(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads/main",
            &ledger_ref,
        ]);
        let value = |name: &str| {
            refs.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing:\n{refs}"))
                .to_string()
        };
        let (main_now, ledger_now) = (value("refs/heads/main"), value(&ledger_ref));
        match (main_now == base, ledger_now == ledger) {
            (true, true) => old += 1,
            (false, false) => {
                assert_eq!(main_now, validated, "round {round}");
                new += 1;
            }
            torn => panic!("round {round}: a torn promotion {torn:?}:\n{refs}"),
        }
    }
    eprintln!("killed promotions: {old} left everything old, {new} moved everything");
    t.fsck();
}
