//! Step 3 of sync: reconcile run ledgers with the remote's, never rewriting either side.
//!
//! A ledger is a commit chain extended only by compare-and-swap, so two ledgers of one run are
//! either the same, one ahead of the other, or diverged (two machines moved the same run). The
//! first three reconcile by fast-forward in one direction; a diverged run is reported with both
//! states and left alone on both sides, for a person to decide.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::Result;
use crate::model::ids::check_run_id;
use crate::store::ledger;
use crate::store::tx::Cas;
use crate::store::Store;

use super::push::PushRef;

/// What sync does with one run's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerAction {
    UpToDate,
    /// Only the remote has the run: our ledger is created at its value.
    Created,
    /// Ours is an ancestor of the remote's: ours moves forward.
    FastForwarded,
    /// The remote's is an ancestor of ours: ours is left as it is and pushed.
    Left,
    /// Only we have the run: it is pushed.
    LocalOnly,
    /// Both moved: nothing is written on either side.
    Diverged,
    /// The remote's ledger is not one we can take (bad run id, no readable `run.json`).
    Ignored,
}

/// The plan for one run.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerStep {
    pub run: String,
    pub action: LedgerAction,
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub local: Option<gix::ObjectId>,
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub remote: Option<gix::ObjectId>,
    /// For a diverged run: the state on each side; for an ignored one: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LedgerStep {
    /// The compare-and-swap on our ledger, if it moves.
    pub fn local_update(&self, message: &str) -> Option<Cas> {
        match (self.action, self.remote) {
            (LedgerAction::Created | LedgerAction::FastForwarded, Some(remote)) => Some(
                Cas::update(ledger::ref_name(&self.run), self.local, remote, message),
            ),
            _ => None,
        }
    }

    /// The push of our ledger, if the remote's moves.
    pub fn push(&self) -> Option<PushRef> {
        match (self.action, self.local) {
            (LedgerAction::Left | LedgerAction::LocalOnly, Some(local)) => Some(PushRef {
                dst: ledger::ref_name(&self.run),
                new: local,
                expect: self.remote,
            }),
            _ => None,
        }
    }
}

/// Plan every run in `local` ∪ `remote` (run id → ledger tip).
pub fn plan(
    store: &Store,
    local: &BTreeMap<String, gix::ObjectId>,
    remote: &BTreeMap<String, gix::ObjectId>,
) -> Result<Vec<LedgerStep>> {
    let runs: BTreeSet<&String> = local.keys().chain(remote.keys()).collect();
    let mut out = Vec::with_capacity(runs.len());
    for run in runs {
        let (l, r) = (local.get(run).copied(), remote.get(run).copied());
        let mut step = LedgerStep {
            run: run.clone(),
            action: LedgerAction::UpToDate,
            local: l,
            remote: r,
            local_state: None,
            remote_state: None,
            reason: None,
        };
        step.action = match (l, r) {
            (None, None) => continue,
            (Some(_), None) => LedgerAction::LocalOnly,
            (None, Some(r)) => match acceptable(store, run, r) {
                Ok(()) => LedgerAction::Created,
                Err(why) => {
                    step.reason = Some(why);
                    LedgerAction::Ignored
                }
            },
            (Some(l), Some(r)) if l == r => LedgerAction::UpToDate,
            (Some(l), Some(r)) if store.is_ancestor(r, l)? => LedgerAction::Left,
            (Some(l), Some(r)) if store.is_ancestor(l, r)? => match acceptable(store, run, r) {
                Ok(()) => LedgerAction::FastForwarded,
                Err(why) => {
                    step.reason = Some(why);
                    LedgerAction::Ignored
                }
            },
            (Some(l), Some(r)) => {
                step.local_state = state_of(store, l);
                step.remote_state = state_of(store, r);
                LedgerAction::Diverged
            }
        };
        out.push(step);
    }
    Ok(out)
}

/// A remote ledger we take in must be a run we can read: a valid id and a `run.json` of a
/// schema we know, naming the same run.
fn acceptable(store: &Store, run: &str, tip: gix::ObjectId) -> Result<(), String> {
    check_run_id(run).map_err(|why| format!("invalid run id: {why}"))?;
    let record = store.read_run_json(tip).map_err(|e| e.message)?;
    if record.run_id != run {
        return Err(format!(
            "its run.json names run {:?}, not {run:?}",
            record.run_id
        ));
    }
    Ok(())
}

fn state_of(store: &Store, tip: gix::ObjectId) -> Option<String> {
    store
        .read_run_json(tip)
        .ok()
        .map(|r| r.state.as_str().to_string())
}
