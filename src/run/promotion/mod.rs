//! The preconditions of promotion, shared by `promote`, `land`, `status` and `promote
//! --remote`: the run is completed, its branch is at the validated commit, its evidence is
//! re-read from the notes and its digests re-checked (the ledger alone is never trusted), a
//! change to guarded paths is approved, and the target can move (at the base, not locked, a
//! checked-out target clean and movable). Nothing here writes.

mod error;

pub use error::PromoteError;

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::evidence::judge::{evaluate, Verdict};
use crate::evidence::requirements::{required_at, under_trust, Claim};
use crate::evidence::sign::{signing_hint, JudgedAt};
use crate::model::{RunRecord, RunState};
use crate::store::checkout;
use crate::store::ledger::{self, Ledger};
use crate::store::merge::merge_preview;
use crate::store::remote::fetch::NOTES_PREFIX;
use crate::store::tx;
use crate::store::worktree::UntrackedScan;
use crate::store::Store;
use crate::trust::approval::judge_run_step;

/// Everything promote checked, ready to write.
pub struct Plan {
    pub ledger: Ledger,
    pub target: String,
    pub base: gix::ObjectId,
    pub validated: gix::ObjectId,
    pub target_worktree: Option<PathBuf>,
    /// The index of `target_worktree` as the check that it can move read it: the move reuses
    /// it when the file is still the same, instead of reading a large index again.
    pub target_index: Option<gix::worktree::Index>,
    /// The target already points at the validated commit: a promotion interrupted between its
    /// two ref writes (gix writes loose refs one after the other). Only the ledger is left.
    pub ledger_only: bool,
}

/// The run's own preconditions of promotion, local or remote (`sync::remote_promote`): completed,
/// target a branch, run branch head == validated commit, and the evidence re-read from the notes
/// and its digests re-checked. Returns the target ref and the validated commit.
pub fn check_validated(
    store: &Store,
    run: &RunRecord,
) -> Result<(String, gix::ObjectId), PromoteError> {
    let run_id = run.run_id.clone();
    if run.state != RunState::Completed {
        return Err(PromoteError::NotCompleted {
            run_id,
            state: run.state.to_string(),
        });
    }
    let target = run.base.reference.clone();
    if !target.starts_with("refs/heads/") {
        return Err(PromoteError::TargetNotABranch { target });
    }
    let Some(validated) = run.validated.as_ref() else {
        return Err(PromoteError::NoValidatedCommit { run_id });
    };
    let validated_id = store.parse_oid(&validated.commit)?;
    let head = store.ref_target(&run.branch)?;
    if head.is_none() {
        return Err(PromoteError::BranchNotHere {
            branch: run.branch.clone(),
        });
    }
    if head != Some(validated_id) {
        return Err(PromoteError::BranchChanged {
            run_id,
            branch: run.branch.clone(),
            head: head.map_or("nothing".into(), |h| h.to_string()),
            validated: validated.commit.clone(),
        });
    }
    // The ledger is never trusted on its own: the evidence must be in the notes, intact.
    let requirements =
        required_at(store, validated_id, Claim::Promotion(run)).map_err(Error::from)?;
    // Who may attest is read from the target's tip, never from the run's own commits.
    let trust = crate::store::policy::trust_at_tip(store, &target)?;
    let requirements = under_trust(requirements, trust.as_ref());
    // Failing tests the target's tip has may be inherited where its policy allows it.
    let requirements = crate::evidence::requirements::with_baselines(
        store,
        requirements,
        store.ref_target(&target)?,
    )?;
    if requirements.is_empty() {
        return Err(PromoteError::NoRecordOfChecks {
            run_id,
            validated: validated.commit.clone(),
        });
    }
    let verdicts = evaluate(store, validated_id, &requirements)?;
    let unsatisfied: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.satisfies())
        .map(|v| v.describe())
        .collect();
    if !unsatisfied.is_empty() {
        // Refused for its signature: finishing again helps only with a key that counts.
        let by_signature = verdicts.iter().any(|v| {
            matches!(
                v.verdict,
                Verdict::Unsigned | Verdict::UnknownSigner | Verdict::SignerExpired
            )
        });
        let signing = match store.ref_target(&target)? {
            Some(commit) if by_signature => signing_hint(
                store,
                JudgedAt {
                    commit,
                    label: target.strip_prefix("refs/heads/").unwrap_or(&target),
                    again: &format!("git tabellio finish {run_id}"),
                    run: Some(&run_id),
                },
            ),
            _ => None,
        };
        return Err(PromoteError::EvidenceDoesNotHold {
            run_id,
            validated: validated.commit.clone(),
            unsatisfied,
            signing,
        });
    }
    Ok((target, validated_id))
}

