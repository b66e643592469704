//! Gates a run cannot weaken, worktrees that are not what they claim, symlinked worktree roots,
//! symbolic bases, and crashes and corrupt refs the tool repairs by itself.

use crate::util::*;

#[test]
fn a_run_cannot_weaken_the_policy_that_gates_its_promotion() {
    let t = TestEnv::with_readme_policy();
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    t.tab(&["start", "r1", "--task", "t", "--base", "main"])
        .ok();
    let wt = t.worktree("r1");
    // The run turns its required check into `true` and removes what the check asks for.
    write_file(
        &wt.join(".tabellio/policy.json"),
        &policy(&[("readme", &["true"])]),
    );
    std::fs::remove_file(wt.join("README.md")).unwrap();
    t.commit_all_in(&wt, "weaken the gate");
    t.tab(&["finish", "r1"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("readme"), "{}", r.desc);
    assert_eq!(t.git_out(&["rev-parse", "main"]), main, "main moved");
    // `--dry-run` refuses the same way.
    t.tab(&["promote", "r1", "--dry-run"]).code(3);
}

#[test]
fn finish_refuses_a_run_worktree_that_belongs_to_another_repository() {
    let t = TestEnv::ref_only();
    let wt = t.started_run("r1", "a.txt");
    let ours = t.git_out(&["rev-parse", "tabellio/r1"]);
    // Another repository (a clone) with its own `tabellio/r1`, whose worktree takes the place
    // of the run's; its commit is also fetched here, so it could be judged.
    let other = t.path().join("other");
    let (r, o) = (t.repo.to_str().unwrap(), other.to_str().unwrap());
    t.git_in(t.path(), &["clone", "-q", r, o]).ok();
    t.git_in(&other, &["branch", "tabellio/r1", "origin/main"])
        .ok();
    std::fs::remove_dir_all(&wt).unwrap();
    t.git_in(
        &other,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "tabellio/r1"],
    )
    .ok();
    t.commit_file_in(&wt, "theirs.txt", "theirs\n");
    let theirs = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    t.git(&["fetch", "-q", o, "tabellio/r1:refs/heads/smuggled"])
        .ok();
    let before = t.snapshot();
    for args in [&["finish", "r1", "--", "true"][..], &["checkpoint", "r1"]] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = t.tab(&all);
        r.code(3);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            message.contains(wt.to_str().unwrap()) && message.contains("another repository"),
            "{}",
            r.desc
        );
    }
    assert_eq!(t.snapshot(), before, "a refused finish wrote something");
    let run = t.git_out(&["show", "refs/tabellio/runs/r1:run.json"]);
    assert!(!run.contains(&theirs), "{run}");
    assert_eq!(t.git_out(&["rev-parse", "tabellio/r1"]), ours);
}

/// A committed symlink at `.tabellio/worktrees` pointing at `<test dir>/outside`; that directory.
fn committed_worktrees_link(t: &TestEnv) -> std::path::PathBuf {
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(t.repo.join(".tabellio")).unwrap();
    std::os::unix::fs::symlink(&outside, t.repo.join(".tabellio/worktrees")).unwrap();
    t.commit_all("link the worktrees away");
    outside
}

