//! What a killed command can leave behind, and how the tool gets the user out of it. The
//! states are made by hand (the exact bytes a SIGKILL at the wrong moment leaves), so the
//! tests are deterministic.

use crate::util::*;

#[test]
fn a_promotion_killed_between_its_two_ref_writes_is_completed_by_promote() {
    let t = TestEnv::ref_only();
    // The target was written, the ledger was not.
    let validated = t.half_promoted_run("r1", "a.txt");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["next_action"]["action"], "promote", "{st}");
    assert!(st["allowed_actions"]
        .as_array()
        .unwrap()
        .contains(&"promote".into()));
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["run"]["state"], "promoted");
    assert_eq!(t.git_out(&["rev-parse", "main"]), validated);
    t.fsck();
}

#[test]
fn a_checked_out_target_left_half_moved_is_finished_not_committed() {
    let t = TestEnv::new();
    t.write("old.txt", "old\n");
    t.write("keep.txt", "keep\n");
    t.commit_all("files");
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    t.git_in(&wt, &["rm", "-q", "old.txt"]).ok();
    write_file(&wt.join("new.txt"), "new\n");
    write_file(&wt.join("keep.txt"), "kept and changed\n");
    t.commit_all_in(&wt, "change");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    // The move was killed half-way: old.txt removed, new.txt written, keep.txt not yet.
    std::fs::remove_file(t.repo.join("old.txt")).unwrap();
    t.write("new.txt", "new\n");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("keep.txt")).unwrap(),
        "kept and changed\n"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.fsck();
}

#[test]
fn someone_elses_edit_in_the_target_is_never_taken_for_a_leftover() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    t.write("README.md", "my own edit\n");
    let before = t.snapshot();
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .starts_with("refs/heads/main is the protected target: do not commit there"),
        "{}",
        r.desc
    );
    assert_eq!(before, t.snapshot());
    assert_eq!(
        std::fs::read_to_string(t.repo.join("README.md")).unwrap(),
        "my own edit\n"
    );
}

#[test]
fn a_start_killed_while_adding_the_worktree_is_explained_and_cleaned_up() {
    let t = TestEnv::new();
    t.tab(&["start", "k1", "--task", "t"]).ok();
    // What a killed `git worktree add` leaves: locked as initializing, no index, no commondir.
    let admin = t.repo.join(".git/worktrees/k1");
    std::fs::write(admin.join("locked"), "initializing\n").unwrap();
    std::fs::remove_file(admin.join("index")).unwrap();
    std::fs::write(admin.join("commondir"), "").unwrap();
    let (code, st) = t.tab_json(&["status", "k1"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["next_action"]["action"], "abandon");
    assert!(st["live"]["worktree_broken"].is_string(), "{st}");
    let r = t.tab(&["--json", "checkpoint", "k1"]);
    r.code(3);
    t.tab(&["abandon", "k1"]).ok();
    t.tab(&["cleanup", "k1"]).code(3);
    t.tab(&["cleanup", "k1", "--force"]).ok();
    assert!(!t.worktree("k1").exists());
    // Stock git works again.
    t.git(&["worktree", "list"]).ok();
    t.git(&["gc", "-q"]).ok();
    t.fsck();
}

#[test]
fn a_checkpoint_whose_note_went_missing_restores_it() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab_in(&wt, &["checkpoint", "-m", "step"]).ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    t.git(&["update-ref", "-d", "refs/notes/tabellio/checkpoints"])
        .ok();
    let r = t.tab_in(&wt, &["--json", "checkpoint"]);
    r.ok();
    assert_eq!(r.json()["recorded"], false);
    let note = t.git_out(&["notes", "--ref=tabellio/checkpoints", "show", &head]);
    assert!(note.contains("\"summary\":\"step\""), "{note}");
}

#[test]
fn a_completed_run_without_its_worktree_can_still_be_promoted() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    t.git(&[
        "worktree",
        "remove",
        "--force",
        t.worktree("r1").to_str().unwrap(),
    ])
    .ok();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["next_action"]["action"], "promote", "{st}");
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn an_exclude_file_in_another_encoding_is_appended_to_not_rewritten() {
    let t = TestEnv::new();
    let exclude = t.repo.join(".git/info/exclude");
    let mut bytes = b"secret.env\n# caf\xe9 (latin-1)\n".to_vec();
    std::fs::write(&exclude, &bytes).unwrap();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    bytes.extend_from_slice(b"/.tabellio/worktrees/\n");
    assert_eq!(std::fs::read(&exclude).unwrap(), bytes);
}

