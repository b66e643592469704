//! Which runs land, in which order, onto which target; every run's own preconditions checked
//! before anything is written.

use crate::error::{Error, Result};
use crate::model::policy;
use crate::model::RunState;
use crate::run::promotion::{check_validated, PromoteError};
use crate::store::ledger::Ledger;
use crate::store::replay::commits_since;
use crate::store::Store;

use super::{LandOptions, Landing, RunLanding};
use crate::run::{current_branch, valid_run_id, Env};

/// A completed run that may land: its ledger as read, its frozen base and validated head.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub ledger: Ledger,
    pub base: gix::ObjectId,
    pub head: gix::ObjectId,
    /// The run's commits since its base, oldest first.
    pub commits: Vec<gix::ObjectId>,
}

impl Candidate {
    pub fn run_id(&self) -> &str {
        &self.ledger.record.run_id
    }
}

/// The queue as read now.
#[derive(Default)]
pub struct Queue {
    pub candidates: Vec<Candidate>,
    /// Runs that are promoted already.
    pub already: Vec<RunLanding>,
    /// Completed runs left out of a bare `land` because `land` refused them and nothing
    /// changed since: trying them again would only be refused again.
    pub waiting: Vec<Waiting>,
}

/// A completed run whose land refusal stands.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Waiting {
    pub run_id: String,
    /// The refusal, in a person's words.
    pub reason: String,
    /// What starts its repair.
    pub command: String,
}

/// The target: `--target` (a branch name or `refs/heads/…`), else the named runs' base branch,
/// else, inside a run's worktree, that run's target, else the current branch.
pub fn target(env: &Env, opts: &LandOptions) -> Result<String> {
    if let Some(t) = &opts.target {
        let full = if t.starts_with("refs/") {
            t.clone()
        } else {
            format!("refs/heads/{t}")
        };
        if !full.starts_with("refs/heads/") {
            return Err(Error::usage(format!("--target {t} is not a branch"))
                .hint("land only moves local branches (refs/heads/…)"));
        }
        return Ok(full);
    }
    let mut bases = Vec::new();
    for id in &opts.runs {
        valid_run_id(id)?;
        let base = env.store.find_ledger(id)?.record.base.reference;
        if !bases.contains(&base) {
            bases.push(base);
        }
    }
    match bases.len() {
        1 => return Ok(bases.remove(0)),
        0 => {}
        _ => {
            return Err(Error::usage(format!(
                "the named runs target different branches: {}",
                bases.join(", ")
            ))
            .hint("land them separately, or name the target with --target"))
        }
    }
    // Inside a run's worktree the current branch is the run's own: its target is meant.
    if let Ok(ledger) = crate::run::resolve_run(env, None) {
        return Ok(ledger.record.base.reference);
    }
    current_branch(&env.store)
        .filter(|h| h.starts_with("refs/heads/"))
        .ok_or_else(|| {
            Error::usage("no run named, no --target, and HEAD is not on a branch")
                .hint("name the target: `git tabellio land --target <branch>`")
        })
}

/// Read the queue: the named runs in order, or every completed run whose target is `target`,
/// oldest completion first. A named run in a state other than `completed` or `promoted` refuses
/// the whole command (exit 3), as does a completed run whose evidence no longer holds.
pub fn resolve(store: &Store, target: &str, named: &[String]) -> Result<Queue> {
    if named.is_empty() {
        return resolve_up_to(store, target, completed_of(store, target)?, usize::MAX);
    }
    let mut ledgers: Vec<Ledger> = Vec::new();
    for id in named {
        valid_run_id(id)?;
        if ledgers.iter().any(|l| &l.record.run_id == id) {
            continue;
        }
        ledgers.push(store.find_ledger(id)?);
    }
    let mut queue = Queue::default();
    for ledger in ledgers {
        resolve_one(store, target, ledger, &mut queue)?;
    }
    Ok(queue)
}

/// The head of the queue, as [`resolve`] reads it without named runs: the first `limit` runs
/// that may land (and what was passed over on the way). Of a target with a queue (`enqueue`),
/// only the entries up to there have their runs read, so the cost does not grow with the
/// queue behind them.
pub fn resolve_first(store: &Store, target: &str, limit: usize) -> Result<Queue> {
    resolve_up_to(store, target, completed_of(store, target)?, limit)
}

/// [`resolve`] of the completed runs `ledgers` yields, in order, up to `limit` candidates: a
/// run whose refusal stands waits instead.
fn resolve_up_to(
    store: &Store,
    target: &str,
    ledgers: impl Iterator<Item = Ledger>,
    limit: usize,
) -> Result<Queue> {
    let mut queue = Queue::default();
    for ledger in ledgers {
        if queue.candidates.len() >= limit {
            break;
        }
        let head = store
            .ref_target(&ledger.record.branch)?
            .map(|h| h.to_string());
        match ledger.record.standing_refusal(head.as_deref()) {
            Some(refusal) => queue.waiting.push(Waiting {
                run_id: ledger.record.run_id.clone(),
                reason: refusal.describe(),
                command: format!("git tabellio reopen {}", ledger.record.run_id),
            }),
            None => resolve_one(store, target, ledger, &mut queue)?,
        }
    }
    Ok(queue)
}

