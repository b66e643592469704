//! `worker [--remote <name>] [--once] [--lease <seconds>] [--id <name>]`: validate the candidate
//! stacks a `land --lanes` lander publishes. A worker never moves a target or a ledger: it
//! writes evidence notes and its own claims, nothing else.
//!
//! For each candidate (`refs/tabellio/candidates/<target>/<id>`) still stacked on its target's
//! tip and without a verdict in the notes, the worker claims it by creating
//! `refs/tabellio/claims/<id>` (compare-and-swap: one worker wins; a claim whose lease ran out
//! is taken over by compare-and-swap on it), runs the candidate's checks in a temporary
//! worktree at exactly the candidate commit (as `validate` runs them, reusing passing evidence
//! of the same tree), notes the records on the commit and its tree, and deletes its claim. With
//! `--remote` the candidates, claims and notes are the remote's: the claim is created there by
//! a leased push, and the evidence and the claim's release go in one atomic push.
//!
//! The checks are those the candidate names, each taken from the policy at the tip it was
//! stacked on (or at the candidate itself, for a run that changed the policy) and only when the
//! definition's digest matches: a candidate ref can ask for a check, never define one.
//!
//! Failure model: a worker killed while checking has written nothing but its claim, which
//! another worker takes over once the lease runs out; partial results are never noted. SIGINT
//! and SIGTERM stop the checks, delete the claims the worker holds, and end it.

use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::detached::{note_records, run_detached, Detached, DetachedRun, Scratch};
use crate::evidence::interrupt;
use crate::evidence::known::{tree_verdict, Known};
use crate::evidence::reuse::Reuse;
use crate::evidence::sign::{refuse_uncountable, JudgedAt, RecordSigner};
use crate::model::candidate::ClaimRecord;
use crate::model::canonical::sha256_hex;
use crate::model::policy::{ResolvedCheck, DEFAULT_EXCERPT_BYTES};
use crate::model::time;
use crate::model::EvidenceRecord;
use crate::run::Env;
use crate::runner::Stream;
use crate::store::candidates::{self, Candidate, Claim, CANDIDATES, CLAIMS};
use crate::store::policy::policy_at;
use crate::store::remote::fetch_notes_and_merge;
use crate::store::remote::notes_merge::NotesStep;
use crate::store::remote::push::{self, PushRef, PushResult};
use crate::store::scoped::Materialise;
use crate::store::tx::{self, Cas, TxError};
use crate::store::Store;

/// The default lease of a claim.
pub const DEFAULT_LEASE_S: u64 = 600;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub remote: Option<String>,
    /// One pass over the candidates, then stop.
    pub once: bool,
    pub lease_s: u64,
    /// Who this worker is, in its claims.
    pub id: String,
    pub sign_key: Option<std::path::PathBuf>,
    pub no_sign: bool,
    pub stream: Stream,
    /// How long to wait between passes that found nothing to do.
    pub poll: Duration,
}

/// One candidate this worker validated.
#[derive(Debug, Clone, Serialize)]
pub struct Validated {
    pub candidate: String,
    pub target: String,
    pub commit: String,
    pub runs: Vec<String>,
    pub passed: bool,
    pub checks_run: usize,
    /// Took over a claim whose lease had run out.
    pub took_over: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerOutcome {
    pub worker: String,
    pub validated: Vec<Validated>,
    /// The signal that stopped it, if one did.
    pub interrupted: Option<i32>,
    /// Candidates whose claim another worker took over while this one validated them (it
    /// stalled past its lease): their results were not noted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
}

/// Where this worker reads candidates and claims, and how it writes claims and evidence.
struct Place<'a> {
    store: &'a Store,
    remote: Option<&'a str>,
}

