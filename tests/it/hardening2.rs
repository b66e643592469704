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
