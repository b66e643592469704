//! `land --until-empty`: drain a target's queue without a person. Each round lands what lands
//! (the `land` operation, with `--reopen`), then drives the loop of every run it reopened —
//! resuming the agent its loop ran, with the refusal as the seed of the agent's context — and
//! lands again what the repairs completed. It stops when nothing is left to land, or every run
//! left is exhausted (`repair_exhausted`) or waiting for a person (a run no loop drove has no
//! agent to resume: it stays `reopened`).
//!
//! Guarantees: nothing here writes a ref itself; every write is the land operation's or the
//! loop's, each compare-and-swap and recorded in the ledgers. So a drain killed at any point
//! is resumed by running it again: a landing killed half-way is finished by the next `land`,
//! a killed loop (`looping`, or `blocked` by an interrupt) is resumed, a reopened run is
//! repaired. Rounds are bounded by the runs' repair rounds (`land.repair_rounds`).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use crate::error::Result;
use crate::lifecycle::land::{land, LandOptions, Landing};
use crate::model::loop_state::HarnessStop;
use crate::model::RunState;
use crate::run::Env;

use super::{run_loop, LoopEvent, LoopOptions};

/// What became of one run the drain saw.
#[derive(Debug, Clone, Serialize)]
pub struct DrainedRun {
    pub run_id: String,
    /// Its state when the drain stopped.
    pub state: RunState,
    /// Repair rounds the run has spent (its record's `repair.rounds`).
    pub rounds: u32,
    /// Agent runs this drain's loops made for it.
    pub agent_invocations: u32,
    /// Checks its loops executed (the landing's own validations are counted in the totals).
    pub check_executions: u32,
    /// Why it did not land, when it did not.
    pub reason: Option<String>,
}

/// What the drain did.
#[derive(Debug, Clone, Serialize)]
pub struct DrainOutcome {
    pub target: String,
    pub runs: Vec<DrainedRun>,
    /// `land` rounds run.
    pub rounds: u32,
    /// Totals of the landings: checks executed and reused, stack tops validated.
    pub checks_run: usize,
    pub checks_reused: usize,
    pub validations: usize,
}

impl DrainOutcome {
    /// Every run the drain saw landed.
    pub fn all_landed(&self) -> bool {
        self.runs.iter().all(|r| r.state == RunState::Promoted)
    }
}

/// More rounds than any drain needs: each round after the first repairs a run, and a run's
/// repairs are bounded by its repair rounds. A guard against a loop that would not end.
const MAX_ROUNDS: u32 = 64;

/// Drain the queue `opts` names (its runs, or every completed run of the target).
pub fn drain(
    env: &Env,
    opts: &LandOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(String),
) -> Result<DrainOutcome> {
    let store = &env.store;
    let mut runs: BTreeMap<String, DrainedRun> = BTreeMap::new();
    let mut outcome = DrainOutcome {
        target: String::new(),
        runs: Vec::new(),
        rounds: 0,
        checks_run: 0,
        checks_reused: 0,
        validations: 0,
    };
    let named = opts.runs.clone();
    for round in 1..=MAX_ROUNDS {
        outcome.rounds = round;
        // Named runs: those still waiting to land (the others were landed or reopened).
        let mut land_opts = LandOptions {
            reopen: true,
            ..opts.clone()
        };
        if !named.is_empty() {
            land_opts.runs = named
                .iter()
                .filter(|id| {
                    store.try_find_ledger(id).ok().flatten().is_some_and(|l| {
                        matches!(l.record.state, RunState::Completed | RunState::Promoted)
                    })
                })
                .cloned()
                .collect();
            if land_opts.runs.is_empty() {
                land_opts.target = Some(outcome.target.clone()).filter(|t| !t.is_empty());
            }
        }
        if named.is_empty() || !land_opts.runs.is_empty() {
            land_round(env, &land_opts, round, (&mut outcome, &mut runs), on_event)?;
        }
        if outcome.target.is_empty() {
            break;
        }
        // A culprit an earlier landing refused but did not reopen (a drain killed between the
        // two, or a plain `land` before): reopened here, so it is repaired like the others.
        for id in refused_unreopened(env, &outcome.target)? {
            let ledger = store.find_ledger(&id)?;
            match crate::run::reopen::reopen(env, &ledger, "land") {
                Ok(_) => on_event(format!("round {round}: reopened {id}, refused earlier")),
                // A lock or a ref that moved stops the drain, as in a repair: it is not the
                // run's failure, and the run is reopened once the lock is gone.
                Err(e) if e.kind == crate::error::ErrorKind::Conflict => return Err(e),
                Err(e) => entry(&mut runs, &id).reason = Some(e.message),
            }
        }
        let mut completed = 0;
        for (id, resume) in to_repair(env, &outcome.target)? {
            let seen = entry(&mut runs, &id);
            if repair_one(env, opts, (&id, resume), seen, interrupt, on_event)? {
                completed += 1;
            }
        }
        // Only a repair that completed puts something new in the queue.
        if completed == 0 {
            break;
        }
    }
    if !outcome.target.is_empty() {
        left_for_a_person(env, &outcome.target, &mut runs)?;
    }
    for (id, mut r) in runs {
        let Some(ledger) = store.try_find_ledger(&id)? else {
            continue;
        };
        r.state = ledger.record.state;
        r.rounds = ledger.record.repair.as_ref().map_or(0, |p| p.rounds);
        if r.state == RunState::Promoted {
            r.reason = None;
        }
        outcome.runs.push(r);
    }
    Ok(outcome)
}