#[test]
fn start_refuses_a_worktree_root_reached_through_a_committed_symlink() {
    let t = TestEnv::new();
    let outside = committed_worktrees_link(&t);
    let before = t.snapshot();
    let r = t.tab(&["--json", "start", "r1", "--task", "t"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(".tabellio/worktrees") && message.contains("symbolic link"),
        "{}",
        r.desc
    );
    assert!(r.json()["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("tabellio.worktreeRoot"));
    assert_eq!(t.snapshot(), before, "a refused start wrote something");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // Configured by the user, a root reached through a symlink is theirs to choose.
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    t.git(&["config", "tabellio.worktreeRoot", link.to_str().unwrap()])
        .ok();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    assert!(outside.join("r1/.git").is_file());
}

#[test]
fn cleanup_force_never_deletes_through_a_symlinked_worktree_root() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    t.tab(&["abandon", "r1"]).ok();
    // The run worktree goes away by hand, and a symlink takes the root's place, pointing at a
    // directory that has an `r1` of someone else's.
    std::fs::remove_dir_all(t.repo.join(".tabellio/worktrees")).unwrap();
    let outside = t.path().join("outside");
    write_file(&outside.join("r1/precious.txt"), "keep me\n");
    std::os::unix::fs::symlink(&outside, t.repo.join(".tabellio/worktrees")).unwrap();
    let r = t.tab(&["--json", "cleanup", "r1", "--force"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("symbolic link"), "{}", r.desc);
    assert!(outside.join("r1/precious.txt").exists(), "deleted outside");
    // The documented way out: remove the link, then cleanup again.
    std::fs::remove_file(t.repo.join(".tabellio/worktrees")).unwrap();
    t.tab(&["cleanup", "r1", "--force"]).ok();
    assert!(outside.join("r1/precious.txt").exists());
    assert_eq!(
        t.git(&["rev-parse", "-q", "--verify", "tabellio/r1"]).code,
        1
    );
}

#[test]
fn start_refuses_a_symlink_at_the_worktree_path_in_its_precondition() {
    let t = TestEnv::new();
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::create_dir_all(t.repo.join(".tabellio/worktrees")).unwrap();
    std::os::unix::fs::symlink(&empty, t.worktree("r1")).unwrap();
    let before = t.snapshot();
    let r = t.tab(&["--json", "start", "r1", "--task", "t"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("symbolic link") && message.contains(t.worktree("r1").to_str().unwrap()),
        "{}",
        r.desc
    );
    assert_eq!(t.snapshot(), before, "a refused start wrote something");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

#[test]
fn a_symbolic_base_resolves_to_the_branch_it_names() {
    let t = TestEnv::ref_only();
    t.git(&["branch", "-m", "main", "trunk"]).ok();
    t.git(&["symbolic-ref", "refs/heads/main", "refs/heads/trunk"])
        .ok();
    let r = t.tab(&["start", "r1", "--task", "t", "--base", "main"]);
    r.ok();
    assert!(
        r.stdout.contains("refs/heads/trunk") && r.stdout.contains("refs/heads/main"),
        "{}",
        r.desc
    );
    let run = t.git_out(&["show", "refs/tabellio/runs/r1:run.json"]);
    let run: serde_json::Value = serde_json::from_str(&run).unwrap();
    assert_eq!(run["base"]["ref"], "refs/heads/trunk");
    let (code, st) = t.tab_json(&["start", "r2", "--task", "t", "--base", "main"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["base_via"], "refs/heads/main", "{st}");
    // The branch it names is what promotion moves; `main` follows it.
    t.commit_file_in(&t.worktree("r1"), "a.txt", "a\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    t.tab(&["promote", "r1"]).ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    assert_eq!(t.git_out(&["rev-parse", "trunk"]), head);
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    assert_eq!(
        t.git_out(&["symbolic-ref", "refs/heads/main"]),
        "refs/heads/trunk"
    );
}

/// What a `start` killed inside its ref transaction leaves: the ledger of `id` written, its
/// branch not, the branch's `.lock` file still there, no worktree. The lock's path.
pub(crate) fn torn_start(t: &TestEnv, id: &str) -> std::path::PathBuf {
    t.tab(&["start", id, "--task", "t"]).ok();
    let wt = t.worktree(id);
    t.git(&["worktree", "remove", "--force", wt.to_str().unwrap()])
        .ok();
    let branch = format!("refs/heads/tabellio/{id}");
    let base = t.git_out(&["rev-parse", &branch]);
    t.git(&["update-ref", "-d", &branch]).ok();
    let lock = t.repo.join(format!(".git/{branch}.lock"));
    write_file(&lock, &format!("{base}\n"));
    lock
}

#[test]
fn a_torn_start_is_recognised_by_status_and_completed_by_starting_again() {
    let t = TestEnv::new();
    let lock = torn_start(&t, "r1");
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
