//! The harness loop (`git tabellio loop`): drive an agent command and the checks until the run
//! validates or stops converging, with every phase recorded in the run ledger.
//!
//! Phases of one iteration: `execute` (the agent) → `collect` (commit what it left, checkpoint)
//! → `evaluate` (the checks, recorded exactly as `finish` records them) → `decide` (the
//! convergence fingerprint and the stop status) → `persist` (the iteration into `history`);
//! then the next iteration or `finalize`. Each phase is a method of the loop's driver in its own
//! file: `execute.rs`, `collect.rs`, `evaluate.rs`, `decide.rs` (with `persist`) and `finalize.rs`
//! (with the interrupted stop); `start.rs` begins or resumes a loop.
//!
//! Guarantees. Every phase transition is one compare-and-swap ledger commit (state `looping`,
//! `run.json.loop.phase` = the phase to run next) carrying what the finished phase produced, in
//! the same transaction as that phase's notes (checkpoint, evidence). A phase whose commit
//! landed is never run again; a phase that did not commit (the process was killed, or an
//! interrupt discarded it) runs again on `--resume`. Phases that write outside the ledger are
//! idempotent: `collect` commits the worktree by compare-and-swap from the iteration's start
//! head and recognises its own commit, `execute` and `evaluate` write nothing but the context
//! file. A completed loop returns its stored outcome without running anything. One loop per
//! run at a time ([`lock`]), including an agent a killed loop left running.
//!
//! A stop other than success leaves the run `blocked` with the reason; the exit code is 0 for a
//! completed (or promoted) run and 1 for a blocked one.

pub mod agent;
pub mod collect;
pub mod context;
mod decide;
pub mod done;
pub mod drain;
mod evaluate;
mod execute;
mod finalize;
pub mod fingerprint;
pub mod interrupt;
pub mod lock;
mod start;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::lifecycle::status::next_action::{blocked_loop_step, Action};
use crate::lifecycle::status::NextAction;
use crate::model::canonical::{self};
use crate::model::loop_state::{LoopIteration, LoopState, LoopStatus, Phase};
use crate::model::{RunRecord, RunState};
use crate::run::{resolve_run, run_workspace, Env};
use crate::runner::Stream;
use crate::store::ledger::{self, Ledger};
use crate::store::Store;

use decide::stop_decided;
use finalize::{finish_outcome, replay};
use start::{limits, prepare_resume, start, Resume};

pub const DEFAULT_MAX_LOOPS: u32 = 5;
pub const DEFAULT_NO_PROGRESS_LIMIT: u32 = 2;
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// More iterations than anyone means; a typo guard.
pub const MAX_MAX_LOOPS: u32 = 1000;
/// The agent's output kept in the ledger (each iteration's record is pushed with the run).
const AGENT_EXCERPT_BYTES: usize = 4 * 1024;
/// How much of the agent's stdout DONE detection reads (fences are tracked from there).
const DONE_TAIL_BYTES: usize = 256 * 1024;

/// `git tabellio loop`, as the command line said.
#[derive(Debug, Clone, Default)]
pub struct LoopOptions {
    pub run: Option<String>,
    /// The agent command; on `--resume` empty means "the one stored".
    pub agent_argv: Vec<String>,
    pub max_loops: Option<u32>,
    pub no_progress_limit: Option<u32>,
    pub agent_timeout: Option<Duration>,
    /// `--check` names (empty: the policy's required checks).
    pub checks: Vec<String>,
    pub promote: bool,
    pub resume: bool,
    pub stream: Stream,
}

/// Something a person watching the loop may want to know; the CLI prints these as they come.
#[derive(Debug, Clone, Serialize)]
pub struct LoopEvent {
    pub iteration: u32,
    pub phase: Phase,
    pub message: String,
}

/// How this invocation relates to the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invocation {
    /// A new loop ran.
    Started,
    /// An interrupted or killed loop was continued.
    Resumed,
    /// The loop had already stopped: its stored outcome, nothing ran.
    Replayed,
}

