//! Writing a settled stack: one compare-and-swap transaction for everything that lands, then
//! the ledgers of the runs refused (conflicts, culprits), each compare-and-swap on its own.

use crate::error::Result;
use crate::model::land::{LandAttempt, Restack};
use crate::model::run::{Promotion, PromotionMode};
use crate::model::{time, RunState};
use crate::run::advance;
use crate::run::completion::completion_record;
use crate::run::promotion::check_target_worktree;
use crate::store::checkout;
use crate::store::ledger::{self, Ledger};
use crate::store::tx::{self, Cas, TxError};
use crate::store::Store;

use super::check::Settled;
use super::stack::{Stacked, Unstacked};
use super::{Landing, RunLanding};

/// How the landing transaction went.
pub enum Written {
    /// Landed (or nothing to land); `mode` is `ref` or `worktree`.
    Landed { mode: PromotionMode },
    /// `name` moved (or was locked) underneath: rebuild on the new state.
    Moved { name: String },
}

/// Held by the landing write under way in this process.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Land `settled.accepted` on `target` (at `tip`) in one transaction: the target to the top of
/// the stack, each run branch to its restacked head, each ledger to `promoted`. A target or run
/// branch checked out in a worktree moves its files while the transaction's locks are held.
pub fn land_settled(
    store: &Store,
    target: &str,
    tip: gix::ObjectId,
    settled: &Settled,
) -> Result<Written> {
    let Some(top) = settled.accepted.last().map(|s| s.head) else {
        return Ok(Written::Landed {
            mode: PromotionMode::Ref,
        });
    };
    // One landing write at a time in this process: the lanes of a `land` share the target and
    // the worktree it is checked out in, whose files move while the transaction's locks are
    // held. Across processes the target's lock decides.
    let _turn = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let target_worktree = store.worktrees_of_branch(target)?.into_iter().next();
    if let Some(path) = &target_worktree {
        if let Err(e) = check_target_worktree(store, path, target, tip, top) {
            // A worktree another process is moving looks changed: while it holds the target's
            // lock, or once the target moved, that is a race lost, and the stack is rebuilt.
            if store.ref_target_now(target)? != Some(tip)
                || crate::store::tx::held_lock(store, &[target]).is_some()
            {
                return Ok(Written::Moved {
                    name: target.to_string(),
                });
            }
            return Err(e);
        }
    }
    let mode = if target_worktree.is_some() {
        PromotionMode::Worktree
    } else {
        PromotionMode::Ref
    };
    let message = format!(
        "tabellio: land {}",
        settled
            .accepted
            .iter()
            .map(|s| s.candidate.run_id())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut edits = vec![Cas::update(target, Some(tip), top, &message)];
    let mut moves: Vec<checkout::FileMove> = Vec::new();
    if let Some(path) = target_worktree {
        moves.push((path, store.tree_of(tip)?, store.tree_of(top)?));
    }
    for s in &settled.accepted {
        let c = &s.candidate;
        if s.head != c.head {
            edits.push(Cas::update(
                &c.ledger.record.branch,
                Some(c.head),
                s.head,
                &message,
            ));
            moves.extend(run_worktree_moves(store, s)?);
        }
        let mut next = promoted(target, tip, top, (mode, None), s);
        next.completion = completion_record(store, &c.ledger.record, s.head)?;
        let commit = store.write_ledger_commit(Some(&c.ledger), &next, "land")?;
        edits.push(Cas::update(
            ledger::ref_name(c.run_id()),
            Some(c.ledger.tip),
            commit,
            &message,
        ));
    }
    edits.extend(crate::store::queue::landing_removals(
        store,
        target,
        settled.accepted.iter().map(|s| s.candidate.run_id()),
        &message,
    )?);
    let prepared = match tx::prepare(store, &edits) {
        Ok(p) => p,
        Err(e) => return lost(e),
    };
    let moved = checkout::move_all(&moves)?;
    if let Err(e) = prepared.commit(store) {
        moved.undo();
        return lost(e);
    }
    drop(moved);
    Ok(Written::Landed { mode })
}

/// A lost race is a rebuild; anything else is an error.
fn lost(e: TxError) -> Result<Written> {
    match e {
        TxError::Moved { name, .. } | TxError::Locked { name, .. } => Ok(Written::Moved { name }),
        other => Err(other.into_error()),
    }
}

/// The run's own worktrees (clean, at its old head, or holding only what a killed move of
/// theirs left) move with its branch, so they do not show the restack as uncommitted changes.
fn run_worktree_moves(store: &Store, s: &Stacked) -> Result<Vec<checkout::FileMove>> {
    let c = &s.candidate;
    let mut out = Vec::new();
    for path in store.worktrees_of_branch(&c.ledger.record.branch)? {
        if !path.exists() {
            continue;
        }
        // A lock a killed landing left while it moved this worktree is named, not stepped over.
        checkout::refuse_index_lock(store, &path)?;
        let ws = store.inspect(&path)?;
        if ws.head != Some(c.head) {
            continue;
        }
        // What a landing killed while it moved this worktree left (toward this restack or
        // another) is not someone's work: the move puts it back first.
        let left_by_a_kill = || -> Result<bool> {
            let mut touched = ws.changed.clone();
            touched.extend(ws.untracked.iter().cloned());
            Ok(checkout::killed_move(&path).is_some()
                && checkout::foreign_to_move(store, &path, c.head, s.head, &touched)?.is_empty())
        };
        if ws.is_clean() || left_by_a_kill()? {
            out.push((path, store.tree_of(c.head)?, store.tree_of(s.head)?));
        }
    }
    Ok(out)
}

/// The ledger record of a landed run; `how` is the promotion's mode and remote.
pub fn promoted(
    target: &str,
    tip: gix::ObjectId,
    top: gix::ObjectId,
    how: (PromotionMode, Option<&str>),
    s: &Stacked,
) -> crate::model::RunRecord {
    let (mode, remote) = how;
    let rec = &s.candidate.ledger.record;
    let mut next = ledger::transition(rec, RunState::Promoted);
    next.promotion = Some(Promotion {
        target: target.to_string(),
        old: tip.to_string(),
        new: top.to_string(),
        mode,
        remote: remote.map(str::to_string),
        at: time::now(),
    });
    next.landed = Some(s.head.to_string());
    next.restack = Some(Restack {
        mode: s.mode,
        base_before: rec.base.commit.clone(),
        base_after: s.onto.to_string(),
        head_before: s.candidate.head.to_string(),
        head_after: s.head.to_string(),
    });
    next
}

/// The results of a settled stack, after its transaction landed: the refused runs' ledgers
/// record why (a conflict as a land attempt, a culprit as `validation_failed`).
pub fn results(store: &Store, target: &str, settled: Settled) -> Result<Vec<RunLanding>> {
    let mut out: Vec<RunLanding> = settled
        .accepted
        .iter()
        .map(|s| RunLanding {
            run_id: s.candidate.run_id().to_string(),
            result: Landing::Landed,
            state: RunState::Promoted,
            landed: Some(s.head.to_string()),
            restack: Some(s.mode),
            base_before: s.candidate.ledger.record.base.commit.clone(),
            base_after: Some(s.onto.to_string()),
            paths: Vec::new(),
            commit: None,
            reason: None,
            satisfied: None,
            checks: None,
        })
        .collect();
    for u in settled.refused {
        let culprit = u.commit.and_then(|c| settled.culprits.get(&c));
        let attempt = super::refusal::attempt_of(store, target, &u, culprit)?;
        out.push(record_refusal(store, u, attempt)?);
    }
    Ok(out)
}

/// Record one refused run in its ledger (compare-and-swap; a ledger that moved meanwhile was
/// changed by someone else, whose word stands): the land attempt, and a culprit becomes
/// `validation_failed`.
fn record_refusal(store: &Store, u: Unstacked, attempt: Option<LandAttempt>) -> Result<RunLanding> {
    let ledger: &Ledger = &u.candidate.ledger;
    let rec = &ledger.record;
    let next = attempt.map(|attempt| {
        let mut next = match u.result {
            Landing::ValidationFailed => {
                let mut next = ledger::transition(rec, RunState::ValidationFailed);
                next.validated = None;
                next.reason = Some(u.reason.clone());
                next
            }
            _ => ledger::transition(rec, RunState::Completed),
        };
        next.land_attempts.push(attempt);
        next
    });
    let mut state = rec.state;
    if let Some(next) = next {
        state = next.state;
        if advance(store, ledger, next, "land", &[]).is_err() {
            state = store.find_ledger(&rec.run_id)?.record.state;
        }
    }
    Ok(RunLanding {
        run_id: rec.run_id.clone(),
        result: u.result,
        state,
        landed: None,
        restack: None,
        base_before: rec.base.commit.clone(),
        base_after: Some(u.onto.to_string()),
        paths: u.paths,
        commit: u.commit.map(|c| c.to_string()),
        reason: Some(u.reason),
        satisfied: None,
        checks: None,
    })
}
