//! Run worktrees that are not what they claim: another repository's worktree in the run's
//! place, and a worktree root or path reached through a symbolic link, which `start` refuses
//! and `cleanup --force` never deletes through.

use crate::util::*;

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