/// Check one run and put it in `queue`: a candidate, or already landed.
fn resolve_one(store: &Store, target: &str, ledger: Ledger, queue: &mut Queue) -> Result<()> {
    // A landing killed half-way may have put the run on the target already.
    if let Some(done) = super::repair::finish_interrupted(store, &ledger, target)? {
        queue.already.push(done);
        return Ok(());
    }
    let (ledger, validated_head) = match settled_read(store, ledger)? {
        Ok(read) => read,
        Err(already) => {
            queue.already.push(already);
            return Ok(());
        }
    };
    let rec = &ledger.record;
    if rec.state == RunState::Promoted {
        queue.already.push(already_landed(&ledger));
        return Ok(());
    }
    if rec.state != RunState::Completed {
        return Err(Error::refused(format!(
            "run {} is {}; only completed runs land",
            rec.run_id, rec.state
        ))
        .hint(format!(
            "`git tabellio status {}` says what to do next",
            rec.run_id
        )));
    }
    if rec.base.reference != target {
        return Err(Error::refused(format!(
            "run {} targets {}, not {target}",
            rec.run_id, rec.base.reference
        ))
        .hint("land it onto its own target (--target), or leave it out"));
    }
    let Some(head) = validated_head else {
        return Err(Error::internal(format!(
            "run {} is completed but its validation was not checked",
            rec.run_id
        )));
    };
    let base = store.parse_oid(&rec.base.commit)?;
    let commits = commits_since(store, base, head).map_err(Error::from)?;
    queue.candidates.push(Candidate {
        ledger,
        base,
        head,
        commits,
    });
    Ok(())
}

/// With nothing to land on `target`: the other targets that completed runs wait on, with how
/// many, so `land` can say where they are instead of "nothing to land".
pub fn waiting_elsewhere(store: &Store, target: &str) -> Result<Vec<(String, usize)>> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for ledger in store.readable_ledgers()? {
        let rec = &ledger.record;
        if rec.state != RunState::Completed || rec.base.reference == target {
            continue;
        }
        match out.iter_mut().find(|(t, _)| *t == rec.base.reference) {
            Some((_, n)) => *n += 1,
            None => out.push((rec.base.reference.clone(), 1)),
        }
    }
    out.sort();
    Ok(out)
}

/// The run as it stands once no other writer is half-way through its transaction: gix writes
/// the loose refs of one transaction one after the other, so a concurrent `land` may be seen
/// with the run branch moved and the ledger not yet. A completed run whose preconditions fail
/// is re-read for a moment before the failure counts; `Err` is a run found promoted meanwhile.
fn settled_read(
    store: &Store,
    ledger: Ledger,
) -> Result<Result<(Ledger, Option<gix::ObjectId>), RunLanding>> {
    let mut ledger = ledger;
    for _ in 0..40 {
        if ledger.record.state == RunState::Promoted {
            return Ok(Err(already_landed(&ledger)));
        }
        if ledger.record.state != RunState::Completed {
            return Ok(Ok((ledger, None)));
        }
        // Checked here, once, on the very record that is returned: a check made apart from the
        // read could see another landing's branch move in between.
        match check_validated(store, &ledger.record) {
            Ok((_, head)) => return Ok(Ok((ledger, Some(head)))),
            Err(PromoteError::EvidenceDoesNotHold { unsatisfied, .. })
                if !landing_in_flight(store, &ledger.record)? =>
            {
                // One run's evidence does not hold the queue up: it is refused alone.
                return Ok(Err(evidence_refused(store, &ledger, &unsatisfied)?));
            }
            Err(e) if !landing_in_flight(store, &ledger.record)? => return Err(e.into()),
            Err(_) => {}
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        ledger = store.find_ledger(&ledger.record.run_id)?;
    }
    // Still half-way after a while (a slow or killed writer): another writer's, not ours to
    // judge as a refusal of the run. A lock left by a killed landing is named, with its removal.
    let ledger_ref = crate::store::ledger::ref_name(&ledger.record.run_id);
    if let Some((name, lock)) =
        crate::store::tx::held_lock(store, &[ledger.record.branch.as_str(), ledger_ref.as_str()])
    {
        return Err(crate::store::tx::TxError::Locked { name, lock }.into_error());
    }
    Err(Error::conflict(format!(
        "run {} is being landed by another process: its branch is already on {}, its ledger not yet",
        ledger.record.run_id, ledger.record.base.reference
    ))
    .hint(format!(
        "run `git tabellio status {}` in a moment; if it stays like this, the other landing was killed half-way (docs/land.md, \"A killed landing\")",
        ledger.record.run_id
    )))
}

/// A completed run whose branch was moved onto its target's history: what another `land`
/// writes in the same transaction as the ledger (the branch first), not a commit of the run's.
fn landing_in_flight(store: &Store, rec: &crate::model::RunRecord) -> Result<bool> {
    let (Some(head), Some(tip)) = (
        store.ref_target(&rec.branch)?,
        store.ref_target(&rec.base.reference)?,
    ) else {
        return Ok(false);
    };
    let validated = rec.validated.as_ref().map(|v| v.commit.as_str());
    Ok(validated != Some(head.to_string().as_str()) && store.is_ancestor(head, tip)?)
}

/// The runs a bare `land` takes: when `target` has a queue (`enqueue`), its entries whose runs
/// are completed, in queue order; otherwise every completed run whose target is `target`, oldest
/// completion first (the time of its passing attempt; the run id breaks ties).
///
/// The ledgers of queue entries are read as the iterator is taken: a reader of the queue's
/// head reads no more of them than it takes.
fn completed_of<'s>(
    store: &'s Store,
    target: &'s str,
) -> Result<Box<dyn Iterator<Item = Ledger> + 's>> {
    let queued = store.read_queue(Some(target))?;
    if !queued.entries.is_empty() {
        return Ok(Box::new(queued.entries.into_iter().filter_map(
            move |entry| match store.try_find_ledger(&entry.record.run) {
                Ok(Some(l))
                    if l.record.state == RunState::Completed
                        && l.record.base.reference == target =>
                {
                    Some(l)
                }
                _ => None,
            },
        )));
    }
    let mut out = Vec::new();
    // One unreadable ledger (a newer schema) must not stop the queue.
    for ledger in store.readable_ledgers()? {
        if ledger.record.state == RunState::Completed && ledger.record.base.reference == target {
            out.push(ledger);
        }
    }
    let completed_at = |l: &Ledger| {
        l.record
            .attempts
            .iter()
            .rev()
            .find(|a| a.status == crate::model::run::AttemptStatus::Passed)
            .map_or_else(|| l.record.updated_at.clone(), |a| a.at.clone())
    };
    out.sort_by(|a, b| {
        completed_at(a)
            .cmp(&completed_at(b))
            .then_with(|| a.record.run_id.cmp(&b.record.run_id))
    });
    Ok(Box::new(out.into_iter()))
}

