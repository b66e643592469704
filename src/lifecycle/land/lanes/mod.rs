//! `land --lanes W`: the lander of distributed landing. It runs no check: it plans candidate
//! stacks ([`plan`]), publishes them as `refs/tabellio/candidates/<target>/<id>` for workers
//! (`git tabellio worker`) to validate, and lands what their evidence proves, through the same
//! stacking, bisection and transaction as `land` ([`super::check::settle`] with a
//! [`deferred::Deferred`] checker: where `land` would run checks, the notes decide).
//!
//! It holds no state outside refs: the queue, the candidates and the evidence on their trees are
//! all it reads, each round afresh, so a lander killed anywhere is continued by any other
//! (`land --lanes W` again, on any clone); two at once are safe, since every move is the
//! compare-and-swap `land` makes and candidates are created only (same stack, same id).
//! Candidates stacked on a tip the target has left are removed after each landing.

pub mod deferred;
pub mod plan;

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::evidence::known::{tree_verdict, Known};
use crate::model::candidate::{CandidateCheck, CandidateRecord, CandidateRun, CANDIDATE_SCHEMA};
use crate::model::policy::ResolvedCheck;
use crate::model::time;
use crate::store::candidates::{candidate_id, candidate_ref, CANDIDATES};
use crate::store::notes::EVIDENCE;
use crate::store::queue::target_short;
use crate::store::remote::fetch::Tracking;
use crate::store::remote::fetch_and_merge_notes;
use crate::store::remote::push::{self, PushRef, PushResult};
use crate::store::replay;
use crate::store::tx::{self, Cas};
use crate::store::Store;

use super::check::Checker;
use super::queue::{self, Candidate};
use super::required::requirements;
use super::stack::stack_one;
use super::{LandOptions, LandOutcome};
use deferred::Deferred;

/// How long the lander waits between looks at the notes while workers validate.
const POLL: Duration = Duration::from_millis(200);

/// How often a lander waiting for workers says so (`progress`).
const SAY_EVERY: Duration = Duration::from_secs(30);

/// How many times in a row a landing that lost to another writer is read again and retried.
const CONFLICTS: u32 = 5;

/// Land `target`'s queue with `opts.lanes` candidates validated at once by workers.
pub fn land(
    store: &Store,
    target: &str,
    opts: &LandOptions,
    (lanes, squash): (usize, bool),
    outcome: &mut LandOutcome,
) -> Result<()> {
    let server = Server {
        store,
        remote: opts.remote.as_deref(),
        target,
    };
    let mut conflicts = 0;
    let mut idle = 0;
    // The wait for workers ends on a fetch of everything a round reads: the round after it
    // does not fetch again.
    let mut fresh = false;
    loop {
        let skipped = std::mem::take(&mut fresh);
        if !skipped {
            server.refresh()?;
        }
        // The notes as this round reads them: evidence noted from here on ends the wait below
        // at once, so a worker finishing while this round plans is never missed.
        let seen = store.ref_target_now(EVIDENCE)?;
        let (batch, priority) = next_batch(store, &server, target, opts.batch)?;
        if batch.is_empty() {
            // Also what a lander killed after its last landing left; nothing is left to land,
            // so a candidate a worker still validates is no use to anyone either. They are
            // removed as the remote has them now (the last fetch was before a retirement).
            if skipped {
                server.refresh()?;
            }
            return server.retire(Retire::All);
        }
        let ids: Vec<String> = batch.iter().map(|c| c.run_id().to_string()).collect();
        let tip = server.tip()?.ok_or_else(|| {
            Error::not_found(format!("the target {target} does not exist"))
                .hint("land onto an existing branch (--target)")
        })?;
        let mut stacks = Stacker::new(&server, tip, &batch, squash);
        let mut checker = Checker::new(store, opts, squash);
        checker.deferred = Some(Deferred {
            failing: plan::smallest_failing(store, &mut stacks, &ids)?,
            ..Deferred::default()
        });
        let landed = match &opts.remote {
            Some(remote) => {
                // Fetched just now, at the start of this round.
                let fetched = true;
                super::remote::land_batch(
                    store,
                    (remote, target, fetched),
                    &ids,
                    &mut checker,
                    outcome,
                )
            }
            None => super::land_batch(store, target, &ids, &mut checker, outcome, super::ROUNDS),
        };
        outcome.validations += checker.validations;
        outcome.checks_reused += checker.checks_reused;
        let pending = checker.deferred.as_mut().and_then(|d| d.pending.take());
        match (landed, pending) {
            // Nothing is requeued here (`more_waiting` is off): each round takes the queue anew.
            (Ok((results, _)), _) => {
                outcome.runs.extend(results);
                conflicts = 0;
                server.refresh()?;
                server.retire(Retire::Unclaimed)?;
                // What the next round reads was fetched just now (the candidates retired
                // there are on a tip the target left, which no round reads).
                fresh = true;
            }
            (Err(_), Some(pending)) => {
                // A round is the candidates published together: the next is planned once the
                // notes give each of them its verdict, from all they say, so a round never
                // plans on half of the last one's results (and validates more than it needs).
                // A verdict that could not change the plan is not waited for: a stack that
                // begins with a failing prefix fails, and none below a passing prefix is
                // asked (`plan::Bounds`).
                let waiting = next_round(&server, &mut stacks, (&ids, &pending), lanes)?;
                if waiting == 0 {
                    // Nothing any worker could validate would decide this stack: waiting
                    // would never end. Read everything again a few times (another lander may
                    // have moved the target meanwhile), then say so.
                    idle += 1;
                    if idle > CONFLICTS {
                        return Err(Error::refused(format!(
                            "the stack of {} on {target} waits for a validation no candidate can ask for",
                            pending.join(", ")
                        ))
                        .hint("see `git tabellio queue`; `land` without --lanes validates it here"));
                    }
                    std::thread::sleep(POLL);
                    continue;
                }
                idle = 0;
                fresh = server.wait_for_evidence((seen, &priority), waiting, opts.progress)?;
            }
            // Another writer moved something underneath (the target, a ledger): read the
            // refs again, a few times, before giving up as `land` does.
            (Err(e), None) if e.kind == ErrorKind::Conflict && conflicts < CONFLICTS => {
                conflicts += 1;
                std::thread::sleep(POLL);
            }
            (Err(e), None) => return Err(e),
        }
    }
}