#[test]
fn promotion_writes_files_the_way_their_attributes_say() {
    let t = TestEnv::new();
    t.write(".gitattributes", "*.txt text eol=crlf\n");
    t.write("a.txt", "l1\n");
    t.git(&["add", "-A"]).ok();
    t.git(&["commit", "-q", "-m", "attributes"]).ok();
    t.git(&["checkout", "-q", "--", "."]).ok();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    std::fs::write(wt.join("a.txt"), "l1\r\nl2\r\n").unwrap();
    t.git_in(&wt, &["add", "-A"]).ok();
    t.git_in(&wt, &["commit", "-q", "-m", "l2"]).ok();
    t.tab(&["finish", "r1", "--", "true"]).ok();
    t.tab(&["promote", "r1"]).ok();
    assert_eq!(
        std::fs::read(t.repo.join("a.txt")).unwrap(),
        b"l1\r\nl2\r\n"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
}

#[test]
fn a_half_moved_target_that_swapped_files_and_directories_is_finished() {
    let t = TestEnv::new();
    t.write("d/inner", "in d\n");
    t.write("x", "x file\n");
    t.git(&["add", "-A"]).ok();
    t.git(&["commit", "-q", "-m", "shapes"]).ok();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    t.git_in(&wt, &["rm", "-q", "-r", "d", "x"]).ok();
    write_file(&wt.join("d"), "d is a file\n");
    write_file(&wt.join("x/inner"), "x is a dir\n");
    t.git_in(&wt, &["add", "-A"]).ok();
    t.git_in(&wt, &["commit", "-q", "-m", "swap"]).ok();
    t.tab(&["finish", "r1", "--", "true"]).ok();
    // Killed half-way: d/inner gone and d written; x removed and x/inner written.
    std::fs::remove_dir_all(t.repo.join("d")).unwrap();
    t.write("d", "d is a file\n");
    std::fs::remove_file(t.repo.join("x")).unwrap();
    t.write("x/inner", "x is a dir\n");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.fsck();
}

#[test]
fn status_and_dry_run_see_what_would_block_promotion() {
    let t = TestEnv::new();
    t.completed_run("r1", "f.txt");
    // main is checked out here, with an edit of someone's.
    t.write("README.md", "mine\n");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["next_action"]["action"], "unblock-promote", "{st}");
    assert!(
        st["next_action"]["reason"]
            .as_str()
            .unwrap()
            .contains("README.md"),
        "{st}"
    );
    t.git(&["checkout", "-q", "--", "README.md"]).ok();
    // A stale lock is found by the dry run too, and named.
    let lock = t.repo.join(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").unwrap();
    let r = t.tab(&["--json", "promote", "r1", "--dry-run"]);
    r.code(4);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("main.lock"),
        "{}",
        r.desc
    );
    std::fs::remove_file(&lock).unwrap();
    t.tab(&["promote", "r1", "--dry-run"]).ok();
}

#[test]
fn a_worktree_root_that_cannot_exist_is_a_usage_error_that_writes_nothing() {
    let t = TestEnv::new();
    t.write(".tabellio", "a file in the way\n");
    let exclude = t.repo.join(".git/info/exclude");
    let before_exclude = std::fs::read(&exclude).unwrap_or_default();
    let before = t.snapshot();
    let r = t.tab(&["--json", "start", "r1", "--task", "t"]);
    r.code(2);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a file"),
        "{}",
        r.desc
    );
    assert_eq!(before, t.snapshot());
    assert_eq!(std::fs::read(&exclude).unwrap_or_default(), before_exclude);
}

#[test]
fn a_held_ref_lock_is_named_by_status_and_promote_alike() {
    let t = TestEnv::new();
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    t.completed_run("r1", "f.txt");
    let lock = t.repo.join(".git/refs/tabellio/runs/r1.lock");
    std::fs::write(&lock, "").unwrap();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["next_action"]["action"], "unblock-promote", "{st}");
    assert!(
        st["next_action"]["reason"]
            .as_str()
            .unwrap()
            .contains("r1.lock"),
        "{st}"
    );
    assert!(
        !st["allowed_actions"]
            .as_array()
            .unwrap()
            .contains(&"promote".into()),
        "{st}"
    );
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(4);
    std::fs::remove_file(&lock).unwrap();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn a_dangling_symlink_as_worktree_root_is_a_usage_error() {
    let t = TestEnv::new();
    std::os::unix::fs::symlink("/nonexistent/tabellio-root", t.repo.join("dang")).unwrap();
    t.git(&["config", "tabellio.worktreeRoot", "dang"]).ok();
    let before = t.snapshot();
    t.tab(&["start", "s2", "--task", "t"]).code(2);
    assert_eq!(before, t.snapshot());
}

#[test]
fn a_torn_start_is_recognised_by_status_and_completed_by_starting_again() {
    let t = TestEnv::new();
    let lock = t.torn_start("r1");
    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st}");
    let reason = st["next_action"]["reason"].as_str().unwrap();
    assert_eq!(st["next_action"]["action"], "start", "{st}");
    assert!(
        reason.contains("interrupted") && reason.contains("r1.lock"),
        "{st}"
    );
    assert!(!reason.contains("another machine"), "{st}");
    // The same start again completes it: the id is not burnt.
    let r = t.tab(&["--json", "start", "r1", "--task", "again"]);
    r.ok();
    assert!(!lock.exists(), "the stale lock is still there");
    assert!(t.worktree("r1").join(".git").is_file());
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "active", "{st}");
    assert_eq!(st["run"]["task"]["text"], "again", "{st}");
    t.commit_file_in(&t.worktree("r1"), "a.txt", "a\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    t.fsck();
}