/// The result for a completed run whose evidence does not hold under the target tip's policy
/// (`unsatisfied`: `name (verdict)` per check). When the run's own commits change the policy,
/// that is why: a run never changes its own gate, so its evidence, made under its own policy, is
/// judged by the target's.
fn evidence_refused(store: &Store, ledger: &Ledger, unsatisfied: &[String]) -> Result<RunLanding> {
    let rec = &ledger.record;
    let id = &rec.run_id;
    let base = store.parse_oid(&rec.base.commit)?;
    let head = store.ref_target(&rec.branch)?;
    let own_policy = match head {
        Some(head) => {
            store.read_file_at(base, policy::PATH)? != store.read_file_at(head, policy::PATH)?
        }
        None => false,
    };
    let reason = if own_policy {
        format!(
            "its own commits change {path}, and a run never changes its own gate: judged by the \
             policy at the tip of {target}, its evidence does not hold ({checks}); revert its \
             change to {path} in the run (a policy change lands on its own, by a person), \
             commit, then `git tabellio finish {id}`",
            path = policy::PATH,
            target = rec.base.reference,
            checks = unsatisfied.join(", ")
        )
    } else {
        format!(
            "its evidence does not hold under the policy at the tip of {target} ({checks}); \
             `git tabellio status {id}` says what to do next",
            target = rec.base.reference,
            checks = unsatisfied.join(", ")
        )
    };
    Ok(RunLanding {
        run_id: id.clone(),
        result: Landing::Refused,
        state: rec.state,
        landed: None,
        restack: None,
        base_before: rec.base.commit.clone(),
        base_after: None,
        paths: Vec::new(),
        commit: head.map(|h| h.to_string()),
        reason: Some(reason),
        satisfied: None,
        checks: None,
    })
}

/// The result for a run promoted before this call.
pub fn already_landed(ledger: &Ledger) -> RunLanding {
    let rec = &ledger.record;
    RunLanding {
        run_id: rec.run_id.clone(),
        result: Landing::AlreadyLanded,
        state: rec.state,
        landed: rec
            .landed
            .clone()
            .or_else(|| rec.promotion.as_ref().map(|p| p.new.clone())),
        restack: rec.restack.as_ref().map(|r| r.mode),
        base_before: rec.base.commit.clone(),
        base_after: rec.restack.as_ref().map(|r| r.base_after.clone()),
        paths: Vec::new(),
        commit: None,
        reason: Some(match &rec.promotion {
            Some(p) => format!("already landed on {} at {}", p.target, p.new),
            None => "already promoted".into(),
        }),
        satisfied: None,
        checks: None,
    }
}
