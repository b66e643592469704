//! `queue [--target <branch>]`: the landing queue as the refs say it is, in landing order, with
//! each entry's state and an estimate of its wait. Read-only.
//!
//! The estimate is an estimate: `land` validates up to `batch` runs together, so an entry at
//! position `p` (0-based among the waiting ones) waits about `(p / batch + 1)` validations, each
//! taken to last as long as the slowest validation of the waiting runs' own passing evidence
//! (the sum of its checks' `duration_ms`). Nothing is stored about it.

use serde::Serialize;

use crate::error::Result;
use crate::evidence::read::records_for;
use crate::model::queue::QueueEntry;
use crate::model::RunState;
use crate::run::Env;
use crate::store::queue::{self, target_short};
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// Only this target's queue (`None`: every target's).
    pub target: Option<String>,
    /// How many runs `land` validates together (for the estimate).
    pub batch: usize,
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Its run is completed: the next `land` of its target takes it in this order.
    Waiting,
    /// Its run is in another state (e.g. `validation_failed` after a landing found it failing):
    /// it keeps its place, and lands once the run is completed again.
    Blocked,
    /// Its run landed (or was abandoned, or is gone): the next `land` of the target removes it.
    Done,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueRow {
    /// 1-based, within its target, among all its entries.
    pub position: usize,
    pub target: String,
    pub run: String,
    pub state: EntryState,
    /// The run's state now (`null` when it has no ledger here).
    pub run_state: Option<RunState>,
    #[serde(rename = "ref")]
    pub name: String,
    pub entry: QueueEntry,
    /// Seconds until it is likely landed (`waiting` entries only, when an estimate exists).
    pub estimated_wait_s: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueOutcome {
    pub entries: Vec<QueueRow>,
    /// Refs under the queue that are not readable entries (name, why); never landed.
    pub unreadable: Vec<Unreadable>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    #[serde(rename = "ref")]
    pub name: String,
    pub reason: String,
}

pub fn queue(env: &Env, opts: &QueueOptions) -> Result<QueueOutcome> {
    let store = &env.store;
    let target = opts.target.as_deref().map(queue::branch_ref);
    let read = store.read_queue(target.as_deref())?;
    let mut rows: Vec<QueueRow> = Vec::new();
    for entry in read.entries {
        let ledger = store.try_find_ledger(&entry.record.run).ok().flatten();
        let run_state = ledger.as_ref().map(|l| l.record.state);
        let state = if queue::finished(store, &entry)?.is_some() {
            EntryState::Done
        } else if run_state == Some(RunState::Completed) {
            EntryState::Waiting
        } else {
            EntryState::Blocked
        };
        let target = target_short(&entry.record.target).to_string();
        let position = rows.iter().filter(|r| r.target == target).count() + 1;
        rows.push(QueueRow {
            position,
            target,
            run: entry.record.run.clone(),
            state,
            run_state,
            name: entry.name,
            entry: entry.record,
            estimated_wait_s: None,
        });
    }
    estimate(store, &mut rows, opts.batch.max(1))?;
    Ok(QueueOutcome {
        entries: rows,
        unreadable: read
            .unreadable
            .into_iter()
            .map(|(name, reason)| Unreadable { name, reason })
            .collect(),
    })
}

/// Fill `estimated_wait_s` of the waiting rows, per target (see the module docs).
fn estimate(store: &Store, rows: &mut [QueueRow], batch: usize) -> Result<()> {
    let mut per_validation: std::collections::BTreeMap<String, u64> = Default::default();
    for r in rows.iter().filter(|r| r.state == EntryState::Waiting) {
        let ms = validation_ms(store, &r.entry.head)?;
        let slowest = per_validation.entry(r.target.clone()).or_default();
        *slowest = (*slowest).max(ms);
    }
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for r in rows.iter_mut().filter(|r| r.state == EntryState::Waiting) {
        let ahead = seen.entry(r.target.clone()).or_default();
        let ms = per_validation.get(&r.target).copied().unwrap_or(0);
        r.estimated_wait_s = Some(((*ahead / batch + 1) as u64 * ms).div_ceil(1000));
        *ahead += 1;
    }
    Ok(())
}

/// How long the passing evidence on `head` took: the sum of each check's latest passing record.
fn validation_ms(store: &Store, head: &str) -> Result<u64> {
    let Ok(commit) = store.parse_oid(head) else {
        return Ok(0);
    };
    let Ok(tree) = store.tree_of(commit) else {
        return Ok(0);
    };
    let mut by_check: std::collections::BTreeMap<String, (String, u64)> = Default::default();
    for (_, rec) in records_for(store, commit, tree)? {
        let Some(rec) = rec.filter(|r| r.passed()) else {
            continue;
        };
        let slot = by_check.entry(rec.check.name.clone()).or_default();
        if rec.finished_at >= slot.0 {
            *slot = (rec.finished_at.clone(), rec.duration_ms);
        }
    }
    Ok(by_check.values().map(|(_, ms)| ms).sum())
}
