//! Ways around the gates and inputs that mislead the tool: replacement objects, first pushes,
//! hook environments, oversized policy values, branch names git refuses, local paths in
//! repository ids, corrupt refs, and unknown record fields.

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

/// An empty bare repository at `<test dir>/server.git`, added as `origin`.
fn empty_origin(t: &TestEnv) -> std::path::PathBuf {
    let server = t.path().join("server.git");
    let s = server.to_str().unwrap();
    t.git_in(t.path(), &["init", "-q", "--bare", "-b", "main", s])
        .ok();
    t.git(&["remote", "add", "origin", s]).ok();
    server
}

#[test]
fn pre_push_judges_a_push_that_creates_a_protected_branch() {
    let t = TestEnv::with_readme_policy();
    let server = empty_origin(&t);
    t.tab(&["hooks", "install"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let r = t.git(&["push", "origin", "main"]);
    assert_ne!(
        r.code, 0,
        "an unvalidated first push went through\n{}",
        r.desc
    );
    assert!(
        r.stderr.contains("refs/heads/main") && r.stderr.contains("readme (missing)"),
        "{}",
        r.desc
    );
    assert_eq!(
        t.git_in(&server, &["rev-parse", "-q", "--verify", "main"])
            .code,
        1
    );
    // Validated, the same first push passes.
    t.tab(&["validate", &main]).ok();
    t.git(&[
        "push",
        "-q",
        "--atomic",
        "origin",
        "main",
        "refs/notes/tabellio/evidence",
    ])
    .ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), main);
}

#[test]
fn pre_push_judges_a_push_whose_remote_tip_is_unknown_here() {
    let t = TestEnv::with_readme_policy();
    let server = empty_origin(&t);
    t.git(&["push", "-q", "origin", "main"]).ok();
    // Someone else moves the remote's main to a commit this clone never fetched.
    let other = t.path().join("other");
    let (s, o) = (server.to_str().unwrap(), other.to_str().unwrap());
    t.git_in(t.path(), &["clone", "-q", s, o]).ok();
    t.commit_file_in(&other, "theirs.txt", "theirs\n");
    t.git_in(&other, &["push", "-q", "origin", "main"]).ok();
    let theirs = t.git_out_in(&other, &["rev-parse", "HEAD"]);
    assert_ne!(t.git(&["cat-file", "-e", &theirs]).code, 0);
    // Here: an unvalidated commit on main, pushed with the hooks installed.
    t.commit_file_in(&t.repo, "ours.txt", "ours\n");
    t.tab(&["hooks", "install"]).ok();
    let r = t.git(&["push", "-f", "origin", "main"]);
    assert_ne!(r.code, 0, "an unvalidated push went through\n{}", r.desc);
    assert!(r.stderr.contains("readme (missing)"), "{}", r.desc);
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), theirs);
}

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

#[test]
fn an_excerpt_limit_above_one_mib_is_a_policy_error() {
    let t = TestEnv::new();
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["output"] = serde_json::json!({"excerpt_bytes": 50_000_000});
    t.commit_policy(&p.to_string());
    let before = t.snapshot();
    let r = t.tab(&["--json", "validate"]);
    r.code(2);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("output.excerpt_bytes") && message.contains("1 MiB"),
        "{}",
        r.desc
    );
    assert!(r.json()["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("policy.json"));
    assert_eq!(t.snapshot(), before, "a refused validate wrote something");
    // Exactly 1 MiB is allowed.
    p["output"] = serde_json::json!({"excerpt_bytes": 1_048_576});
    t.commit_policy(&p.to_string());
    t.tab(&["validate"]).ok();
}

#[test]
fn branch_names_git_refuses_are_refused_before_anything_is_written() {
    let t = TestEnv::new();
    let before = t.snapshot();
    for name in [
        "HEAD",
        "refs/heads/HEAD",
        "-x",
        "a..b",
        "x.lock",
        "a/.b",
        "@",
        "a@{1}",
        "a//b",
        "tail/",
    ] {
        let flag = format!("--branch={name}");
        let r = t.tab(&["--json", "start", "r1", "--task", "t", &flag]);
        r.code(2);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("not a valid branch name"), "{}", r.desc);
        assert_eq!(t.snapshot(), before, "{name:?}: something was written");
        assert!(!t.worktree("r1").exists(), "{name:?}: a worktree was made");
    }
    // Names git accepts still work.
    t.tab(&["start", "r1", "--task", "t", "--branch=feature/x@y"])
        .ok();
    assert_eq!(
        t.git(&["rev-parse", "-q", "--verify", "refs/heads/feature/x@y"])
            .code,
        0
    );
}

#[test]
fn windows_style_origins_never_reach_the_stored_repository_id() {
    for (i, url) in [
        r"C:\Users\agent\secret.git",
        "D:/x/secret.git",
        r"\\server\share\secret.git",
    ]
    .into_iter()
    .enumerate()
    {
        let t = TestEnv::new();
        t.git(&["remote", "add", "origin", url]).ok();
        let id = format!("r{i}");
        t.tab(&["start", &id, "--task", "t"]).ok();
        let run = t.git_out(&["show", &format!("refs/tabellio/runs/{id}:run.json")]);
        let run: serde_json::Value = serde_json::from_str(&run).unwrap();
        let repository = run["repository"].as_str().unwrap();
        assert!(
            repository.starts_with("local/")
                && !repository.contains("secret")
                && !repository.contains("Users")
                && !repository.contains("server"),
            "{url} became {repository}"
        );
    }
}

