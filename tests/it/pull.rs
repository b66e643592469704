//! Pulling a commit promoted on the remote into a clone whose hooks guard `main`: every common
//! form of `git pull` (and `git fetch` + `git merge`) succeeds without a prior `sync`, and where
//! the hook must refuse, it says how to put the index and files back.

use crate::util::*;

/// A server whose `main` requires `ci`; a clone `u1` with the hooks installed; a commit
/// promoted onto the server's `main` from another clone, with its evidence pushed along.
fn promoted_elsewhere() -> (TestEnv, TestEnv, TestEnv, String) {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    a.commit_policy(&policy(&[("ci", &["true"])]));
    a.git(&["push", "-q"]).ok();
    let u1 = TestEnv::clone_of(&server);
    u1.tab(&["init", "--hooks"]).ok();
    let u2 = TestEnv::clone_of(&server);
    u2.start_with_commit("remote-1", "r.txt", "x\n");
    u2.tab(&["finish", "remote-1"]).ok();
    let good = u2.git_out(&["rev-parse", "refs/heads/tabellio/remote-1"]);
    u2.tab(&["promote", "remote-1", "--remote", "origin"]).ok();
    (server, u1, u2, good)
}

#[track_caller]
fn assert_pulled(u1: &TestEnv, good: &str) {
    assert_eq!(u1.git_out(&["rev-parse", "main"]), good);
    assert_eq!(u1.git_out(&["status", "--porcelain"]), "");
    u1.git(&["fsck", "--strict"]).ok();
}

#[test]
fn git_pull_origin_main_brings_a_commit_promoted_elsewhere() {
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["pull", "-q", "origin", "main"]).ok();
    assert_pulled(&u1, &good);
    // The hook fetched the remote's evidence into the tracking notes: `verify` agrees. With
    // reftable the hook could only read it (the stack was locked): the next fetch keeps it.
    if crate::util::ref_format() == "reftable" {
        u1.tab(&["verify", "main"]).code(1);
        u1.git(&["fetch", "-q", "origin"]).ok();
    }
    u1.tab(&["verify", "main"]).ok();
}

#[test]
fn git_pull_rebase_origin_main_brings_a_commit_promoted_elsewhere() {
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["pull", "-q", "--rebase", "origin", "main"]).ok();
    assert_pulled(&u1, &good);
}

#[test]
fn git_pull_and_git_pull_rebase_bring_a_commit_promoted_elsewhere() {
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["pull", "-q", "--rebase"]).ok();
    assert_pulled(&u1, &good);
    // The fetch brings the evidence into the tracking notes; the fast-forward's
    // reference-transaction hook accepts it from there, before any sync.
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["pull", "-q", "--ff-only"]).ok();
    assert_pulled(&u1, &good);
    // A commit nobody validated is still refused.
    u1.write("sneaky.txt", "x\n");
    u1.git(&["add", "-A"]).ok();
    let r = u1.git(&["commit", "-q", "-m", "unvalidated"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(u1.git_out(&["rev-parse", "main"]), good);
    // Made here, not pulled: the way out is to validate it, with nothing to put back.
    assert!(r.stderr.contains("git tabellio validate"), "{}", r.desc);
    assert!(!r.stderr.contains("read-tree"), "{}", r.desc);
}

#[test]
fn git_fetch_origin_main_then_merge_ff_only_brings_a_commit_promoted_elsewhere() {
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["fetch", "-q", "origin", "main"]).ok();
    u1.git(&["merge", "-q", "--ff-only", "FETCH_HEAD"]).ok();
    assert_pulled(&u1, &good);
    let (_server, u1, _u2, good) = promoted_elsewhere();
    u1.git(&["fetch", "-q", "origin", "main"]).ok();
    u1.git(&["merge", "-q", "--ff-only", "origin/main"]).ok();
    assert_pulled(&u1, &good);
}

