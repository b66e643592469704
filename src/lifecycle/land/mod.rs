//! `land`: a merge queue without a server. Completed runs are stacked on the target's current
//! tip (restacked by replay or squash when the target moved), the stack's top is validated with
//! the target's required checks, and one compare-and-swap transaction moves the target, the run
//! branches and the ledgers together.
//!
//! Guarantees: the target only ever moves to a commit whose exact tree has passing evidence for
//! the required checks of the policy at the tip it was stacked on (and of a run's own policy
//! when the run changed it). Every ref write is compare-and-swap; a lost race (the target or a
//! ledger moved) is re-read and the queue rebuilt on the new tip, at most [`ROUNDS`] times, never
//! overwritten. What may be left behind by a failure: evidence notes of validated stacks (true
//! records about real commits) and unreachable objects of restacks that did not land, which
//! `git gc` removes. A conflicting run is recorded as a refused attempt in its own ledger only;
//! a failing run (the culprit a bisection isolates) becomes `validation_failed`.

mod check;
mod confirm;
mod lanes;
mod plan;
mod queue;
mod refusal;
mod remote;
mod repair;
mod requeue;
mod required;
mod scopes;
mod signing;
mod stack;
mod write;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::RunState;
use crate::runner::Stream;
use crate::store::Store;

use crate::evidence::reuse::Reuse;
use crate::run::Env;

pub use queue::{Candidate, Waiting};
pub use requeue::Requeued;

/// How many times a queue is rebuilt on a target that moved underneath before giving up.
pub const ROUNDS: u32 = 3;

/// The default number of runs stacked and validated together.
pub const DEFAULT_BATCH: usize = 8;

/// What `land` was asked.
#[derive(Debug, Clone)]
pub struct LandOptions {
    /// The runs to land, in this order (empty: every completed run of the target).
    pub runs: Vec<String>,
    /// The target branch (default: the named runs' base branch, else the current branch).
    pub target: Option<String>,
    /// At most this many runs are stacked and validated together.
    pub batch: usize,
    /// Land each run as one commit instead of replaying its commits.
    pub squash: bool,
    /// Land on this remote's target (one atomic push) instead of the local one.
    pub remote: Option<String>,
    pub reuse: Reuse,
    /// Say what would happen and write nothing.
    pub dry_run: bool,
    pub stream: Stream,
    /// `--sign-key <file>`: sign the records with this key instead of git's `user.signingKey`.
    pub sign_key: Option<std::path::PathBuf>,
    /// `--no-sign`: do not sign the records.
    pub no_sign: bool,
    /// `--lanes W`: run no check here; publish up to W candidate stacks at once for workers.
    pub lanes: Option<usize>,
    /// `--reopen`: reopen every run refused by a conflict or a failure onto the new tip.
    pub reopen: bool,
    /// Where `land --lanes` says it is still waiting for workers (a line at a time).
    pub progress: Option<fn(&str)>,
}

impl Default for LandOptions {
    fn default() -> Self {
        LandOptions {
            runs: Vec::new(),
            target: None,
            batch: DEFAULT_BATCH,
            squash: false,
            remote: None,
            reuse: Reuse::Allowed,
            dry_run: false,
            stream: Stream::Quiet,
            sign_key: None,
            no_sign: false,
            lanes: None,
            reopen: false,
            progress: None,
        }
    }
}

/// What became of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Landing {
    /// Landed by this call.
    Landed,
    /// Promoted or landed before this call; nothing was done.
    AlreadyLanded,
    /// Its change conflicts with the tip it was to be stacked on; it stays `completed`.
    Conflict,
    /// The stack fails the required checks because of it; it is now `validation_failed`.
    ValidationFailed,
    /// It cannot be landed as it is (e.g. a merge commit to replay); nothing was written.
    Refused,
    /// `--dry-run`: it would be landed (or restacked and validated first).
    WouldLand,
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunLanding {
    pub run_id: String,
    pub result: Landing,
    /// The run's state after this call.
    pub state: RunState,
    /// The commit the run landed as (its replayed head), or would land as in a dry run when
    /// nothing has to be restacked.
    pub landed: Option<String>,
    /// `none`, `replay` or `squash`.
    pub restack: Option<crate::model::land::RestackMode>,
    /// The run's frozen base and the tip it was stacked on.
    pub base_before: String,
    pub base_after: Option<String>,
    /// Conflicting paths (sorted), for `conflict`.
    pub paths: Vec<String>,
    /// `conflict`: the run's commit that did not apply; `validation_failed`: the run's
    /// restacked head, on which the failing evidence is noted.
    pub commit: Option<String>,
    /// Why, in a person's words, for anything but `landed`.
    pub reason: Option<String>,
    /// Dry run: whether the top of the run's stack already has passing evidence for every
    /// required check (so validating it would run nothing).
    pub satisfied: Option<bool>,
    /// Which required checks apply to the run's change, which are `not_applicable` (their
    /// declared inputs untouched) and which are reused (passing evidence for the same inputs
    /// exists), as judged before validating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<plan::ChecksPlan>,
}

