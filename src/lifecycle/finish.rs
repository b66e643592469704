//! `finish`: run the validation checks in the run worktree and record the attempt.
//!
//! Nothing is written while checks run: a finish killed at any moment leaves the run exactly as
//! it was, finishable again. Afterwards the attempt goes into the ledger and the evidence records
//! onto the validated commit and its tree, in one transaction.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::judge::evaluate;
use crate::evidence::judge::inherits_failures;
use crate::evidence::produce::{
    drop_not_asked, resolve_checks, run_checks, CheckContext, CheckSelection,
};
use crate::evidence::requirements::{required_at, Claim, Requirement};
use crate::evidence::sign::{kind_proven_by, refuse_uncountable, JudgedAt, RecordSigner};
use crate::model::evidence::set_digest;
use crate::model::run::{Attempt, AttemptCheck, Validated};
use crate::model::{time, EvidenceRecord, RunRecord, RunState};
use crate::runner::Stream;
use crate::store::ledger::{self, Ledger};
use crate::store::notes::EVIDENCE;
use crate::store::Store;

use crate::run::workspace::workspace_with_work;
use crate::run::{resolve_run, Env};

#[derive(Debug, Serialize)]
pub struct FinishOutcome {
    pub run: RunRecord,
    pub workspace: PathBuf,
    pub attempt: Attempt,
    pub evidence: Vec<EvidenceRecord>,
    /// Every execution of a check on the head's tree, this attempt's and earlier ones, each
    /// with its attempt number: a pass now never hides a failure before.
    pub executions: Vec<crate::evidence::history::Execution>,
    /// Each failing check of this attempt, explained from the evidence in the notes.
    pub failures: Vec<crate::evidence::explain::FailureExplanation>,
}

impl FinishOutcome {
    pub fn passed(&self) -> bool {
        self.run.state == RunState::Completed
    }
}

/// What `finish` is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct FinishOptions<'a> {
    /// The run, or `None` for the one whose worktree the command runs in.
    pub run: Option<&'a str>,
    /// The checks: the policy's required ones, some of them, or an ad-hoc command.
    pub checks: &'a CheckSelection,
    /// Where the checks' output and progress go.
    pub stream: Stream,
}

pub fn finish(env: &Env, opts: &FinishOptions<'_>) -> Result<FinishOutcome> {
    let FinishOptions {
        run,
        checks: sel,
        stream,
    } = *opts;
    let store = &env.store;
    // The preconditions only read: each ref (the run worktree's `HEAD` above all) once. What
    // is read after the checks ran is read afresh.
    let (ledger, path, head) = store.snapshot_refs(|| finishable(env, run))?;
    let rec = &ledger.record;
    let (checks, cap) = resolve_checks(store, head, sel)?;
    let provenance = crate::model::provenance::Provenance::of_run(rec);
    let plans_gate = crate::plans::gate::gate(store, head)?;
    // The evidence is written after the checks run: a compression level it could not be
    // written with is refused before they start.
    store.loose_compression()?;
    // The principal is the one the target's allowed signers grant the key: those judge it.
    let target_tip = store.ref_target(&rec.base.reference)?;
    let signer = RecordSigner::resolve(store, sel.sign_key.as_deref(), sel.no_sign, target_tip)?;
    // A required check with `when` runs unless the records this finish writes prove, as the
    // gates will judge them, that it is not asked of this run's actor.
    let kind = kind_proven_by(
        store,
        signer.as_ref(),
        (target_tip, head),
        &provenance.actor,
    )?;
    let (checks, not_asked) = drop_not_asked(checks, sel, kind.as_deref());
    // Records promote would refuse for their signature are refused now, before any check runs:
    // finishing again would only make the same ones.
    let label = short_ref(&rec.base.reference);
    let again = format!("git tabellio finish {}", rec.run_id);
    refuse_uncountable(
        store,
        signer.as_ref(),
        target_tip.map(|commit| JudgedAt {
            commit,
            label,
            again: &again,
            run: Some(&rec.run_id),
        }),
        checks.iter().map(|c| c.name.as_str()),
        sel.no_sign,
    )?;
    crate::evidence::sign::refuse_misattributed(
        store,
        signer.as_ref(),
        target_tip,
        &provenance.actor,
    )?;

    let ctx = CheckContext {
        store,
        worktree: &path,
        run_id: Some(&rec.run_id),
        commit: head,
        branch: Some(&rec.branch),
        excerpt_cap: cap,
        stream,
        reuse: sel.reuse,
        signer: signer.as_ref(),
        signing_env: crate::runner::SigningEnv::Inherit,
        provenance: Some(&provenance),
        left: None,
    };
    let records = run_checks(&ctx, &checks)?;
    // Checks chosen by hand (`--check`, or an ad-hoc command) do not complete a run whose
    // policy requires others: the policy's required checks must pass too, in this attempt or
    // in evidence already noted on this commit.
    let gate = match required_gap(store, head, target_tip, &records, &not_asked)? {
        Some(gap) => Some(gap),
        None => plans_gate,
    };

    let (attempt, next) = record_attempt(
        store,
        &ledger,
        NewAttempt {
            head,
            records: &records,
            gate,
            command: "finish",
        },
        |completed| {
            if completed {
                RunState::Completed
            } else {
                RunState::ValidationFailed
            }
        },
        |_| {},
    )?;
    let next = next.record;
    let failing: Vec<(String, String)> = records
        .iter()
        .filter(|r| !r.passed())
        .map(|r| (r.check.name.clone(), r.check.digest.clone()))
        .collect();
    let mut failures = crate::evidence::explain::explain(store, target_tip, &failing)?;
    crate::evidence::explain::name_new_failures(store, target_tip, &records, &mut failures)?;
    Ok(FinishOutcome {
        failures,
        executions: crate::evidence::history::executions_on(store, head)?,
        run: next,
        workspace: path,
        attempt,
        evidence: records,
    })
}

