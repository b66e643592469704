//! The end of a loop: the stop recorded in the run (completed or blocked, with the reason a
//! person reads), an interrupt recorded as a paused loop, the promotion `--promote` asked for,
//! and the outcome handed back.

use crate::error::{Error, Result};
use crate::lifecycle::status::status_of;
use crate::model::loop_state::{
    AgentStop, DoneReason, HarnessStop, LoopIteration, LoopState, LoopStatus, Phase,
};
use crate::model::{time, RunState};
use crate::run::{run_workspace, Env};
use crate::store::ledger::{self, Ledger};

use super::{commit, loop_of, next_action_from_loop, Driver, Invocation, LoopOutcome};

/// The stored outcome of a stopped loop; only a promotion it asked for and did not get to is
/// carried out.
pub(super) fn replay(env: &Env, ledger: Ledger) -> Result<LoopOutcome> {
    let ledger = promote_if_asked(env, ledger)?;
    finish_outcome(env, ledger, Invocation::Replayed)
}

pub(super) fn promote_if_asked(env: &Env, ledger: Ledger) -> Result<Ledger> {
    let wants = ledger
        .record
        .loop_state
        .as_ref()
        .is_some_and(|l| l.promote && l.status == LoopStatus::Terminal);
    if wants && ledger.record.state == RunState::Completed {
        crate::lifecycle::promote::promote(
            env,
            &crate::lifecycle::promote::PromoteOptions {
                run: Some(&ledger.record.run_id),
                dry_run: false,
            },
        )?;
        return env.store.find_ledger(&ledger.record.run_id);
    }
    Ok(ledger)
}

/// The loop's outcome: the run as the ledger has it now, and `status`'s next action. The loop
/// has stopped and its record is final, so the outcome never depends on `status` working: when
/// it cannot be computed (e.g. the agent committed a policy that does not parse), the next
/// action is derived from the loop state alone.
pub(super) fn finish_outcome(
    env: &Env,
    ledger: Ledger,
    invocation: Invocation,
) -> Result<LoopOutcome> {
    let store = &env.store;
    let workspace = run_workspace(store, &ledger)?;
    let next_action = match status_of(store, &ledger) {
        Ok(status) => status.next_action,
        Err(e) => next_action_from_loop(&ledger.record, &e.message),
    };
    let rec = ledger.record;
    Ok(LoopOutcome {
        promoted: rec.state == RunState::Promoted
            && rec.loop_state.as_ref().is_some_and(|l| l.promote),
        run: rec,
        workspace,
        invocation,
        next_action,
    })
}

impl Driver<'_> {
    pub(super) fn finalize(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        if state.is_stopped() {
            // Finalized before; only a promotion may be left.
            return promote_if_asked(self.env, ledger);
        }
        let last = state.history.last().cloned().ok_or_else(|| {
            Error::internal("the loop reached finalize without any iteration in its history")
        })?;
        // `decide` recorded both; a history entry without them (or an `error` stop recorded
        // before `error` was a status) is the harness's own failure.
        let (status, harness) = match (last.status, last.why_harness_stopped) {
            (Some(s), Some(h)) if h != HarnessStop::Error => (s, h),
            _ => (LoopStatus::Error, HarnessStop::Error),
        };
        let completed = status == LoopStatus::Terminal;
        let reason = (!completed).then(|| stop_reason(state, &last, harness));
        let mut next = ledger::transition(
            rec,
            if completed {
                RunState::Completed
            } else {
                RunState::Blocked
            },
        );
        let l = next.loop_state.as_mut().expect("checked above");
        l.phase = Phase::Finalize;
        l.status = status;
        l.why_agent_stopped = last.why_agent_stopped.or(l.why_agent_stopped);
        l.why_harness_stopped = Some(harness);
        l.done_reason = last.done_reason.or(Some(DoneReason::NoClaim));
        l.stopped_at = Some(time::now());
        if completed {
            next.reason = None;
        } else {
            next.reason = reason.clone();
        }
        let command = format!("loop {}/stop", l.iteration);
        let ledger = commit(store, &ledger, next, &command)?;
        self.say(
            last.n,
            Phase::Finalize,
            match &reason {
                None => format!("run {} completed", rec.run_id),
                Some(r) => format!("run {} blocked: {r}", rec.run_id),
            },
        );
        if completed && state.promote {
            let ledger = promote_if_asked(self.env, ledger)?;
            self.say(
                last.n,
                Phase::Finalize,
                format!("run {} promoted", rec.run_id),
            );
            return Ok(ledger);
        }
        Ok(ledger)
    }

    /// Record that a signal stopped the loop before `phase` (which runs on resume).
    ///
    /// The loop had not decided a stop (see [`stop_decided`]), so `status` stays `progressing`:
    /// an interrupted loop is a progressing loop paused, resumable with `--resume`. The agent's
    /// side describes the iteration in flight: `signaled` when we stopped its agent (that run is
    /// discarded and runs again on resume), the agent's own stop when the interrupt came after
    /// it, and before this iteration's agent ran, the stop of the last agent that ran
    /// (`signaled` when none has).
    pub(super) fn stop_interrupted(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let phase = state.phase;
        let iteration = state.iteration;
        let reason = format!(
            "loop: interrupted at iteration {iteration} before its {phase} phase (the loop was progressing); `git tabellio loop {} --resume` continues it",
            rec.run_id
        );
        let agent_interrupted = self.agent_interrupted;
        let mut next = ledger::transition(rec, RunState::Blocked);
        let l = next.loop_state.as_mut().expect("checked above");
        l.status = LoopStatus::Progressing;
        l.why_harness_stopped = Some(HarnessStop::Interrupted);
        let ran = l.current.as_ref().and_then(|c| c.agent.clone());
        let (agent, done) = if agent_interrupted {
            (AgentStop::Signaled, DoneReason::NoClaim)
        } else if let Some(run) = &ran {
            (
                run.stopped,
                if run.claimed_done {
                    DoneReason::ClaimedNotValidated
                } else {
                    DoneReason::NoClaim
                },
            )
        } else {
            (
                l.why_agent_stopped.unwrap_or(AgentStop::Signaled),
                l.done_reason.unwrap_or(DoneReason::NoClaim),
            )
        };
        l.why_agent_stopped = Some(agent);
        l.done_reason = Some(done);
        if agent_interrupted {
            if let Some(cur) = l.current.as_mut() {
                cur.why_agent_stopped = Some(AgentStop::Signaled);
            }
        }
        l.stopped_at = Some(time::now());
        next.reason = Some(reason.clone());
        let ledger = commit(
            store,
            &ledger,
            next,
            &format!("loop {iteration}/{phase} (interrupted)"),
        )?;
        self.say(iteration, phase, reason);
        Ok(ledger)
    }
}

