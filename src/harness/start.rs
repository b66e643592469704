//! Beginning a loop: a new loop's limits and first ledger commit, or the checks that let
//! `--resume` continue a stopped one.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::evidence::produce::{resolve_checks, CheckSelection};
use crate::model::canonical::sha256_hex;
use crate::model::loop_state::{
    AgentSpec, HarnessStop, LoopIteration, LoopState, LoopStatus, Phase,
};
use crate::model::{time, RunRecord, RunState};
use crate::run::{run_workspace, Env};
use crate::runner;
use crate::store::ledger::{self, Ledger};
use crate::store::Store;

use super::{
    argv_digest, commit, LoopOptions, DEFAULT_AGENT_TIMEOUT, DEFAULT_MAX_LOOPS,
    DEFAULT_NO_PROGRESS_LIMIT, MAX_MAX_LOOPS,
};

/// A new loop's limits: max loops, no-progress limit, agent timeout.
pub(super) struct Limits {
    max_loops: u32,
    no_progress_limit: u32,
    timeout: Duration,
}

pub(super) fn limits(opts: &LoopOptions) -> Result<Limits> {
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
pub(super) fn start(
    env: &Env,
    opts: &LoopOptions,
    limits: Limits,
    ledger: Ledger,
) -> Result<Ledger> {
    let store = &env.store;
    let rec = &ledger.record;
    let id = &rec.run_id;
    check_loopable(rec)?;
    if rec.task.sha256 != sha256_hex(rec.task.text.as_bytes()) {
        return Err(task_changed(id));
    }
    let repair = rec.state == RunState::Reopened;
    let head = if repair && !rec.open_conflicts().is_empty() {
        // The conflicts a reopen wrote out are the agent's to resolve: uncommitted on purpose,
        // collected after the agent ran.
        store
            .ref_target(&rec.branch)?
            .ok_or_else(|| Error::refused(format!("the run branch {} is missing", rec.branch)))?
    } else {
        clean_head(env, &ledger)?
    };
    check_loop_checks(store, head, opts, id)?;
    if opts.promote {
        refuse_unsigned_promotion(store, rec)?;
    }
    let mut limits = limits;
    if repair {
        // Each iteration of a repair loop is one repair round, bounded by the target's policy.
        let allowed = crate::store::policy::land_at(store, &rec.base.reference)?.repair_rounds();
        let used = rec.repair.as_ref().map_or(0, |r| r.rounds);
        let left = allowed.saturating_sub(used);
        if left == 0 {
            return Err(Error::refused(format!(
                "run {id} has used its {allowed} repair round(s) (land.repair_rounds)"
            ))
            .hint(format!(
                "a person takes it from here: repair it in its worktree, commit, `git tabellio finish {id}`"
            )));
        }
        limits.max_loops = match opts.max_loops {
            Some(asked) => asked.min(left),
            None => left,
        };
    }
    let mut state = first_loop_state(store, &ledger, opts, limits, head)?;
    state.repair = repair;
    let mut next = ledger::transition(rec, RunState::Looping);
    next.loop_state = Some(state);
    next.reason = None;
    commit(store, &ledger, next, "loop 1/execute")
}

/// `loop --promote` under a target whose policy requires signed evidence for a required check:
/// the loop never signs (docs/loop.md), so its promotion could only be refused after every
/// iteration ran. Refused before anything runs, with the way that works.
fn refuse_unsigned_promotion(store: &Store, rec: &RunRecord) -> Result<()> {
    let Some(tip) = store.ref_target(&rec.base.reference)? else {
        return Ok(());
    };
    let Some(trust) = crate::store::policy::trust_at(store, tip)? else {
        return Ok(());
    };
    let required = crate::store::policy::policy_at(store, tip)?
        .map(|p| p.required)
        .unwrap_or_default();
    let signed: Vec<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|name| trust.require_signed.covers(name))
        .collect();
    if signed.is_empty() {
        return Ok(());
    }
    let id = &rec.run_id;
    let target = rec.base.reference.trim_start_matches("refs/heads/");
    Err(Error::refused(format!(
        "the policy at {target} requires signed evidence for {}, and the loop never signs: `--promote` could not succeed; nothing was run",
        signed.join(", ")
    ))
    .hint(format!(
        "loop without --promote (`git tabellio loop {id} -- <agent command>`); once it completes, sign the checks with a key the policy allows and promote: `git tabellio finish {id} --sign-key <key>` then `git tabellio promote {id}` (docs/signing.md)"
    )))
}

/// A fresh loop starts only from a run that is open and not looping already.
fn check_loopable(rec: &RunRecord) -> Result<()> {
    let id = &rec.run_id;
    match rec.state {
        RunState::Active | RunState::ValidationFailed | RunState::Blocked | RunState::Reopened => {
            Ok(())
        }
        RunState::Looping => Err(Error::refused(format!("run {id} is already looping")).hint(
            format!("continue it with `git tabellio loop {id} --resume`"),
        )),
        RunState::Completed => Err(Error::refused(format!(
            "run {id} is completed; there is nothing left to loop for"
        ))
        .hint(format!("promote it: `git tabellio promote {id}`"))),
        RunState::Promoted | RunState::Abandoned | RunState::Superseded => Err(Error::refused(
            format!("run {id} is {}; it is over", rec.state),
        )
        .hint("start a new run")),
    }
}

