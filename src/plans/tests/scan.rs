//! Markdown task lines, plan classes, the report and scanning a folder or a tree.

use super::*;

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
