//! The temporary worktrees of `validate` leave nothing behind: not when a check deletes the
//! worktree's `.git` or the whole worktree, and not when a killed `validate` left one whose
//! checkout is gone but whose registration is not.

use crate::util::*;

/// The registrations under `<git dir>/worktrees/` of scratch worktrees.
fn scratch_registrations(t: &TestEnv) -> Vec<String> {
    std::fs::read_dir(t.repo.join(".git").join("worktrees"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("validate-"))
                .collect()
        })
        .unwrap_or_default()
}

#[track_caller]
fn assert_no_scratch_left(t: &TestEnv) {
    assert_eq!(scratch_registrations(t), Vec::<String>::new());
    let list = t.git_out(&["worktree", "list", "--porcelain"]);
    assert!(!list.contains("validate-"), "{list}");
    assert!(!list.contains("prunable"), "{list}");
    assert_eq!(t.git_out(&["worktree", "prune", "--dry-run", "-v"]), "");
}

#[test]
fn a_check_that_deletes_the_scratch_worktrees_git_file_fails_and_leaves_nothing() {
    let t = TestEnv::new();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let r = t.tab(&["--json", "validate", "--", "rm", "-f", ".git"]);
    r.code(1);
    let v = r.json();
    assert_eq!(v["verdict"], "failed", "{v}");
    let record = &v["evidence"][0];
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["stopped"]["tabellio"], "workspace_mutated");
    assert!(!r.stdout.contains("abandon"), "{}", r.desc);
    assert!(!r.stderr.contains("abandon"), "{}", r.desc);
    assert_no_scratch_left(&t);
    // The failure is recorded like any other.
    let (code, verdict) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{verdict}");
    t.fsck();
}

#[test]
fn a_check_that_deletes_the_whole_scratch_worktree_fails_and_leaves_nothing() {
    let t = TestEnv::new();
    let r = t.tab(&["--json", "validate", "--", "sh", "-c", "rm -rf \"$PWD\""]);
    r.code(1);
    assert_eq!(
        r.json()["evidence"][0]["stopped"]["tabellio"],
        "workspace_mutated"
    );
    assert_no_scratch_left(&t);
    t.fsck();
}

#[test]
fn a_registration_left_without_its_checkout_by_a_killed_validate_is_swept() {
    let t = TestEnv::new();
    // What a validate killed after its check deleted the checkout leaves: a registration whose
    // checkout is gone, named for a process that no longer exists.
    let scratch = orphan_scratch(&t, "HEAD");
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(scratch_registrations(&t).len(), 1);
    t.tab(&["validate", "--", "true"]).ok();
    assert_no_scratch_left(&t);
    t.fsck();
}

/// A landing killed while it removed its validations' worktrees leaves one behind: the next
/// `land`, with nothing to validate or land, removes it.
#[test]
fn a_land_with_nothing_to_validate_sweeps_what_a_killed_landing_left() {
    let t = TestEnv::runs_to_land("ok", &["r1"]);
    t.tab(&["land", "r1"]).ok();
    orphan_scratch(&t, "main");
    assert_eq!(scratch_registrations(&t).len(), 1);
    let (code, j) = t.tab_json(&["land", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["result"], "already_landed", "{j}");
    assert_no_scratch_left(&t);
    t.fsck();
}

/// A validation worktree at `rev` as a killed process leaves it: named for a process that no
/// longer exists. Its path.
fn orphan_scratch(t: &TestEnv, rev: &str) -> std::path::PathBuf {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let scratch = t
        .repo
        .join(".git/tabellio/tmp")
        .join(format!("validate-{pid}-0"));
    let spot = scratch.to_str().unwrap();
    t.git(&["worktree", "add", "-q", "--detach", spot, rev])
        .ok();
    scratch
}