/// The runs this round lands: the queue's head only (a round's work does not grow with the
/// queue behind it), up to `batch` of them, and only the priority entries when the head is
/// theirs; with the priority runs' ids. Priority entries land first, as a batch of their own:
/// their candidates never wait on the rest of the queue's, and their landing leaves the others'
/// evidence standing wherever it does not touch a check's inputs.
fn next_batch(
    store: &Store,
    server: &Server,
    target: &str,
    batch: usize,
) -> Result<(Vec<Candidate>, Vec<String>)> {
    let queue = queue::resolve_first(store, target, batch)?;
    let priority = server.priority_runs()?;
    let urgent = queue
        .candidates
        .iter()
        .take_while(|c| priority.iter().any(|p| p == c.run_id()))
        .count();
    let take = if urgent > 0 {
        urgent
    } else {
        queue.candidates.len()
    };
    let runs = queue.candidates.into_iter().take(take.min(batch)).collect();
    Ok((runs, priority))
}

/// How many of the stack's candidates still wait for a verdict that could change the plan;
/// when none does, the next round is planned and its candidates published together (one push
/// with `--remote`, so the workers start on them together), and the count is taken again.
fn next_round(
    server: &Server,
    stacks: &mut Stacker,
    (ids, pending): (&[String], &[String]),
    lanes: usize,
) -> Result<usize> {
    let store = server.store;
    let known = plan::bounds(store, stacks, ids)?;
    let waiting = stacks.unvalidated((ids, pending), known)?;
    if waiting > 0 {
        return Ok(waiting);
    }
    let planned = plan::plan(store, stacks, ids, pending, lanes)?;
    let mut round = Vec::new();
    for runs in &planned {
        round.extend(stacks.candidate(runs)?);
    }
    server.publish(&round)?;
    stacks.unvalidated((ids, pending), known)
}

/// Which candidates on a tip the target has left are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retire {
    /// Those no worker is validating now.
    Unclaimed,
    /// All of them: the queue is empty.
    All,
}

/// Where the lander reads and writes: this repository, or `--remote`'s (fetched into the
/// tracking refs, written by leased pushes as well as here).
struct Server<'s> {
    store: &'s Store,
    remote: Option<&'s str>,
    target: &'s str,
}

