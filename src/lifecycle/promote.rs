//! `promote`: move the run's target branch to exactly the validated commit, fast-forward only,
//! compare-and-swap, in the same ref transaction as the ledger's `promoted` record.
//!
//! Every precondition is checked before the first write; the ledger's word on validation is
//! never trusted by itself (the evidence is re-read from notes and its digests re-checked).
//! A target checked out in some worktree is moved together with that worktree's index and
//! files while the transaction's locks are held, so nobody can move the target or the ledger
//! in between; if the files cannot be moved, they are put back and the transaction is dropped.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::model::run::Promotion;
use crate::model::{time, RunRecord, RunState};
use crate::run::completion::completion_record;
use crate::run::promotion::plan;
use crate::run::{resolve_run, Env};
use crate::store::checkout;
use crate::store::ledger;
use crate::store::tx::{self, Cas};

pub use crate::model::run::PromotionMode;

#[derive(Debug, Serialize)]
pub struct PromoteOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub target: String,
    pub old: String,
    pub new: String,
    pub mode: PromotionMode,
    /// The worktree that moved with the target, in worktree mode.
    pub target_worktree: Option<PathBuf>,
    pub dry_run: bool,
    /// True when the run was promoted before this call (nothing was done).
    pub already_promoted: bool,
    /// Why the verification summary of the new tip could not be noted, when it could not (the
    /// promotion itself stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_warning: Option<String>,
}

/// What `promote` is asked to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromoteOptions<'a> {
    /// The run, or `None` for the one whose worktree the command runs in.
    pub run: Option<&'a str>,
    /// Check every precondition and take the locks, but write nothing.
    pub dry_run: bool,
}

pub fn promote(env: &Env, opts: &PromoteOptions<'_>) -> Result<PromoteOutcome> {
    let PromoteOptions { run, dry_run } = *opts;
    let store = &env.store;
    let ledger = resolve_run(env, run)?;
    let workspace = crate::run::run_workspace(store, &ledger)?;
    if ledger.record.state == RunState::Promoted {
        return already_promoted(store, ledger, workspace, dry_run);
    }
    let mut plan = plan(store, ledger)?;
    let mode = if plan.target_worktree.is_some() {
        PromotionMode::Worktree
    } else {
        PromotionMode::Ref
    };
    let rec = &plan.ledger.record;
    let mut next = ledger::transition(rec, RunState::Promoted);
    next.promotion = Some(Promotion {
        target: plan.target.clone(),
        old: plan.base.to_string(),
        new: plan.validated.to_string(),
        mode,
        remote: None,
        at: time::now(),
    });
    let outcome = |run: RunRecord| PromoteOutcome {
        run,
        workspace: workspace.clone(),
        target: plan.target.clone(),
        old: plan.base.to_string(),
        new: plan.validated.to_string(),
        mode,
        target_worktree: plan.target_worktree.clone(),
        dry_run,
        already_promoted: false,
        summary_warning: None,
    };
    if dry_run {
        // Take the locks and let them go: a lock someone holds (or a stale one) is found now,
        // as the real promotion would find it. Nothing is written.
        let ledger_ref = ledger::ref_name(&rec.run_id);
        let probe = [
            Cas::update(
                &plan.target,
                Some(plan.base),
                plan.validated,
                "tabellio: promote --dry-run",
            ),
            Cas::update(
                &ledger_ref,
                Some(plan.ledger.tip),
                plan.ledger.tip,
                "tabellio: promote --dry-run",
            ),
        ];
        let probe = if plan.ledger_only {
            &probe[1..]
        } else {
            &probe[..]
        };
        drop(tx::prepare(store, probe).map_err(|e| e.into_error())?);
        return Ok(outcome(rec.clone()));
    }
    next.completion = completion_record(store, rec, plan.validated)?;
    let ledger_commit = store.write_ledger_commit(Some(&plan.ledger), &next, "promote")?;
    let message = format!("tabellio: promote {}", rec.run_id);
    let edits = [
        Cas::update(&plan.target, Some(plan.base), plan.validated, &message),
        Cas::update(
            ledger::ref_name(&rec.run_id),
            Some(plan.ledger.tip),
            ledger_commit,
            &message,
        ),
    ];
    // The target write goes first: a crash between the two loose-ref writes leaves the target
    // at the validated commit with the ledger still `completed`, which `plan` recognises and
    // this function completes by writing the ledger alone (`ledger_only`).
    match &plan.target_worktree {
        _ if plan.ledger_only => tx::apply(store, &edits[1..]).map_err(|e| e.into_error())?,
        None => tx::apply(store, &edits).map_err(|e| e.into_error())?,
        Some(path) => {
            // Hold the locks on target and ledger while the files move: nobody can move either
            // in between, and a failure rolls both the files and the transaction back.
            let prepared = tx::prepare(store, &edits).map_err(|e| e.into_error())?;
            let (old_tree, new_tree) = (store.tree_of(plan.base)?, store.tree_of(plan.validated)?);
            // The index as checked, taken rather than copied (20,000 entries are a 2 MB copy).
            let read = plan.target_index.take().map(|i| i.into_owned_or_cloned());
            let journal = checkout::move_worktree_read(path, (old_tree, new_tree), read)?;
            if let Err(e) = prepared.commit(store) {
                let _ = checkout::move_worktree(path, new_tree, old_tree);
                return Err(e.into_error());
            }
            drop(journal);
        }
    }
    let summary = (plan.base, plan.validated);
    Ok(PromoteOutcome {
        summary_warning: crate::run::vsa::note_summary(store, &plan.target, summary, None)
            .err()
            .map(|e| e.message),
        ..outcome(next)
    })
}

/// The outcome of promoting run `ledger`, promoted before. A promotion killed between its move
/// and its summary notes the summary now (not in a dry run).
fn already_promoted(
    store: &crate::store::Store,
    ledger: crate::store::ledger::Ledger,
    workspace: Option<PathBuf>,
    dry_run: bool,
) -> Result<PromoteOutcome> {
    let p = ledger.record.promotion.clone();
    let unsummarised = match &p {
        Some(p) if !dry_run => crate::run::vsa::unsummarised(store, p)?,
        _ => None,
    };
    let summary_warning = match (&p, unsummarised) {
        (Some(p), Some(moved)) => crate::run::vsa::note_summary(store, &p.target, moved, None)
            .err()
            .map(|e| e.message),
        _ => None,
    };
    Ok(PromoteOutcome {
        target: p
            .as_ref()
            .map_or(ledger.record.base.reference.clone(), |p| p.target.clone()),
        old: p.as_ref().map_or_else(String::new, |p| p.old.clone()),
        new: p.as_ref().map_or_else(String::new, |p| p.new.clone()),
        mode: p.as_ref().map_or(PromotionMode::Ref, |p| p.mode),
        run: ledger.record,
        workspace,
        target_worktree: None,
        dry_run,
        already_promoted: true,
        summary_warning,
    })
}