#[derive(Debug, Serialize)]
pub struct LoopOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub invocation: Invocation,
    /// The loop promoted the run (`--promote`), now or before.
    pub promoted: bool,
    pub next_action: NextAction,
}

impl LoopOutcome {
    pub fn loop_state(&self) -> Option<&LoopState> {
        self.run.loop_state.as_ref()
    }

    /// The loop's verdict: the run completed (or was promoted), not stopped blocked. The
    /// renderer turns it into the exit code.
    pub fn validated(&self) -> bool {
        matches!(self.run.state, RunState::Completed | RunState::Promoted)
            && self
                .loop_state()
                .is_some_and(|l| l.status == LoopStatus::Terminal)
    }
}

/// SHA-256 of the canonical JSON array of the argv: what `--resume` compares.
pub fn argv_digest(argv: &[String]) -> String {
    let value = serde_json::Value::Array(argv.iter().map(|a| a.clone().into()).collect());
    canonical::digest_of(&value).expect("an array of strings is canonical")
}

/// Everything the phases share.
struct Driver<'a> {
    env: &'a Env,
    opts: &'a LoopOptions,
    /// The agent argv to run (the stored argv is redacted; this one is not).
    argv: Vec<String>,
    interrupt: &'a AtomicBool,
    /// An interrupt stopped the agent in flight (its run was discarded).
    agent_interrupted: bool,
    on_event: &'a mut dyn FnMut(&LoopEvent),
}

/// Run, resume or replay the loop of a run.
pub fn run_loop(
    env: &Env,
    opts: &LoopOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(&LoopEvent),
) -> Result<LoopOutcome> {
    let store = &env.store;
    let first = resolve_run(env, opts.run.as_deref())?;
    let run_id = first.record.run_id.clone();
    // A reopened run's repair runs the agent its loop ran, unless another is given.
    let repair_agent = if !opts.resume && opts.agent_argv.is_empty() {
        start::stored_agent(&first.record)?
    } else {
        None
    };
    let with_agent;
    let opts = match repair_agent {
        Some(argv) => {
            with_agent = LoopOptions {
                agent_argv: argv,
                ..opts.clone()
            };
            &with_agent
        }
        None => opts,
    };
    if !opts.resume && opts.agent_argv.is_empty() {
        return Err(Error::usage("no agent command given").hint(format!(
            "give it after --, e.g. `git tabellio loop {run_id} -- my-agent --task-from-env`"
        )));
    }
    let limits = if opts.resume {
        None
    } else {
        Some(limits(opts)?)
    };
    // The agent's program, as the person typed it, is found before anything is written.
    let opts = &LoopOptions {
        agent_argv: agent::locate(&opts.agent_argv, &env.cwd)?,
        ..opts.clone()
    };
    // Preconditions are checked under the lock, against the ledger as it is then.
    let _lock = lock::acquire(store.repo.common_dir(), &run_id)?;
    let ledger = store.find_ledger(&run_id)?;
    let (ledger, argv, invocation) = if opts.resume {
        match prepare_resume(env, opts, ledger)? {
            Resume::Continue(ledger, argv) => (ledger, argv, Invocation::Resumed),
            Resume::Stopped(ledger) => return replay(env, ledger),
        }
    } else {
        let argv = opts.agent_argv.clone();
        let limits = limits.expect("computed above for a new loop");
        (start(env, opts, limits, ledger)?, argv, Invocation::Started)
    };
    let mut driver = Driver {
        env,
        opts,
        argv,
        interrupt,
        agent_interrupted: false,
        on_event,
    };
    let ledger = driver.drive(ledger)?;
    finish_outcome(env, ledger, invocation)
}

