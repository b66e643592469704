//! The hooks, with real git: local ref transactions, pushes from a client, and a bare server
//! whose pre-receive reads evidence from the push itself.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::util::*;

/// A repository with a policy on `main` protecting it and requiring `readme`, hooks installed.
fn protected_repo() -> TestEnv {
    let t = TestEnv::with_readme_policy();
    t.tab(&["hooks", "install"]).ok();
    t
}

/// Commit `file` on a new or existing branch `branch` (checked out afterwards).
fn commit_on(t: &TestEnv, branch: &str, file: &str) -> String {
    let exists = t
        .git(&[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .code
        == 0;
    if exists {
        t.git(&["checkout", "-q", branch]).ok();
    } else {
        t.git(&["checkout", "-q", "-b", branch]).ok();
    }
    t.write(file, &format!("{file}\n"));
    t.commit_all(&format!("add {file}"));
    t.git_out(&["rev-parse", "HEAD"])
}

fn rev(t: &TestEnv, r: &str) -> String {
    t.git_out(&["rev-parse", r])
}

/// Run `git-tabellio hook <args>` with `input` on stdin, in `cwd`.
fn run_hook(t: &TestEnv, cwd: &Path, args: &[&str], input: &str) -> Run {
    run_hook_env(t, cwd, args, input, &[])
}

/// [`run_hook`] with extra environment variables set last.
fn run_hook_env(t: &TestEnv, cwd: &Path, args: &[&str], input: &str, env: &[(&str, &str)]) -> Run {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect();
    let mut all = vec!["hook"];
    all.extend_from_slice(args);
    t.command_with_input(BIN, cwd, &env, &all, input)
}

#[test]
fn reference_transaction_refuses_unvalidated_updates_of_a_protected_branch() {
    let t = protected_repo();
    let main = rev(&t, "main");
    // Unprotected refs pass: a feature branch, its commits, another branch at it.
    let feature = commit_on(&t, "feature", "a.txt");
    t.git(&["branch", "other", "feature"]).ok();

    // update-ref of main to the unvalidated commit is refused, naming ref, commit and check.
    let r = t.git(&["update-ref", "refs/heads/main", &feature]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr.contains("refs/heads/main")
            && r.stderr.contains(&feature)
            && r.stderr.contains("readme (missing)"),
        "{}",
        r.desc
    );
    assert_eq!(rev(&t, "main"), main);

    // So is a fast-forward merge into main.
    t.git(&["checkout", "-q", "main"]).ok();
    let r = t.git(&["merge", "-q", "--ff-only", "feature"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(rev(&t, "main"), main);
    t.git(&["reset", "-q", "--hard", "main"]).ok();

    // Validated, the same merge goes through.
    t.tab(&["validate", "feature"]).ok();
    t.git(&["merge", "-q", "--ff-only", "feature"]).ok();
    assert_eq!(rev(&t, "main"), feature);

    // A commit made directly on main is refused; its evidence would have to exist first.
    t.write("direct.txt", "x\n");
    t.git(&["add", "-A"]).ok();
    let r = t.git(&["commit", "-q", "-m", "direct"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(rev(&t, "main"), feature);
    t.git(&["reset", "-q", "--hard"]).ok();

    // A reworded commit with the same tree keeps the evidence (tree-keyed).
    t.git(&["commit", "-q", "--amend", "-m", "reworded"]).ok();
    assert_ne!(rev(&t, "main"), feature);

    // Deleting a protected ref is not a move to an unverified commit: it passes.
    t.git(&["branch", "-q", "release-tmp", "main"]).ok();
    t.git(&["checkout", "-q", "--detach"]).ok();
    t.git(&["update-ref", "-d", "refs/heads/main"]).ok();
    t.fsck();
}

#[test]
fn config_patterns_protect_more_refs_and_a_new_ref_takes_heads_policy() {
    let t = protected_repo();
    let feature = commit_on(&t, "feature", "b.txt");
    // Not protected yet.
    t.git(&["branch", "release/1", &feature]).ok();
    t.git(&[
        "config",
        "--add",
        "tabellio.protect",
        "refs/heads/release/*",
    ])
    .ok();
    t.git(&["config", "--add", "tabellio.protect", "refs/tags/v*"])
        .ok();
    let next = commit_on(&t, "feature", "c.txt");
    let before = t.snapshot();
    let r = t.git(&["branch", "release/2", &next]);
    assert_ne!(r.code, 0, "{}", r.desc);
    let r = t.git(&["tag", "-a", "-m", "v1", "v1", &next]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("refs/tags/v1"), "{}", r.desc);
    assert_eq!(t.snapshot(), before, "refused updates change nothing");
    t.tab(&["validate", &next]).ok();
    t.git(&["branch", "release/2", &next]).ok();
    // An annotated tag is peeled to its commit.
    t.git(&["tag", "-a", "-m", "v1", "v1", &next]).ok();
    // Moving it to an unvalidated commit is refused (the old value, a tag, is peeled too).
    let unvalidated = commit_on(&t, "feature", "k.txt");
    let r = t.git(&["tag", "-f", "-a", "-m", "v1 again", "v1", &unvalidated]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("readme (missing)"), "{}", r.desc);
}

#[test]
fn reference_transaction_returns_at_once_without_a_protected_ref() {
    let t = TestEnv::new();
    // Outside any repository: it must not even look for one.
    let nowhere = t.path().to_path_buf();
    let z = "0".repeat(40);
    let a = "a".repeat(40);
    for (args, input) in [
        (vec!["reference-transaction", "committed"], "garbage".to_string()),
        (vec!["reference-transaction", "aborted"], String::new()),
        (vec!["reference-transaction", "preparing"], format!("{z} {a} refs/heads/main\n")),
        (
            vec!["reference-transaction", "prepared"],
            format!(
                "{z} {a} refs/remotes/origin/main\n{z} {a} refs/notes/tabellio/evidence\n{z} {a} HEAD\n{z} {a} ORIG_HEAD\n{a} {z} refs/heads/main\n{z} ref:refs/heads/x HEAD\n{z} {a} refs/tabellio/runs/r1\n"
            ),
        ),
    ] {
        let r = run_hook(&t, &nowhere, &args, &input);
        assert_eq!(r.code, 0, "{}", r.desc);
        assert!(r.stderr.is_empty(), "{}", r.desc);
    }
    // The same for a push that touches no gated ref and no tabellio notes.
    let r = run_hook(
        &t,
        &nowhere,
        &["pre-receive"],
        &format!("{z} {a} refs/tabellio/runs/r1\n{a} {z} refs/heads/main\n"),
    );
    assert_eq!(r.code, 0, "{}", r.desc);
    // A push of tabellio notes is looked at (their size, that no record is dropped): the
    // repository is opened (and here found missing).
    let r = run_hook(
        &t,
        &nowhere,
        &["pre-receive"],
        &format!("{z} {a} refs/notes/tabellio/evidence\n"),
    );
    assert_eq!(r.code, 5, "{}", r.desc);
    // A branch update does open the repository (and here finds none).
    let r = run_hook(
        &t,
        &nowhere,
        &["reference-transaction", "prepared"],
        &format!("{z} {a} refs/heads/main\n"),
    );
    assert_eq!(r.code, 5, "{}", r.desc);
}

#[test]
fn hooks_install_refuses_a_foreign_hook_and_force_moves_it_aside() {
    let t = TestEnv::new();
    let hooks = t.repo.join(".git/hooks");
    write_file(&hooks.join("pre-push"), "#!/bin/sh\necho mine\n");
    let before = t.snapshot();
    let (code, v) = t.tab_json(&["hooks", "install"]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("pre-push"),
        "{v}"
    );
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("--force"),
        "{v}"
    );
    assert!(
        !hooks.join("reference-transaction").exists(),
        "nothing written"
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    assert_eq!(t.snapshot(), before);

    let (code, v) = t.tab_json(&["hooks", "install", "--force"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push.pre-tabellio")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    let actions: Vec<(&str, &str)> = v["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap(), h["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [
            ("reference-transaction", "created"),
            ("pre-push", "replaced")
        ]
    );
    // The installed shims are the project's own hooks/ files, executable.
    let project_hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks");
    for name in ["reference-transaction", "pre-push"] {
        let installed = std::fs::read_to_string(hooks.join(name)).unwrap();
        assert_eq!(
            installed,
            std::fs::read_to_string(project_hooks.join(name)).unwrap(),
            "{name}"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(hooks.join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
    }
    // Again: unchanged.
    let (_, v) = t.tab_json(&["hooks", "install"]);
    assert!(
        v["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["action"] == "unchanged"),
        "{v}"
    );

    // core.hooksPath is honoured, relative to the worktree root.
    t.git(&["config", "core.hooksPath", "githooks"]).ok();
    let (code, v) = t.tab_json(&["hooks", "install"]);
    assert_eq!(code, 0, "{v}");
    assert!(t.repo.join("githooks/reference-transaction").exists());
    assert_eq!(
        v["hooks_dir"],
        t.repo.join("githooks").display().to_string()
    );
}

/// Push `refspec` to `origin` in one atomic push together with the evidence notes.
fn push_with_evidence(t: &TestEnv, refspec: &str) -> Run {
    let notes = "refs/notes/tabellio/evidence";
    t.git(&["push", "--atomic", "origin", refspec, notes])
}

/// A bare server with `main` (carrying the policy) pushed from `client`, and the pre-receive
/// shim installed.
fn server_and_client() -> (TestEnv, PathBuf) {
    let t = TestEnv::with_readme_policy();
    let server = t.origin_with_hook(&["main"]);
    (t, server)
}

#[test]
fn a_bare_server_refuses_an_unvalidated_push_and_accepts_evidence_in_the_same_atomic_push() {
    let (t, server) = server_and_client();
    let server_main = t.git_out_in(&server, &["rev-parse", "main"]);
    let feature = commit_on(&t, "feature", "d.txt");

    // Unvalidated: refused; the message names the ref, the commit and the missing check.
    let r = t.git(&["push", "--atomic", "origin", "feature:main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("pre-receive hook declined"), "{}", r.desc);
    assert!(
        r.stderr.contains("refs/heads/main")
            && r.stderr.contains(&feature)
            && r.stderr.contains("readme (missing)"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), server_main);
    // The refused commit never reached the server (it was only in quarantine).
    assert_ne!(t.git_in(&server, &["cat-file", "-e", &feature]).code, 0);

    // Validated locally, but without the notes in the push: the server cannot see evidence.
    t.tab(&["validate", "feature"]).ok();
    let r = t.git(&["push", "--atomic", "origin", "feature:main"]);
    assert_ne!(r.code, 0, "{}", r.desc);

    // With the evidence notes in the same atomic push: accepted; the server judged by the
    // pushed notes (its own notes ref did not exist before).
    assert_ne!(
        t.git_in(
            &server,
            &[
                "rev-parse",
                "-q",
                "--verify",
                "refs/notes/tabellio/evidence"
            ]
        )
        .code,
        0
    );
    // Force objects into a pack in the quarantine (not loose) to cover both object kinds.
    t.git_in(&server, &["config", "receive.unpackLimit", "1"])
        .ok();
    push_with_evidence(&t, "feature:main").ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), feature);
    let note = t.git_out_in(
        &server,
        &["notes", "--ref=tabellio/evidence", "show", &feature],
    );
    assert!(note.contains("\"status\":\"passed\""), "{note}");

    // Verify works on the server (CI may run it there).
    let r = t.tab_in(&server, &["verify", "main"]);
    r.ok();

    // A tampered record arriving with the push is refused.
    let next = commit_on(&t, "feature", "e.txt");
    t.tab(&["validate", &next]).ok();
    let line = t
        .git_out(&["notes", "--ref=tabellio/evidence", "show", &next])
        .replace("\"duration_ms\":", "\"duration_ms\":1");
    t.forge_evidence(&next, &line);
    let r = push_with_evidence(&t, "feature:main");
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("readme (tampered)"), "{}", r.desc);
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), feature);
    // Unprotected branches are pushed freely.
    t.git(&["push", "-q", "origin", "feature"]).ok();
}

#[test]
fn the_server_gate_uses_the_policy_at_the_protected_tip_not_the_pushed_one() {
    let (t, server) = server_and_client();
    // The pushed commit drops its own required checks.
    t.git(&["checkout", "-q", "-b", "weaken"]).ok();
    let weak = serde_json::json!({"schema": "tabellio.policy/v1", "protect": ["refs/heads/main"]})
        .to_string();
    t.write(".tabellio/policy.json", &weak);
    t.commit_all("weaken the gate");
    let commit = rev(&t, "HEAD");
    // Evidence for some other check does not satisfy main's `readme`.
    t.tab(&["validate", &commit, "--check", "other", "--", "true"])
        .ok();
    let r = push_with_evidence(&t, "weaken:main");
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("readme (missing)"), "{}", r.desc);
    // An invalid policy cannot be pushed onto the protected branch either.
    t.write(
        ".tabellio/policy.json",
        "{\"schema\":\"tabellio.policy/v1\",\"required\":[\"nope\"]}",
    );
    t.git(&["commit", "-q", "-am", "break the policy"]).ok();
    let broken = rev(&t, "HEAD");
    t.tab(&["validate", &broken, "--policy-from", "main"]).ok();
    let r = push_with_evidence(&t, "weaken:main");
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("its own policy is invalid"), "{}", r.desc);
    let _ = server;
}

#[test]
fn pre_push_refuses_locally_and_warns_about_missing_notes() {
    let (t, server) = server_and_client();
    // The server has no hook for this test: the client's pre-push is the gate.
    std::fs::remove_file(server.join("hooks/pre-receive")).unwrap();
    t.tab(&["hooks", "install"]).ok();
    let server_main = t.git_out_in(&server, &["rev-parse", "main"]);
    let feature = commit_on(&t, "feature", "f.txt");
    let r = t.git(&["push", "origin", "feature:main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr.contains("refs/heads/main")
            && r.stderr.contains(&feature)
            && r.stderr.contains("readme (missing)"),
        "{}",
        r.desc
    );
    assert!(r.stderr.contains("failed to push"), "{}", r.desc);
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), server_main);

    t.tab(&["validate", "feature"]).ok();
    // Allowed, with a warning that the remote's gate will need the notes.
    let r = t.git(&["push", "origin", "feature:main"]);
    r.ok();
    assert!(
        r.stderr.contains("warning") && r.stderr.contains("refs/notes/tabellio/evidence"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), feature);
    // With the notes: no warning.
    let next = commit_on(&t, "feature", "g.txt");
    t.tab(&["validate", &next]).ok();
    let r = push_with_evidence(&t, "feature:main");
    r.ok();
    assert!(!r.stderr.contains("warning"), "{}", r.desc);
    // Pushing an unprotected branch is not gated.
    let more = commit_on(&t, "feature", "h.txt");
    t.git(&["push", "-q", "origin", "feature"]).ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "feature"]), more);
}

#[test]
fn pre_push_reads_the_pre_commit_frameworks_environment() {
    let t = protected_repo();
    let main = rev(&t, "main");
    let feature = commit_on(&t, "feature", "i.txt");
    let env = [
        ("PRE_COMMIT_TO_REF", feature.as_str()),
        ("PRE_COMMIT_FROM_REF", main.as_str()),
        ("PRE_COMMIT_LOCAL_BRANCH", "refs/heads/feature"),
        ("PRE_COMMIT_REMOTE_BRANCH", "refs/heads/main"),
        ("PRE_COMMIT_REMOTE_NAME", "origin"),
    ];
    let r = run_hook_env(&t, &t.repo, &["pre-push"], "", &env);
    assert_eq!(r.code, 1, "{}", r.desc);
    assert!(
        r.stderr.contains("refs/heads/main") && r.stderr.contains(&feature),
        "{}",
        r.desc
    );
    t.tab(&["validate", &feature]).ok();
    let r = run_hook_env(&t, &t.repo, &["pre-push"], "", &env);
    assert_eq!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr.contains("origin"),
        "warns about the notes for origin: {}",
        r.desc
    );
}