/// What `land` did.
#[derive(Debug, Clone, Serialize)]
pub struct LandOutcome {
    pub target: String,
    /// The target's tip before and after.
    pub old: Option<String>,
    pub new: Option<String>,
    /// `ref`, `worktree` (the target is checked out and its files moved too) or `remote`.
    pub mode: crate::model::run::PromotionMode,
    pub runs: Vec<RunLanding>,
    /// Checks executed and checks whose passing evidence on the same tree was reused.
    pub checks_run: usize,
    pub checks_reused: usize,
    /// Every check execution this call made, in order, each with its attempt number on its
    /// tree: a retry that passed never hides the failure before it.
    pub executions: Vec<crate::evidence::history::Execution>,
    /// The verdicts on the target's new tip under the policy of the tip it was landed on
    /// (`flaky-pass`, `no-new-failures` with the inherited test ids); empty when it did not move.
    pub verdicts: Vec<crate::evidence::judge::CheckVerdict>,
    /// Stack tops validated (each a set of checks on one commit).
    pub validations: usize,
    /// Queue builds: 1, plus one for every time the target moved underneath.
    pub rounds: u32,
    pub dry_run: bool,
    /// Why the verification summary of the new tip could not be noted, when it could not (the
    /// landing itself stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_warning: Option<String>,
    /// Completed runs a bare `land` left out: refused before, unchanged since.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Waiting>,
    /// `--reopen` (or the policy's `on_refuse`): the refused runs reopened onto the new tip.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reopened: Vec<Requeued>,
}

impl LandOutcome {
    /// Every run landed (now or before): exit 0; otherwise the batch result is exit 1.
    pub fn all_landed(&self) -> bool {
        self.runs.iter().all(|r| {
            matches!(
                r.result,
                Landing::Landed | Landing::AlreadyLanded | Landing::WouldLand
            )
        })
    }
}