/// What a person does next, from the run's state and its loop alone (no policy, no worktree):
/// the fallback when `status` cannot be computed. `why` is what kept `status` from working.
fn next_action_from_loop(rec: &RunRecord, why: &str) -> NextAction {
    let id = &rec.run_id;
    let reason = rec
        .reason
        .clone()
        .unwrap_or_else(|| format!("the run is {}", rec.state));
    let reason = format!("{reason} (status could not be computed: {why})");
    let action = |action: Action, blocking: bool, command: Option<String>| NextAction {
        action,
        blocking,
        reason: reason.clone(),
        command,
    };
    let harness = rec.loop_state.as_ref().and_then(|l| l.why_harness_stopped);
    match (rec.state, harness) {
        (RunState::Looping, _) => action(
            Action::Loop,
            true,
            Some(format!("git tabellio loop {id} --resume")),
        ),
        (RunState::Blocked, stop) => {
            let (step, command) = blocked_loop_step(id, stop);
            action(step, true, Some(command))
        }
        (RunState::Completed, _) => action(
            Action::Promote,
            false,
            Some(format!("git tabellio promote {id}")),
        ),
        (RunState::Promoted | RunState::Abandoned, _) => action(
            Action::Cleanup,
            false,
            Some(format!("git tabellio cleanup {id}")),
        ),
        _ => action(
            Action::Finish,
            false,
            Some(format!("git tabellio finish {id}")),
        ),
    }
}

/// Write `next` as a ledger commit on top of `ledger` (compare-and-swap) and return the new
/// ledger.
fn commit(store: &Store, ledger: &Ledger, next: RunRecord, command: &str) -> Result<Ledger> {
    crate::run::advance(store, ledger, next, command, &[])
}

fn loop_of(ledger: &Ledger) -> Result<&LoopState> {
    ledger.record.loop_state.as_ref().ok_or_else(|| {
        Error::internal(format!(
            "run {} is looping but has no loop state",
            ledger.record.run_id
        ))
    })
}

fn current_of(state: &LoopState) -> Result<&LoopIteration> {
    state.current.as_ref().ok_or_else(|| {
        Error::internal(format!(
            "the loop is in its {} phase but records no iteration in flight",
            state.phase
        ))
    })
}

/// The loop state of `ledger` and its iteration in flight.
fn in_flight(ledger: &Ledger) -> Result<(&LoopState, &LoopIteration)> {
    let state = loop_of(ledger)?;
    Ok((state, current_of(state)?))
}

/// A copy of the record for the transition into `phase`, with the in-flight iteration changed
/// by `edit`.
fn next_phase(
    rec: &RunRecord,
    phase: Phase,
    edit: impl FnOnce(&mut LoopState),
) -> (RunRecord, String) {
    let mut next = ledger::transition(rec, RunState::Looping);
    let l = next
        .loop_state
        .as_mut()
        .expect("callers checked the loop state");
    edit(l);
    l.phase = phase;
    let command = format!("loop {}/{}", l.iteration, phase);
    (next, command)
}

