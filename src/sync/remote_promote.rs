//! `git tabellio promote <run> --remote <name>`: promote on the server instead of locally.
//!
//! The run's own preconditions are the local ones ([`crate::run::promotion::check_validated`]: state,
//! run branch head, evidence re-read and digest-checked); the target is the remote's. One atomic
//! push carries the validated commit onto the remote target (leased on the frozen base), the
//! run's `promoted` ledger commit (leased on the remote's ledger as fetched) and our evidence
//! and checkpoint notes merged with the remote's (leased too), so a server hook that checks
//! evidence finds it in the same push. Nothing local moves before the push succeeded: a push
//! that loses to a moved target leaves the run `completed` here and on the remote (exit 4).

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::run::Promotion;
use crate::model::{time, RunRecord, RunState};
use crate::run::{resolve_run, run_workspace, Env};
use crate::store::ledger::{self, Ledger};
use crate::store::tx::{self, Cas, TxError};
use crate::store::Store;

use super::fetch::{self, Tracking};
use super::notes_merge::NotesStep;
use super::push::{self, PushRef, PushResult, PushedRef};
use super::MAX_ROUNDS;
use crate::store::backoff::REMOTE_ROUNDS;

#[derive(Debug, Clone, Serialize)]
pub struct RemotePromoteOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub remote: String,
    pub target: String,
    pub old: String,
    pub new: String,
    pub dry_run: bool,
    /// The run was promoted before this call: nothing was done.
    pub already_promoted: bool,
    pub rounds: u32,
    pub pushed: Vec<PushedRef>,
    /// The server declined the push (its hook said no): what it said. Nothing moved anywhere.
    pub declined: Option<Vec<String>>,
    /// True when a local writer moved our notes while we pushed: they lack the remote's
    /// records until the next sync merges them.
    pub local_notes_behind: bool,
    /// Why the verification summary of the new tip was not noted and pushed, if it was not
    /// (the promotion stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_warning: Option<String>,
}

pub fn promote_remote(
    env: &Env,
    run: Option<&str>,
    remote: &str,
    dry_run: bool,
) -> Result<RemotePromoteOutcome> {
    let store = &env.store;
    let ledger = resolve_run(env, run)?;
    let workspace = run_workspace(store, &ledger)?;
    let rec = &ledger.record;
    let outcome = |run: RunRecord, target: String, old: String, new: String| RemotePromoteOutcome {
        run,
        workspace: workspace.clone(),
        remote: remote.to_string(),
        target,
        old,
        new,
        dry_run,
        already_promoted: false,
        rounds: 0,
        pushed: Vec::new(),
        declined: None,
        local_notes_behind: false,
        summary_warning: None,
    };
    if rec.state == RunState::Promoted {
        let p = rec.promotion.clone();
        let mut o = outcome(
            rec.clone(),
            p.as_ref()
                .map_or(rec.base.reference.clone(), |p| p.target.clone()),
            p.as_ref().map_or_else(String::new, |p| p.old.clone()),
            p.as_ref().map_or_else(String::new, |p| p.new.clone()),
        );
        o.already_promoted = true;
        return Ok(o);
    }
    // Everything about the run itself is checked before the network is touched.
    let (target, validated, base) = check_run_side(store, rec, remote)?;
    fetch::check_remote(store, remote)?;

    let mut result = outcome(
        rec.clone(),
        target.clone(),
        base.to_string(),
        validated.to_string(),
    );
    for round in 1..=MAX_ROUNDS {
        result.rounds = round;
        let at_validated = check_remote_target(store, remote, &target, base, validated)?;
        if at_validated {
            return adopt_remote_promotion(store, remote, &ledger, (&target, validated), result);
        }
        if dry_run {
            return Ok(result);
        }
        fetch::fetch(store, remote)?;
        let tracking = Tracking::read(store, remote)?;
        let remote_ledger = check_remote_ledger(store, remote, &ledger, &tracking)?;
        let notes = super::plan_notes(store, &tracking, remote)?;

        let next = promoted(store, rec, remote, &target, (base, validated))?;
        let ledger_commit = store.write_ledger_commit(Some(&ledger), &next, "promote")?;
        let mut pushes = vec![
            PushRef {
                dst: target.clone(),
                new: validated,
                expect: Some(base),
            },
            PushRef {
                dst: ledger::ref_name(&rec.run_id),
                new: ledger_commit,
                expect: remote_ledger,
            },
        ];
        pushes.extend(notes.iter().filter_map(NotesStep::push));
        match push::push(store, remote, &pushes)? {
            PushResult::Pushed(refs) => {
                super::record_pushed_in_tracking(store, remote, &pushes);
                result.pushed = refs;
                result.local_notes_behind =
                    record_locally(store, &ledger, ledger_commit, &notes, remote)?;
                result.summary_warning = crate::run::vsa::publish_summary(
                    store,
                    remote,
                    &target,
                    (base, validated),
                    None,
                )
                .err()
                .map(|e| e.message);
                result.run = next;
                return Ok(result);
            }
            PushResult::LostRace(refs) => {
                // Maybe the target moved (the next round's check says so, exit 4), maybe only
                // the notes did (the next round merges them again).
                result.pushed = refs;
                if round < MAX_ROUNDS {
                    REMOTE_ROUNDS.sleep(round);
                }
            }
            PushResult::Declined { refs, messages } => {
                result.pushed = refs;
                result.declined = Some(messages);
                return Ok(result);
            }
        }
    }
    Err(Error::conflict(format!(
        "{remote} kept changing for {MAX_ROUNDS} attempts; nothing was promoted and run {} is still completed",
        rec.run_id
    ))
    .hint(format!(
        "other machines are pushing to {remote} right now: run `git tabellio sync {remote}` (merges their notes and ledgers) and promote again"
    )))
}