impl Server<'_> {
    /// The target's tip as the lander lands on it.
    fn tip(&self) -> Result<Option<gix::ObjectId>> {
        match self.remote {
            Some(r) => self
                .store
                .ref_target(&format!("refs/remotes/{r}/{}", target_short(self.target))),
            None => self.store.ref_target(self.target),
        }
    }

    fn tracking_candidates(&self) -> Option<String> {
        self.remote
            .map(|r| format!("refs/tabellio/remotes/{r}/candidates/"))
    }

    /// The runs of the target's priority entries (with `--remote`, as last brought here).
    fn priority_runs(&self) -> Result<Vec<String>> {
        Ok(self
            .store
            .read_queue(Some(self.target))?
            .entries
            .into_iter()
            .filter(|e| e.record.priority)
            .map(|e| e.record.run)
            .collect())
    }

    fn claims_prefix(&self) -> String {
        match self.remote {
            Some(r) => format!("refs/tabellio/remotes/{r}/claims/"),
            None => crate::store::candidates::CLAIMS.to_string(),
        }
    }

    /// Is a worker validating candidate `id` now (a claim whose lease has not run out)?
    fn claimed(&self, id: &str) -> Result<bool> {
        let now = time::now();
        Ok(self
            .store
            .try_find_claim(&self.claims_prefix(), id)?
            .is_some_and(|c| !c.expired_at(&now)))
    }

    /// With `--remote`: fetch the remote's target, candidates, claims and notes, merge its
    /// notes here (the workers' evidence), and bring its queue entries.
    fn refresh(&self) -> Result<()> {
        let (Some(r), Some(tracking)) = (self.remote, self.tracking_candidates()) else {
            return Ok(());
        };
        let message = "tabellio: land fetches the workers' evidence";
        let extra = [
            format!("+{CANDIDATES}*:{tracking}*"),
            format!(
                "+{}*:{}",
                crate::store::candidates::CLAIMS,
                self.claims_prefix()
            ) + "*",
            format!(
                "+{}:refs/remotes/{r}/{}",
                self.target,
                target_short(self.target)
            ),
        ];
        fetch_and_merge_notes(self.store, r, &extra, message)?;
        let runs = Tracking::read(self.store, r)?.runs;
        // A ledger the remote moved past ours (another lander, or a push of ours whose answer
        // never came back, landed the run) is fast-forwarded here, so the run is seen landed.
        let mut edits = Vec::new();
        for (id, mine) in self.store.list_ledgers()? {
            if let Some(theirs) = runs.get(&id).filter(|t| **t != mine) {
                if self.store.repo.has_object(*theirs) && self.store.is_ancestor(mine, *theirs)? {
                    edits.push(Cas::update(
                        crate::store::ledger::ref_name(&id),
                        Some(mine),
                        *theirs,
                        message,
                    ));
                }
            }
        }
        edits.extend(crate::store::queue::plan_sync(self.store, r, &runs, message)?.0);
        let _ = tx::apply(self.store, &edits);
        Ok(())
    }

    /// The candidates of the target published here (or, with `--remote`, there).
    fn candidates(&self) -> Result<Vec<crate::store::candidates::Candidate>> {
        Ok(match self.tracking_candidates() {
            Some(prefix) => {
                self.store
                    .read_candidates_under(&prefix, Some(self.target))?
                    .0
            }
            None => self.store.read_candidates(Some(self.target))?.0,
        })
    }

    /// Wait until the evidence notes move from `seen` (the workers noted something) or a
    /// priority entry not among `priority` is queued, saying every [`SAY_EVERY`] how many
    /// candidates are still waiting: a lander without workers waits for them, never silently.
    /// True when it ended on a [`Self::refresh`] (with `--remote`, a fetch of everything).
    fn wait_for_evidence(
        &self,
        (seen, priority): (Option<gix::ObjectId>, &[String]),
        waiting: usize,
        progress: Option<fn(&str)>,
    ) -> Result<bool> {
        let started = std::time::Instant::now();
        let mut said = started;
        let mut refreshed = false;
        loop {
            if self.store.ref_target_now(EVIDENCE)? != seen {
                return Ok(refreshed);
            }
            if self.priority_runs()?.iter().any(|p| !priority.contains(p)) {
                return Ok(refreshed);
            }
            if let Some(say) = progress.filter(|_| said.elapsed() >= SAY_EVERY) {
                said = std::time::Instant::now();
                say(&format!(
                    "waiting {}s for workers: {waiting} candidate(s) of {} without a verdict (`git tabellio worker` validates them)",
                    started.elapsed().as_secs(),
                    target_short(self.target)
                ));
            }
            std::thread::sleep(POLL);
            self.refresh()?;
            refreshed = self.remote.is_some();
        }
    }

    /// Publish candidate commits (name, commit), created only: one already there stays. With
    /// `--remote`, one push for all of them; a lost lease there is a candidate another lander
    /// published first (the same stack), and they are then pushed one by one, so the others
    /// still go out.
    fn publish(&self, candidates: &[(String, gix::ObjectId)]) -> Result<()> {
        if candidates.is_empty() {
            return Ok(());
        }
        if let Some(r) = self.remote {
            let pushes: Vec<PushRef> = candidates
                .iter()
                .map(|(name, commit)| PushRef {
                    dst: name.clone(),
                    new: *commit,
                    expect: None,
                })
                .collect();
            let mut results = vec![push::push(self.store, r, &pushes)?];
            if matches!(results[0], PushResult::LostRace(_)) {
                results = pushes
                    .iter()
                    .map(|p| push::push(self.store, r, std::slice::from_ref(p)))
                    .collect::<Result<_>>()?;
            }
            for result in results {
                if let PushResult::Declined { messages, .. } = result {
                    return Err(Error::refused(format!(
                        "{r} declined a candidate: {}",
                        messages.join("; ")
                    ))
                    .hint("the server's hooks must let refs/tabellio/candidates/ be created"));
                }
            }
            // What the remote now holds, as its tracking copy (as `git push` moves a
            // remote-tracking branch): the candidates just published are counted as waiting
            // for workers at once, not after the next fetch. One a fetch brought first stays.
            let tracking = self.tracking_candidates().unwrap_or_default();
            for (name, commit) in candidates {
                let tracked = format!("{tracking}{}", &name[CANDIDATES.len()..]);
                let create = Cas::update(tracked, None, *commit, "tabellio: land publishes");
                let _ = tx::apply(self.store, &[create]);
            }
        }
        for (name, commit) in candidates {
            let create = Cas::update(name, None, *commit, "tabellio: land publishes a candidate");
            match tx::apply(self.store, &[create]) {
                Ok(()) | Err(tx::TxError::Moved { .. }) => {}
                Err(e) => return Err(e.into_error()),
            }
        }
        Ok(())
    }

    /// Remove the candidates stacked on a tip the target has left (compare-and-swap each here,
    /// one leased push there): a candidate another lander removed first is simply gone. One a
    /// worker is still validating stays until its claim is gone: workers see by it that its
    /// inputs are being validated (its evidence may still count on the new tip, for checks
    /// whose declared inputs the landing did not touch), and a later landing removes it.
    fn retire(&self, which: Retire) -> Result<()> {
        let tip = self.tip()?.map(|t| t.to_string());
        let message = "tabellio: land retires a candidate";
        let (ours, _) = self.store.read_candidates(Some(self.target))?;
        let mut stale = Vec::new();
        for c in ours.iter().filter(|c| Some(&c.record.tip) != tip.as_ref()) {
            if which == Retire::All || !self.claimed(&c.id)? {
                stale.push(c);
            }
        }
        for c in stale {
            let _ = tx::apply(self.store, &[Cas::delete(&c.name, c.commit, message)]);
        }
        if let (Some(r), Some(prefix)) = (self.remote, self.tracking_candidates()) {
            let (theirs, _) = self
                .store
                .read_candidates_under(&prefix, Some(self.target))?;
            let mut pushes: Vec<PushRef> = Vec::new();
            for c in theirs
                .iter()
                .filter(|c| Some(&c.record.tip) != tip.as_ref())
            {
                if which == Retire::All || !self.claimed(&c.id)? {
                    pushes.push(PushRef::deletion(
                        candidate_ref(self.target, &c.id),
                        c.commit,
                    ));
                }
            }
            if !pushes.is_empty() {
                push::push(self.store, r, &pushes)?;
            }
        }
        Ok(())
    }
}