/// The run `run` names, if `finish` may validate it, with its worktree and the commit there.
fn finishable(env: &Env, run: Option<&str>) -> Result<(Ledger, PathBuf, gix::ObjectId)> {
    let ledger = resolve_run(env, run)?;
    let rec = &ledger.record;
    if !matches!(
        rec.state,
        RunState::Active
            | RunState::ValidationFailed
            | RunState::Completed
            | RunState::Blocked
            | RunState::Reopened
    ) {
        return Err(Error::refused(format!(
            "run {} is {}; finish needs an active, failed, blocked, reopened or completed run",
            rec.run_id, rec.state
        ))
        .hint(if rec.state == RunState::Looping {
            "a loop is driving this run: `git tabellio loop --resume`"
        } else {
            "a promoted or abandoned run is over"
        }));
    }
    let (path, head) = workspace_with_work(env, &ledger)?;
    refuse_standing_refusal(rec, head)?;
    Ok((ledger, path, head))
}

/// A run `land` refused, unchanged since: finishing it again would validate the same commit
/// on the same old base, say `completed`, and the next `land` would refuse it the same way.
fn refuse_standing_refusal(rec: &RunRecord, head: gix::ObjectId) -> Result<()> {
    let Some(refusal) = rec.standing_refusal(Some(&head.to_string())) else {
        return Ok(());
    };
    let id = &rec.run_id;
    Err(Error::refused(format!(
        "land refused run {id} ({}) and nothing changed since: finishing it again would validate the same commit on its old base and change nothing",
        refusal.describe()
    ))
    .hint(format!(
        "reopen it onto the tip of {}, where it is repaired and validated: `git tabellio reopen {id}`",
        short_ref(&refusal.target)
    )))
}

/// `main` for `refs/heads/main`: the branch as a person names it.
fn short_ref(name: &str) -> &str {
    name.strip_prefix("refs/heads/").unwrap_or(name)
}

