//! `land --remote <name>`: land on the remote's target. The target and the remote's ledgers and
//! notes are fetched, the stack is built and validated locally on the remote's tip, and one
//! atomic push with leases carries the target (leased on the tip stacked on), the landed runs'
//! ledgers (leased on the remote's ledgers as fetched) and the evidence notes merged with the
//! remote's, as `promote --remote` pushes. A lease that fails is a moved target: the queue is
//! rebuilt on the new tip. Nothing local moves before the push succeeded; afterwards the
//! ledgers, run branches and notes move here too (the local target does not: it is not the
//! one that was landed on).

use crate::error::{Error, Result};
use crate::run::completion::completion_record;
use crate::store::ledger;
use crate::store::remote::fetch::{self, Tracking};
use crate::store::remote::notes_merge::NotesStep;
use crate::store::remote::push::{self, PushRef, PushResult};
use crate::store::remote::{plan_notes, record_pushed_in_tracking};
use crate::store::tx::{self, Cas};
use crate::store::Store;

use super::check::{settle, Checker, Settled};
use super::write::{promoted, results};
use super::{queue, LandOutcome, RunLanding, ROUNDS};

/// Where the fetched remote target is kept: git's own remote-tracking branch.
fn tracking_target(remote: &str, target: &str) -> String {
    let short = target.strip_prefix("refs/heads/").unwrap_or(target);
    format!("refs/remotes/{remote}/{short}")
}

/// Fetch the remote's ledgers and notes, and its target into the remote-tracking branch, in
/// one round trip.
fn fetch_all(store: &Store, remote: &str, target: &str) -> Result<gix::ObjectId> {
    let tracked = tracking_target(remote, target);
    // The target's refspec is not a pattern: a target missing there fails the fetch, which
    // git's words do not tell from other failures than those of the remote itself.
    fetch::fetch_with(store, remote, &[format!("+{target}:{tracked}")]).map_err(|e| {
        if e.kind != crate::error::ErrorKind::Internal {
            return e;
        }
        Error::not_found(format!(
            "could not fetch {target} from {remote}: {}",
            e.message
        ))
        .hint(format!("check that {target} exists on {remote}"))
    })?;
    store
        .ref_target(&tracked)?
        .ok_or_else(|| Error::internal(format!("{tracked} is missing after the fetch")))
}

/// One batch landed on the remote, rebuilt whenever a lease fails: the landings, and the runs
/// stacked after a culprit, to be landed next ([`Settled::requeued`]). `fetched`: the caller
/// has just fetched the remote's ledgers, notes and target, so the first attempt lands on what
/// they hold (a lease that fails fetches again).
pub fn land_batch(
    store: &Store,
    (remote, target, fetched): (&str, &str, bool),
    batch: &[String],
    checker: &mut Checker<'_>,
    outcome: &mut LandOutcome,
) -> Result<(Vec<RunLanding>, Vec<String>)> {
    for round in 0..ROUNDS {
        outcome.rounds += 1;
        let tip = match store.ref_target(&tracking_target(remote, target))? {
            Some(tip) if fetched && round == 0 => tip,
            _ => fetch_all(store, remote, target)?,
        };
        let queue = queue::resolve(store, target, batch)?;
        let mut out = queue.already;
        if queue.candidates.is_empty() {
            return Ok((out, Vec::new()));
        }
        let mut settled = settle(store, checker, tip, queue.candidates)?;
        let landed =
            settled.accepted.is_empty() || push_settled(store, (remote, target), tip, &settled)?;
        if landed {
            if let Some(top) = settled.accepted.last() {
                outcome.old = Some(tip.to_string());
                outcome.new = Some(top.head.to_string());
                outcome.mode = crate::model::run::PromotionMode::Remote;
            }
            let requeued = std::mem::take(&mut settled.requeued);
            out.extend(results(store, target, settled)?);
            return Ok((out, requeued));
        }
    }
    Err(Error::conflict(format!(
        "{target} on {remote} kept moving while landing: gave up after {ROUNDS} rounds"
    ))
    .hint("other machines are pushing to it; run `git tabellio land --remote` again"))
}

/// Push the landing; true when it landed, false when a lease failed (rebuild).
fn push_settled(
    store: &Store,
    (remote, target): (&str, &str),
    tip: gix::ObjectId,
    settled: &Settled,
) -> Result<bool> {
    let top = settled
        .accepted
        .last()
        .map(|s| s.head)
        .ok_or_else(|| Error::internal("nothing to push"))?;
    let tracking = Tracking::read(store, remote)?;
    let notes = plan_notes(store, &tracking, remote)?;
    let message = format!("tabellio: land on {remote}");
    let mut pushes = vec![PushRef {
        dst: target.to_string(),
        new: top,
        expect: Some(tip),
    }];
    let mut local: Vec<Cas> = Vec::new();
    for s in &settled.accepted {
        let c = &s.candidate;
        let mut next = promoted(
            target,
            tip,
            top,
            (crate::model::run::PromotionMode::Remote, Some(remote)),
            s,
        );
        next.completion = completion_record(store, &c.ledger.record, s.head)?;
        let commit = store.write_ledger_commit(Some(&c.ledger), &next, "land")?;
        let name = ledger::ref_name(c.run_id());
        pushes.push(PushRef {
            dst: name.clone(),
            new: commit,
            expect: tracking.runs.get(c.run_id()).copied(),
        });
        local.push(Cas::update(name, Some(c.ledger.tip), commit, &message));
        if s.head != c.head {
            let branch = &c.ledger.record.branch;
            local.push(Cas::update(branch, Some(c.head), s.head, &message));
        }
    }
    pushes.extend(notes.iter().filter_map(NotesStep::push));
    let landed = settled.accepted.iter().map(|s| s.candidate.run_id());
    let (queue_pushes, queue_local) =
        crate::store::queue::remote_landing_removals(store, remote, target, landed, &message)?;
    pushes.extend(queue_pushes);
    local.extend(queue_local);
    match push::push(store, remote, &pushes)? {
        PushResult::Pushed(_) => {
            record_pushed_in_tracking(store, remote, &pushes);
            record_locally(store, local, &notes, &message)?;
            Ok(true)
        }
        PushResult::LostRace(_) => Ok(false),
        PushResult::Declined { messages, .. } => Err(Error::refused(format!(
            "{remote} declined the landing: {}",
            messages.join("; ")
        ))
        .hint("nothing moved anywhere; see what the remote's hook said")),
    }
}

/// After the push: our ledgers and run branches, then our notes (a local writer may have moved
/// them meanwhile; the next sync merges them then).
fn record_locally(
    store: &Store,
    local: Vec<Cas>,
    notes: &[NotesStep],
    message: &str,
) -> Result<()> {
    tx::apply(store, &local).map_err(|e| {
        let mut err = e.into_error();
        err.message = format!("landed on the remote, but here: {}", err.message);
        err.hint("`git tabellio sync` brings the remote's ledgers of the runs")
    })?;
    let notes: Vec<Cas> = notes
        .iter()
        .filter_map(|s| s.local_update(message))
        .collect();
    let _ = tx::apply(store, &notes);
    Ok(())
}