/// The run head of a clean workspace, which must descend from the run's base.
fn clean_head(env: &Env, ledger: &Ledger) -> Result<gix::ObjectId> {
    let store = &env.store;
    let rec = &ledger.record;
    let id = &rec.run_id;
    let interrupted = rec
        .loop_state
        .as_ref()
        .is_some_and(|l| l.why_harness_stopped == Some(HarnessStop::Interrupted));
    let (_path, head) =
        crate::run::workspace::clean_workspace(env, ledger).map_err(|e| {
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
    if !crate::run::workspace::descends_from_base(store, rec, head)? {
        return Err(Error::refused(format!(
            "the run head {head} does not descend from the run's base {base}"
        ))
        .hint("rebase the run branch onto its base, or start a new run"));
    }
    Ok(head)
}

/// The agent a reopened run's repair runs when `loop` is given none: the one its last loop
/// ran, as stored (`None` for a run no loop drove).
pub(super) fn stored_agent(rec: &RunRecord) -> Result<Option<Vec<String>>> {
    if rec.state != RunState::Reopened {
        return Ok(None);
    }
    let Some(l) = &rec.loop_state else {
        return Ok(None);
    };
    if l.agent.redacted {
        return Err(Error::usage(
            "the loop's agent command was stored redacted (secrets or local paths); give it again after --",
        )
        .hint(format!(
            "`git tabellio loop {} -- <the agent command>`",
            rec.run_id
        )));
    }
    Ok(Some(l.agent.argv.clone()))
}

/// The checks must be resolvable now; the agent's commits may change them later (the policy
/// is read from the commit being validated, as `finish` does). The loop has no ad-hoc check:
/// its argv after `--` is the agent, so without a policy there is nothing to validate with.
fn check_loop_checks(
    store: &Store,
    head: gix::ObjectId,
    opts: &LoopOptions,
    id: &str,
) -> Result<()> {
    if matches!(crate::store::policy::policy_at(store, head), Ok(None)) {
        return Err(Error::usage(format!(
            "no checks for the loop: no {} at the run head {head}",
            crate::model::policy::PATH
        ))
        .hint(format!(
            "the loop validates with the policy's checks (the command after `--` is the agent, not a check): \
             commit a {} that defines them on the run branch, for example \
             {{\"schema\": \"tabellio.policy/v1\", \"checks\": {{\"test\": {{\"argv\": [\"cargo\", \"test\"], \"timeout_s\": 600}}}}, \"required\": [\"test\"]}}, \
             then `git tabellio loop {id} -- <agent command>` (`--check <name>` picks among its checks)",
            crate::model::policy::PATH
        )));
    }
    let sel = CheckSelection {
        names: opts.checks.clone(),
        ..CheckSelection::default()
    };
    resolve_checks(store, head, &sel)?;
    Ok(())
}

/// The loop state of iteration 1 at `head`. The agent's argv is stored without secrets and
/// without this machine's directories; `argv_sha256` pins the exact command for `--resume`.
fn first_loop_state(
    store: &Store,
    ledger: &Ledger,
    opts: &LoopOptions,
    limits: Limits,
    head: gix::ObjectId,
) -> Result<LoopState> {
    let Limits {
        max_loops,
        no_progress_limit,
        timeout,
    } = limits;
    let redactor = runner::Redactor::from_env();
    let paths = crate::store::paths::LocalPaths::repository_only(
        store,
        run_workspace(store, ledger)?.as_deref(),
    );
    let stored_argv: Vec<String> = redactor
        .redact_argv(&opts.agent_argv)
        .iter()
        .map(|a| paths.apply(a))
        .collect();
    Ok(LoopState {
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
        task_sha256: ledger.record.task.sha256.clone(),
        checks: opts.checks.clone(),
        promote: opts.promote,
        repair: false,
        started_at: time::now(),
        stopped_at: None,
        resumes: 0,
        current: Some(LoopIteration::new(1, head.to_string())),
        history: Vec::new(),
    })
}

fn task_changed(id: &str) -> Error {
    Error::refused(format!(
        "the task of run {id} does not match the task pinned for it (its text, its SHA-256 and the loop's record must agree)"
    ))
    .hint(format!(
        "the task is pinned verbatim for a loop's whole life; start a new run for a new task (`git tabellio abandon {id}`)"
    ))
}

pub(super) enum Resume {
    Continue(Ledger, Vec<String>),
    Stopped(Ledger),
}

/// Check that `--resume` may continue this loop, with this agent and task.
pub(super) fn prepare_resume(env: &Env, opts: &LoopOptions, ledger: Ledger) -> Result<Resume> {
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
        // Stored as the loop ran it; a relative path (stored by earlier versions) was run in
        // the run worktree.
        let workspace = run_workspace(store, &ledger)?.unwrap_or_else(|| env.cwd.clone());
        super::agent::locate(&state.agent.argv, &workspace)?
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
