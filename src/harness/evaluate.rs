//! The evaluate phase: run the checks on the collected head and record them exactly as
//! `finish` records an attempt, or record why they could not run.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::evidence::judge::evaluate as evaluate_evidence;
use crate::evidence::produce::{
    resolve_checks, run_checks, CheckContext, CheckSelection, ResolveChecksError,
};
use crate::evidence::requirements::{required_at, Claim, Requirement};
use crate::lifecycle::finish::{record_attempt, NewAttempt};
use crate::model::loop_state::{
    AgentStop, Collected, Evaluated, IterationCheck, LoopIteration, Phase,
};
use crate::model::{EvidenceRecord, RunRecord, RunState};
use crate::store::ledger::Ledger;
use crate::store::policy::PolicyAtError;
use crate::store::Store;

use super::fingerprint::{self, failure_signature};
use super::{commit, in_flight, next_phase, Driver};

impl Driver<'_> {
    pub(super) fn evaluate(&mut self, ledger: Ledger) -> Result<Ledger> {
        let store = &self.env.store;
        let rec = &ledger.record;
        let (state, cur) = in_flight(&ledger)?;
        let n = cur.n;
        let collected = cur.collect.clone().ok_or_else(|| {
            Error::internal("the loop is evaluating an iteration that was not collected")
        })?;
        let head = store.parse_oid(&collected.head)?;
        let base = store.parse_oid(&rec.base.commit)?;
        let skip = skip_reason(cur, &collected, head == base);
        // A policy the agent broke is reported by resolving the checks below.
        let requirements = match required_at(store, head, Claim::RunHead(rec)) {
            Ok(r) => r,
            Err(PolicyAtError::Invalid { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if let Some(why) = skip {
            self.say(n, Phase::Evaluate, format!("checks skipped: {why}"));
            return record_unevaluated(store, &ledger, "skipped", why, &requirements);
        }

        let sel = CheckSelection {
            names: state.checks.clone(),
            ..CheckSelection::default()
        };
        let (checks, cap, gate) = match resolve_checks(store, head, &sel) {
            Ok((checks, cap)) => (
                checks,
                cap,
                crate::plans::gate::loop_gate(store, head, base, &rec.task.text)?,
            ),
            Err(ResolveChecksError::Read(e)) => return Err(e),
            // The agent's commit broke the policy: the harness cannot evaluate, for good.
            Err(e) => {
                let e = Error::from(e);
                self.say(
                    n,
                    Phase::Evaluate,
                    format!("cannot evaluate: {}", e.message),
                );
                return record_unevaluated(store, &ledger, "error", e.message, &requirements);
            }
        };
        let path = self.workspace(&ledger)?;
        self.say(
            n,
            Phase::Evaluate,
            format!(
                "running checks: {}",
                checks
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let ctx = CheckContext {
            store,
            worktree: &path,
            run_id: Some(&rec.run_id),
            commit: head,
            branch: Some(&rec.branch),
            excerpt_cap: cap,
            stream: self.opts.stream,
            // The loop runs its checks every iteration: how they converge is what it watches.
            reuse: crate::evidence::reuse::Reuse::Never,
            // The loop never signs: it runs an agent's commits unattended, and what it attests
            // should not carry a key that makes it count (docs/verify.md).
            signer: None,
            signing_env: crate::runner::SigningEnv::Withheld,
            provenance: Some(&crate::model::provenance::Provenance::of_run(rec)),
            left: None,
        };
        let records = run_checks(&ctx, &checks)?;
        if self.interrupt.load(Ordering::SeqCst) {
            // Checks we stopped prove nothing: discard them; evaluate runs again on resume.
            return Ok(ledger);
        }
        let evaluated = judge(store, rec, head, &requirements, &records, gate.clone())?;
        self.say(
            n,
            Phase::Evaluate,
            format!(
                "checks {}: {}",
                evaluated.verdict,
                evaluated
                    .checks
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.status))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let command = format!("loop {}/{}", state.iteration, Phase::Decide);
        let (_, ledger) = record_attempt(
            store,
            &ledger,
            NewAttempt {
                head,
                records: &records,
                gate,
                command: &command,
            },
            |_| RunState::Looping,
            |next| {
                if let Some(l) = next.loop_state.as_mut() {
                    l.phase = Phase::Decide;
                    if let Some(cur) = l.current.as_mut() {
                        cur.evaluate = Some(evaluated);
                    }
                }
            },
        )?;
        Ok(ledger)
    }
}

/// Required checks that will lack satisfied evidence on `head` once `fresh` is recorded.
fn missing_after(
    store: &Store,
    head: gix::ObjectId,
    requirements: &[Requirement],
    fresh: &[EvidenceRecord],
) -> Result<Vec<String>> {
    // By name: a check whose `when` the records prove does not hold has no verdict.
    let existing = evaluate_evidence(store, head, requirements)?;
    Ok(requirements
        .iter()
        .filter(|req| {
            let fresh_ok = fresh.iter().any(|r| {
                r.check.name == req.name
                    && r.passed()
                    && req.digest.as_ref().is_none_or(|d| *d == r.check.digest)
            });
            !fresh_ok
                && existing
                    .iter()
                    .any(|v| v.name == req.name && !v.satisfies())
        })
        .map(|req| req.name.clone())
        .collect())
}

/// Why the checks are not run on this iteration's head, if they are not.
fn skip_reason(cur: &LoopIteration, collected: &Collected, at_base: bool) -> Option<String> {
    if cur.why_agent_stopped != Some(AgentStop::Exited) {
        Some("the agent failed; its work is not validated".to_string())
    } else if let Some(why) = &collected.failure {
        Some(why.clone())
    } else if at_base {
        Some("the run branch has no commits beyond its base".to_string())
    } else {
        None
    }
}

/// Record an iteration whose checks did not run: its `verdict`, why, and every requirement as
/// missing.
fn record_unevaluated(
    store: &Store,
    ledger: &Ledger,
    verdict: &str,
    why: String,
    requirements: &[Requirement],
) -> Result<Ledger> {
    let evaluated = Evaluated {
        verdict: verdict.into(),
        attempt: None,
        checks: Vec::new(),
        missing_evidence: requirements.iter().map(|r| r.name.clone()).collect(),
        failure_signature: Vec::new(),
        skipped: Some(why),
        plan_gate: None,
    };
    let (next, command) = next_phase(&ledger.record, Phase::Decide, |l| {
        if let Some(cur) = l.current.as_mut() {
            cur.evaluate = Some(evaluated);
        }
    });
    commit(store, ledger, next, &command)
}

/// The iteration's judgement of the checks that ran on `head` and of the plan gate.
fn judge(
    store: &Store,
    rec: &RunRecord,
    head: gix::ObjectId,
    requirements: &[Requirement],
    records: &[EvidenceRecord],
    gate: Option<String>,
) -> Result<Evaluated> {
    let completed = records.iter().all(EvidenceRecord::passed) && gate.is_none();
    let mut missing = missing_after(store, head, requirements, records)?;
    let mut signature = failure_signature(
        records
            .iter()
            .filter(|r| !r.passed())
            .map(|r| (r.check.name.as_str(), r.output.excerpt.as_str())),
    );
    if let Some(g) = &gate {
        missing.push(crate::plans::gate::missing_name(g).into());
        signature.push(fingerprint::mask(g));
    }
    Ok(Evaluated {
        verdict: if completed { "passed" } else { "failed" }.into(),
        attempt: Some(rec.attempts.len() as u32 + 1),
        checks: records
            .iter()
            .map(|r| IterationCheck {
                name: r.check.name.clone(),
                status: r.status,
                exit_code: r.exit_code,
            })
            .collect(),
        missing_evidence: missing,
        failure_signature: signature,
        skipped: None,
        plan_gate: gate,
    })
}
