//! The decide and persist phases: the convergence fingerprint and the stop status of the
//! iteration, then the iteration moved into the loop's history.

use crate::error::{Error, Result};
use crate::model::loop_state::{
    AgentStop, DoneReason, HarnessStop, LoopIteration, LoopState, LoopStatus, Phase,
};
use crate::model::RunState;
use crate::store::ledger::{self, Ledger};

use super::fingerprint::{fingerprint, FingerprintInput};
use super::{commit, current_of, in_flight, loop_of, next_phase, Driver};

impl Driver<'_> {
    pub(super) fn decide(&mut self, ledger: Ledger) -> Result<Ledger> {
        let store = &self.env.store;
        let rec = &ledger.record;
        let (state, cur) = in_flight(&ledger)?;
        let n = cur.n;
        let (Some(agent), Some(collected), Some(evaluated)) =
            (&cur.agent, &cur.collect, &cur.evaluate)
        else {
            return Err(Error::internal(format!(
                "iteration {n} reached decide without the results of its earlier phases"
            )));
        };
        let failing: Vec<String> = evaluated
            .checks
            .iter()
            .filter(|c| c.status != crate::model::evidence::CheckStatus::Passed)
            .map(|c| c.name.clone())
            .collect();
        let fp = fingerprint(&FingerprintInput {
            tree: &collected.tree,
            decision: &evaluated.verdict,
            failing,
            signature: evaluated.failure_signature.clone(),
            missing: evaluated.missing_evidence.clone(),
        });
        let previous = state.history.last();
        let unchanged_run = 1 + state
            .history
            .iter()
            .rev()
            .take_while(|h| h.collect.as_ref().is_some_and(|c| !c.changed))
            .count() as u32;
        let executor_failure = agent.stopped != AgentStop::Exited || collected.failure.is_some();
        let (status, harness) = if executor_failure {
            (
                LoopStatus::ExecutorFailure,
                Some(HarnessStop::ExecutorFailure),
            )
        } else if evaluated.verdict == "error" {
            (LoopStatus::Error, Some(HarnessStop::Error))
        } else if evaluated.verdict == "passed" {
            (LoopStatus::Terminal, Some(HarnessStop::Validated))
        } else if evaluated.verdict == "failed"
            && previous.and_then(|p| p.fingerprint.as_deref()) == Some(fp.as_str())
        {
            // Only a *failing* iteration can repeat a state (docs/loop.md); an iteration whose checks
            // did not run (nothing committed yet) is judged by no-progress instead.
            (LoopStatus::RepeatedState, Some(HarnessStop::RepeatedState))
        } else if !collected.changed && unchanged_run >= state.no_progress_limit {
            (LoopStatus::NoProgress, Some(HarnessStop::NoProgress))
        } else if n >= state.max_loops {
            (LoopStatus::MaxLoopsReached, Some(HarnessStop::MaxLoops))
        } else {
            (LoopStatus::Progressing, None)
        };
        // A repair loop's stop without passing checks, on its last allowed round, is the end of
        // the repair: `repair_exhausted`, whatever else the round showed.
        let exhausted = state.repair
            && matches!(
                harness,
                Some(HarnessStop::RepeatedState | HarnessStop::NoProgress | HarnessStop::MaxLoops)
            )
            && rec.repair.as_ref().map_or(0, |r| r.rounds) + 1
                >= crate::store::policy::land_at(store, &rec.base.reference)?.repair_rounds();
        let (status, harness) = if exhausted {
            (
                LoopStatus::RepairExhausted,
                Some(HarnessStop::RepairExhausted),
            )
        } else {
            (status, harness)
        };
        let done_reason = if status == LoopStatus::Terminal {
            DoneReason::Validated
        } else if agent.claimed_done {
            DoneReason::ClaimedNotValidated
        } else {
            DoneReason::NoClaim
        };
        self.say(
            n,
            Phase::Decide,
            format!(
                "{}{} (fingerprint {})",
                status.as_str(),
                match (done_reason, &evaluated.plan_gate) {
                    (DoneReason::ClaimedNotValidated, Some(g))
                        if crate::plans::gate::missing_name(g)
                            == crate::plans::gate::OPEN_ITEMS =>
                    {
                        "; the agent claimed DONE but its plan has open items"
                    }
                    (DoneReason::ClaimedNotValidated, _) => {
                        "; the agent claimed DONE but the checks did not pass"
                    }
                    _ => "",
                },
                &fp[..12]
            ),
        );
        let (next, command) = next_phase(rec, Phase::Persist, |l| {
            l.status = status;
            l.done_reason = Some(done_reason);
            if let Some(cur) = l.current.as_mut() {
                cur.fingerprint = Some(fp);
                cur.status = Some(status);
                cur.why_harness_stopped = harness;
                cur.done_reason = Some(done_reason);
            }
        });
        commit(store, &ledger, next, &command)
    }

    pub(super) fn persist(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let cur = current_of(state)?.clone();
        let stops = cur.why_harness_stopped.is_some();
        let head = cur
            .collect
            .as_ref()
            .map_or_else(|| cur.start_head.clone(), |c| c.head.clone());
        let mut next = ledger::transition(rec, RunState::Looping);
        if state.repair {
            // One repair round spent: the agent ran and its checks were judged.
            let rounds = next.repair.as_ref().map_or(0, |r| r.rounds) + 1;
            next.repair = Some(crate::model::land::Repair { rounds });
        }
        let l = next.loop_state.as_mut().expect("checked above");
        l.history.push(cur);
        if stops {
            l.current = None;
            l.phase = Phase::Finalize;
        } else {
            l.iteration += 1;
            l.current = Some(LoopIteration::new(l.iteration, head));
            l.phase = Phase::Execute;
        }
        let command = format!("loop {}/{}", l.iteration, l.phase);
        commit(store, &ledger, next, &command)
    }
}

/// Has `decide` decided that the loop stops (so only ledger commits are left)?
pub(super) fn stop_decided(state: &LoopState) -> bool {
    match state.phase {
        Phase::Finalize => true,
        Phase::Persist => state
            .current
            .as_ref()
            .is_some_and(|c| c.why_harness_stopped.is_some()),
        _ => false,
    }
}