/// The record of `rec` promoted through `remote`: `target` moved from `old` to `new`.
fn promoted(
    store: &Store,
    rec: &RunRecord,
    remote: &str,
    target: &str,
    (old, new): (gix::ObjectId, gix::ObjectId),
) -> Result<RunRecord> {
    let mut next = ledger::transition(rec, RunState::Promoted);
    next.promotion = Some(Promotion {
        target: target.to_string(),
        old: old.to_string(),
        new: new.to_string(),
        mode: crate::model::run::PromotionMode::Remote,
        remote: Some(remote.to_string()),
        at: time::now(),
    });
    next.completion = crate::run::completion::completion_record(store, rec, new)?;
    Ok(next)
}

/// The remote's target is already at the validated commit. When that is this run's own
/// promotion — its push landed but the answer never came back (the connection broke after the
/// server updated its refs) — the remote's ledger of the run says so: ours fast-forwards to it
/// and our notes take the remote's as sync would, so running the same command again converges.
/// Anything else is for `sync` and a person to look at.
fn adopt_remote_promotion(
    store: &Store,
    remote: &str,
    ledger: &Ledger,
    (target, validated): (&str, gix::ObjectId),
    mut result: RemotePromoteOutcome,
) -> Result<RemotePromoteOutcome> {
    let id = &ledger.record.run_id;
    let not_ours = || {
        Error::conflict(format!(
            "{target} on {remote} is already at the validated commit {validated}, but this run's ledger here does not say promoted"
        ))
        .hint(format!(
            "`git tabellio sync {remote}` brings the remote's ledger of the run"
        ))
    };
    if result.dry_run {
        return Err(not_ours());
    }
    fetch::fetch(store, remote)?;
    let tracking = Tracking::read(store, remote)?;
    let Some(theirs) = tracking.runs.get(id).copied() else {
        return Err(not_ours());
    };
    if !store.is_ancestor(ledger.tip, theirs)? {
        return Err(not_ours());
    }
    let record = store.read_ledger_record(id, theirs)?;
    let validated_hex = validated.to_string();
    let ours = record.state == RunState::Promoted
        && record
            .promotion
            .as_ref()
            .is_some_and(|p| p.target == target && p.new == validated_hex);
    if !ours {
        return Err(not_ours());
    }
    let message = format!("tabellio: promote {id} on {remote} (landed earlier)");
    let notes = super::plan_notes(store, &tracking, remote)?;
    let mut edits = vec![Cas::update(
        ledger::ref_name(id),
        Some(ledger.tip),
        theirs,
        &message,
    )];
    edits.extend(notes.iter().filter_map(|s| s.local_update(&message)));
    tx::apply(store, &edits).map_err(|e| {
        let err = e.into_error();
        let hint = format!("`git tabellio sync {remote}` brings the remote's ledger of the run");
        Error::new(
            err.kind,
            format!(
                "run {id} was promoted on {remote}, but its ledger or notes here changed meanwhile: {}",
                err.message
            ),
        )
        .hint(hint)
    })?;
    result.run = record;
    result.already_promoted = true;
    Ok(result)
}