/// A person's words for why the loop stopped blocked.
fn stop_reason(state: &LoopState, last: &LoopIteration, harness: HarnessStop) -> String {
    let n = last.n;
    let failing = last
        .evaluate
        .as_ref()
        .map(|e| {
            e.checks
                .iter()
                .filter(|c| c.status != crate::model::evidence::CheckStatus::Passed)
                .map(|c| c.name.clone())
                .chain(
                    e.missing_evidence
                        .iter()
                        .filter(|m| *m == "plan-hygiene" || *m == crate::plans::gate::OPEN_ITEMS)
                        .cloned(),
                )
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let failing = if failing.is_empty() {
        "none ran".to_string()
    } else {
        failing.join(", ")
    };
    let detail = match harness {
        HarnessStop::ExecutorFailure => {
            let agent = last.agent.as_ref();
            match (
                last.collect.as_ref().and_then(|c| c.failure.clone()),
                agent.map(|a| a.stopped),
            ) {
                (_, Some(AgentStop::Nonzero)) => format!(
                    "the agent exited with code {}",
                    agent.and_then(|a| a.exit_code).unwrap_or(-1)
                ),
                (_, Some(AgentStop::Signaled)) => format!(
                    "the agent was killed by signal {}",
                    agent.and_then(|a| a.signal).unwrap_or(0)
                ),
                (_, Some(AgentStop::TimedOut)) => format!(
                    "the agent did not finish within its timeout of {} s",
                    state.agent.timeout_s
                ),
                (_, Some(AgentStop::NotFound)) => format!(
                    "the agent command could not be started ({})",
                    agent
                        .map(|a| a.output.excerpt.trim().to_string())
                        .unwrap_or_default()
                ),
                (Some(why), _) => why,
                (None, _) => "the agent failed".into(),
            }
        }
        HarnessStop::RepeatedState => format!(
            "iteration {n} ended exactly where iteration {} did (same tree, same failing checks: {failing})",
            n.saturating_sub(1)
        ),
        HarnessStop::NoProgress => format!(
            "the agent changed nothing in {} iteration(s) in a row (failing: {failing})",
            state.no_progress_limit
        ),
        HarnessStop::MaxLoops => format!(
            "{} iteration(s) without passing checks (failing: {failing})",
            state.max_loops
        ),
        HarnessStop::RepairExhausted => format!(
            "repair_exhausted: the run's repair rounds are used up and its checks still fail on its new base (failing: {failing}); a person takes it from here"
        ),
        HarnessStop::Error => last
            .evaluate
            .as_ref()
            .and_then(|e| e.skipped.clone())
            .unwrap_or_else(|| "the harness could not go on".into()),
        HarnessStop::Interrupted => "interrupted".into(),
        HarnessStop::Validated => "validated".into(),
    };
    let status = if harness == HarnessStop::Error {
        LoopStatus::Error
    } else {
        last.status.unwrap_or(state.status)
    };
    format!("loop: {status} at iteration {n}: {detail}")
}