/// Land the queue: batches of at most `opts.batch` runs, each stacked, validated, bisected on
/// failure and landed in one transaction.
pub fn land(env: &Env, opts: &LandOptions) -> Result<LandOutcome> {
    if opts.batch == 0 {
        return Err(Error::usage("--batch must be at least 1"));
    }
    let store = &env.store;
    if let Some(remote) = &opts.remote {
        crate::store::remote::fetch::check_remote(store, remote)?;
    }
    let target = queue::target(env, opts)?;
    let old = store.ref_target(&target)?;
    let mut outcome = LandOutcome {
        target: target.clone(),
        old: old.map(|o| o.to_string()),
        new: old.map(|o| o.to_string()),
        mode: crate::model::run::PromotionMode::Ref,
        runs: Vec::new(),
        checks_run: 0,
        checks_reused: 0,
        executions: Vec::new(),
        verdicts: Vec::new(),
        validations: 0,
        rounds: 0,
        dry_run: opts.dry_run,
        summary_warning: None,
        waiting: Vec::new(),
        reopened: Vec::new(),
    };
    // Every named run is looked at before anything is written: a run in the wrong state
    // refuses the whole command.
    let first = queue::resolve(store, &target, &opts.runs)?;
    if opts.runs.is_empty()
        && first.candidates.is_empty()
        && first.already.is_empty()
        && first.waiting.is_empty()
    {
        let elsewhere = queue::waiting_elsewhere(store, &target)?;
        if let Some((other, _)) = elsewhere.first() {
            let list: Vec<String> = elsewhere
                .iter()
                .map(|(t, n)| format!("{n} on {t}"))
                .collect();
            return Err(Error::usage(format!(
                "no completed run targets {target}, but completed runs wait on other branches: {}",
                list.join(", ")
            ))
            .hint(format!(
                "land them onto their target: `git tabellio land --target {}`",
                other.trim_start_matches("refs/heads/")
            )));
        }
    }
    outcome.runs.extend(first.already);
    outcome.waiting = first.waiting;
    let squash = opts.squash || crate::store::policy::squash_at(store, &target)?;
    if opts.dry_run {
        let (results, predicted) =
            stack::dry_run(store, &target, &first.candidates, squash, opts.batch)?;
        outcome.runs.extend(results);
        outcome.validations = predicted.validations;
        outcome.checks_run = predicted.checks_run;
        outcome.checks_reused = predicted.checks_reused;
        return Ok(outcome);
    }

    let tip = store.ref_target(&target)?;
    let plans = match tip {
        Some(tip) => plan::plans(store, tip, &first.candidates)?,
        None => Vec::new(),
    };
    match opts.lanes {
        // The workers run the checks and sign their records (and refuse, before running any,
        // when their key could not count); the lander runs none and signs nothing.
        Some(0) => return Err(Error::usage("--lanes must be at least 1")),
        Some(lanes) => lanes::land(store, &target, opts, (lanes, squash), &mut outcome)?,
        None => land_here(
            env,
            (&target, squash),
            opts,
            &first.candidates,
            &mut outcome,
        )?,
    }
    if opts.remote.is_none() {
        let new = store.ref_target(&target)?;
        outcome.new = new.map(|o| o.to_string());
        if let (Some(old), Some(new)) = (old, new) {
            if old != new {
                let checks = required::requirements(store, old, &[])?;
                outcome.verdicts =
                    check::Checker::new(store, opts, squash).verdicts_of(old, new, &checks)?;
            }
        }
    }
    note_summary_of(store, opts, &mut outcome)?;
    // What a landing killed while it removed its validations' worktrees left is removed by the
    // next one, also one with nothing to validate (each validation sweeps before it starts).
    crate::store::scratch::sweep_stale(store);
    if opts.remote.is_none() {
        let on_refuse = crate::store::policy::land_at(store, &target)?.on_refuse;
        if opts.reopen || on_refuse == Some(crate::model::policy::OnRefuse::Reopen) {
            outcome.reopened = requeue::reopen_refused(env, &mut outcome.runs, &outcome.waiting)?;
        }
    }
    for run in &mut outcome.runs {
        if let Some((_, plan)) = plans.iter().find(|(id, _)| *id == run.run_id) {
            run.checks = Some(plan.clone());
        }
    }
    Ok(outcome)
}

/// Note the verification summary of the tip the landing moved the target to (`outcome.old` →
/// `outcome.new`), and on `--remote` push it there; a summary that could not be written is a
/// warning, never a failed landing.
fn note_summary_of(store: &Store, opts: &LandOptions, outcome: &mut LandOutcome) -> Result<()> {
    let (Some(old), Some(new)) = (&outcome.old, &outcome.new) else {
        return Ok(());
    };
    let (old, new) = if old == new {
        match left_unsummarised(store, outcome)? {
            Some(landing) => landing,
            None => return Ok(()),
        }
    } else {
        (store.parse_oid(old)?, store.parse_oid(new)?)
    };
    let key = opts.sign_key.as_deref();
    let target = &outcome.target;
    let written = match &opts.remote {
        None => crate::run::vsa::note_summary(store, target, (old, new), key),
        Some(remote) => crate::run::vsa::publish_summary(store, remote, target, (old, new), key),
    };
    outcome.summary_warning = written.err().map(|e| e.message);
    Ok(())
}

/// A landing killed after its transaction and before its summary: the target's tip has no
/// summary, and a run's ledger records the landing (or promotion) that moved the target there
/// (a run named here first, else any run's). Its `(old, new)`, for landing again to write the
/// summary the killed one left out.
fn left_unsummarised(
    store: &Store,
    outcome: &LandOutcome,
) -> Result<Option<(gix::ObjectId, gix::ObjectId)>> {
    let Some(tip) = outcome.new.as_deref() else {
        return Ok(None);
    };
    if !store
        .note_lines(crate::store::notes::VSA, store.parse_oid(tip)?)?
        .is_empty()
    {
        return Ok(None);
    }
    // An unreadable ledger (a newer schema) records nothing this can use.
    let named = (outcome.runs.iter())
        .filter(|r| r.result == Landing::AlreadyLanded)
        .filter_map(|r| store.try_find_ledger(&r.run_id).ok().flatten());
    for ledger in named.chain(store.readable_ledgers()?) {
        let Some(p) = ledger.record.promotion else {
            continue;
        };
        if p.target == outcome.target && p.new == tip {
            return crate::run::vsa::unsummarised(store, &p);
        }
    }
    Ok(None)
}

