//! The completion record of a landing run (shared by `promote`, `land` and `promote --remote`):
//! the items of the run's own plans at the commit it lands as, done or open, and for each done
//! one the evidence that backs it — the first commit of the run that was validated with the
//! item done (a passing attempt, in attempt order, else the landed commit itself) and the
//! record that satisfied each check there. Read only; the caller writes it with the ledger.

use std::collections::BTreeSet;

use crate::error::{Context, Result};
use crate::evidence::judge::{evaluate, Verdict};
use crate::evidence::requirements::{required_at, Claim, Requirement};
use crate::model::completion::{Backing, BackingRecord, Completion, CompletionItem};
use crate::model::run::AttemptStatus;
use crate::model::RunRecord;
use crate::plans::owned::{plans_named, run_plans, OwnedPlan};
use crate::store::Store;

/// The completion record of `run` landing as `landed`; `None` when the run has no plan.
pub fn completion_record(
    store: &Store,
    run: &RunRecord,
    landed: gix::ObjectId,
) -> Result<Option<Completion>> {
    let repo = &store.repo;
    let base = store.parse_oid(&run.base.commit)?;
    // Which plans are the run's is decided on its own work (its validated commit), not on a
    // restacked copy, whose difference from the old base holds what others landed meanwhile.
    let own_head = match &run.validated {
        Some(v) => store.parse_oid(&v.commit)?,
        None => landed,
    };
    let read = |at: &str| format!("could not read the plans of run {} at {at}", run.run_id);
    let own = run_plans(repo, base, own_head, &run.task.text).context(|| read("its head"))?;
    if own.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = own.iter().map(OwnedPlan::name).collect();
    let at_landed = plans_named(repo, landed, &names).context(|| read("the landed commit"))?;

    // Where each done item could be backed, in the order it was validated.
    let mut candidates: Vec<(gix::ObjectId, Vec<Requirement>)> = Vec::new();
    for a in run
        .attempts
        .iter()
        .filter(|a| a.status == AttemptStatus::Passed)
    {
        let reqs = a
            .checks
            .iter()
            .map(|c| Requirement::new(c.name.clone(), Some(c.digest.clone())))
            .collect();
        candidates.push((store.parse_oid(&a.commit)?, reqs));
    }
    candidates.push((
        landed,
        required_at(store, landed, Claim::Promotion(run)).map_err(crate::error::Error::from)?,
    ));
    let mut backings: Vec<(BTreeSet<(String, String)>, Backing)> = Vec::new();
    for (commit, reqs) in candidates {
        if reqs.is_empty() {
            continue;
        }
        let verdicts = evaluate(store, commit, &reqs)?;
        if verdicts.iter().any(|v| v.verdict != Verdict::Satisfied) {
            continue;
        }
        let done = plans_named(repo, commit, &names)
            .context(|| read(&commit.to_string()))?
            .iter()
            .flat_map(|p| {
                p.tasks
                    .iter()
                    .filter(|t| t.done)
                    .map(|t| (p.name().to_string(), t.text.clone()))
            })
            .collect();
        let evidence = verdicts
            .into_iter()
            .map(|v| BackingRecord {
                check: v.name,
                record: v.record.unwrap_or_default(),
            })
            .collect();
        backings.push((
            done,
            Backing {
                commit: commit.to_string(),
                evidence,
            },
        ));
    }

    let mut items = Vec::new();
    for plan in &at_landed {
        for t in &plan.tasks {
            let key = (plan.name().to_string(), t.text.clone());
            let backed_by = t
                .done
                .then(|| backings.iter().find(|(done, _)| done.contains(&key)))
                .flatten()
                .map(|(_, b)| b.clone());
            items.push(CompletionItem {
                plan: plan.path.clone(),
                task: t.text.clone(),
                done: t.done,
                backed_by,
            });
        }
    }
    let done = items.iter().filter(|i| i.done).count();
    Ok(Some(Completion {
        commit: landed.to_string(),
        plans: at_landed.iter().map(|p| p.path.clone()).collect(),
        open: items.len() - done,
        done,
        items,
    }))
}
