//! Reconcile: moving misplaced plans like `git mv`, and what it leaves when it cannot.

use super::*;
use crate::plans::reconcile::reconcile_with;
use std::io::Write as _;

#[cfg(unix)]
#[test]
fn unreadable_entries_are_reported_and_the_others_still_handled() {
    let fx = Fixture::repo();
    fx.write("plans/active.md", &plan("active", 1, 1));
    fx.write("plans/finished.md", &plan("finished", 2, 0));
    fx.write("plans/folder.md/inside.md", &plan("inside", 1, 0));
    std::os::unix::fs::symlink("nowhere.md", fx.root.join("plans/dangling.md")).expect("symlink");
    std::os::unix::fs::symlink("finished.md", fx.root.join("plans/alias.md")).expect("symlink");
    fx.write("plans_completed", "a file where a folder should be\n");

    let expected_errors = vec![
        (
            "plans/alias.md".to_owned(),
            "plans/alias.md is a symbolic link, not a regular file, so it is not read as a plan"
                .to_owned(),
        ),
        (
            "plans/dangling.md".to_owned(),
            "plans/dangling.md is a symbolic link, not a regular file, so it is not read as a plan"
                .to_owned(),
        ),
        (
            "plans/folder.md".to_owned(),
            "plans/folder.md is a directory, not a regular file, so it is not read as a plan"
                .to_owned(),
        ),
        (
            "plans_completed".to_owned(),
            "plans_completed is a file, not a directory, so it holds no plans".to_owned(),
        ),
    ];
    let report = scan_dir(&fx.root);
    assert_eq!(error_list(&report.errors), expected_errors);
    assert_eq!(paths(&report, PlanClass::Active), ["plans/active.md"]);
    assert_eq!(paths(&report, PlanClass::Misplaced), ["plans/finished.md"]);

    // The misplaced plan cannot go anywhere while plans_completed is a file; the error says so
    // and the scan errors are still reported.
    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert!(outcome.moved.is_empty());
    let mut expected = expected_errors.clone();
    expected.push((
        "plans/finished.md".to_owned(),
        "cannot move plans/finished.md: plans_completed is a file, not a directory".to_owned(),
    ));
    expected.sort();
    assert_eq!(error_list(&outcome.errors), expected);

    std::fs::remove_file(fx.root.join("plans_completed")).expect("rm");
    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert_eq!(
        outcome.moved,
        [Move {
            from: "plans/finished.md".into(),
            to: "plans_completed/finished.md".into()
        }]
    );
    assert_eq!(outcome.errors.len(), 3, "{:?}", outcome.errors);
    assert!(fx.exists("plans/dangling.md") && fx.exists("plans/folder.md/inside.md"));
}

#[test]
fn a_prose_only_plan_is_not_moved() {
    let fx = Fixture::repo();
    fx.write("plans/prose.md", "# Thoughts\n\nNothing to tick.\n");
    fx.write(
        "plans_completed/history.md",
        "# History\n\n* [ ] not a task\n",
    );
    fx.commit_all();
    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert!(outcome.moved.is_empty() && outcome.errors.is_empty());
    assert!(fx.exists("plans/prose.md") && fx.exists("plans_completed/history.md"));
    assert_eq!(fx.git(&["status", "--porcelain"]), "");
    assert!(!fx.root.join(".git/index.lock").exists());
}