#[test]
fn evidence_notes_updated_in_the_same_transaction_count() {
    let t = protected_repo();
    let feature = commit_on(&t, "feature", "j.txt");
    let before_notes = t.git(&[
        "rev-parse",
        "-q",
        "--verify",
        "refs/notes/tabellio/evidence",
    ]);
    assert_ne!(before_notes.code, 0, "no notes yet");
    t.tab(&["validate", &feature]).ok();
    let notes = rev(&t, "refs/notes/tabellio/evidence");
    // Take the notes ref back: the evidence now exists only in the notes commit.
    t.git(&["update-ref", "-d", "refs/notes/tabellio/evidence"])
        .ok();
    let update_ref_stdin =
        |input: &str| t.command_with_input("git", &t.repo, &[], &["update-ref", "--stdin"], input);
    let alone = update_ref_stdin(&format!(
        "start\nupdate refs/heads/main {feature}\nprepare\ncommit\n"
    ));
    assert!(alone.code != 0, "{}", alone.stderr);
    let together = update_ref_stdin(&format!(
        "start\nupdate refs/heads/main {feature}\nupdate refs/notes/tabellio/evidence {notes}\nprepare\ncommit\n"
    ));
    assert!(together.code == 0, "{}", together.stderr);
    assert_eq!(rev(&t, "main"), feature);
    assert_eq!(rev(&t, "refs/notes/tabellio/evidence"), notes);
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

/// `git merge --ff-only` of an unvalidated commit onto the checked-out protected branch: git
/// moves the index and files before the hook refuses the branch's move. The refusal says so,
/// with the one command that puts them back, and that command keeps the person's own change.
#[test]
fn a_refused_merge_on_the_checked_out_branch_says_the_files_moved_and_how_to_restore_them() {
    let t = protected_repo();
    let main = rev(&t, "main");
    let feature = commit_on(&t, "feature", "a.txt");
    t.git(&["checkout", "-q", "main"]).ok();
    // Someone's own uncommitted change, in a file the merge does not touch.
    t.write("notes.txt", "mine\n");
    let r = t.git(&["merge", "--ff-only", "feature"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(rev(&t, "main"), main, "the branch stayed");
    let command = format!("git read-tree -m -u {feature} {main}");
    assert!(
        r.stderr
            .contains("git had already moved this worktree's index and files")
            && r.stderr.contains(&command),
        "{}",
        r.desc
    );
    // The files are the refused commit's, as the refusal says.
    assert!(t.repo.join("a.txt").exists());
    // The command, followed.
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    t.git(&args).ok();
    assert!(!t.repo.join("a.txt").exists(), "the refused file is gone");
    assert_eq!(
        t.git_out(&["status", "--porcelain"]),
        "?? notes.txt",
        "back where it was, the person's own file kept"
    );
    // A refusal where nothing moved says nothing of the kind.
    let r = t.git(&["update-ref", "refs/heads/main", &feature]);
    assert_ne!(r.code, 0);
    assert!(!r.stderr.contains("already moved"), "{}", r.desc);
}

/// Evidence notes are only ever added: the server refuses a push that deletes them or forces
/// them to a history that drops the records it has, and says how to push instead.
#[test]
fn a_bare_server_refuses_a_push_that_drops_evidence_notes() {
    let (t, server) = server_and_client();
    let notes = "refs/notes/tabellio/evidence";
    commit_on(&t, "feature", "d.txt");
    t.tab(&["validate", "feature"]).ok();
    let first = rev(&t, notes);
    push_with_evidence(&t, "feature:main").ok();
    // More evidence on the server.
    commit_on(&t, "feature", "e.txt");
    t.tab(&["validate", "feature"]).ok();
    push_with_evidence(&t, "feature:main").ok();
    let on_server = t.git_out_in(&server, &["rev-parse", notes]);
    for refspec in [format!("+{first}:{notes}"), format!(":{notes}")] {
        let r = t.git(&["push", "origin", &refspec]);
        assert_ne!(r.code, 0, "{refspec}: {}", r.desc);
        assert!(
            r.stderr
                .contains("would drop records of refs/notes/tabellio/evidence")
                && r.stderr.contains("git tabellio sync"),
            "{refspec}: {}",
            r.desc
        );
        assert_eq!(t.git_out_in(&server, &["rev-parse", notes]), on_server);
    }
}

/// One note over the cap (16 MiB) is refused by the server, naming it and the cap; the notes
/// ref on the server stays where it was.
#[test]
fn a_bare_server_refuses_a_note_over_the_cap() {
    let (t, server) = server_and_client();
    let notes = "refs/notes/tabellio/evidence";
    let main = rev(&t, "main");
    let big = t.path().join("big-note.txt");
    std::fs::write(&big, vec![b'x'; 17 * 1024 * 1024]).unwrap();
    t.git(&[
        "notes",
        "--ref=tabellio/evidence",
        "add",
        "-f",
        "-F",
        big.to_str().unwrap(),
        &main,
    ])
    .ok();
    let r = t.git(&["push", "origin", notes]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr
            .contains("over the cap of 16777216 bytes (16 MiB) for one note"),
        "{}",
        r.desc
    );
    assert_ne!(
        t.git_in(&server, &["rev-parse", "-q", "--verify", notes])
            .code,
        0,
        "the server has no notes ref"
    );
}
