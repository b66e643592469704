//! Promote's preconditions, in-process: each refusal from a real repository, as its own
//! [`PromoteError`] variant, with nothing written (every ref as it was, before and after both
//! the plan and the operation itself).

use tabellio::lifecycle::promote::{promote, PromoteOptions, PromotionMode};
use tabellio::model::RunState;
use tabellio::run::promotion::{check_validated, plan, PromoteError};
use tabellio::ErrorKind;

use crate::util::*;

/// Plan and promote run `r1`: both refuse with the error `plan` gave, and no ref moved.
/// Returns the plan's error, and the exit kind promote's error has.
#[track_caller]
fn refused(t: &TestEnv) -> (PromoteError, ErrorKind) {
    let before = t.refs();
    let env = t.env();
    let err = match plan(&env.store, t.ledger("r1")) {
        Ok(_) => panic!("the plan went ahead"),
        Err(e) => e,
    };
    let shown = err.to_string();
    let e = match promote(
        &env,
        &PromoteOptions {
            run: Some("r1"),
            dry_run: false,
        },
    ) {
        Ok(_) => panic!("promote went ahead after the plan refused: {shown}"),
        Err(e) => e,
    };
    assert_eq!(e.message, shown);
    assert_eq!(t.refs(), before, "a refused promotion wrote a ref");
    (err, e.kind)
}

#[test]
fn a_run_that_is_not_completed_is_refused() {
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    let (e, kind) = refused(&t);
    assert!(
        matches!(&e, PromoteError::NotCompleted { state, .. } if state == "active"),
        "{e:?}"
    );
    assert_eq!(kind, ErrorKind::Refused);
    assert!(!t.lib_finish("r1", &["false"]).passed());
    let (e, _) = refused(&t);
    assert!(matches!(&e, PromoteError::NotCompleted { state, .. } if state == "validation_failed"));
}

#[test]
fn a_target_that_is_not_a_branch_is_refused() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    t.git(&["tag", "v1", "main"]).ok();
    t.set_run("r1", RunState::Completed, |r| {
        r.base.reference = "refs/tags/v1".into()
    });
    let (e, _) = refused(&t);
    assert!(matches!(&e, PromoteError::TargetNotABranch { target } if target == "refs/tags/v1"));
}

#[test]
fn a_completed_run_without_a_validated_commit_is_refused() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    t.set_run("r1", RunState::Completed, |r| r.validated = None);
    let (e, _) = refused(&t);
    assert!(matches!(e, PromoteError::NoValidatedCommit { .. }), "{e:?}");
}

#[test]
fn a_missing_or_moved_run_branch_is_refused() {
    let t = TestEnv::for_lib();
    let wt = t.lib_completed("r1");
    let validated = t.rev("tabellio/r1");
    t.commit_file_in(&wt, "after.txt", "after validation\n");
    let (e, kind) = refused(&t);
    assert!(
        matches!(&e, PromoteError::BranchChanged { validated: v, .. } if *v == validated),
        "{e:?}"
    );
    assert_eq!(kind, ErrorKind::Refused);
    let wt_s = wt.to_str().unwrap();
    t.git(&["worktree", "remove", "--force", wt_s]).ok();
    t.git(&["branch", "-q", "-D", "tabellio/r1"]).ok();
    let (e, _) = refused(&t);
    assert!(
        matches!(&e, PromoteError::BranchNotHere { branch } if branch == "refs/heads/tabellio/r1"),
        "{e:?}"
    );
}

#[test]
fn a_run_with_no_record_of_its_checks_is_refused() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    // No policy, and the ledger lost its attempts: nothing says what proves the commit.
    t.set_run("r1", RunState::Completed, |r| r.attempts.clear());
    let (e, _) = refused(&t);
    assert!(matches!(e, PromoteError::NoRecordOfChecks { .. }), "{e:?}");
}

