//! Replacement objects are never followed: after `git replace <evil> <good>`, `verify`,
//! `validate`, `finish` and `promote` judge the evil commit by what it really holds.

use crate::util::*;

/// A commit on top of `parent` whose tree is `parent`'s without `README.md`: what the readme
/// check forbids.
fn commit_without_readme(t: &TestEnv, parent: &str) -> String {
    let listing = t.git_out(&["ls-tree", parent]);
    let kept: String = listing
        .lines()
        .filter(|l| !l.ends_with("\tREADME.md"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mktree = t.command_with_input("git", &t.repo, &[], &["mktree"], &kept);
    mktree.ok();
    let tree = mktree.stdout.trim().to_string();
    t.git_out(&["commit-tree", &tree, "-p", parent, "-m", "evil"])
}

#[test]
fn a_replaced_object_is_judged_by_its_real_content() {
    let t = TestEnv::with_readme_policy();
    let good = t.git_out(&["rev-parse", "main"]);
    t.tab(&["validate", &good]).ok();
    let evil = commit_without_readme(&t, &good);
    t.git(&["replace", &evil, &good]).ok();
    // Stock git now shows the good content under the evil id.
    assert_eq!(
        t.git_out(&["rev-parse", &format!("{evil}^{{tree}}")]),
        t.git_out(&["rev-parse", &format!("{good}^{{tree}}")])
    );
    let r = t.tab(&["--json", "verify", &evil]);
    assert_eq!(r.code, 1, "the evil commit must not verify\n{}", r.desc);
    // The good commit still does.
    t.tab(&["verify", &good]).ok();
}

#[test]
fn validate_checks_out_a_replaced_commits_real_content() {
    let t = TestEnv::with_readme_policy();
    let good = t.git_out(&["rev-parse", "main"]);
    let evil = commit_without_readme(&t, &good);
    t.git(&["replace", &evil, &good]).ok();
    // The scratch checkout holds what the commit really has (no README.md): the check fails,
    // with either ref storage (reftable checks out through `git worktree add`).
    let r = t.tab(&["--json", "validate", &evil]);
    assert_eq!(r.code, 1, "{}", r.desc);
    let record = &r.json()["evidence"][0];
    assert_eq!(
        record["exit_code"], 1,
        "the check saw the replacement\n{}",
        r.desc
    );
    t.tab(&["verify", &evil]).code(1);
}

#[test]
fn a_run_moved_to_a_replaced_commit_cannot_promote_it() {
    let t = TestEnv::with_readme_policy();
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    let wt = t.started_run("r1", "a.txt");
    let good = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    let evil = commit_without_readme(&t, &good);
    t.git(&["replace", &evil, &good]).ok();
    // With the replacement active, git moves the branch without touching index or files.
    t.git_in(&wt, &["reset", "-q", "--soft", &evil]).ok();
    assert_eq!(t.git_out_in(&wt, &["rev-parse", "HEAD"]), evil);
    let finish = t.tab(&["finish", "r1"]);
    let promote = t.tab(&["promote", "r1"]);
    let main = t.git_out(&["rev-parse", "main"]);
    assert_ne!(
        main, evil,
        "main moved to the evil commit\n{}\n{}",
        finish.desc, promote.desc
    );
    assert_ne!(
        finish.code, 0,
        "finish judged the replacement\n{}",
        finish.desc
    );
    let r = t.tab(&["verify", &evil]);
    assert_eq!(r.code, 1, "{}", r.desc);
}