/// One `land` of the queue in round `round`: its counts added to `outcome`, each run's
/// reason noted in `runs`.
fn land_round(
    env: &Env,
    land_opts: &LandOptions,
    round: u32,
    (outcome, runs): (&mut DrainOutcome, &mut BTreeMap<String, DrainedRun>),
    on_event: &mut dyn FnMut(String),
) -> Result<()> {
    let landed = land(env, land_opts)?;
    outcome.target = landed.target.clone();
    outcome.checks_run += landed.checks_run;
    outcome.checks_reused += landed.checks_reused;
    outcome.validations += landed.validations;
    let mut n = 0;
    for r in &landed.runs {
        let seen = entry(runs, &r.run_id);
        if r.result == Landing::Landed {
            n += 1;
        }
        seen.reason = r.reason.clone();
    }
    for w in &landed.waiting {
        entry(runs, &w.run_id).reason = Some(w.reason.clone());
    }
    on_event(format!(
        "round {round}: landed {n}, reopened {}{}",
        landed.reopened.len(),
        list(landed.reopened.iter().map(|r| r.run_id.as_str()))
    ));
    Ok(())
}

/// Repair reopened run `id` with its agent (resumed, or run again from the stored argv): true
/// when the repair completed it, so it is back in the queue. An interrupt, a lock or a ref that
/// moved stops the drain (an error); any other failure is the run's reason.
fn repair_one(
    env: &Env,
    opts: &LandOptions,
    (id, resume): (&str, bool),
    seen: &mut DrainedRun,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(String),
) -> Result<bool> {
    let ledger = env.store.find_ledger(id)?;
    if !resume && super::start::stored_agent(&ledger.record)?.is_none() {
        seen.reason =
            Some("reopened for a person: no loop drove it, so there is no agent to resume".into());
        return Ok(false);
    }
    wait_for_leftovers(env, id, on_event);
    on_event(format!(
        "repair {id}: {} its agent",
        if resume { "resuming" } else { "running" }
    ));
    let loop_opts = LoopOptions {
        run: Some(id.to_string()),
        resume,
        stream: opts.stream,
        ..LoopOptions::default()
    };
    let mut quiet = |_: &LoopEvent| {};
    let o = match run_loop(env, &loop_opts, interrupt, &mut quiet) {
        Ok(o) => o,
        // A lock (a stale one a killed process left, named with its removal, or another loop's)
        // or a ref that moved stops the drain: run it again once it is gone.
        Err(e) if e.kind == crate::error::ErrorKind::Conflict => return Err(e),
        Err(e) => {
            on_event(format!("repair {id}: {}", e.message));
            seen.reason = Some(e.message);
            return Ok(false);
        }
    };
    if let Some(l) = o.loop_state() {
        seen.agent_invocations += l.history.iter().filter(|h| h.agent.is_some()).count() as u32;
        seen.check_executions += l
            .history
            .iter()
            .filter_map(|h| h.evaluate.as_ref())
            .map(|e| e.checks.len() as u32)
            .sum::<u32>();
    }
    if o.run.state == RunState::Completed {
        on_event(format!("repair {id}: completed, back in the queue"));
        return Ok(true);
    }
    let why = o.loop_state().and_then(|l| l.why_harness_stopped);
    seen.reason = o.run.reason.clone();
    on_event(format!(
        "repair {id}: stopped {}",
        why.map_or("-", HarnessStop::as_str)
    ));
    if why == Some(HarnessStop::Interrupted) {
        return Err(crate::error::Error::refused(format!(
            "the drain was interrupted while repairing {id}"
        ))
        .hint("run `git tabellio land --until-empty` again to go on"));
    }
    Ok(false)
}