#[test]
fn evidence_that_does_not_hold_is_refused_whatever_the_ledger_says() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let head = t.rev("tabellio/r1");
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    // The same check's record, edited: tamper detection alone refuses it.
    let forged = note.replace("\"duration_ms\":", "\"duration_ms\":1");
    assert_ne!(forged, note);
    t.forge_evidence(&head, &forged);
    let (e, kind) = refused(&t);
    match &e {
        PromoteError::EvidenceDoesNotHold { unsatisfied, .. } => {
            assert_eq!(unsatisfied, &["adhoc (tampered)"])
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(kind, ErrorKind::Refused);
    // check_validated, which a remote promotion shares, says the same.
    let env = t.env();
    assert!(matches!(
        check_validated(&env.store, &t.ledger("r1").record),
        Err(PromoteError::EvidenceDoesNotHold { .. })
    ));
    t.git(&["update-ref", "-d", "refs/notes/tabellio/evidence"])
        .ok();
    match refused(&t).0 {
        PromoteError::EvidenceDoesNotHold { unsatisfied, .. } => {
            assert_eq!(unsatisfied, ["adhoc (missing)"])
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_moved_target_is_a_conflict() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    t.commit_file_in(&t.repo, "main.txt", "moved\n");
    let tip = t.rev("main");
    let (e, kind) = refused(&t);
    match &e {
        PromoteError::TargetMoved {
            current, preview, ..
        } => {
            assert_eq!(current, &tip);
            assert!(preview.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(kind, ErrorKind::Conflict);
    t.git(&["update-ref", "-d", "refs/heads/main"]).ok();
    match refused(&t).0 {
        PromoteError::TargetMoved {
            current, preview, ..
        } => assert_eq!((current.as_str(), preview), ("nothing (deleted)", None)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_validated_commit_off_the_base_is_not_a_fast_forward() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    // The target and the run's recorded base both at a sibling of the validated commit (a
    // hand-edited ledger): the target did not move, yet promoting would not fast-forward.
    t.commit_file_in(&t.repo, "sibling.txt", "sibling\n");
    let sibling = t.rev("main");
    t.set_run("r1", RunState::Completed, |r| r.base.commit = sibling);
    let (e, _) = refused(&t);
    assert!(matches!(e, PromoteError::NotAFastForward { .. }), "{e:?}");
}

#[test]
fn a_target_being_rebased_is_refused() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    // What `git rebase` leaves while it stops: HEAD detached, the branch named in its state.
    t.git(&["checkout", "-q", "--detach"]).ok();
    write_file(
        &t.repo.join(".git/rebase-merge/head-name"),
        "refs/heads/main\n",
    );
    let (e, _) = refused(&t);
    match &e {
        PromoteError::TargetInOperation { what, .. } => assert_eq!(what, "rebased"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_held_lock_or_a_dirty_target_worktree_is_refused_before_any_write() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let lock = t.repo.join(".git/refs/tabellio/runs/r1.lock");
    write_file(&lock, "");
    let (e, kind) = refused(&t);
    assert!(matches!(e, PromoteError::Other(_)), "{e:?}");
    assert!(e.to_string().contains("is locked"), "{e}");
    assert_eq!(kind, ErrorKind::Conflict);
    std::fs::remove_file(&lock).unwrap();
    // `main` is checked out in the main worktree: its uncommitted changes are not ours to move.
    t.write("README.md", "edited, not committed\n");
    let (e, kind) = refused(&t);
    assert!(e.to_string().contains("uncommitted changes"), "{e}");
    assert_eq!(kind, ErrorKind::Refused);
}

#[test]
fn a_dry_run_writes_nothing_and_a_promotion_moves_target_and_ledger_together() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let validated = t.rev("tabellio/r1");
    let before = t.refs();
    let env = t.env();
    let out = promote(
        &env,
        &PromoteOptions {
            run: Some("r1"),
            dry_run: true,
        },
    )
    .expect("dry run");
    assert!(out.dry_run && out.new == validated);
    assert_eq!(t.refs(), before);
    let out = promote(
        &env,
        &PromoteOptions {
            run: Some("r1"),
            dry_run: false,
        },
    )
    .expect("promote");
    assert_eq!(out.mode, PromotionMode::Worktree);
    assert_eq!(t.rev("main"), validated);
    assert_eq!(t.ledger("r1").record.state, RunState::Promoted);
    // Again: nothing to do, nothing written.
    let after = t.refs();
    assert!(
        promote(
            &env,
            &PromoteOptions {
                run: Some("r1"),
                dry_run: false,
            },
        )
        .expect("again")
        .already_promoted
    );
    assert_eq!(t.refs(), after);
    t.fsck();
}
