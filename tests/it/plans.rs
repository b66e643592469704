//! Plan hygiene from the outside: status, reconcile (with --commit), and the finish gate.

use crate::util::*;

fn plan(open: usize, done: usize) -> String {
    let mut s = String::from("# Plan\n\n```\n- [ ] not a task, inside a fence\n```\n");
    for i in 0..open {
        s.push_str(&format!("- [ ] open {i}\n"));
    }
    for i in 0..done {
        s.push_str(&format!("- [x] done {i}\n"));
    }
    s
}

#[test]
fn status_counts_plans_and_tasks() {
    let t = TestEnv::new();
    t.write("plans/a.md", &plan(1, 1));
    t.write("plans/b.md", &plan(2, 0));
    t.write("plans_completed/c.md", &plan(0, 3));
    t.write("plans_completed/d.md", &plan(0, 1));
    t.write("plans/README.md", &plan(5, 0));
    t.write("plans/nested/e.md", &plan(1, 0));
    t.write("plans/prose.md", "just words\n");
    let (code, j) = t.tab_json(&["plans", "--dir", t.repo.to_str().unwrap()]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["active"], serde_json::json!(["plans/a.md", "plans/b.md"]));
    assert_eq!(
        j["completed"],
        serde_json::json!(["plans_completed/c.md", "plans_completed/d.md"])
    );
    assert_eq!(j["no_checklist"], serde_json::json!(["plans/prose.md"]));
    assert_eq!(j["placement_clean"], true);
    assert_eq!(j["hygiene_clean"], false);
    let bar = j["bar"].as_str().unwrap();
    assert!(bar.ends_with("2/4 plans 5/8 tasks (50%)"), "{bar}");
}

#[test]
fn reconcile_moves_commits_and_the_finish_gate_follows() {
    let t = TestEnv::new();
    t.commit_hygiene_policy();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    write_file(&wt.join("plans/done.md"), &plan(0, 2));
    write_file(&wt.join("plans/same.md"), &plan(0, 1));
    write_file(&wt.join("plans_completed/same.md"), &plan(0, 1));
    write_file(&wt.join("plans_completed/reopened.md"), &plan(1, 1));
    t.commit_all_in(&wt, "plans");

    // The checks pass, but the plans are not hygienic: not completed.
    let r = t.tab_in(&wt, &["--json", "finish"]);
    r.code(1);
    assert_eq!(r.json()["run"]["state"], "validation_failed");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert!(
        st["missing_evidence"]
            .as_array()
            .unwrap()
            .contains(&"plan-hygiene".into()),
        "{st}"
    );
    assert_eq!(st["next_action"]["action"], "plans");
    assert!(
        st["next_action"]["reason"]
            .as_str()
            .unwrap()
            .contains("plans/done.md"),
        "{st}"
    );
    assert!(
        st["plans"]["bar"].as_str().unwrap().contains("misplaced:"),
        "{st}"
    );

    let r = t.tab_in(&wt, &["--json", "plans", "reconcile", "--commit"]);
    r.ok();
    let j = r.json();
    let moved: Vec<(String, String)> = j["moved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["from"].as_str().unwrap().into(),
                m["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        moved.contains(&("plans/done.md".into(), "plans_completed/done.md".into())),
        "{moved:?}"
    );
    assert!(
        moved.contains(&("plans/same.md".into(), "plans_completed/same_1.md".into())),
        "{moved:?}"
    );
    assert!(
        moved.contains(&(
            "plans_completed/reopened.md".into(),
            "plans/reopened.md".into()
        )),
        "{moved:?}"
    );
    assert!(j["commit"].is_string());
    assert_eq!(t.git_out_in(&wt, &["status", "--porcelain"]), "");
    // Content is never edited.
    assert_eq!(
        std::fs::read_to_string(wt.join("plans/reopened.md")).unwrap(),
        plan(1, 1)
    );

    // Still an open plan: the gate holds; tick it and the run completes.
    t.tab_in(&wt, &["finish"]).code(1);
    write_file(&wt.join("plans/reopened.md"), &plan(0, 2));
    t.git_in(&wt, &["commit", "-q", "-am", "tick"]).ok();
    t.tab_in(&wt, &["plans", "reconcile", "--commit"]).ok();
    let r = t.tab_in(&wt, &["--json", "finish"]);
    r.ok();
    assert_eq!(r.json()["run"]["state"], "completed");
    t.fsck();
}

/// Scanning a named directory needs no repository; moving plans does, and says so plainly.
#[test]
fn status_of_a_directory_works_outside_a_repository() {
    let t = TestEnv::new();
    let dir = t.path().join("loose");
    write_file(&dir.join("plans/a.md"), &plan(1, 1));
    let outside = t.path().join("nowhere");
    std::fs::create_dir_all(&outside).unwrap();
    // No repository above `outside` may be found, whatever the machine's temp dir sits in.
    let ceiling = [("GIT_CEILING_DIRECTORIES", t.path().as_os_str())];
    let dir_s = dir.to_str().unwrap();
    for args in [
        &["--json", "plans", "--dir", dir_s][..],
        &["--json", "plans", "status", "--dir", dir_s],
    ] {
        let r = t.command_with_env(BIN, &outside, &ceiling, args);
        r.ok();
        assert_eq!(r.json()["active"], serde_json::json!(["plans/a.md"]));
    }
    let r = t.command_with_env(
        BIN,
        &outside,
        &ceiling,
        &["--json", "plans", "reconcile", "--dir", dir_s],
    );
    r.code(5);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        message,
        format!(
            "not a git repository (or any parent up to /): {}",
            outside.display()
        )
    );
    let r = t.command_with_env(BIN, &outside, &ceiling, &["list"]);
    r.code(5);
    assert!(
        r.stderr.starts_with("error: not a git repository") && !r.stderr.contains('{'),
        "{}",
        r.desc
    );
}
