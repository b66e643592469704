//! The `GIT_*` environment of the caller (a hook's `GIT_INDEX_FILE`, `git --git-dir=…
//! --work-tree=…`) never steers what a command sees of the run worktree.

use crate::util::*;

/// Install a `post-commit` hook (shared by every worktree) that runs `finish r1 -- true` and
/// writes what it printed and its exit code to `<test dir>/hook.out`; that file's path.
fn finish_from_post_commit(t: &TestEnv) -> std::path::PathBuf {
    let out = t.path().join("hook.out");
    let hook = t.repo.join(".git/hooks/post-commit");
    let script = format!(
        "#!/bin/sh\ngit tabellio finish r1 -- true >'{0}' 2>&1\necho \"exit $?\" >>'{0}'\n",
        out.display()
    );
    write_file(&hook, &script);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    out
}

#[test]
fn finish_from_a_post_commit_hook_sees_the_run_worktree_as_it_is() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    let out = finish_from_post_commit(&t);
    // A commit in the main worktree: git runs the hook with `GIT_INDEX_FILE=.git/index`, the
    // main worktree's index, relative to the hook's directory.
    t.commit_file_in(&t.repo.clone(), "main.txt", "main\n");
    let printed = std::fs::read_to_string(&out).expect("the hook ran");
    assert!(
        printed.ends_with("exit 0\n") && !printed.contains("uncommitted"),
        "{printed}"
    );
    assert_eq!(
        t.tab(&["--json", "status", "r1"]).json()["state"],
        "completed"
    );
}

#[test]
fn the_git_environment_of_the_caller_does_not_steer_the_run_worktree() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    // What `git --git-dir=… --work-tree=…` exports, pointing at the main worktree.
    let git_dir = t.repo.join(".git");
    let index = git_dir.join("index");
    let env = [
        ("GIT_DIR", git_dir.as_os_str()),
        ("GIT_WORK_TREE", t.repo.as_os_str()),
        ("GIT_INDEX_FILE", index.as_os_str()),
    ];
    let r = t.command_with_env(BIN, &t.repo, &env, &["finish", "r1", "--", "true"]);
    r.ok();
    assert_eq!(
        t.tab(&["--json", "status", "r1"]).json()["state"],
        "completed"
    );
}

/// An index that stages `ghost.txt` (absent from the run head and from the worktree) beside the
/// run worktree's own entries: seen through it, the worktree has changes.
fn alternate_index(t: &TestEnv, wt: &std::path::Path) -> std::path::PathBuf {
    let alt = t.path().join("alternate-index");
    let env = [("GIT_INDEX_FILE", alt.as_os_str())];
    t.command_with_env("git", wt, &env, &["read-tree", "HEAD"])
        .ok();
    let blob = t.git_out_in(wt, &["hash-object", "-w", "README.md"]);
    let entry = format!("100644,{blob},ghost.txt");
    t.command_with_env(
        "git",
        wt,
        &env,
        &["update-index", "--add", "--cacheinfo", &entry],
    )
    .ok();
    alt
}

#[test]
fn a_git_index_file_in_the_environment_does_not_change_what_a_command_in_the_run_worktree_sees() {
    // A command started in the run worktree reads that worktree through the repository it
    // opened, unless the environment could make that repository see it differently: with a
    // hook's `GIT_INDEX_FILE` set, the worktree is opened by its path, as from anywhere else.
    let t = TestEnv::ref_only();
    let wt = t.started_run("r1", "a.txt");
    let alt = alternate_index(&t, &wt);
    let seen_through_it = t.command_with_env(
        "git",
        &wt,
        &[("GIT_INDEX_FILE", alt.as_os_str())],
        &["status", "--porcelain"],
    );
    assert!(
        seen_through_it.stdout.contains("ghost.txt"),
        "{}",
        seen_through_it.desc
    );
    let env = [("GIT_INDEX_FILE", alt.as_os_str())];
    let status = t.command_with_env(BIN, &wt, &env, &["--json", "status"]);
    status.ok();
    assert_eq!(
        status.json()["live"]["dirty"],
        serde_json::json!([]),
        "{}",
        status.desc
    );
    t.command_with_env(BIN, &wt, &env, &["checkpoint"]).ok();
    t.command_with_env(BIN, &wt, &env, &["finish", "--", "true"])
        .ok();
    assert_eq!(
        t.tab(&["--json", "status", "r1"]).json()["state"],
        "completed"
    );
}