#[test]
fn reconcile_moves_misplaced_plans_like_git_mv() {
    let fx = Fixture::repo();
    fx.write("plans/active.md", &plan("active", 1, 1));
    fx.write("plans/done.md", &plan("done", 3, 0));
    fx.write("plans/edited.md", &plan("edited", 1, 1));
    fx.write("plans/same.md", &plan("same moving", 2, 0));
    fx.write("plans_completed/same.md", &plan("same staying", 2, 0));
    fx.write("plans/twice.md", &plan("twice moving", 2, 0));
    fx.write("plans_completed/twice.md", &plan("twice staying", 2, 0));
    fx.write("plans_completed/twice_1.md", &plan("twice one", 2, 0));
    fx.write("plans/ghost.md", &plan("ghost moving", 1, 0));
    fx.write("plans_completed/ghost.md", &plan("ghost staged", 1, 0));
    fx.write("plans_completed/reopened.md", &plan("reopened", 2, 1));
    fx.write("plans_completed/kept.md", &plan("kept", 2, 0));
    fx.write("src/main.rs", "fn main() {}\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let done = fx.root.join("plans/done.md");
        std::fs::set_permissions(&done, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    fx.commit_all();
    // Tracked but deleted on disk: its name is still taken in the index.
    std::fs::remove_file(fx.root.join("plans_completed/ghost.md")).expect("rm");
    // Ticked in the worktree only: the staged blob must move unchanged, like git mv.
    fx.write("plans/edited.md", &plan("edited", 2, 0));
    fx.write("plans/untracked.md", &plan("untracked", 1, 0));
    let blob_before = fx.git(&["rev-parse", ":plans/done.md"]);
    let stage_before = fx.git(&["ls-files", "-s", "plans/done.md"]);
    #[cfg(unix)]
    assert!(stage_before.starts_with("100755 "), "{stage_before}");
    let edited_blob_before = fx.git(&["rev-parse", ":plans/edited.md"]);
    let done_text = fx.read("plans/done.md");

    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let moves: Vec<(&str, &str)> = outcome
        .moved
        .iter()
        .map(|m| (m.from.as_str(), m.to.as_str()))
        .collect();
    assert_eq!(
        moves,
        [
            ("plans/done.md", "plans_completed/done.md"),
            ("plans/edited.md", "plans_completed/edited.md"),
            ("plans/ghost.md", "plans_completed/ghost_1.md"),
            ("plans/same.md", "plans_completed/same_1.md"),
            ("plans/twice.md", "plans_completed/twice_2.md"),
            ("plans/untracked.md", "plans_completed/untracked.md"),
            ("plans_completed/reopened.md", "plans/reopened.md"),
        ]
    );

    assert_eq!(
        sorted_lines(&fx.git(&["status", "--porcelain"])),
        sorted_lines(
            " D plans_completed/ghost.md\n\
             ?? plans_completed/untracked.md\n\
             R  plans/done.md -> plans_completed/done.md\n\
             RM plans/edited.md -> plans_completed/edited.md\n\
             R  plans/ghost.md -> plans_completed/ghost_1.md\n\
             R  plans/same.md -> plans_completed/same_1.md\n\
             R  plans/twice.md -> plans_completed/twice_2.md\n\
             R  plans_completed/reopened.md -> plans/reopened.md\n"
        )
    );
    assert_eq!(
        sorted_lines(&fx.git(&["diff", "--cached", "-M", "--name-status"])),
        sorted_lines(
            "R100\tplans/done.md\tplans_completed/done.md\n\
             R100\tplans/edited.md\tplans_completed/edited.md\n\
             R100\tplans/ghost.md\tplans_completed/ghost_1.md\n\
             R100\tplans/same.md\tplans_completed/same_1.md\n\
             R100\tplans/twice.md\tplans_completed/twice_2.md\n\
             R100\tplans_completed/reopened.md\tplans/reopened.md\n"
        )
    );
    assert_eq!(
        fx.git(&["rev-parse", ":plans_completed/done.md"]),
        blob_before
    );
    // Same mode (100755 on unix), blob and stage under the new name.
    assert_eq!(
        fx.git(&["ls-files", "-s", "plans_completed/done.md"]),
        stage_before.replace("plans/done.md", "plans_completed/done.md")
    );
    assert_eq!(
        fx.git(&["rev-parse", ":plans_completed/edited.md"]),
        edited_blob_before
    );
    assert_eq!(fx.read("plans_completed/done.md"), done_text);
    assert_eq!(
        fx.read("plans_completed/same.md"),
        plan("same staying", 2, 0)
    );
    assert_eq!(
        fx.read("plans_completed/same_1.md"),
        plan("same moving", 2, 0)
    );
    assert_eq!(
        fx.read("plans_completed/twice_1.md"),
        plan("twice one", 2, 0)
    );
    assert!(!fx.root.join(".git/index.lock").exists());

    // The index is whole: a commit of it is what `git add -A` would have staged for these.
    fx.git(&["commit", "-q", "-m", "reconciled"]);
    fx.git(&["fsck", "--strict", "--no-progress"]);
    let tree_files = fx.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree_files.contains("plans_completed/done.md\n"));
    assert!(!tree_files.contains("plans/done.md\n"));
    let report = scan_dir(&fx.root);
    assert!(report.placement_clean(), "{:?}", report.plans);
    assert!(reconcile(&fx.root).expect("second run").moved.is_empty());
}

#[test]
fn reconcile_creates_the_missing_target_folder() {
    let fx = Fixture::repo();
    fx.write("plans/a.md", &plan("a", 2, 0));
    fx.write("README.md", "repo\n");
    fx.commit_all();
    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(
        fx.git(&["status", "--porcelain"]),
        "R  plans/a.md -> plans_completed/a.md\n"
    );
}

#[test]
fn reconcile_without_an_index_only_renames() {
    let fx = Fixture::repo();
    fx.write("plans_completed/back.md", &plan("back", 1, 1));
    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert_eq!(
        outcome.to_json(),
        serde_json::json!({
            "moved": [{"from": "plans_completed/back.md", "to": "plans/back.md"}],
            "errors": [],
        })
    );
    assert!(fx.exists("plans/back.md") && !fx.exists("plans_completed/back.md"));
    assert!(!fx.root.join(".git/index").exists());
    assert!(!fx.root.join(".git/index.lock").exists());
}

#[test]
fn a_conflicted_plan_is_not_moved() {
    let fx = Fixture::repo();
    fx.write("plans/c.md", &plan("c", 1, 0));
    fx.write("plans/d.md", &plan("d", 1, 0));
    fx.commit_all();
    let blob = fx.git(&["hash-object", "-w", "plans/c.md"]);
    let blob = blob.trim();
    let info = format!(
        "0 {zero}\tplans/c.md\n100644 {blob} 1\tplans/c.md\n100644 {blob} 2\tplans/c.md\n100644 {blob} 3\tplans/c.md\n",
        zero = "0".repeat(40)
    );
    let mut child = hermetic::git(&fx.home, &fx.root)
        .args(["update-index", "--index-info"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn git");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(info.as_bytes())
        .expect("write stdin");
    assert!(child.wait().expect("git waits").success());
    assert!(fx.git(&["ls-files", "-u"]).contains("plans/c.md"));

    let outcome = reconcile(&fx.root).expect("reconcile runs");
    assert_eq!(
        error_list(&outcome.errors),
        [(
            "plans/c.md".to_owned(),
            "plans/c.md is conflicted in the index; resolve the conflict before it can be moved"
                .to_owned()
        )]
    );
    assert_eq!(
        outcome.moved,
        [Move {
            from: "plans/d.md".into(),
            to: "plans_completed/d.md".into()
        }]
    );
    assert!(fx.exists("plans/c.md"));
    assert_eq!(fx.git(&["ls-files", "-u"]).lines().count(), 3);
}

#[test]
fn a_held_index_lock_stops_reconcile_before_anything_moves() {
    let fx = Fixture::repo();
    fx.write("plans/a.md", &plan("a", 1, 0));
    fx.commit_all();
    let lock = fx.root.join(".git/index.lock");
    std::fs::write(&lock, b"someone else's").expect("write lock");
    let err = reconcile(&fx.root).expect_err("the index is locked");
    assert!(matches!(err, ReconcileError::LockIndex { .. }), "{err:?}");
    assert!(fx.exists("plans/a.md") && !fx.exists("plans_completed/a.md"));
    assert_eq!(std::fs::read(&lock).expect("lock kept"), b"someone else's");
}

#[test]
fn reconcile_needs_the_worktree_root() {
    let fx = Fixture::repo();
    fx.write("plans/a.md", &plan("a", 1, 0));
    assert!(reconcile(&fx.root.join("plans")).is_err());
    assert!(matches!(
        reconcile(&fx.root.join("missing")),
        Err(ReconcileError::Open { .. })
    ));
}

#[test]
fn a_failed_index_write_moves_tracked_plans_back() {
    let fx = Fixture::repo();
    fx.write("plans/tracked.md", &plan("tracked", 2, 0));
    fx.write("plans_completed/reopened.md", &plan("reopened", 1, 1));
    fx.commit_all();
    fx.write("plans/untracked.md", &plan("untracked", 1, 0));
    let index_before = std::fs::read(fx.root.join(".git/index")).expect("index");

    fn failing_writer(_: &gix::index::File, _: gix::lock::File, _: bool) -> Result<(), String> {
        Err("disk full".to_owned())
    }
    let outcome = reconcile_with(&fx.root, failing_writer).expect("reconcile runs");
    assert_eq!(
        outcome.moved,
        [Move {
            from: "plans/untracked.md".into(),
            to: "plans_completed/untracked.md".into()
        }]
    );
    assert_eq!(
        error_list(&outcome.errors),
        [
            (
                "plans/tracked.md".to_owned(),
                "moved plans_completed/tracked.md back to plans/tracked.md because the index \
                 could not be written: disk full"
                    .to_owned()
            ),
            (
                "plans_completed/reopened.md".to_owned(),
                "moved plans/reopened.md back to plans_completed/reopened.md because the index \
                 could not be written: disk full"
                    .to_owned()
            ),
        ]
    );
    assert_eq!(
        std::fs::read(fx.root.join(".git/index")).expect("index"),
        index_before
    );
    assert!(!fx.root.join(".git/index.lock").exists());
    assert_eq!(
        fx.git(&["status", "--porcelain"]),
        "?? plans_completed/untracked.md\n"
    );
}

#[test]
fn a_linked_worktree_reconciles_its_own_index() {
    let fx = Fixture::repo();
    fx.write("plans/a.md", &plan("a", 1, 1));
    fx.commit_all();
    let linked = fx.root.parent().expect("has a parent").join("linked");
    let linked_str = linked.to_str().expect("temp paths are UTF-8");
    fx.git(&["worktree", "add", "-q", "-b", "run", linked_str]);
    std::fs::write(linked.join("plans/a.md"), plan("a", 2, 0)).expect("tick");

    let outcome = reconcile(&linked).expect("reconcile runs");
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(
        git_in(&fx.home, &linked, &["status", "--porcelain"]),
        "RM plans/a.md -> plans_completed/a.md\n"
    );
    assert_eq!(fx.git(&["status", "--porcelain"]), "");
    assert!(fx.exists("plans/a.md"));
}
