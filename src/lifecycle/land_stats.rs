//! `land --stats [--target <branch>]`: how landing has gone, from refs and notes only (the run
//! ledgers, the target's first-parent history and every evidence record). Read-only.
//!
//! - time in queue: per run landed on the target, from its passing validation (the last passing
//!   attempt of its ledger) to its landing (`promotion.at`), p50 and p95;
//! - executions: evidence records of checks that ran (not `reused_from` another), per landed
//!   run; the reuse ratio is the share of records that reused another instead of running;
//! - wasted executions: passing executions on trees the target never held and no run's
//!   validated head has: stacks invalidated before they could land (failing ones isolated a
//!   culprit, and are not counted as waste);
//! - flaky passes: a tree and check definition with both passing and failing records.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::Result;
use crate::model::allowed_signers::parse_rfc3339_utc;
use crate::model::run::AttemptStatus;
use crate::model::{EvidenceRecord, RunState};
use crate::run::Env;
use crate::store::notes::EVIDENCE;
use crate::store::queue::branch_ref;
use crate::store::Store;

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p95: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LandStats {
    pub target: String,
    /// Runs landed (or promoted) on the target.
    pub landed: usize,
    /// Seconds from a run's passing validation to its landing (`null` with nothing landed).
    pub time_in_queue_s: Option<Percentiles>,
    /// Checks executed (every record that reused no other).
    pub executions: usize,
    pub executions_per_landed_run: Option<f64>,
    /// Records that reused another's result, and their share of all records.
    pub reused: usize,
    pub reuse_ratio: Option<f64>,
    pub wasted_executions: usize,
    pub flaky_passes: usize,
}

pub fn land_stats(env: &Env, target: &str) -> Result<LandStats> {
    let store = &env.store;
    let target = branch_ref(target);
    let mut waits: Vec<u64> = Vec::new();
    let mut heads: BTreeSet<String> = BTreeSet::new();
    for ledger in store.readable_ledgers()? {
        let rec = &ledger.record;
        if let Some(v) = &rec.validated {
            heads.insert(v.tree.clone());
        }
        let Some(p) = rec.promotion.as_ref().filter(|p| p.target == target) else {
            continue;
        };
        if rec.state != RunState::Promoted {
            continue;
        }
        let passed = rec
            .attempts
            .iter()
            .rev()
            .find(|a| a.status == AttemptStatus::Passed)
            .and_then(|a| parse_rfc3339_utc(&a.at));
        if let (Some(from), Some(to)) = (passed, parse_rfc3339_utc(&p.at)) {
            waits.push((to - from).max(0) as u64);
        }
        // A landed run's attempts hold the tree it was validated with.
        for a in &rec.attempts {
            heads.insert(a.tree.clone());
        }
    }
    let landed_trees = target_trees(store, &target)?;
    let mut records: BTreeMap<String, EvidenceRecord> = BTreeMap::new();
    for line in store.all_note_lines(EVIDENCE)? {
        if let Ok(rec) = EvidenceRecord::from_line(&line) {
            records.insert(rec.digest.clone(), rec);
        }
    }
    let (mut executions, mut reused, mut wasted) = (0, 0, 0);
    let mut outcomes: BTreeMap<(String, String), (bool, bool)> = BTreeMap::new();
    for rec in records.values() {
        let slot = outcomes
            .entry((rec.tree.clone(), rec.check.digest.clone()))
            .or_default();
        if rec.passed() {
            slot.0 = true;
        } else {
            slot.1 = true;
        }
        if rec.reused_from.is_some() {
            reused += 1;
            continue;
        }
        executions += 1;
        if rec.passed() && !landed_trees.contains(&rec.tree) && !heads.contains(&rec.tree) {
            wasted += 1;
        }
    }
    let landed = waits.len();
    let total = executions + reused;
    Ok(LandStats {
        target,
        landed,
        time_in_queue_s: percentiles(&mut waits),
        executions,
        executions_per_landed_run: (landed > 0).then(|| executions as f64 / landed as f64),
        reused,
        reuse_ratio: (total > 0).then(|| reused as f64 / total as f64),
        wasted_executions: wasted,
        flaky_passes: outcomes.values().filter(|(p, f)| *p && *f).count(),
    })
}

/// The trees of the target's first-parent history.
fn target_trees(store: &Store, target: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut next = store.ref_target(target)?;
    while let Some(id) = next {
        let commit = store.commit(id)?;
        out.insert(store.tree_of(id)?.to_string());
        next = commit.parent_ids().next().map(|p| p.detach());
    }
    Ok(out)
}

fn percentiles(values: &mut [u64]) -> Option<Percentiles> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    // Nearest rank.
    let at = |p: usize| values[((p * values.len()).div_ceil(100)).saturating_sub(1)];
    Some(Percentiles {
        p50: at(50),
        p95: at(95),
    })
}
