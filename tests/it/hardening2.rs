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