/// Stacks of queued runs on one tip, built once each (objects only).
struct Stacker<'s> {
    store: &'s Store,
    server: &'s Server<'s>,
    tip: gix::ObjectId,
    target: &'s str,
    runs: &'s [Candidate],
    squash: bool,
    committer: gix::actor::Signature,
    /// Run list → (top commit, checks), or `None` when it does not stack.
    built: HashMap<Vec<String>, Option<(gix::ObjectId, Vec<ResolvedCheck>)>>,
}

impl<'s> Stacker<'s> {
    fn new(
        server: &'s Server<'s>,
        tip: gix::ObjectId,
        runs: &'s [Candidate],
        squash: bool,
    ) -> Self {
        Stacker {
            store: server.store,
            server,
            tip,
            target: server.target,
            runs,
            squash,
            committer: replay::committer(server.store),
            built: HashMap::new(),
        }
    }

    fn build(&mut self, ids: &[String]) -> Result<Option<(gix::ObjectId, Vec<ResolvedCheck>)>> {
        if let Some(done) = self.built.get(ids) {
            return Ok(done.clone());
        }
        let mut onto = self.tip;
        let mut chosen: Vec<Candidate> = Vec::new();
        let mut ok = true;
        for id in ids {
            let Some(c) = self.runs.iter().find(|c| c.run_id() == id) else {
                ok = false;
                break;
            };
            match stack_one(self.store, c, onto, self.squash, &self.committer)? {
                Ok(s) => onto = s.head,
                Err(_) => {
                    ok = false;
                    break;
                }
            }
            chosen.push(c.clone());
        }
        let built = if ok {
            Some((onto, requirements(self.store, self.tip, &chosen)?))
        } else {
            None
        };
        self.built.insert(ids.to_vec(), built.clone());
        Ok(built)
    }

