#[path = "../../tests/support/hermetic.rs"]
mod hermetic;

use super::reconcile::reconcile_with;
use super::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// A temp dir with a hermetic HOME and a worktree at `root`.
struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
}

impl Fixture {
    /// A plain directory, no git.
    fn plain() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&home).expect("mkdir home");
        std::fs::create_dir_all(&root).expect("mkdir repo");
        Fixture {
            _dir: dir,
            home,
            root,
        }
    }

    /// A fresh git repository on branch `main`.
    fn repo() -> Fixture {
        let fixture = Fixture::plain();
        fixture.git(&["init", "-q", "-b", "main"]);
        fixture
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(&self.home, &self.root, args)
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir -p");
        std::fs::write(path, content).expect("write file");
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).expect("read file")
    }

    fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(rel)).is_ok()
    }

    fn commit_all(&self) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "plans"]);
    }
}

fn git_in(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let output = hermetic::git(home, cwd)
        .args(args)
        .output()
        .expect("git can be spawned");
    assert!(
        output.status.success(),
        "git {args:?} in {} failed ({})\nstdout:\n{}\nstderr:\n{}",
        cwd.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8 here")
}

/// A plan titled `title` with `done` ticked and `open` unticked tasks.
fn plan(title: &str, done: usize, open: usize) -> String {
    let mut text = format!("# {title}\n\nWhy {title} exists.\n\n");
    for i in 0..done {
        text.push_str(&format!("- [x] {title} step {i}\n"));
    }
    for i in 0..open {
        text.push_str(&format!("- [ ] {title} later {i}\n"));
    }
    text
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn paths(report: &PlanReport, class: PlanClass) -> Vec<&str> {
    report.with_class(class).map(|p| p.path.as_str()).collect()
}

fn error_list(errors: &[PlanError]) -> Vec<(String, String)> {
    errors
        .iter()
        .map(|e| (e.path().to_owned(), e.message()))
        .collect()
}

#[test]
fn task_lines_follow_the_rules() {
    let text = "\u{feff}- [ ] open at the very start\r\n\
                - [x] done\r\n\
                \t  - [X] indented done\n\
                - [~] dropped counts as done\n\
                - [ ]\n\
                * [ ] star bullet\n\
                -[ ] no space\n\
                -  [ ] two spaces\n\
                > - [ ] quoted\n\
                - [-] other mark\n\
                - [ ]glued\n\
                - [xx] two marks\n\
                text with - [ ] in the middle\n\
                1. [ ] numbered\n";
    assert_eq!(count_tasks(text), TaskCount { open: 2, done: 3 });
    assert_eq!(count_tasks(""), TaskCount::default());
}

#[test]
fn fenced_code_blocks_hold_no_tasks() {
    let text = "- [ ] real\n\
                ```markdown\n- [ ] example\n```\n\
                ~~~~\n- [x] example\n~~~\nstill inside: a shorter fence does not close\n~~~~~\n\
                ``` not a fence ` because of the backtick\n- [x] real done\n\
                \x20 ```\n  - [ ] indented fence example\n  ```\n\
                ```\n- [ ] unclosed fence runs to the end\n";
    assert_eq!(count_tasks(text), TaskCount { open: 1, done: 1 });
}

#[test]
fn classes_follow_folder_and_open_tasks() {
    let t = |open, done| TaskCount { open, done };
    assert_eq!(PlanClass::of(Folder::Plans, t(1, 3)), PlanClass::Active);
    assert_eq!(PlanClass::of(Folder::Plans, t(0, 3)), PlanClass::Misplaced);
    assert_eq!(
        PlanClass::of(Folder::Completed, t(0, 3)),
        PlanClass::Completed
    );
    assert_eq!(
        PlanClass::of(Folder::Completed, t(1, 0)),
        PlanClass::Misplaced
    );
    assert_eq!(
        PlanClass::of(Folder::Plans, t(0, 0)),
        PlanClass::NoChecklist
    );
    assert_eq!(
        PlanClass::of(Folder::Completed, t(0, 0)),
        PlanClass::NoChecklist
    );
}

#[test]
fn two_active_and_two_completed_plans_are_fifty_percent() {
    let fx = Fixture::plain();
    fx.write("plans/a.md", &plan("a", 1, 1));
    fx.write("plans/b.md", &plan("b", 2, 3));
    fx.write("plans_completed/c.md", &plan("c", 2, 0));
    fx.write("plans_completed/d.md", &plan("d", 1, 0));
    let report = scan_dir(&fx.root);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(
        paths(&report, PlanClass::Active),
        ["plans/a.md", "plans/b.md"]
    );
    assert_eq!(
        paths(&report, PlanClass::Completed),
        ["plans_completed/c.md", "plans_completed/d.md"]
    );
    assert_eq!(
        report.bar(),
        "██████████░░░░░░░░░░ 2/4 plans 6/10 tasks (50%)"
    );
    let counts = report.counts();
    assert_eq!((counts.plans_total, counts.plans_completed), (4, 2));
    assert_eq!((counts.tasks_total, counts.tasks_done), (10, 6));
}

#[test]
fn bar_rounds_down_and_names_misplaced_plans() {
    let file = |path: &str, class, open, done| PlanFile {
        path: path.to_owned(),
        class,
        open,
        done,
    };
    let report = PlanReport {
        plans: vec![
            file("plans/a.md", PlanClass::Active, 1, 0),
            file("plans/b.md", PlanClass::Misplaced, 0, 2),
            file("plans/n.md", PlanClass::NoChecklist, 0, 0),
            file("plans_completed/c.md", PlanClass::Completed, 0, 1),
        ],
        errors: Vec::new(),
    };
    assert_eq!(
        report.bar(),
        "██████░░░░░░░░░░░░░░ 1/3 plans 3/4 tasks (33%) misplaced:1"
    );
    // 19 of 20 would round to a full bar and 100%; it must not.
    let mut almost = PlanReport::default();
    for i in 0..40 {
        let class = if i == 0 {
            PlanClass::Active
        } else {
            PlanClass::Completed
        };
        almost
            .plans
            .push(file(&format!("p{i}.md"), class, usize::from(i == 0), 1));
    }
    assert!(almost.bar().ends_with("(97%)"), "{}", almost.bar());
    assert!(almost.bar().starts_with(&format!("{}░", "█".repeat(19))));
    assert_eq!(
        PlanReport::default().bar(),
        format!("{} 0/0 plans 0/0 tasks (100%)", "█".repeat(20))
    );
}

#[test]
fn nested_files_readmes_and_dotfiles_are_not_plans() {
    let fx = Fixture::plain();
    let example = "# How to write plans\n\n```\n- [ ] fenced example\n```\n- [ ] a bare example\n- [x] another\n";
    fx.write("plans/README.md", example);
    fx.write("plans/MASTER_PLAN.md", &plan("master", 1, 1));
    fx.write("plans_completed/README.md", example);
    fx.write("plans/sub/finished.md", &plan("nested", 3, 0));
    fx.write("plans_completed/old/open.md", &plan("nested open", 0, 1));
    fx.write("plans/.draft.md", &plan("dot", 1, 0));
    fx.write("plans/notes.txt", &plan("txt", 1, 0));
    fx.write("plans/readme.MD", &plan("upper", 1, 0));
    fx.write("plan.md", &plan("top level", 1, 0));
    let report = scan_dir(&fx.root);
    assert!(report.plans.is_empty(), "{:?}", report.plans);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.placement_clean() && report.hygiene_clean());

    let missing = scan_dir(&fx.root.join("missing"));
    assert_eq!(missing.errors.len(), 1);
    assert_eq!(missing.errors[0].path(), ".");
}

#[test]
fn a_live_backlog_is_placement_clean_but_not_hygiene_clean() {
    let fx = Fixture::plain();
    fx.write("plans/now.md", &plan("now", 1, 2));
    fx.write("plans/prose.md", "# Ideas\n\nNo checklist [ ] here.\n");
    fx.write("plans_completed/then.md", &plan("then", 4, 0));
    let report = scan_dir(&fx.root);
    assert!(report.placement_clean());
    assert!(!report.hygiene_clean());
    assert_eq!(paths(&report, PlanClass::NoChecklist), ["plans/prose.md"]);

    fx.write("plans/now.md", &plan("now", 3, 0));
    let report = scan_dir(&fx.root);
    assert!(!report.placement_clean() && !report.hygiene_clean());
    assert!(report.bar().ends_with(" misplaced:1"), "{}", report.bar());

    std::fs::remove_file(fx.root.join("plans/now.md")).expect("rm");
    let report = scan_dir(&fx.root);
    assert!(report.placement_clean() && report.hygiene_clean());
}

#[test]
fn to_json_has_the_documented_shape() {
    let fx = Fixture::plain();
    fx.write("plans/a.md", &plan("a", 1, 1));
    fx.write("plans/b.md", &plan("b", 1, 0));
    fx.write("plans/n.md", "prose\n");
    fx.write("plans_completed/c.md", &plan("c", 2, 0));
    std::fs::create_dir_all(fx.root.join("plans/d.md")).expect("mkdir");
    let json = scan_dir(&fx.root).to_json();
    assert_eq!(json["active"], serde_json::json!(["plans/a.md"]));
    assert_eq!(
        json["completed"],
        serde_json::json!(["plans_completed/c.md"])
    );
    assert_eq!(json["misplaced"], serde_json::json!(["plans/b.md"]));
    assert_eq!(json["no_checklist"], serde_json::json!(["plans/n.md"]));
    assert_eq!(json["counts"]["plans_total"], 3);
    assert_eq!(json["counts"]["plans_completed"], 1);
    assert_eq!(json["counts"]["tasks_total"], 5);
    assert_eq!(json["counts"]["tasks_done"], 4);
    assert_eq!(json["counts"]["misplaced"], 1);
    assert_eq!(json["placement_clean"], false);
    assert_eq!(json["hygiene_clean"], false);
    assert_eq!(
        json["bar"],
        "██████░░░░░░░░░░░░░░ 1/3 plans 4/5 tasks (33%) misplaced:1"
    );
    assert_eq!(json["plans"][0]["class"], "active");
    assert_eq!(json["errors"][0]["path"], "plans/d.md");
    assert_eq!(
        json["errors"][0]["message"],
        "plans/d.md is a directory, not a regular file, so it is not read as a plan"
    );
}

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

#[cfg(unix)]
#[test]
fn tree_scan_equals_dir_scan_on_a_committed_worktree() {
    let fx = Fixture::repo();
    fx.write("plans/active.md", &plan("active", 1, 1));
    fx.write("plans/finished.md", &plan("finished", 2, 0));
    fx.write("plans/prose.md", "just words\n");
    fx.write("plans/README.md", "- [ ] example\n");
    fx.write("plans/sub/nested.md", &plan("nested", 1, 0));
    fx.write("plans/folder.md/inside.md", &plan("inside", 1, 0));
    fx.write("plans_completed/old.md", &plan("old", 3, 0));
    fx.write("plans_completed/reopened.md", &plan("reopened", 3, 1));
    fx.write("plans_completed/latin1.md", "- [x] caf\u{e9}\n");
    std::fs::write(
        fx.root.join("plans_completed/latin1.md"),
        b"- [x] caf\xe9\n",
    )
    .expect("write bytes");
    std::os::unix::fs::symlink("old.md", fx.root.join("plans_completed/link.md")).expect("symlink");
    fx.commit_all();

    let from_dir = scan_dir(&fx.root);
    let repo = gix::open_opts(&fx.root, gix::open::Options::isolated()).expect("open");
    let head = repo.head_id().expect("head").detach();
    let tree = repo
        .find_commit(head)
        .expect("commit")
        .tree_id()
        .expect("tree")
        .detach();
    for id in [head, tree] {
        let from_tree = scan_tree(&repo, id).expect("tree scan");
        assert_eq!(from_tree.plans, from_dir.plans);
        assert_eq!(error_list(&from_tree.errors), error_list(&from_dir.errors));
        assert_eq!(from_tree.to_json(), from_dir.to_json());
    }
    assert_eq!(from_dir.plans.len(), 6, "{:?}", from_dir.plans);
    assert_eq!(
        from_dir.bar(),
        "████████░░░░░░░░░░░░ 2/5 plans 10/12 tasks (40%) misplaced:2"
    );
    assert_eq!(from_dir.errors.len(), 2, "{:?}", from_dir.errors);

    let missing =
        gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").expect("valid hex");
    assert!(matches!(
        scan_tree(&repo, missing),
        Err(ScanTreeError::FindTree { .. })
    ));
}
