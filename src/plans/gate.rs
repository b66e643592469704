//! The plan-hygiene gate of `plans.require_hygiene`: whether the plans at a commit let a run
//! complete, and the plans at fault in a line. Read by `finish`, `status` and the loop.

use std::path::Path;

use crate::error::{Context, Result};
use crate::store::policy::policy_at;
use crate::store::Store;

pub use super::owned::OPEN_ITEMS;
use super::{PlanClass, PlanReport};

/// The plans of a worktree, when it has any plan folder at all.
pub fn report_if_any(path: &Path) -> Option<PlanReport> {
    (path.join(super::PLANS_DIR).is_dir() || path.join(super::COMPLETED_DIR).is_dir())
        .then(|| super::scan_dir(path))
}

/// The plans at `commit` when the policy there requires hygiene and they are not
/// hygiene-clean (or cannot all be read); `None` when the gate lets the commit through.
pub fn gate_report(store: &Store, commit: gix::ObjectId) -> Result<Option<PlanReport>> {
    let Some(policy) = policy_at(store, commit)? else {
        return Ok(None);
    };
    if !policy.plans.require_hygiene {
        return Ok(None);
    }
    let report = super::scan_tree(&store.repo, commit)
        .context(|| format!("could not read the plans at {commit}"))?;
    Ok((!report.hygiene_clean() || !report.errors.is_empty()).then_some(report))
}

/// The plan-hygiene gate at `commit`: `Some(reason)` when it blocks completion.
pub fn gate(store: &Store, commit: gix::ObjectId) -> Result<Option<String>> {
    Ok(gate_report(store, commit)?.map(|r| format!("plan-hygiene: {}", fault_summary(&r))))
}

/// What holds a looping run back at `commit` (its base `base`, its task text `task`): the
/// plan-hygiene gate above, then the run's own plans (see [`super::owned`]): an open item in
/// one keeps the run from completing, whether or not the agent claims DONE. The reason starts
/// `plan-hygiene:` or [`OPEN_ITEMS`]`:`.
pub fn loop_gate(
    store: &Store,
    commit: gix::ObjectId,
    base: gix::ObjectId,
    task: &str,
) -> Result<Option<String>> {
    if let Some(reason) = gate(store, commit)? {
        return Ok(Some(reason));
    }
    super::owned::open_items(&store.repo, base, commit, task)
        .context(|| format!("could not read the run's plans at {commit}"))
}

/// The name of what a gate's `reason` says is missing: `plan` or `plan-hygiene`.
pub fn missing_name(reason: &str) -> &'static str {
    if reason.starts_with(&format!("{OPEN_ITEMS}:")) {
        OPEN_ITEMS
    } else {
        "plan-hygiene"
    }
}

/// The plans at fault, in a line.
pub fn fault_summary(report: &PlanReport) -> String {
    let mut parts = Vec::new();
    let list = |class| {
        report
            .with_class(class)
            .map(|p| p.path.clone())
            .collect::<Vec<_>>()
    };
    let active = list(PlanClass::Active);
    if !active.is_empty() {
        parts.push(format!(
            "open tasks in {} (tick them or finish the work)",
            active.join(", ")
        ));
    }
    let misplaced = list(PlanClass::Misplaced);
    if !misplaced.is_empty() {
        parts.push(format!(
            "misplaced plans {} (`git tabellio plans reconcile`)",
            misplaced.join(", ")
        ));
    }
    for e in &report.errors {
        parts.push(format!("{}: {}", e.path(), e.message()));
    }
    parts.join("; ")
}