/// The command the refusal gives for putting the index and files back, as argv for git.
fn way_back(stderr: &str) -> Vec<String> {
    let line = stderr
        .lines()
        .find_map(|l| {
            l.trim_start_matches("tabellio:")
                .trim()
                .strip_prefix("git ")
        })
        .unwrap_or_else(|| panic!("no git command in\n{stderr}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn a_pull_of_an_unvalidated_commit_is_refused_with_the_way_back() {
    let (_server, u1, u2, good) = promoted_elsewhere();
    // Someone pushes a commit nobody validated on top (the server has no hooks).
    u2.git(&["fetch", "-q", "origin"]).ok();
    u2.git(&["switch", "-q", "--detach", "origin/main"]).ok();
    u2.write("sneaky.txt", "x\n");
    u2.git(&["add", "-A"]).ok();
    u2.git(&["commit", "-q", "-m", "unvalidated"]).ok();
    u2.git(&["push", "-q", "origin", "HEAD:main"]).ok();
    let sneaky = u2.git_out(&["rev-parse", "HEAD"]);
    let before = u1.git_out(&["rev-parse", "main"]);
    // Changes of the user's own, staged and not, that the way back must keep.
    u1.write("README.md", "mine, staged\n");
    u1.git(&["add", "README.md"]).ok();
    u1.write("notes.txt", "mine, untracked\n");
    let r = u1.git(&["pull", "-q", "origin", "main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(u1.git_out(&["rev-parse", "main"]), before);
    assert!(r.stderr.contains(&sneaky), "{}", r.desc);
    assert!(r.stderr.contains("git tabellio sync origin"), "{}", r.desc);
    let back = way_back(&r.stderr);
    assert_eq!(back, ["read-tree", "-m", "-u", &sneaky, "HEAD"]);
    let back: Vec<&str> = back.iter().map(String::as_str).collect();
    u1.git(&back).ok();
    assert_eq!(
        u1.git_out(&["status", "--porcelain"]),
        "M  README.md\n?? notes.txt"
    );
    assert_eq!(
        std::fs::read_to_string(u1.repo.join("README.md")).unwrap(),
        "mine, staged\n"
    );
    assert!(!u1.repo.join("sneaky.txt").exists());
    // The validated commit before it still comes through (with reftable the refused pull's
    // hook could not keep the evidence it read: fetch it as the refusal says).
    u1.git(&["stash", "-q"]).ok();
    if crate::util::ref_format() == "reftable" {
        u1.git(&["fetch", "-q", "origin"]).ok();
    }
    u1.git(&["merge", "-q", "--ff-only", &good]).ok();
    assert_eq!(u1.git_out(&["rev-parse", "main"]), good);
}

#[test]
fn a_remote_that_cannot_be_reached_from_the_hook_points_to_sync() {
    let (server, u1, _u2, _good) = promoted_elsewhere();
    u1.git(&["fetch", "-q", "origin", "main"]).ok();
    let before = u1.git_out(&["rev-parse", "main"]);
    // The remote is gone by the time of the merge.
    let gone = server.path().join("moved.git");
    std::fs::rename(&server.repo, &gone).unwrap();
    let r = u1.git(&["merge", "-q", "--ff-only", "origin/main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(u1.git_out(&["rev-parse", "main"]), before);
    assert!(
        r.stderr
            .contains("could not fetch the evidence notes from origin"),
        "{}",
        r.desc
    );
    assert!(
        r.stderr.contains("`git tabellio sync origin`"),
        "{}",
        r.desc
    );
    assert!(!r.stderr.contains("git tabellio validate"), "{}", r.desc);
    // Once the remote is back, sync brings the evidence and the merge goes through.
    std::fs::rename(&gone, &server.repo).unwrap();
    let back = way_back(&r.stderr);
    let back: Vec<&str> = back.iter().map(String::as_str).collect();
    u1.git(&back).ok();
    assert_eq!(u1.git_out(&["status", "--porcelain"]), "");
    u1.tab(&["sync", "origin"]).ok();
    u1.git(&["merge", "-q", "--ff-only", "origin/main"]).ok();
}

#[test]
fn moving_a_branch_not_checked_out_gets_the_evidence_and_has_nothing_to_put_back() {
    let (_server, u1, u2, good) = promoted_elsewhere();
    u1.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    // One transaction moves `main` and `origin/main`: the latter says where it came from.
    u1.git(&["fetch", "-q", "--atomic", "origin", "main:main"])
        .ok();
    assert_eq!(u1.git_out(&["rev-parse", "main"]), good);
    // An unvalidated commit on top is refused; git moved no file, so there is nothing to put
    // back, and the way out is the evidence.
    u2.git(&["fetch", "-q", "origin"]).ok();
    u2.git(&["switch", "-q", "--detach", "origin/main"]).ok();
    u2.commit_file_in(&u2.repo, "sneaky.txt", "x\n");
    u2.git(&["push", "-q", "origin", "HEAD:main"]).ok();
    u1.git(&["fetch", "-q", "origin", "main"]).ok();
    let r = u1.git(&["branch", "-f", "main", "origin/main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert_eq!(u1.git_out(&["rev-parse", "main"]), good);
    assert!(r.stderr.contains("git tabellio sync origin"), "{}", r.desc);
    assert!(!r.stderr.contains("read-tree"), "{}", r.desc);
    assert_eq!(u1.git_out(&["status", "--porcelain"]), "");
}