/// The policy's required checks at `head` that neither `records` (this attempt) nor the
/// evidence already noted on `head` satisfy: `Some(reason)` when there are any.
fn required_gap(
    store: &Store,
    head: gix::ObjectId,
    target_tip: Option<gix::ObjectId>,
    records: &[EvidenceRecord],
    not_asked: &[String],
) -> Result<Option<String>> {
    let mut reqs = required_at(store, head, Claim::Policy)?;
    reqs.retain(|r| !not_asked.contains(&r.name));
    if reqs.is_empty() {
        return Ok(None);
    }
    // Failing tests the target's tip has count as inherited where the policy allows it.
    let reqs = crate::evidence::requirements::with_baselines(store, reqs, target_tip)?;
    let satisfied_now = |r: &Requirement| {
        records.iter().any(|rec| {
            rec.check.name == r.name
                && r.digest.as_deref().is_none_or(|d| d == rec.check.digest)
                && (rec.passed()
                    || crate::evidence::judge::judge(rec, r, &rec.commit, &rec.tree)
                        == crate::evidence::judge::Verdict::NoNewFailures)
        })
    };
    // A check the notes prove is not asked has no verdict.
    let before = evaluate(store, head, &reqs)?;
    let missing: Vec<String> = reqs
        .iter()
        .filter(|r| !satisfied_now(r) && before.iter().any(|v| v.name == r.name && !v.satisfies()))
        .map(|r| r.name.clone())
        .collect();
    Ok((!missing.is_empty()).then(|| {
        format!(
            "required checks not passed: {} (the policy at the run head requires them; `git tabellio finish` runs them)",
            missing.join(", ")
        )
    }))
}

/// The attempt [`record_attempt`] records.
pub struct NewAttempt<'a> {
    /// The validated commit.
    pub head: gix::ObjectId,
    /// Its sealed evidence records.
    pub records: &'a [EvidenceRecord],
    /// The plan-hygiene gate: `Some(reason)` keeps the run from completing.
    pub gate: Option<String>,
    /// Names the transition in the ledger commit's message.
    pub command: &'a str,
}

/// Record one validation attempt of `head`: the attempt (and, when every check passed and
/// `gate` is `None`, the validated commit) in a new ledger commit on top of `ledger`, and the
/// evidence records as notes on `head` and on its tree, in one transaction. `state` picks the
/// run's state from whether the attempt completed the run; `update` may change the new record
/// further before it is written (the loop records its phase transition in the same commit).
/// Shared by `finish` and the harness loop, so both record evidence the same way.
pub fn record_attempt(
    store: &Store,
    ledger: &Ledger,
    new: NewAttempt<'_>,
    state: impl FnOnce(bool) -> RunState,
    update: impl FnOnce(&mut RunRecord),
) -> Result<(Attempt, Ledger)> {
    let NewAttempt {
        head,
        records,
        gate,
        command,
    } = new;
    let rec = &ledger.record;
    let tree = store.tree_of(head)?;
    // A reopened run's conflict markers must be gone from what it validates: checks that do
    // not read those files would pass them.
    let markers = crate::run::reopen::conflicts_remaining(store, rec, None, Some(head))?;
    let gate = match gate {
        None if !markers.is_empty() => Some(format!(
            "conflict markers remain in {}: resolve them, commit, then validate again",
            markers.join(", ")
        )),
        gate => gate,
    };
    // An attempt passes when every check passed (or failed only tests the target's tip fails
    // too, where its policy allows a baseline) and the plan gate let it through.
    let tip = store.ref_target(&rec.base.reference)?;
    let mut completed = gate.is_none();
    for r in records {
        completed = completed && (r.passed() || inherits_failures(store, tip, r)?);
    }
    let evidence_digest = set_digest(records.iter().map(|r| r.digest.as_str()));
    let attempt = Attempt {
        n: rec.attempts.len() as u32 + 1,
        commit: head.to_string(),
        tree: tree.to_string(),
        checks: records
            .iter()
            .map(|r| AttemptCheck {
                name: r.check.name.clone(),
                digest: r.check.digest.clone(),
                status: r.status,
                exit_code: r.exit_code,
            })
            .collect(),
        status: crate::model::run::AttemptStatus::of(completed),
        evidence_digest: evidence_digest.clone(),
        at: time::now(),
    };
    let mut next = ledger::transition(rec, state(completed));
    next.attempts.push(attempt.clone());
    next.validated = completed.then(|| Validated {
        commit: head.to_string(),
        tree: tree.to_string(),
        evidence_digest,
    });
    next.reason = gate;
    update(&mut next);
    let targets = crate::evidence::scope::note_targets(head, tree, records)?;
    let advanced = crate::run::advance(store, ledger, next, command, &[(EVIDENCE, targets)])?;
    Ok((attempt, advanced))
}
