//! `status`: what state a run is in, what the live repository says about it, and what to do
//! next. It is the one place a person, an agent or CI learns the next action.
//!
//! [`observe`] reads the ledger and the live repository into plain values; [`next_action`]
//! decides on them without reading anything.

pub mod divergence;
pub mod next_action;
pub mod observe;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Result;
use crate::model::{RunRecord, RunState};
use crate::run::{resolve_run, Env};
use crate::store::ledger::Ledger;
use crate::store::Store;

pub use next_action::{loop_next_action, LiveState, NextAction};

#[derive(Debug, Serialize)]
pub struct StatusOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub state: RunState,
    pub previous_state: Option<RunState>,
    pub allowed_actions: Vec<String>,
    pub next_action: NextAction,
    pub satisfied_evidence: Vec<String>,
    pub missing_evidence: Vec<String>,
    pub live: LiveState,
    /// The run worktree's plans, when it has a plan folder.
    pub plans: Option<serde_json::Value>,
    /// The guarded paths the run changes that still need a person's approval.
    pub approval_needed: Option<Vec<String>>,
    /// Where the run's ledger, the shared notes or the target differ from a remote's copy, as
    /// far as the last fetch knows, each with its fix.
    pub sync_divergence: Vec<divergence::Divergence>,
}

pub fn status(env: &Env, run: Option<&str>) -> Result<StatusOutcome> {
    let ledger = resolve_run(env, run)?;
    status_at(&env.store, &ledger, Some(&env.cwd))
}

/// The status of a run, its commands as typed anywhere outside the run worktree.
pub fn status_of(store: &Store, ledger: &Ledger) -> Result<StatusOutcome> {
    status_at(store, ledger, None)
}

/// The status of a run, its commands runnable from `cwd` (`None`: from outside the run
/// worktree).
fn status_at(store: &Store, ledger: &Ledger, cwd: Option<&Path>) -> Result<StatusOutcome> {
    let run = &ledger.record;
    let seen = observe::observe(store, ledger, cwd)?;
    let next_action = next_action::next_action(run, &seen.live, &seen.conditions);
    let mut allowed = next_action::allowed_actions(run, &seen.live, &seen.conditions);
    // The next action already asked promote's own preconditions: agree with it.
    if next_action.action == "unblock-promote" || next_action.action == "approve" {
        allowed.retain(|a| a != "promote");
    }
    if next_action.action == "approve" {
        allowed.insert(0, "approve".into());
    }
    if next_action.action == "land" {
        allowed.insert(0, "land".into());
    }
    Ok(StatusOutcome {
        run: run.clone(),
        workspace: seen.workspace,
        state: run.state,
        previous_state: run.previous_state,
        allowed_actions: allowed,
        next_action,
        satisfied_evidence: seen.satisfied,
        approval_needed: seen.conditions.approval_needed.clone(),
        missing_evidence: seen.conditions.missing,
        plans: seen
            .worktree
            .as_ref()
            .and_then(|w| crate::lifecycle::plans::report_if_any(&w.path))
            .map(|r| r.to_json()),
        live: seen.live,
        sync_divergence: divergence::divergences(store, run)?,
    })
}