    /// How many candidates on this tip whose stack is one of these runs have no verdict in
    /// the notes yet and whose verdict could still change what is planned next for `queue`
    /// (`known`, [`plan::bounds`]; the `pending` stack, which `land` asks for, always could):
    /// what the workers are still to validate for this lander.
    fn unvalidated(
        &mut self,
        (queue, pending): (&[String], &[String]),
        known: plan::Bounds,
    ) -> Result<usize> {
        let tip = self.tip.to_string();
        let mut n = 0;
        for c in self.server.candidates()? {
            if c.record.tip != tip {
                continue;
            }
            let runs: Vec<String> = c.record.runs.iter().map(|r| r.run.clone()).collect();
            if runs != pending && !known.matters(queue, &runs) {
                continue;
            }
            if let Some((top, checks)) = self.build(&runs)? {
                if tree_verdict(self.store, self.store.tree_of(top)?, &checks)? == Known::Unknown {
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    /// The candidate of `ids` to publish (name and commit), unless it does not stack or is
    /// already published.
    fn candidate(&mut self, ids: &[String]) -> Result<Option<(String, gix::ObjectId)>> {
        let Some((top, checks)) = self.build(ids)? else {
            return Ok(None);
        };
        let record = CandidateRecord {
            schema: CANDIDATE_SCHEMA.into(),
            target: self.target.to_string(),
            tip: self.tip.to_string(),
            runs: ids
                .iter()
                .map(|id| {
                    let c = self
                        .runs
                        .iter()
                        .find(|c| c.run_id() == id)
                        .expect("built above from these runs");
                    CandidateRun {
                        run: id.clone(),
                        head: c.head.to_string(),
                    }
                })
                .collect(),
            checks: checks
                .iter()
                .map(|c| CandidateCheck {
                    name: c.name.clone(),
                    digest: c.def.digest(),
                })
                .collect(),
            created_at: time::now(),
        };
        let name = candidate_ref(self.target, &candidate_id(&record));
        if self.store.ref_target_now(&name)?.is_some() {
            return Ok(None);
        }
        let commit = self.store.write_candidate(&record, top)?;
        Ok(Some((name, commit)))
    }
}

impl plan::Stacks for Stacker<'_> {
    fn tree(&mut self, runs: &[String]) -> Result<Option<(gix::ObjectId, Vec<ResolvedCheck>)>> {
        Ok(match self.build(runs)? {
            Some((top, checks)) => Some((self.store.tree_of(top)?, checks)),
            None => None,
        })
    }
}