impl Place<'_> {
    fn candidates_prefix(&self) -> String {
        match self.remote {
            Some(r) => format!("refs/tabellio/remotes/{r}/candidates/"),
            None => CANDIDATES.to_string(),
        }
    }

    fn claims_prefix(&self) -> String {
        match self.remote {
            Some(r) => format!("refs/tabellio/remotes/{r}/claims/"),
            None => CLAIMS.to_string(),
        }
    }

    /// The target's tip as this worker knows it.
    fn tip(&self, target: &str) -> Result<Option<gix::ObjectId>> {
        match self.remote {
            Some(r) => self.store.ref_target(&format!(
                "refs/remotes/{r}/{}",
                target.strip_prefix("refs/heads/").unwrap_or(target)
            )),
            None => self.store.ref_target(target),
        }
    }

    /// Bring the remote's candidates, claims, target tips and notes here (not its ledgers or
    /// queue, which a worker never reads: a poll costs the same however many runs there are).
    fn refresh(&self) -> Result<()> {
        let Some(r) = self.remote else {
            return Ok(());
        };
        let extra = [
            format!("+{CANDIDATES}*:refs/tabellio/remotes/{r}/candidates/*"),
            format!("+{CLAIMS}*:refs/tabellio/remotes/{r}/claims/*"),
            format!("+refs/heads/*:refs/remotes/{r}/*"),
        ];
        fetch_notes_and_merge(self.store, r, &extra, "tabellio: worker fetches evidence")?;
        Ok(())
    }

    /// Create (or take over) the claim; false when another worker holds it.
    fn claim(&self, name: &str, old: Option<gix::ObjectId>, new: gix::ObjectId) -> Result<bool> {
        match self.remote {
            Some(r) => {
                let pushed = push::push(
                    self.store,
                    r,
                    &[PushRef {
                        dst: name.to_string(),
                        new,
                        expect: old,
                    }],
                )?;
                Ok(matches!(pushed, PushResult::Pushed(_)))
            }
            None => match tx::apply(
                self.store,
                &[Cas::update(name, old, new, "tabellio: claim")],
            ) {
                Ok(()) => Ok(true),
                Err(TxError::Moved { .. } | TxError::Locked { .. }) => Ok(false),
                Err(e) => Err(e.into_error()),
            },
        }
    }

    /// Move our claim from `old` to `new` (a renewed lease); false when it is no longer ours.
    /// A lock another writer holds a moment is no loss: an error, tried again at the next tick.
    fn renew(&self, name: &str, old: gix::ObjectId, new: gix::ObjectId) -> Result<bool> {
        if self.remote.is_some() {
            return self.claim(name, Some(old), new);
        }
        let renewal = Cas::update(name, Some(old), new, "tabellio: renew claim");
        match tx::apply(self.store, &[renewal]) {
            Ok(()) => Ok(true),
            Err(TxError::Moved { .. }) => Ok(false),
            Err(e) => Err(e.into_error()),
        }
    }

    /// Delete our claim; remotely together with the evidence, in one atomic push (retried on
    /// a notes ref another worker moved meanwhile).
    fn release(&self, claim: gix::ObjectId, name: &str) -> Result<()> {
        let Some(r) = self.remote else {
            let _ = tx::apply(
                self.store,
                &[Cas::delete(name, claim, "tabellio: release claim")],
            );
            return Ok(());
        };
        for _ in 0..8 {
            let notes = fetch_notes_and_merge(self.store, r, &[], "tabellio: worker merges")?;
            let mut pushes: Vec<PushRef> = notes.iter().filter_map(NotesStep::push).collect();
            pushes.push(PushRef::deletion(name, claim));
            match push::push(self.store, r, &pushes)? {
                PushResult::Pushed(_) => return Ok(()),
                PushResult::LostRace(_) => continue,
                PushResult::Declined { messages, .. } => {
                    return Err(Error::refused(format!(
                        "{r} declined the evidence: {}",
                        messages.join("; ")
                    ))
                    .hint("see what the remote's hook said"))
                }
            }
        }
        Err(Error::conflict(format!(
            "the evidence notes on {r} kept moving; the records are noted here"
        ))
        .hint(format!("`git tabellio sync {r}` shares them")))
    }
}

/// Keeps a claim alive while its checks run: every third of the lease, a thread writes the claim
/// again with a new expiry (a commit whose parent is the claim it replaces) and moves the claim
/// ref to it by compare-and-swap (remotely, a leased push), so a slow but live worker is never
/// taken over. A lost compare-and-swap means another worker took the claim over after this one
/// stalled past its lease: renewal stops and the claim is the other's.
struct Renewal {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Option<gix::ObjectId>>,
}