/// The run's own preconditions of a remote promotion (as a local one, plus the approval its
/// guarded changes need as the remote's last fetched tip sees them): the target, the validated
/// commit and the base.
fn check_run_side(
    store: &Store,
    rec: &RunRecord,
    remote: &str,
) -> Result<(String, gix::ObjectId, gix::ObjectId)> {
    let (target, validated) = crate::run::promotion::check_validated(store, rec)?;
    let base = store.parse_oid(&rec.base.commit)?;
    // Guarded as the remote's tip we last fetched says, else as the base does.
    let tracking = target
        .strip_prefix("refs/heads/")
        .map(|b| format!("refs/remotes/{remote}/{b}"));
    let gating = match &tracking {
        Some(t) => store.ref_target(t)?,
        None => None,
    };
    crate::run::promotion::check_approved(store, rec, gating, validated)?;
    if !store.is_ancestor(base, validated)? {
        return Err(Error::refused(format!(
            "the validated commit {validated} does not descend from the base {base}"
        ))
        .hint("promote only fast-forwards; rebase the run onto its base"));
    }
    Ok((target, validated, base))
}

/// The remote's target must still be the frozen base (false), or already be the validated
/// commit (true: [`adopt_remote_promotion`] looks whose promotion that was).
fn check_remote_target(
    store: &Store,
    remote: &str,
    target: &str,
    base: gix::ObjectId,
    validated: gix::ObjectId,
) -> Result<bool> {
    let found = fetch::ls_remote(store, remote, &[target])?;
    let current = found.get(target).map(String::as_str);
    let (base_hex, validated_hex) = (base.to_string(), validated.to_string());
    if current == Some(base_hex.as_str()) {
        return Ok(false);
    }
    let Some(current) = current else {
        return Err(Error::conflict(format!(
            "target moved: {target} does not exist on {remote}; the run started from {base}"
        ))
        .hint(format!(
            "push the target branch to {remote} first, or promote locally"
        )));
    };
    if current == validated_hex {
        return Ok(true);
    }
    Err(Error::conflict(format!(
        "target moved: {target} on {remote} is at {current}, the run started from {base}"
    ))
    .hint(format!(
        "promote only fast-forwards: `git tabellio land <run> --remote {remote}` restacks the run onto the remote's tip, validates it and pushes"
    )))
}

/// The remote's ledger of the run must be ours or behind ours; returns its value (the lease).
fn check_remote_ledger(
    store: &Store,
    remote: &str,
    ledger: &Ledger,
    tracking: &Tracking,
) -> Result<Option<gix::ObjectId>> {
    let id = &ledger.record.run_id;
    let Some(theirs) = tracking.runs.get(id).copied() else {
        return Ok(None);
    };
    if theirs == ledger.tip || store.is_ancestor(theirs, ledger.tip)? {
        return Ok(Some(theirs));
    }
    let their_state = store
        .read_run_json(theirs)
        .map(|r| r.state.as_str().to_string())
        .unwrap_or_else(|_| "unreadable".into());
    if store.is_ancestor(ledger.tip, theirs)? {
        return Err(Error::conflict(format!(
            "the ledger of run {id} on {remote} is ahead of ours (it says {their_state})"
        ))
        .hint(format!(
            "`git tabellio sync {remote}` brings it here; then `git tabellio status {id}`"
        )));
    }
    Err(Error::conflict(format!(
        "the ledger of run {id} diverged: {} here, {their_state} on {remote}",
        ledger.record.state
    ))
    .hint(format!(
        "`git tabellio sync {remote}` shows both; decide which one stands"
    )))
}

/// After the push: our ledger to the pushed commit and our notes to the pushed notes. The notes
/// may have moved meanwhile (a local finish): then only the ledger moves, and the next sync
/// merges the notes. Returns true in that case.
fn record_locally(
    store: &Store,
    ledger: &Ledger,
    ledger_commit: gix::ObjectId,
    notes: &[NotesStep],
    remote: &str,
) -> Result<bool> {
    let message = format!("tabellio: promote {} on {remote}", ledger.record.run_id);
    let ledger_cas = Cas::update(
        ledger::ref_name(&ledger.record.run_id),
        Some(ledger.tip),
        ledger_commit,
        &message,
    );
    let mut edits = vec![ledger_cas.clone()];
    edits.extend(notes.iter().filter_map(|s| s.local_update(&message)));
    let lost = |e: TxError| {
        let mut err = e.into_error();
        err.message = format!(
            "run {} was promoted on {remote}, but its ledger here changed meanwhile: {}",
            ledger.record.run_id, err.message
        );
        err.hint(format!(
            "`git tabellio sync {remote}` reports both ledgers of the run"
        ))
    };
    match tx::apply(store, &edits) {
        Ok(()) => Ok(false),
        Err(TxError::Moved { name, .. } | TxError::Locked { name, .. })
            if name.starts_with("refs/notes/") =>
        {
            tx::apply(store, &[ledger_cas]).map_err(lost)?;
            Ok(true)
        }
        Err(e) => Err(lost(e)),
    }
}