/// A blob (`README.md` of main), a tree (main's) and an unrelated commit (main itself).
fn corrupt_targets(t: &TestEnv) -> [(&'static str, String); 3] {
    [
        ("blob", t.git_out(&["rev-parse", "main:README.md"])),
        ("tree", t.git_out(&["rev-parse", "main^{tree}"])),
        ("commit", t.git_out(&["rev-parse", "main"])),
    ]
}

/// `run` is refused with exit 3, naming `refname` and saying how to repair it.
#[track_caller]
fn refused_naming(t: &TestEnv, args: &[&str], refname: &str) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = t.tab(&all);
    r.code(3);
    let v = r.json();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    let hint = v["error"]["hint"].as_str().unwrap_or_default();
    assert!(message.contains(refname), "{}", r.desc);
    assert!(hint.contains("git update-ref"), "{}", r.desc);
}

#[test]
fn a_ledger_ref_at_a_blob_a_tree_or_an_unrelated_commit_is_refused_by_name() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let ledger = "refs/tabellio/runs/r1";
    let good = t.git_out(&["rev-parse", ledger]);
    for (kind, target) in corrupt_targets(&t) {
        t.git(&["update-ref", ledger, &target]).ok();
        for args in [&["log", "r1"][..], &["promote", "r1"], &["finish", "r1"]] {
            refused_naming(&t, args, ledger);
        }
        assert_eq!(
            t.git_out(&["rev-parse", ledger]),
            target,
            "{kind}: rewritten"
        );
    }
    // The repair the hint names works.
    t.git(&["update-ref", ledger, &good]).ok();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn a_notes_ref_at_a_blob_or_a_tree_is_refused_by_name() {
    let t = TestEnv::with_readme_policy();
    t.tab(&["validate"]).ok();
    let evidence = "refs/notes/tabellio/evidence";
    let good = t.git_out(&["rev-parse", evidence]);
    for (kind, target) in corrupt_targets(&t).into_iter().take(2) {
        t.git(&["update-ref", evidence, &target]).ok();
        refused_naming(&t, &["verify"], evidence);
        refused_naming(&t, &["evidence", "HEAD"], evidence);
        refused_naming(&t, &["validate"], evidence);
        assert_eq!(
            t.git_out(&["rev-parse", evidence]),
            target,
            "{kind}: rewritten"
        );
    }
    t.git(&["update-ref", evidence, &good]).ok();
    t.tab(&["verify"]).ok();

    // The checkpoint notes, read and written by `checkpoint`.
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    let checkpoints = "refs/notes/tabellio/checkpoints";
    for (_, target) in corrupt_targets(&t).into_iter().take(2) {
        t.git(&["update-ref", checkpoints, &target]).ok();
        refused_naming(&t, &["checkpoint", "r1"], checkpoints);
    }
}

#[test]
fn a_run_record_with_an_unknown_field_is_refused_like_evidence() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let main = t.git_out(&["rev-parse", "main"]);
    t.forge_ledger("r1", "tabellio: forged", |run| {
        run["approved_by"] = serde_json::json!("nobody");
    });
    for args in [&["log", "r1"][..], &["promote", "r1"]] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = t.tab(&all);
        r.code(3);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("approved_by"), "{}", r.desc);
    }
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    // A nested record too.
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    t.forge_ledger("r1", "tabellio: forged", |run| {
        run["validated"]["signed"] = serde_json::json!(true);
    });
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    assert!(r.stdout.contains("signed"), "{}", r.desc);
}

/// With no policy any passing record verifies a commit; a note line that is no record at all
/// is an alarm (`tampered`), not an absence (`missing`).
#[test]
fn a_non_json_note_line_without_a_policy_is_tampered() {
    let t = TestEnv::new();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let (code, v) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "missing", "{v}");
    t.git(&[
        "notes",
        "--ref=tabellio/evidence",
        "add",
        "-m",
        "not json",
        &head,
    ])
    .ok();
    let (code, v) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "tampered", "{v}");
}

#[test]
fn a_damaged_index_in_the_run_worktree_is_named_with_the_way_out() {
    let t = TestEnv::ref_only();
    let wt = t.started_run("r1", "a.txt");
    let index = std::path::PathBuf::from(t.git_out_in(
        &wt,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    ));
    std::fs::write(&index, b"DIRC not an index").expect("write index");
    let before = t.snapshot();
    for args in [&["status"][..], &["checkpoint"], &["finish", "--", "true"]] {
        let r = t.tab_in(&wt, args);
        r.code(70);
        assert!(r.stderr.contains("could not read the index"), "{}", r.desc);
        assert!(r.stderr.contains("git reset"), "{}", r.desc);
        assert_eq!(t.snapshot(), before, "{args:?} wrote something");
    }
    // The way out the hint gives.
    std::fs::remove_file(&index).expect("remove index");
    t.git_in(&wt, &["reset", "-q"]).ok();
    t.tab_in(&wt, &["checkpoint"]).ok();
}
