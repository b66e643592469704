//! The harness loop (`git tabellio loop`): drive an agent command and the checks until the run
//! validates or stops converging, with every phase recorded in the run ledger.
//!
//! Phases of one iteration: `execute` (the agent) → `collect` (commit what it left, checkpoint)
//! → `evaluate` (the checks, recorded exactly as `finish` records them) → `decide` (the
//! convergence fingerprint and the stop status) → `persist` (the iteration into `history`);
//! then the next iteration or `finalize`.
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

pub mod collect;
pub mod context;
pub mod done;
pub mod fingerprint;
pub mod interrupt;
pub mod lock;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::lifecycle::checkpoint::record_checkpoint;
use crate::lifecycle::evidence::{evaluate as evaluate_evidence, Verdict};
use crate::lifecycle::finish::{
    record_attempt, resolve_checks, run_checks, CheckContext, CheckSelection, NewAttempt,
};
use crate::lifecycle::status::{requirements_for, status_of, NextAction};
use crate::lifecycle::{resolve_run, run_workspace, Env};
use crate::model::canonical::{self, sha256_hex};
use crate::model::loop_state::{
    AgentOutput, AgentRun, AgentSpec, AgentStop, Collected, CommittedBy, DoneReason, Evaluated,
    HarnessStop, IterationCheck, LoopIteration, LoopState, LoopStatus, Phase,
};
use crate::model::{time, EvidenceRecord, RunRecord, RunState};
use crate::store::ledger::{self, Ledger};
use crate::store::{worktree, Store};
use crate::validate::{self, CheckCommand, CommandStop, RunOptions, Stream};