impl Renewal {
    fn start(
        place: &Place<'_>,
        opts: &WorkerOptions,
        (record, claim): (ClaimRecord, gix::ObjectId),
        claimed: std::time::Instant,
    ) -> Renewal {
        let git_dir = place.store.repo.git_dir().to_path_buf();
        let remote = place.remote.map(str::to_string);
        let lease = Duration::from_secs(opts.lease_s);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let store = Store::open(&git_dir).ok()?;
            let place = Place {
                store: &store,
                remote: remote.as_deref(),
            };
            let name = candidates::claim_ref(&record.candidate);
            let mut held = claim;
            // When the lease of `held` started: it runs out `lease` after.
            let mut since = claimed;
            let renew = |held: gix::ObjectId| -> Result<Option<gix::ObjectId>> {
                let mut again = record.clone();
                let now = std::time::SystemTime::now();
                again.lease_expires_at = time::rfc3339(now + lease);
                let next = store.write_claim(&again, Some(held))?;
                Ok(place.renew(&name, held, next)?.then_some(next))
            };
            loop {
                let last = matches!(
                    stopped.recv_timeout(lease / 3),
                    Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
                );
                // At the end, a claim with more than half its lease left is still ours: no
                // worker takes over a claim before its lease ran out, so renewing it once
                // more would only add a push between the check's end and its evidence.
                if last && since.elapsed() < lease / 2 {
                    return Some(held);
                }
                let renewing = std::time::Instant::now();
                match renew(held) {
                    Ok(Some(next)) => {
                        held = next;
                        since = renewing;
                    }
                    Ok(None) => return None,
                    // A failure to reach the remote is tried again at the next tick; the lease
                    // still holds until then. At the end, the claim as last renewed is ours.
                    Err(_) => {}
                }
                if last {
                    return Some(held);
                }
            }
        });
        Renewal { stop, thread }
    }

    /// Stop renewing: the claim commit when it is still this worker's (renewed once more
    /// unless more than half its lease is left).
    fn stop(self) -> Option<gix::ObjectId> {
        let _ = self.stop.send(());
        self.thread.join().ok().flatten()
    }
}