impl Driver<'_> {
    fn say(&mut self, iteration: u32, phase: Phase, message: String) {
        (self.on_event)(&LoopEvent {
            iteration,
            phase,
            message,
        });
    }

    fn workspace(&self, ledger: &Ledger) -> Result<PathBuf> {
        run_workspace(&self.env.store, ledger)?.ok_or_else(|| {
            Error::refused(format!(
                "the worktree of run {} is missing",
                ledger.record.run_id
            ))
            .hint("it may have been removed by hand; abandon the run")
        })
    }

    /// Run phases until the loop stops.
    fn drive(&mut self, mut ledger: Ledger) -> Result<Ledger> {
        loop {
            let phase = loop_of(&ledger)?.phase;
            let before = ledger.tip;
            ledger = match phase {
                Phase::Execute => self.execute(ledger)?,
                Phase::Collect => self.collect(ledger)?,
                Phase::Evaluate => self.evaluate(ledger)?,
                Phase::Decide => self.decide(ledger)?,
                Phase::Persist => self.persist(ledger)?,
                Phase::Finalize => return self.finalize(ledger),
            };
            if ledger.tip == before {
                // The phase was interrupted and discarded: record the stop.
                return self.stop_interrupted(ledger);
            }
            // Once `decide` has decided a stop, what is left (`persist`, `finalize`) is ledger
            // commits only: finish it, so that an interrupted loop is always one that was
            // progressing, and a stop is never hidden behind an interrupt.
            if self.interrupt.load(Ordering::SeqCst) && !stop_decided(loop_of(&ledger)?) {
                return self.stop_interrupted(ledger);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::canonical::sha256_hex;
    use crate::model::loop_state::{AgentSpec, HarnessStop};
    use crate::model::time;

    /// A blocked run whose loop stopped with `harness`.
    fn blocked(harness: HarnessStop, reason: &str) -> RunRecord {
        let mut iteration = LoopIteration::new(1, "0".repeat(40));
        iteration.status = Some(LoopStatus::Error);
        iteration.why_harness_stopped = Some(harness);
        let state = LoopState {
            agent: AgentSpec {
                argv: vec!["agent".into()],
                argv_sha256: argv_digest(&["agent".into()]),
                redacted: false,
                timeout_s: 60,
            },
            task_sha256: sha256_hex(b"t"),
            started_at: time::now(),
            stopped_at: Some(time::now()),
            history: vec![iteration],
            ..crate::model::loop_state::tests::stopped(harness)
        };
        let mut rec: RunRecord = serde_json::from_value(serde_json::json!({
            "schema": "tabellio.run/v1", "run_id": "r1", "state": "blocked",
            "previous_state": "looping",
            "task": {"summary": "t", "text": "t", "sha256": sha256_hex(b"t")},
            "actor": {"type": "human", "id": "me"}, "repository": "repo",
            "base": {"ref": "refs/heads/main", "commit": "0".repeat(40)},
            "branch": "refs/heads/tabellio/r1", "checkpoints": [], "attempts": [],
            "validated": null, "promotion": null, "loop": null, "reason": reason,
            "created_at": time::now(), "updated_at": time::now(),
        }))
        .unwrap();
        rec.loop_state = Some(state);
        rec
    }

    #[test]
    fn the_fallback_next_action_comes_from_the_loop_state() {
        let why = ".tabellio/policy.json: not valid JSON";
        let rec = blocked(HarnessStop::Error, "loop: error at iteration 1: policy");
        let a = next_action_from_loop(&rec, why);
        assert_eq!(a.action, "finish");
        assert!(a.blocking);
        assert_eq!(a.command.as_deref(), Some("git tabellio finish r1"));
        assert!(a.reason.starts_with("loop: error at iteration 1") && a.reason.contains(why));

        let rec = blocked(HarnessStop::Interrupted, "loop: interrupted");
        let a = next_action_from_loop(&rec, why);
        assert_eq!(a.command.as_deref(), Some("git tabellio loop r1 --resume"));
        let rec = blocked(HarnessStop::RepeatedState, "loop: repeated-state");
        assert_eq!(next_action_from_loop(&rec, why).action, "review");
        let rec = blocked(HarnessStop::ExecutorFailure, "loop: executor-failure");
        assert!(next_action_from_loop(&rec, why)
            .command
            .unwrap()
            .contains("working agent command"));
    }

    #[test]
    fn an_interrupt_after_a_decided_stop_does_not_interrupt() {
        let mut state = blocked(HarnessStop::Error, "x").loop_state.unwrap();
        assert!(stop_decided(&state), "finalize");
        state.phase = Phase::Persist;
        let mut cur = LoopIteration::new(2, "0".repeat(40));
        state.current = Some(cur.clone());
        assert!(!stop_decided(&state), "persist of a progressing iteration");
        cur.why_harness_stopped = Some(HarnessStop::MaxLoops);
        state.current = Some(cur);
        assert!(stop_decided(&state), "persist of a stopping iteration");
        for phase in [
            Phase::Execute,
            Phase::Collect,
            Phase::Evaluate,
            Phase::Decide,
        ] {
            state.phase = phase;
            assert!(!stop_decided(&state), "{phase}");
        }
    }

    #[test]
    fn every_status_but_progressing_names_its_harness_stop() {
        assert_eq!(LoopStatus::Error.as_str(), "error");
        assert_eq!(LoopStatus::Error.harness_stop(), Some(HarnessStop::Error));
        assert_eq!(LoopStatus::Progressing.harness_stop(), None);
    }
}