/// What is left on `target` for a person, added to `runs`: runs whose repair is exhausted, and
/// reopened runs no agent can repair, seen in this drain or left by an earlier one.
fn left_for_a_person(
    env: &Env,
    target: &str,
    runs: &mut BTreeMap<String, DrainedRun>,
) -> Result<()> {
    for (id, ledger) in ledgers_on(&env.store, target)? {
        let rec = &ledger.record;
        let exhausted = rec.state == RunState::Blocked
            && rec
                .loop_state
                .as_ref()
                .is_some_and(|l| l.why_harness_stopped == Some(HarnessStop::RepairExhausted));
        if exhausted || rec.state == RunState::Reopened {
            let seen = entry(runs, &id);
            seen.reason = seen.reason.take().or_else(|| rec.reason.clone());
        }
    }
    Ok(())
}

/// How long a drain waits for what a killed one left running in a run (its agent, a check):
/// they hold the run's loop lock until they end.
const LEFTOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Wait, bounded, until no process holds the loop lock of run `id`; a lock still held after
/// that is reported by the loop itself (exit 4, naming it).
fn wait_for_leftovers(env: &Env, id: &str, on_event: &mut dyn FnMut(String)) {
    let started = std::time::Instant::now();
    let mut said = false;
    while started.elapsed() < LEFTOVER_WAIT {
        match super::lock::acquire(env.store.repo.common_dir(), id) {
            Ok(lock) => {
                drop(lock);
                return;
            }
            Err(e) if e.kind == crate::error::ErrorKind::Conflict => {
                if !said {
                    on_event(format!("repair {id}: waiting: {}", e.message));
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(_) => return,
        }
    }
}

fn entry<'a>(runs: &'a mut BTreeMap<String, DrainedRun>, id: &str) -> &'a mut DrainedRun {
    runs.entry(id.to_string()).or_insert_with(|| DrainedRun {
        run_id: id.to_string(),
        state: RunState::Completed,
        rounds: 0,
        agent_invocations: 0,
        check_executions: 0,
        reason: None,
    })
}

fn list<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let ids: Vec<&str> = ids.collect();
    if ids.is_empty() {
        String::new()
    } else {
        format!(" ({})", ids.join(", "))
    }
}

/// The readable ledgers of the runs based on `target`, by id (an unreadable one is `status`'s
/// to report).
fn ledgers_on(
    store: &crate::store::Store,
    target: &str,
) -> Result<Vec<(String, crate::store::ledger::Ledger)>> {
    let mut out = Vec::new();
    for ledger in store.readable_ledgers()? {
        if ledger.record.base.reference == target {
            out.push((ledger.record.run_id.clone(), ledger));
        }
    }
    Ok(out)
}

/// The `validation_failed` runs of `target` whose land refusal stands: refused as a culprit,
/// not reopened since, the run branch where it was.
fn refused_unreopened(env: &Env, target: &str) -> Result<Vec<String>> {
    let store = &env.store;
    let mut out = Vec::new();
    for (id, ledger) in ledgers_on(store, target)? {
        let rec = &ledger.record;
        if rec.state != RunState::ValidationFailed {
            continue;
        }
        let head = store.ref_target(&rec.branch)?.map(|h| h.to_string());
        if rec.standing_refusal(head.as_deref()).is_some() {
            out.push(id);
        }
    }
    Ok(out)
}

/// The runs of `target` a repair loop is to drive: reopened ones (a new repair loop), and
/// loops a killed or interrupted drain left (`looping`, or `blocked` by an interrupt: resumed).
/// The flag says resume.
fn to_repair(env: &Env, target: &str) -> Result<Vec<(String, bool)>> {
    let mut out = Vec::new();
    for (id, ledger) in ledgers_on(&env.store, target)? {
        let rec = &ledger.record;
        let interrupted = rec
            .loop_state
            .as_ref()
            .is_some_and(|l| l.repair && l.why_harness_stopped == Some(HarnessStop::Interrupted));
        let killed =
            rec.state == RunState::Looping && rec.loop_state.as_ref().is_some_and(|l| l.repair);
        match rec.state {
            RunState::Reopened => out.push((id, false)),
            RunState::Looping if killed => out.push((id, true)),
            RunState::Blocked if interrupted => out.push((id, true)),
            _ => {}
        }
    }
    Ok(out)
}