pub fn worker(env: &Env, opts: &WorkerOptions) -> Result<WorkerOutcome> {
    if let Some(remote) = &opts.remote {
        crate::store::remote::fetch::check_remote(&env.store, remote)?;
    }
    if opts.lease_s == 0 {
        return Err(Error::usage("--lease must be at least 1 second"));
    }
    let _signals = interrupt::install()?;
    let mut outcome = WorkerOutcome {
        worker: opts.id.clone(),
        validated: Vec::new(),
        interrupted: None,
        lost: Vec::new(),
    };
    loop {
        // A fresh view each pass: other processes write refs, notes and objects meanwhile.
        let store = Store::open(env.store.repo.git_dir())?;
        let place = Place {
            store: &store,
            remote: opts.remote.as_deref(),
        };
        place.refresh()?;
        let found = pass(&place, opts, &mut outcome)?;
        if let Some(sig) = interrupt::received() {
            outcome.interrupted = Some(sig);
            return Ok(outcome);
        }
        if opts.once {
            return Ok(outcome);
        }
        if !found {
            let until = std::time::Instant::now() + opts.poll;
            while std::time::Instant::now() < until && interrupt::received().is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// One pass over the candidates; true when one was validated.
fn pass(place: &Place<'_>, opts: &WorkerOptions, outcome: &mut WorkerOutcome) -> Result<bool> {
    let store = place.store;
    let (mut candidates, _) = store.read_candidates_under(&place.candidates_prefix(), None)?;
    // Each worker takes the candidates in an order of its own (by a hash of its id and the
    // candidate's): workers that see a new round at the same moment start on different
    // candidates, instead of all racing for the first and losing a claim push each in turn.
    candidates.sort_by_cached_key(|c| order_key(&opts.id, &c.id));
    // What each candidate's validation is about; one whose checks this tool cannot resolve is
    // about nothing another could share.
    let mut by_inputs = Vec::new();
    for c in &candidates {
        if let Ok(checks) = resolve_checks(store, c) {
            by_inputs.push((inputs_of(store, c.commit, &checks)?, c.id.clone()));
        }
    }
    let mut found = false;
    for candidate in candidates {
        if interrupt::received().is_some() {
            break;
        }
        if place.tip(&candidate.record.target)?.map(|t| t.to_string())
            != Some(candidate.record.tip.clone())
        {
            continue; // stacked on a tip the target has left
        }
        let checks = resolve_checks(store, &candidate)?;
        if checks.is_empty()
            || tree_verdict(store, store.tree_of(candidate.commit)?, &checks)? != Known::Unknown
        {
            continue;
        }
        let tree = store.tree_of(candidate.commit)?;
        let inputs = inputs_of(store, candidate.commit, &checks)?;
        // Before claiming: records this worker's key could not make count under the policy
        // at the candidate's tip are never made (exit 3, nothing written), as `finish` and
        // `land` refuse.
        let signer = countable_signer(store, opts, &candidate, &checks)?;
        if same_inputs_claimed(place, &by_inputs, &candidate, &inputs)? {
            continue; // another candidate with the same inputs is being validated
        }
        let held = store.try_find_claim(&place.claims_prefix(), &candidate.id)?;
        let now = time::now();
        let took_over = match &held {
            Some(c) if !c.expired_at(&now) => continue,
            Some(_) => true,
            None => false,
        };
        let claimed = std::time::Instant::now();
        let record = candidates::new_claim(&candidate, &opts.id, opts.lease_s);
        let claim = store.write_claim(&record, held.as_ref().map(|c: &Claim| c.commit))?;
        let name = candidates::claim_ref(&candidate.id);
        if !place.claim(&name, held.as_ref().map(|c: &Claim| c.commit), claim)? {
            continue;
        }
        // Evidence noted while this worker claimed (by a worker that held the claim before, or
        // one that validated the same tree as another candidate): nothing left to run.
        if tree_verdict(store, tree, &checks)? != Known::Unknown {
            place.release(claim, &name)?;
            continue;
        }
        let renewal = Renewal::start(place, opts, (record, claim), claimed);
        let result = validate(store, opts, (&candidate, signer.as_ref()), &checks);
        // Still ours (renewed once more just now where its lease was half gone), or taken over
        // by another worker after this one stalled past its lease: then its result is not
        // noted, whatever it was.
        let Some(claim) = renewal.stop() else {
            outcome.lost.push(candidate.id.clone());
            continue;
        };
        let noted = match &result {
            Ok(Some((records, _))) => note_records(
                store,
                candidate.commit,
                records,
                &format!("tabellio: worker validates candidate {}", candidate.id),
            ),
            _ => Ok(()),
        };
        // Released whatever happened: interrupted, failed or passed.
        let released = place.release(claim, &name);
        let (passed, ran) = match result? {
            Some((records, scratch)) => {
                // Removed once the evidence is out: removing it never delays the next round.
                noted?;
                released?;
                scratch.remove()?;
                (records.iter().all(EvidenceRecord::passed), records.len())
            }
            None => break, // interrupted: nothing noted, claim released
        };
        found = true;
        outcome.validated.push(Validated {
            candidate: candidate.id.clone(),
            target: candidate.record.target.clone(),
            commit: candidate.commit.to_string(),
            runs: candidate
                .record
                .runs
                .iter()
                .map(|r| r.run.clone())
                .collect(),
            passed,
            checks_run: ran,
            took_over,
        });
    }
    Ok(found)
}

/// Where candidate `candidate` comes in worker `worker`'s order: a hash of both, so each
/// worker has an order of its own, the same on every pass.
fn order_key(worker: &str, candidate: &str) -> String {
    sha256_hex(format!("{worker}\n{candidate}").as_bytes())
}

/// What validating `commit` with `checks` is about: per check (by digest), the tree its
/// evidence is keyed to — the scoped tree of a check with declared inputs, else the whole tree.
/// Two candidates alike in this are one validation: the records of one count for the other.
fn inputs_of(
    store: &Store,
    commit: gix::ObjectId,
    checks: &[ResolvedCheck],
) -> Result<Vec<(String, gix::ObjectId)>> {
    let tree = store.tree_of(commit)?;
    let mut out = Vec::new();
    for check in checks {
        let keyed = match check.def.scope() {
            Some(inputs) => store.scoped_tree(tree, &inputs, Materialise::HashOnly)?,
            None => tree,
        };
        out.push((check.def.digest(), keyed));
    }
    Ok(out)
}

/// Does a live claim of another candidate with the same inputs exist (the same tree, or, for
/// checks with declared inputs, trees alike in them: a candidate stacked on a tip the target
/// has since left, still being validated, whose records will count here)?
fn same_inputs_claimed(
    place: &Place<'_>,
    by_inputs: &[(Vec<(String, gix::ObjectId)>, String)],
    candidate: &Candidate,
    inputs: &[(String, gix::ObjectId)],
) -> Result<bool> {
    let now = time::now();
    for (other, id) in by_inputs {
        if other.as_slice() != inputs || *id == candidate.id {
            continue;
        }
        if let Some(c) = place.store.try_find_claim(&place.claims_prefix(), id)? {
            if !c.expired_at(&now) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The checks the candidate names, each from the policy at its tip or at the candidate itself,
/// by digest. A named check neither defines is an error (the lander and this worker disagree
/// on the policy: an older tool, or a forged candidate).
fn resolve_checks(store: &Store, candidate: &Candidate) -> Result<Vec<ResolvedCheck>> {
    let tip = store.parse_oid(&candidate.record.tip)?;
    let policies = [policy_at(store, tip)?, policy_at(store, candidate.commit)?];
    let mut out = Vec::new();
    for want in &candidate.record.checks {
        let def = policies
            .iter()
            .flatten()
            .filter_map(|p| p.checks.get(&want.name))
            .find(|d| d.digest() == want.digest)
            .ok_or_else(|| {
                Error::refused(format!(
                    "candidate {} asks for check {:?} with a definition no policy there has",
                    candidate.id, want.name
                ))
                .hint(format!("delete it: `git update-ref -d {}`", candidate.name))
            })?;
        out.push(ResolvedCheck {
            name: want.name.clone(),
            def: def.clone(),
        });
    }
    Ok(out)
}

/// This worker's signer for `candidate` (its key, as the policy at the candidate's tip grants
/// it), refused when the records it would make for `checks` could not count there.
fn countable_signer(
    store: &Store,
    opts: &WorkerOptions,
    candidate: &Candidate,
    checks: &[ResolvedCheck],
) -> Result<Option<RecordSigner>> {
    let tip = store.parse_oid(&candidate.record.tip)?;
    let signer = RecordSigner::resolve(store, opts.sign_key.as_deref(), opts.no_sign, Some(tip))?;
    let target = &candidate.record.target;
    let label = target.strip_prefix("refs/heads/").unwrap_or(target);
    let again = match &opts.remote {
        Some(r) => format!("git tabellio worker --remote {r}"),
        None => "git tabellio worker".to_string(),
    };
    let judged = JudgedAt {
        commit: tip,
        label,
        again: &again,
        run: None,
    };
    refuse_uncountable(
        store,
        signer.as_ref(),
        Some(judged),
        checks.iter().map(|c| c.name.as_str()),
        opts.no_sign,
    )?;
    Ok(signer)
}

/// Run `checks` on the candidate commit: the records, to note while the claim is still this
/// worker's, and the temporary worktrees they ran in, to remove once they are out; `None` when
/// a signal stopped it.
fn validate<'s>(
    store: &'s Store,
    opts: &WorkerOptions,
    (candidate, signer): (&Candidate, Option<&RecordSigner>),
    checks: &[ResolvedCheck],
) -> Result<Option<(Vec<EvidenceRecord>, Scratch<'s>)>> {
    let tip = store.parse_oid(&candidate.record.tip)?;
    let cap = policy_at(store, tip)?.map_or(DEFAULT_EXCERPT_BYTES, |p| p.excerpt_bytes());
    // The records name the candidate's runs when they agree on who made the change, else
    // this worker, who vouches for the mix.
    let runs: Vec<crate::model::RunRecord> = candidate
        .record
        .runs
        .iter()
        .filter_map(|r| store.find_ledger(&r.run).ok().map(|l| l.record))
        .collect();
    let provenance = if runs.len() == candidate.record.runs.len() {
        crate::run::actor::provenance_of_runs(store, &runs, Some(tip))
    } else {
        crate::run::actor::validating_actor(store, Some(tip))
    };
    crate::evidence::sign::refuse_misattributed(store, signer, Some(tip), &provenance.actor)?;
    let run = DetachedRun {
        commit: candidate.commit,
        run_id: None,
        excerpt_cap: cap,
        stream: opts.stream,
        reuse: Reuse::Allowed,
        signer,
        provenance: Some(&provenance),
    };
    Ok(match run_detached(store, &run, checks)? {
        Detached::Done { records, scratch } => Some((records, scratch)),
        Detached::Interrupted(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::order_key;

    fn order(worker: &str, candidates: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = candidates.iter().map(|c| c.to_string()).collect();
        out.sort_by_cached_key(|c| order_key(worker, c));
        out
    }

    #[test]
    fn each_worker_takes_the_candidates_in_an_order_of_its_own() {
        let round = ["3f9a", "77c0", "a1b2", "e4d5"];
        // The same worker, the same order on every pass.
        assert_eq!(order("host/1", &round), order("host/1", &round));
        // Workers of a fleet do not all start on the same candidate.
        let firsts: std::collections::BTreeSet<String> = ["host/1", "host/1-1", "ci/7", "ci/7-1"]
            .iter()
            .map(|w| order(w, &round)[0].clone())
            .collect();
        assert!(firsts.len() > 1, "every worker starts on {firsts:?}");
    }
}