/// A change to guarded paths needs a person's approval of exactly the validated tree, judged
/// by the guarded list at `gating` (the target's tip: a run cannot loosen its own gate) plus
/// the run's own. `land` judges the tree it lands instead.
pub fn check_approved(
    store: &Store,
    run: &RunRecord,
    gating: Option<gix::ObjectId>,
    validated: gix::ObjectId,
) -> Result<(), PromoteError> {
    let base = store.parse_oid(&run.base.commit)?;
    let gating = gating.unwrap_or(base);
    let approval = judge_run_step(store, Some(gating), base, validated, Some(&run.actor))?;
    if approval.is_needed() {
        return Err(PromoteError::ApprovalNeeded {
            run_id: run.run_id.clone(),
            approval,
        });
    }
    Ok(())
}

/// Check every precondition of promotion; nothing is written. Each ref is read once, so the
/// preconditions judge one view of the refs; the transaction checks them again under its locks.
pub fn plan(store: &Store, ledger: Ledger) -> Result<Plan, PromoteError> {
    store.snapshot_refs(|| plan_now(store, ledger))
}

fn plan_now(store: &Store, ledger: Ledger) -> Result<Plan, PromoteError> {
    // The notes refs (evidence, approvals, what sync fetched) in one read.
    store.snapshot_refs_under(NOTES_PREFIX)?;
    let run = &ledger.record;
    // A missing approval is named before anything else: it needs a person, and everything
    // else the run can fix by itself.
    if let (RunState::Completed, Some(v)) = (run.state, run.validated.as_ref()) {
        let validated = store.parse_oid(&v.commit)?;
        check_approved(
            store,
            run,
            store.ref_target(&run.base.reference)?,
            validated,
        )?;
    }
    let (target, validated_id) = check_validated(store, run)?;
    let base = store.parse_oid(&run.base.commit)?;
    let current = store.ref_target(&target)?;
    let ledger_ref = ledger::ref_name(&run.run_id);
    if current == Some(validated_id) && base != validated_id {
        // An interrupted promotion may have left the ledger's lock behind: name it now (and to
        // `status`), not when the completing write fails.
        if let Some((name, lock)) = tx::held_lock(store, &[ledger_ref.as_str()]) {
            return Err(tx::TxError::Locked { name, lock }.into_error().into());
        }
        let target_worktree = store
            .worktrees_of_branch(&target)?
            .into_iter()
            .find(|p| p.exists());
        return Ok(Plan {
            ledger,
            target,
            base,
            validated: validated_id,
            target_worktree,
            target_index: None,
            ledger_only: true,
        });
    }
    if current != Some(base) {
        let preview = match current {
            Some(tip) => Some(merge_preview(store, tip, validated_id)?.describe()),
            None => None,
        };
        return Err(PromoteError::TargetMoved {
            run_id: run.run_id.clone(),
            target,
            current: current.map_or("nothing (deleted)".into(), |c| c.to_string()),
            base: run.base.commit.clone(),
            preview,
        });
    }
    if !store.is_ancestor(base, validated_id)? {
        return Err(PromoteError::NotAFastForward {
            validated: validated_id,
            base,
        });
    }
    // A lock on a ref the promotion writes refuses it now (and `status` learns it from here),
    // not half-way through.
    if let Some((name, lock)) = tx::held_lock(store, &[target.as_str(), ledger_ref.as_str()]) {
        return Err(tx::TxError::Locked { name, lock }.into_error().into());
    }
    let used = store.branch_use(&target)?;
    if let Some((what, path)) = used.operation {
        return Err(PromoteError::TargetInOperation {
            target,
            what: what.to_string(),
            path,
        });
    }
    let target_worktree = used.checked_out.into_iter().next();
    let mut target_index = None;
    if let Some(path) = &target_worktree {
        match check_target_worktree(store, path, &target, base, validated_id) {
            Ok(index) => target_index = Some(index),
            Err(e) => {
                // A worktree seen mid-move by a concurrent promoter looks dirty or ahead: if the
                // target moved or is locked meanwhile, that is the race we lost, not a dirty tree
                // (so the target is read again, past the snapshot `plan` reads in).
                let lock = store.repo.common_dir().join(format!("{target}.lock"));
                if store.ref_target_now(&target)? != Some(base) || lock.exists() {
                    return Err(PromoteError::PromotionUnderWay { target });
                }
                return Err(e.into());
            }
        }
    }
    Ok(Plan {
        ledger,
        target,
        base,
        validated: validated_id,
        target_worktree,
        target_index,
        ledger_only: false,
    })
}