#[test]
fn a_stale_ledger_lock_after_an_interrupted_promote_is_named_before_promote() {
    let t = TestEnv::ref_only();
    // Killed between the two ref writes: the target moved, the ledger's lock is left.
    let validated = t.half_promoted_run("r1", "a.txt");
    let lock = t.repo.join(".git/refs/tabellio/runs/r1.lock");
    write_file(&lock, &format!("{validated}\n"));
    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st}");
    let next = &st["next_action"];
    assert_eq!(next["action"], "unblock-promote", "{st}");
    assert!(next["reason"].as_str().unwrap().contains("r1.lock"), "{st}");
    let r = t.tab(&["--json", "promote", "r1", "--dry-run"]);
    r.code(4);
    assert!(r.stdout.contains("r1.lock"), "{}", r.desc);
    // The named repair, then promote completes.
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(
        t.tab_json(&["status", "r1"]).1["next_action"]["action"],
        "promote"
    );
    t.tab(&["promote", "r1"]).ok();
    assert_eq!(t.tab_json(&["status", "r1"]).1["state"], "promoted");
}

/// A run on `main` (checked out in the main worktree) that rewrites `keep.txt` and adds
/// `new.txt`, finished; the checked-out promote has not run yet.
fn run_rewriting_checked_out_files(t: &TestEnv) {
    t.write("keep.txt", "keep\n");
    t.commit_all("files");
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    write_file(&wt.join("new.txt"), "new content\n");
    write_file(&wt.join("keep.txt"), "kept and changed\n");
    t.commit_all_in(&wt, "change");
    t.tab(&["finish", "r1", "--", "true"]).ok();
}

#[test]
fn a_checked_out_promote_killed_mid_write_is_finished_by_the_next_promote() {
    let t = TestEnv::new();
    run_rewriting_checked_out_files(&t);
    // Killed while writing: keep.txt truncated to nothing, new.txt half written.
    t.write("keep.txt", "");
    t.write("new.txt", "new co");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("keep.txt")).unwrap(),
        "kept and changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.repo.join("new.txt")).unwrap(),
        "new content\n"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.fsck();
}

#[test]
fn beside_leftovers_of_a_killed_move_only_foreign_paths_are_named() {
    let t = TestEnv::new();
    run_rewriting_checked_out_files(&t);
    t.write("keep.txt", "");
    t.write("README.md", "my own edit\n");
    let before = t.snapshot();
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("README.md"), "{}", r.desc);
    assert!(!message.contains("keep.txt"), "{}", r.desc);
    assert_eq!(before, t.snapshot());
}

/// A landing killed after its transaction, before it noted the verification summary of the new
/// tip (its notes ref's lock left behind): `land` again lands nothing, names the lock in its
/// summary warning, and once the lock is removed writes the summary the killed one left out,
/// whether it names the runs or lands the target's queue.
#[test]
fn a_landing_killed_before_its_summary_has_it_written_by_landing_again() {
    let t = TestEnv::runs_to_land("ok", &["r1", "r2"]);
    t.tab(&["land", "r1", "r2"]).ok();
    let tip = t.git_out(&["rev-parse", "main"]);
    let summary = ["notes", "--ref", "tabellio/vsa", "show", tip.as_str()];
    t.git(&summary).ok();
    // What the kill left: no summary on the tip, and the lock the summary's write took.
    t.git(&["notes", "--ref", "tabellio/vsa", "remove", &tip])
        .ok();
    let lock = t.repo.join(".git/refs/notes/tabellio/vsa.lock");
    write_file(&lock, "");
    let refs = t.snapshot();
    let (code, j) = t.tab_json(&["land", "r1", "r2"]);
    assert_eq!(code, 0, "{j}");
    let warning = j["summary_warning"].as_str().unwrap_or_default();
    assert!(warning.contains(lock.to_str().unwrap()), "{j}");
    assert_eq!(t.snapshot(), refs);
    std::fs::remove_file(&lock).unwrap();
    // The queue of `main` (nothing left in it) finds the landing in the runs' ledgers as well.
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    assert!(j.get("summary_warning").is_none(), "{j}");
    t.git(&summary).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), tip);
    t.fsck();
}

/// A promotion killed after its transaction, before it noted the summary of the commit it moved
/// the target to: `promote` again reports the run promoted and notes the summary.
#[test]
fn a_promotion_killed_before_its_summary_has_it_written_by_promoting_again() {
    let t = TestEnv::runs_to_land("ok", &["r1"]);
    t.tab(&["promote", "r1"]).ok();
    let tip = t.git_out(&["rev-parse", "main"]);
    let summary = ["notes", "--ref", "tabellio/vsa", "show", tip.as_str()];
    t.git(&summary).ok();
    t.git(&["notes", "--ref", "tabellio/vsa", "remove", &tip])
        .ok();
    let (code, j) = t.tab_json(&["promote", "r1", "--dry-run"]);
    assert_eq!(code, 0, "{j}");
    assert!(t.git(&summary).code != 0, "a dry run wrote the summary");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["already_promoted"], true, "{j}");
    t.git(&summary).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), tip);
    t.fsck();
}