use fingerprint::{failure_signature, fingerprint, FingerprintInput};

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

    /// 0 when the run completed (or was promoted), 1 when the loop stopped it blocked.
    pub fn exit_code(&self) -> i32 {
        match self.run.state {
            RunState::Completed | RunState::Promoted
                if self
                    .loop_state()
                    .is_some_and(|l| l.status == LoopStatus::Terminal) =>
            {
                0
            }
            _ => 1,
        }
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

/// A new loop's limits: max loops, no-progress limit, agent timeout.
struct Limits {
    max_loops: u32,
    no_progress_limit: u32,
    timeout: Duration,
}

fn limits(opts: &LoopOptions) -> Result<Limits> {
    let max_loops = opts.max_loops.unwrap_or(DEFAULT_MAX_LOOPS);
    if max_loops == 0 || max_loops > MAX_MAX_LOOPS {
        return Err(Error::usage(format!(
            "--max-loops must be between 1 and {MAX_MAX_LOOPS}"
        )));
    }
    let no_progress_limit = opts.no_progress_limit.unwrap_or(DEFAULT_NO_PROGRESS_LIMIT);
    if no_progress_limit == 0 {
        return Err(Error::usage("--no-progress-limit must be at least 1"));
    }
    let timeout = opts.agent_timeout.unwrap_or(DEFAULT_AGENT_TIMEOUT);
    if timeout.as_secs() == 0 {
        return Err(Error::usage("--agent-timeout must be at least 1 second"));
    }
    Ok(Limits {
        max_loops,
        no_progress_limit,
        timeout,
    })
}

/// Check a fresh loop's preconditions and write its first ledger commit.
fn start(env: &Env, opts: &LoopOptions, limits: Limits, ledger: Ledger) -> Result<Ledger> {
    let Limits {
        max_loops,
        no_progress_limit,
        timeout,
    } = limits;
    let store = &env.store;
    let rec = &ledger.record;
    let id = &rec.run_id;
    match rec.state {
        RunState::Active | RunState::ValidationFailed | RunState::Blocked => {}
        RunState::Looping => {
            return Err(
                Error::refused(format!("run {id} is already looping")).hint(format!(
                    "continue it with `git tabellio loop {id} --resume`"
                )),
            )
        }
        RunState::Completed => {
            return Err(Error::refused(format!(
                "run {id} is completed; there is nothing left to loop for"
            ))
            .hint(format!("promote it: `git tabellio promote {id}`")))
        }
        RunState::Promoted | RunState::Abandoned => {
            return Err(
                Error::refused(format!("run {id} is {}; it is over", rec.state))
                    .hint("start a new run"),
            )
        }
    }
    if rec.task.sha256 != sha256_hex(rec.task.text.as_bytes()) {
        return Err(task_changed(id));
    }
    let interrupted = rec
        .loop_state
        .as_ref()
        .is_some_and(|l| l.why_harness_stopped == Some(HarnessStop::Interrupted));
    let (_path, head) =
        crate::lifecycle::checkpoint::clean_workspace(env, &ledger).map_err(|e| {
            if interrupted {
                // The interrupted agent's changes are what `--resume` collects.
                e.hint(format!(
                    "the last loop was interrupted: `git tabellio loop {id} --resume` continues it and collects them"
                ))
            } else {
                e
            }
        })?;
    let base = store.parse_oid(&rec.base.commit)?;
    if !store.is_ancestor(base, head)? {
        return Err(Error::refused(format!(
            "the run head {head} does not descend from the run's base {base}"
        ))
        .hint("rebase the run branch onto its base, or start a new run"));
    }
    // The checks must be resolvable now; the agent's commits may change them later (the policy
    // is read from the commit being validated, as `finish` does).
    let sel = CheckSelection {
        names: opts.checks.clone(),
        ..CheckSelection::default()
    };
    resolve_checks(store, head, &sel)?;

    // Stored without secrets and without this machine's directories; `argv_sha256` pins the
    // exact command for `--resume`.
    let redactor = validate::Redactor::from_env();
    let paths =
        crate::store::paths::LocalPaths::new(store, run_workspace(store, &ledger)?.as_deref());
    let stored_argv: Vec<String> = redactor
        .redact_argv(&opts.agent_argv)
        .iter()
        .map(|a| paths.apply(a))
        .collect();
    let state = LoopState {
        iteration: 1,
        phase: Phase::Execute,
        max_loops,
        no_progress_limit,
        status: LoopStatus::Progressing,
        why_agent_stopped: None,
        why_harness_stopped: None,
        done_reason: None,
        agent: AgentSpec {
            redacted: stored_argv != opts.agent_argv,
            argv: stored_argv,
            argv_sha256: argv_digest(&opts.agent_argv),
            timeout_s: timeout.as_secs(),
        },
        task_sha256: rec.task.sha256.clone(),
        checks: opts.checks.clone(),
        promote: opts.promote,
        started_at: time::now(),
        stopped_at: None,
        resumes: 0,
        current: Some(LoopIteration::new(1, head.to_string())),
        history: Vec::new(),
    };
    let mut next = ledger::transition(rec, RunState::Looping);
    next.loop_state = Some(state);
    next.reason = None;
    commit(store, &ledger, next, "loop 1/execute")
}

fn task_changed(id: &str) -> Error {
    Error::refused(format!(
        "the task of run {id} does not match the task pinned for it (its text, its SHA-256 and the loop's record must agree)"
    ))
    .hint(format!(
        "the task is pinned verbatim for a loop's whole life; start a new run for a new task (`git tabellio abandon {id}`)"
    ))
}

enum Resume {
    Continue(Ledger, Vec<String>),
    Stopped(Ledger),
}

/// Check that `--resume` may continue this loop, with this agent and task.
fn prepare_resume(env: &Env, opts: &LoopOptions, ledger: Ledger) -> Result<Resume> {
    let store = &env.store;
    let rec = &ledger.record;
    let id = rec.run_id.clone();
    let Some(state) = rec.loop_state.clone() else {
        return Err(
            Error::refused(format!("run {id} has no loop to resume")).hint(format!(
                "start one: `git tabellio loop {id} -- <agent command>`"
            )),
        );
    };
    if opts.max_loops.is_some()
        || opts.no_progress_limit.is_some()
        || opts.agent_timeout.is_some()
        || !opts.checks.is_empty()
        || opts.promote
    {
        return Err(Error::usage(
            "--resume continues the loop with the options it was started with",
        )
        .hint("drop --max-loops, --no-progress-limit, --agent-timeout, --check and --promote; to change them, start a new loop on the stopped run"));
    }
    if !opts.agent_argv.is_empty() && argv_digest(&opts.agent_argv) != state.agent.argv_sha256 {
        return Err(Error::refused(format!(
            "run {id}'s loop was started with a different agent command ({})",
            state.agent.argv.join(" ")
        ))
        .hint(format!(
            "resume with the same command, or without one (`git tabellio loop {id} --resume`); a different agent needs a new loop on a stopped run"
        )));
    }
    if state.task_sha256 != rec.task.sha256
        || rec.task.sha256 != sha256_hex(rec.task.text.as_bytes())
    {
        return Err(task_changed(&id));
    }
    if state.is_stopped() && state.why_harness_stopped != Some(HarnessStop::Interrupted) {
        return Ok(Resume::Stopped(ledger));
    }
    let argv = if !opts.agent_argv.is_empty() {
        opts.agent_argv.clone()
    } else if state.agent.redacted {
        return Err(Error::usage(
            "the loop's agent command was stored redacted (secrets or local paths); give it again after --",
        )
        .hint(format!(
            "`git tabellio loop {id} --resume -- <the same agent command>`"
        )));
    } else {
        state.agent.argv.clone()
    };
    match rec.state {
        RunState::Looping => {}
        RunState::Blocked if state.why_harness_stopped == Some(HarnessStop::Interrupted) => {}
        other => {
            return Err(
                Error::refused(format!("run {id} is {other}; its loop cannot continue"))
                    .hint(format!("`git tabellio status {id}` says what to do next")),
            )
        }
    }
    let mut next = ledger::transition(rec, RunState::Looping);
    let l = next.loop_state.as_mut().expect("checked above");
    l.why_harness_stopped = None;
    l.stopped_at = None;
    l.resumes += 1;
    next.reason = None;
    let command = format!("loop {}/{} (resume)", l.iteration, l.phase);
    let ledger = commit(store, &ledger, next, &command)?;
    Ok(Resume::Continue(ledger, argv))
}

/// The stored outcome of a stopped loop; only a promotion it asked for and did not get to is
/// carried out.
fn replay(env: &Env, ledger: Ledger) -> Result<LoopOutcome> {
    let ledger = promote_if_asked(env, ledger)?;
    finish_outcome(env, ledger, Invocation::Replayed)
}

fn promote_if_asked(env: &Env, ledger: Ledger) -> Result<Ledger> {
    let wants = ledger
        .record
        .loop_state
        .as_ref()
        .is_some_and(|l| l.promote && l.status == LoopStatus::Terminal);
    if wants && ledger.record.state == RunState::Completed {
        crate::promote::promote(env, Some(&ledger.record.run_id), false)?;
        return env.store.find_ledger(&ledger.record.run_id);
    }
    Ok(ledger)
}

/// The loop's outcome: the run as the ledger has it now, and `status`'s next action. The loop
/// has stopped and its record is final, so the outcome never depends on `status` working: when
/// it cannot be computed (e.g. the agent committed a policy that does not parse), the next
/// action is derived from the loop state alone.
fn finish_outcome(env: &Env, ledger: Ledger, invocation: Invocation) -> Result<LoopOutcome> {
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

/// What a person does next, from the run's state and its loop alone (no policy, no worktree):
/// the fallback when `status` cannot be computed. `why` is what kept `status` from working.
fn next_action_from_loop(rec: &RunRecord, why: &str) -> NextAction {
    let id = &rec.run_id;
    let reason = rec
        .reason
        .clone()
        .unwrap_or_else(|| format!("the run is {}", rec.state));
    let reason = format!("{reason} (status could not be computed: {why})");
    let action = |action: &str, blocking: bool, command: Option<String>| NextAction {
        action: action.into(),
        blocking,
        reason: reason.clone(),
        command,
    };
    let harness = rec.loop_state.as_ref().and_then(|l| l.why_harness_stopped);
    match (rec.state, harness) {
        (RunState::Blocked, Some(HarnessStop::Interrupted)) | (RunState::Looping, _) => action(
            "loop",
            true,
            Some(format!("git tabellio loop {id} --resume")),
        ),
        (RunState::Blocked, Some(HarnessStop::ExecutorFailure)) => action(
            "loop",
            true,
            Some(format!(
                "git tabellio loop {id} -- <a working agent command>"
            )),
        ),
        // The run head is not usable as it is (a broken policy): fix it in the run worktree,
        // commit, then validate.
        (RunState::Blocked, Some(HarnessStop::Error)) => {
            action("finish", true, Some(format!("git tabellio finish {id}")))
        }
        (RunState::Blocked, _) => {
            action("review", true, Some(format!("git tabellio context {id}")))
        }
        (RunState::Completed, _) => {
            action("promote", false, Some(format!("git tabellio promote {id}")))
        }
        (RunState::Promoted | RunState::Abandoned, _) => {
            action("cleanup", false, Some(format!("git tabellio cleanup {id}")))
        }
        _ => action("finish", false, Some(format!("git tabellio finish {id}"))),
    }
}

/// Write `next` as a ledger commit on top of `ledger` (compare-and-swap) and return the new
/// ledger.
fn commit(store: &Store, ledger: &Ledger, next: RunRecord, command: &str) -> Result<Ledger> {
    crate::lifecycle::advance(store, ledger, next, command, &[])
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

    fn execute(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let n = state.iteration;
        if self.interrupt.load(Ordering::SeqCst) {
            // Interrupted before the agent started: do not start it.
            return Ok(ledger);
        }
        let path = self.workspace(&ledger)?;
        let context_file = context::write_agent_context(
            store,
            &ledger,
            context::Audience::LoopAgent {
                iteration: n,
                max_loops: state.max_loops,
            },
        )?;
        let cmd = CheckCommand {
            name: "agent".into(),
            argv: self.argv.clone(),
            timeout: Duration::from_secs(state.agent.timeout_s),
        };
        let paths = crate::store::paths::LocalPaths::new(store, Some(&path));
        let opts = RunOptions {
            cwd: path,
            excerpt_cap: AGENT_EXCERPT_BYTES,
            stream: self.opts.stream,
            env_add: vec![
                ("TABELLIO_RUN_ID".into(), rec.run_id.clone()),
                ("TABELLIO_ITERATION".into(), n.to_string()),
                ("TABELLIO_MAX_LOOPS".into(), state.max_loops.to_string()),
                (
                    "TABELLIO_CONTEXT".into(),
                    context_file.display().to_string(),
                ),
            ],
            keep_stdout_tail: DONE_TAIL_BYTES,
            ..RunOptions::default()
        };
        self.say(
            n,
            Phase::Execute,
            format!("running the agent: {}", state.agent.argv.join(" ")),
        );
        let outcome = validate::run_command(&cmd, &opts)
            .map_err(|e| Error::internal(format!("could not run the agent: {e}")))?;
        if self.interrupt.load(Ordering::SeqCst) {
            // We stopped the agent ourselves: not its failure. Execute runs again on resume.
            self.agent_interrupted = true;
            return Ok(ledger);
        }
        // What the agent printed of the secrets its command line carries is redacted too.
        let (argv_secrets_out, argv_redactions) =
            validate::Redactor::for_argv(&self.argv).redact(&outcome.output.excerpt);
        let stopped = match (outcome.stop, outcome.exit_code) {
            (CommandStop::Exited, Some(0)) => AgentStop::Exited,
            (CommandStop::Exited, _) => AgentStop::Nonzero,
            (CommandStop::Signaled, _) => AgentStop::Signaled,
            (CommandStop::TimedOut, _) => AgentStop::TimedOut,
            (CommandStop::NotFound | CommandStop::SpawnFailed, _) => AgentStop::NotFound,
        };
        let run = AgentRun {
            stopped,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            started_at: time::rfc3339(outcome.started_at),
            finished_at: time::rfc3339(outcome.finished_at),
            duration_ms: outcome.duration_ms,
            claimed_done: done::claims_done(&outcome.stdout_tail),
            output: AgentOutput {
                bytes: outcome.output.bytes,
                sha256: outcome.output.sha256.clone(),
                excerpt: paths.apply(&argv_secrets_out),
                truncated: outcome.output.truncated,
                redactions: outcome.output.redactions + argv_redactions,
            },
        };
        self.say(
            n,
            Phase::Execute,
            format!(
                "agent {}{} in {} ms{}",
                stopped.as_str(),
                run.exit_code
                    .map_or(String::new(), |c| format!(" (exit {c})")),
                run.duration_ms,
                if run.claimed_done {
                    ", claims DONE"
                } else {
                    ""
                }
            ),
        );
        let (next, command) = next_phase(rec, Phase::Collect, |l| {
            l.why_agent_stopped = Some(stopped);
            if let Some(cur) = l.current.as_mut() {
                cur.agent = Some(run);
                cur.why_agent_stopped = Some(stopped);
            }
        });
        commit(store, &ledger, next, &command)
    }

    fn collect(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let cur = current_of(state)?;
        let n = cur.n;
        let start_head = store.parse_oid(&cur.start_head)?;
        let path = self.workspace(&ledger)?;
        let failure = |head: Option<gix::ObjectId>, why: String| -> Result<Collected> {
            let head = head.unwrap_or(start_head);
            Ok(Collected {
                head: head.to_string(),
                tree: store.tree_of(head)?.to_string(),
                changed: false,
                committed_by: CommittedBy::Nobody,
                checkpoint: None,
                failure: Some(why),
            })
        };
        let ws = worktree::inspect(&path)?;
        let collected = if ws.branch.as_deref() != Some(rec.branch.as_str()) {
            failure(
                None,
                format!(
                    "the agent left the worktree on {} instead of the run branch {}",
                    ws.branch.as_deref().unwrap_or("a detached HEAD"),
                    rec.branch
                ),
            )?
        } else {
            let head = ws
                .head
                .ok_or_else(|| Error::refused("the run worktree has no HEAD commit"))?;
            let base = store.parse_oid(&rec.base.commit)?;
            if !store.is_ancestor(base, head)? {
                failure(
                    Some(head),
                    format!("the agent rewrote the run branch: {head} does not descend from the base {base}"),
                )?
            } else {
                let message = format!(
                    "tabellio: iteration {n}\n\nTabellio-Run: {}\nTabellio-Actor: {}:{}\n",
                    rec.run_id, rec.actor.kind, rec.actor.id
                );
                let ours = collect::commit_all(store, &path, &rec.branch, head, &message)?;
                let (head, committed_by) = match ours {
                    Some(c) => (c.commit, CommittedBy::Tabellio),
                    None if head == start_head => (head, CommittedBy::Nobody),
                    // Ours from a collect that was killed before its ledger commit, or the
                    // agent's own.
                    None if is_iteration_commit(store, head, n)? => (head, CommittedBy::Tabellio),
                    None => (head, CommittedBy::Agent),
                };
                Collected {
                    head: head.to_string(),
                    tree: store.tree_of(head)?.to_string(),
                    changed: head != start_head,
                    committed_by,
                    checkpoint: None,
                    failure: None,
                }
            }
        };
        let head = store.parse_oid(&collected.head)?;
        self.say(
            n,
            Phase::Collect,
            match (&collected.failure, collected.committed_by) {
                (Some(why), _) => format!("cannot collect: {why}"),
                (None, CommittedBy::Nobody) => "the agent changed nothing".into(),
                (None, CommittedBy::Tabellio) => {
                    format!(
                        "committed the agent's changes as {}",
                        short(&collected.head)
                    )
                }
                (None, CommittedBy::Agent) => {
                    format!("the agent committed {}", short(&collected.head))
                }
            },
        );
        let already = rec.checkpoints.iter().any(|c| c.commit == collected.head);
        if collected.changed && !already {
            let summary = match collected.committed_by {
                CommittedBy::Agent => format!("loop iteration {n}: {}", subject(store, head)),
                _ => format!("loop iteration {n}"),
            };
            let command = format!("loop {}/{}", state.iteration, Phase::Evaluate);
            let (_, ledger) =
                record_checkpoint(store, &ledger, head, Some(&summary), &command, |next| {
                    if let Some(l) = next.loop_state.as_mut() {
                        l.phase = Phase::Evaluate;
                        if let Some(cur) = l.current.as_mut() {
                            let mut c = collected;
                            c.checkpoint = Some(head.to_string());
                            cur.collect = Some(c);
                        }
                    }
                })?;
            return Ok(ledger);
        }
        let (next, command) = next_phase(rec, Phase::Evaluate, |l| {
            if let Some(cur) = l.current.as_mut() {
                cur.collect = Some(collected);
            }
        });
        commit(store, &ledger, next, &command)
    }

    fn evaluate(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let cur = current_of(state)?;
        let n = cur.n;
        let collected = cur.collect.clone().ok_or_else(|| {
            Error::internal("the loop is evaluating an iteration that was not collected")
        })?;
        let head = store.parse_oid(&collected.head)?;
        let base = store.parse_oid(&rec.base.commit)?;
        let skip = if cur.why_agent_stopped != Some(AgentStop::Exited) {
            Some("the agent failed; its work is not validated".to_string())
        } else if let Some(why) = &collected.failure {
            Some(why.clone())
        } else if head == base {
            Some("the run branch has no commits beyond its base".to_string())
        } else {
            None
        };
        // A policy the agent broke is reported by resolving the checks below.
        let requirements = match requirements_for(store, rec, head) {
            Ok(r) => r,
            Err(e) if e.kind == crate::ErrorKind::Usage => Vec::new(),
            Err(e) => return Err(e),
        };
        if let Some(why) = skip {
            self.say(n, Phase::Evaluate, format!("checks skipped: {why}"));
            let missing = requirements.iter().map(|r| r.name.clone()).collect();
            let evaluated = Evaluated {
                verdict: "skipped".into(),
                attempt: None,
                checks: Vec::new(),
                missing_evidence: missing,
                failure_signature: Vec::new(),
                skipped: Some(why),
                plan_gate: None,
            };
            let (next, command) = next_phase(rec, Phase::Decide, |l| {
                if let Some(cur) = l.current.as_mut() {
                    cur.evaluate = Some(evaluated);
                }
            });
            return commit(store, &ledger, next, &command);
        }

        let sel = CheckSelection {
            names: state.checks.clone(),
            ..CheckSelection::default()
        };
        let resolved = resolve_checks(store, head, &sel).and_then(|(checks, cap)| {
            Ok((checks, cap, crate::lifecycle::plans::gate(store, head)?))
        });
        let (checks, cap, gate) = match resolved {
            Ok(r) => r,
            // The agent's commit broke the policy: the harness cannot evaluate, for good.
            Err(e) if e.kind == crate::ErrorKind::Usage => {
                self.say(
                    n,
                    Phase::Evaluate,
                    format!("cannot evaluate: {}", e.message),
                );
                let evaluated = Evaluated {
                    verdict: "error".into(),
                    attempt: None,
                    checks: Vec::new(),
                    missing_evidence: requirements.iter().map(|r| r.name.clone()).collect(),
                    failure_signature: Vec::new(),
                    skipped: Some(e.message),
                    plan_gate: None,
                };
                let (next, command) = next_phase(rec, Phase::Decide, |l| {
                    if let Some(cur) = l.current.as_mut() {
                        cur.evaluate = Some(evaluated);
                    }
                });
                return commit(store, &ledger, next, &command);
            }
            Err(e) => return Err(e),
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
            reuse: crate::lifecycle::reuse::Reuse::Never,
        };
        let records = run_checks(&ctx, &checks)?;
        if self.interrupt.load(Ordering::SeqCst) {
            // Checks we stopped prove nothing: discard them; evaluate runs again on resume.
            return Ok(ledger);
        }
        let completed = records.iter().all(EvidenceRecord::passed) && gate.is_none();
        let mut missing = missing_after(store, head, &requirements, &records)?;
        let mut signature = failure_signature(
            records
                .iter()
                .filter(|r| !r.passed())
                .map(|r| (r.check.name.as_str(), r.output.excerpt.as_str())),
        );
        if let Some(g) = &gate {
            missing.push("plan-hygiene".into());
            signature.push(fingerprint::mask(g));
        }
        let evaluated = Evaluated {
            verdict: if completed { "passed" } else { "failed" }.into(),
            attempt: Some(rec.attempts.len() as u32 + 1),
            checks: records
                .iter()
                .map(|r| IterationCheck {
                    name: r.check.name.clone(),
                    status: r.status.clone(),
                    exit_code: r.exit_code,
                })
                .collect(),
            missing_evidence: missing,
            failure_signature: signature,
            skipped: None,
            plan_gate: gate.clone(),
        };
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

    fn decide(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let cur = current_of(state)?;
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
            .filter(|c| c.status != "passed")
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
            // Only a *failing* iteration can repeat a state (issue 6); an iteration whose checks
            // did not run (nothing committed yet) is judged by no-progress instead.
            (LoopStatus::RepeatedState, Some(HarnessStop::RepeatedState))
        } else if !collected.changed && unchanged_run >= state.no_progress_limit {
            (LoopStatus::NoProgress, Some(HarnessStop::NoProgress))
        } else if n >= state.max_loops {
            (LoopStatus::MaxLoopsReached, Some(HarnessStop::MaxLoops))
        } else {
            (LoopStatus::Progressing, None)
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
                if done_reason == DoneReason::ClaimedNotValidated {
                    "; the agent claimed DONE but the checks did not pass"
                } else {
                    ""
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

    fn persist(&mut self, ledger: Ledger) -> Result<Ledger> {
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

    fn finalize(&mut self, ledger: Ledger) -> Result<Ledger> {
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
    fn stop_interrupted(&mut self, ledger: Ledger) -> Result<Ledger> {
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

/// Has `decide` decided that the loop stops (so only ledger commits are left)?
fn stop_decided(state: &LoopState) -> bool {
    match state.phase {
        Phase::Finalize => true,
        Phase::Persist => state
            .current
            .as_ref()
            .is_some_and(|c| c.why_harness_stopped.is_some()),
        _ => false,
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
                .filter(|c| c.status != "passed")
                .map(|c| c.name.clone())
                .chain(
                    e.missing_evidence
                        .iter()
                        .filter(|m| *m == "plan-hygiene")
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

/// Required checks that will lack satisfied evidence on `head` once `fresh` is recorded.
fn missing_after(
    store: &Store,
    head: gix::ObjectId,
    requirements: &[crate::lifecycle::evidence::Requirement],
    fresh: &[EvidenceRecord],
) -> Result<Vec<String>> {
    let existing = evaluate_evidence(store, head, requirements)?;
    Ok(requirements
        .iter()
        .zip(existing)
        .filter(|(req, verdict)| {
            let fresh_ok = fresh.iter().any(|r| {
                r.check.name == req.name
                    && r.passed()
                    && req.digest.as_ref().is_none_or(|d| *d == r.check.digest)
            });
            !fresh_ok && verdict.verdict != Verdict::Satisfied
        })
        .map(|(req, _)| req.name.clone())
        .collect())
}

/// Is `commit` the harness's own commit of iteration `n` (from a collect killed before it
/// recorded it)?
fn is_iteration_commit(store: &Store, commit: gix::ObjectId, n: u32) -> Result<bool> {
    Ok(subject(store, commit) == format!("tabellio: iteration {n}"))
}

fn subject(store: &Store, commit: gix::ObjectId) -> String {
    store
        .repo
        .find_commit(commit)
        .ok()
        .and_then(|c| c.message_raw().ok().map(|m| m.to_string()))
        .and_then(|m| m.lines().next().map(str::to_string))
        .unwrap_or_default()
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blocked run whose loop stopped with `harness`.
    fn blocked(harness: HarnessStop, reason: &str) -> RunRecord {
        let mut iteration = LoopIteration::new(1, "0".repeat(40));
        iteration.status = Some(LoopStatus::Error);
        iteration.why_harness_stopped = Some(harness);
        let state = LoopState {
            iteration: 1,
            phase: Phase::Finalize,
            max_loops: 5,
            no_progress_limit: 2,
            status: LoopStatus::Error,
            why_agent_stopped: Some(AgentStop::Exited),
            why_harness_stopped: Some(harness),
            done_reason: Some(DoneReason::NoClaim),
            agent: AgentSpec {
                argv: vec!["agent".into()],
                argv_sha256: argv_digest(&["agent".into()]),
                redacted: false,
                timeout_s: 60,
            },
            task_sha256: sha256_hex(b"t"),
            checks: Vec::new(),
            promote: false,
            started_at: time::now(),
            stopped_at: Some(time::now()),
            resumes: 0,
            current: None,
            history: vec![iteration],
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