/// The checked-out target must be movable: present, clean, at the base, nothing untracked in
/// the way, no index lock, no sparse checkout. The index it read.
pub fn check_target_worktree(
    store: &Store,
    path: &std::path::Path,
    target: &str,
    base: gix::ObjectId,
    validated: gix::ObjectId,
) -> Result<gix::worktree::Index> {
    if !path.exists() {
        return Err(Error::refused(format!(
            "{target} is checked out in a worktree that no longer exists: {}",
            path.display()
        ))
        .hint("remove its registration with `git worktree prune`, then promote again"));
    }
    // Only a path the move adds can have an untracked file in its way, as `git read-tree -u
    // -m` judges it: every directory is read for untracked files only when something is on
    // disk at one of those paths (someone's file, or what a killed move left there).
    let trees = (store.tree_of(base)?, store.tree_of(validated)?);
    let moved = crate::store::diff::tree_changes(&store.objects(), trees.0, trees.1)?;
    // A move a killed process left from the base toward another tree is put back before this
    // one: an untracked file where it added a path would be removed, so all are looked at.
    let killed = match checkout::killed_move_from(path, trees) {
        Some((o, n)) => crate::store::diff::tree_changes(&store.objects(), o, n)?,
        None => Vec::new(),
    };
    let untracked = if killed.is_empty() && checkout::additions_are_free(path, &moved) {
        UntrackedScan::Skipped
    } else {
        UntrackedScan::Listed
    };
    let (ws, repo, index) = store.inspect_with_index(path, untracked)?;
    // A promotion killed while it moved this worktree leaves exactly the old or new content
    // of the paths it touches: finishing the move is the repair, and it loses no one's work.
    let mut touched: Vec<String> = ws.changed.clone();
    touched.extend(ws.untracked.iter().cloned());
    let foreign = checkout::foreign_to_move(store, path, base, validated, &touched)?;
    if !touched.is_empty() && foreign.is_empty() {
        checkout::refuse_unmovable(path, &repo, &index)?;
        return Ok(index);
    }
    // Only someone's own changes are named: leftovers of a killed move are the move's.
    let changed: Vec<&String> = ws.changed.iter().filter(|p| foreign.contains(p)).collect();
    if !changed.is_empty() {
        return Err(Error::refused(format!(
            "{target} is checked out in {} with uncommitted changes: {}",
            path.display(),
            changed
                .iter()
                .take(10)
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        // Committing them there would put an unvalidated commit on the protected target (and
        // move it off the frozen base): the edits have to leave the target instead.
        .hint(format!(
            "{target} is the protected target: do not commit there; put the edits aside with \
             `git -C {wt} stash`, promote again, then bring them back with `git -C {wt} stash pop`",
            wt = crate::error::shell_path(path)
        )));
    }
    if ws.head != Some(base) {
        return Err(Error::refused(format!(
            "the worktree {} is not at {base}",
            path.display()
        )));
    }
    let mut in_the_way = checkout::untracked_in_the_way(&moved, &ws.untracked);
    let foreign_untracked: Vec<String> = (ws.untracked.iter())
        .filter(|p| foreign.contains(p))
        .cloned()
        .collect();
    in_the_way.extend(checkout::untracked_in_the_way(&killed, &foreign_untracked));
    if !in_the_way.is_empty() {
        return Err(Error::refused(format!(
            "untracked files in {} would be overwritten: {}",
            path.display(),
            in_the_way.join(", ")
        ))
        .hint("move or delete them, then promote again"));
    }
    checkout::refuse_unmovable(path, &repo, &index)?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run::tests::sample;

    /// An empty repository: no branch, no commit, no notes. Made and opened without the
    /// machine's git configuration.
    fn empty_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("a temp dir");
        crate::store::test_git(dir.path(), dir.path(), &["init", "-q", "repo"]);
        let repo = gix::open_opts(dir.path().join("repo"), gix::open::Options::isolated())
            .expect("the new repository");
        let store = Store::from_repo(repo).expect("a known ref format");
        (dir, store)
    }

    #[test]
    fn the_run_itself_must_be_promotable_before_anything_is_read() {
        let (_dir, store) = empty_store();
        for state in [
            RunState::Active,
            RunState::ValidationFailed,
            RunState::Promoted,
        ] {
            assert!(matches!(
                check_validated(&store, &sample(state)),
                Err(PromoteError::NotCompleted { .. })
            ));
        }
        let mut tag = sample(RunState::Completed);
        tag.base.reference = "refs/tags/v1".into();
        assert!(matches!(
            check_validated(&store, &tag),
            Err(PromoteError::TargetNotABranch { .. })
        ));
        let mut forged = sample(RunState::Completed);
        forged.validated = None;
        assert!(matches!(
            check_validated(&store, &forged),
            Err(PromoteError::NoValidatedCommit { .. })
        ));
        // A run synced from another machine, whose branch did not travel with it.
        assert!(matches!(
            check_validated(&store, &sample(RunState::Completed)),
            Err(PromoteError::BranchNotHere { .. })
        ));
        let e = Error::from(
            plan(
                &store,
                Ledger {
                    tip: gix::ObjectId::null(gix::hash::Kind::Sha1),
                    record: sample(RunState::Active),
                },
            )
            .err()
            .expect("refused"),
        );
        assert_eq!(e.kind, crate::ErrorKind::Refused);
        assert_eq!(
            e.message,
            "run r1 is active; only a completed run can be promoted"
        );
    }
}