/// Validate and land here: the checks run in this process, signed by its key.
fn land_here(
    env: &Env,
    (target, squash): (&str, bool),
    opts: &LandOptions,
    candidates: &[queue::Candidate],
    outcome: &mut LandOutcome,
) -> Result<()> {
    let store = &env.store;
    let ids: Vec<String> = candidates
        .iter()
        .map(|c| c.ledger.record.run_id.clone())
        .collect();
    // Before anything is written: a key that cannot sign refuses the whole command.
    let signer = signing::signer(store, opts, target)?;
    signing::refuse_uncountable_checks(
        store,
        target,
        candidates,
        (squash, opts.batch),
        (signer.as_ref(), opts.no_sign),
    )?;
    // Runs whose changes fall in disjoint check scopes land side by side, each lane on its own.
    let scopes = match (&opts.remote, store.ref_target(target)?) {
        (None, Some(tip)) => scopes::partition(store, tip, candidates)?,
        _ => vec![ids.clone()],
    };
    if scopes.len() > 1 {
        scopes::land_scopes(env, (target, squash), opts, scopes, outcome)?;
    } else {
        let mut checker = check::Checker::new(store, opts, squash).signing(signer);
        land_runs(store, target, ids, &mut checker, outcome, ROUNDS)?;
        outcome.checks_run = checker.checks_run;
        outcome.checks_reused = checker.checks_reused;
        outcome.validations = checker.validations;
        outcome.executions = std::mem::take(&mut checker.executions);
    }
    Ok(())
}

/// Land `ids` in batches of the checker's size, rebuilding a batch at most `rounds` times on a
/// target that moved underneath.
fn land_runs(
    store: &Store,
    target: &str,
    mut pending: Vec<String>,
    checker: &mut check::Checker<'_>,
    outcome: &mut LandOutcome,
    rounds: u32,
) -> Result<()> {
    while !pending.is_empty() {
        let take = pending.len().min(checker.batch);
        let batch: Vec<String> = pending.drain(..take).collect();
        checker.more_waiting = !pending.is_empty();
        let (results, requeued) = match checker.remote.clone() {
            Some(remote) => {
                remote::land_batch(store, (&remote, target, false), &batch, checker, outcome)?
            }
            None => land_batch(store, target, &batch, checker, outcome, rounds)?,
        };
        outcome.runs.extend(results);
        // The runs stacked after a culprit lead the next batch.
        pending.splice(..0, requeued);
    }
    Ok(())
}

/// One batch, rebuilt on the new tip whenever the target (or a ledger) moved underneath: the
/// landings, and the runs stacked after a culprit, to be landed next ([`check::Settled::requeued`]).
fn land_batch(
    store: &Store,
    target: &str,
    batch: &[String],
    checker: &mut check::Checker<'_>,
    outcome: &mut LandOutcome,
    rounds: u32,
) -> Result<(Vec<RunLanding>, Vec<String>)> {
    let mut last_moved = target.to_string();
    for _ in 0..rounds {
        outcome.rounds += 1;
        // Re-read every round: another `land` may have landed some of these meanwhile.
        let queue = queue::resolve(store, target, batch)?;
        let mut results = queue.already;
        if queue.candidates.is_empty() {
            return Ok((results, Vec::new()));
        }
        let tip = store.ref_target(target)?.ok_or_else(|| {
            Error::not_found(format!("the target {target} does not exist"))
                .hint("land onto an existing branch (--target)")
        })?;
        let mut settled = check::settle(store, checker, tip, queue.candidates)?;
        let written = write::land_settled(store, target, tip, &settled)?;
        // After the landing: removing the validations' worktrees never delays it.
        checker.clean_up()?;
        match written {
            write::Written::Landed { mode } => {
                if mode != crate::model::run::PromotionMode::Ref {
                    outcome.mode = mode;
                }
                let requeued = std::mem::take(&mut settled.requeued);
                results.extend(write::results(store, target, settled)?);
                return Ok((results, requeued));
            }
            write::Written::Moved { name } => last_moved = name,
        }
    }
    // A lock that outlived every round is no live writer's: a killed one left it.
    if let Some((name, lock)) = crate::store::tx::held_lock(store, &[last_moved.as_str()]) {
        return Err(crate::store::tx::TxError::Locked { name, lock }.into_error());
    }
    Err(Error::conflict(format!(
        "{last_moved} kept moving while landing: gave up after {rounds} rounds"
    ))
    .hint("other writers are moving it; run `git tabellio land` again"))
}
