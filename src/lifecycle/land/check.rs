//! Validating a stack and isolating the runs that break it.
//!
//! A stack is validated at its top with the required checks of the policy at the target tip it
//! was stacked on, plus the required checks of a run's own policy when the run changed
//! `.tabellio/policy.json` (so no run drops its own checks by editing the policy, and none
//! escapes the target's). Checks run in a temporary detached worktree (as `validate` runs
//! them), never in a user's worktree; passing evidence on the same tree is reused instead of
//! running (see [`crate::evidence::reuse`]). A failing stack is bisected over its prefixes.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::evidence::detached::{note_records, run_detached, Detached, DetachedRun, Scratch};
use crate::evidence::produce::{stamped, ResolvedCheck};
use crate::evidence::reuse::{passing_on_commit, reused_failure, try_reuse, Reuse};
use crate::evidence::sign::maybe_sign;
use crate::evidence::sign::RecordSigner;
use crate::model::land::FailedCheck;
use crate::model::policy::{self, DEFAULT_EXCERPT_BYTES};
use crate::model::EvidenceRecord;
use crate::runner::Stream;
use crate::store::notes::APPROVALS;
use crate::store::policy::{policy_at, Policies};
use crate::store::publish::publish;
use crate::store::replay;
use crate::store::scoped::Materialise;
use crate::store::Store;
use crate::trust::approval::judge_run_step;
use crate::trust::carry::judge_restacked;

use super::lanes::deferred::Deferred;
use super::queue::Candidate;
use super::required::requirements;
use super::stack::{stack_one, Stacked, Unstacked};
use super::{LandOptions, Landing};

/// Runs validations and counts what they cost.
pub struct Checker<'s> {
    pub(super) store: &'s Store,
    /// At most this many runs stacked and validated together, and the remote landed on.
    pub batch: usize,
    pub remote: Option<String>,
    reuse: Reuse,
    stream: Stream,
    squash: bool,
    pub checks_run: usize,
    pub checks_reused: usize,
    pub validations: usize,
    /// Who signs the records landing writes.
    signer: Option<RecordSigner>,
    /// The policies (and allowed signers) at the tips stacks are validated on.
    pub(super) policies: Policies,
    /// Every execution this landing made, in order (a later pass never hides a failure).
    pub executions: Vec<crate::evidence::history::Execution>,
    /// Stack tops whose checks passed but whose evidence does not count under the tip's
    /// `trust`, with the verdicts (`readme (unsigned)`): a run isolated for one of these is
    /// refused for its evidence's signatures, not blamed for failing.
    untrusted: HashMap<gix::ObjectId, Vec<String>>,
    /// Checks with declared inputs this landing saw fail, by scoped tree and check digest: a
    /// stack rebuilt on a moved target with the same inputs fails again without running.
    failed: HashMap<(String, String), EvidenceRecord>,
    /// `land --lanes`: checks are never run here; the notes decide, or the stack waits.
    pub deferred: Option<Deferred>,
    /// The failing records of every commit validated and found failing: a culprit's refusal
    /// names them.
    failures: HashMap<gix::ObjectId, Vec<FailedCheck>>,
    /// Who made the change being validated, as the records it writes name it: the stack's
    /// runs, or whoever lands when they differ ([`crate::run::actor::provenance_of_runs`]).
    provenance: Option<crate::model::provenance::Provenance>,
    /// Set while a failure is re-run to confirm it: a failure seen on the same inputs must not
    /// stand in for the retry.
    pub(super) retrying: bool,
    /// The worktrees of the last validation, removed once its stack landed (or before the next
    /// validation): removing them never stands between a check's end and the landing.
    left: Vec<Scratch<'s>>,
    /// More runs wait behind the batch being settled: the runs after a culprit go back to the
    /// front of the queue and lead the next batch, stacked with the runs that follow (one
    /// validation for both, instead of one for them alone and one for the next batch).
    pub more_waiting: bool,
}

impl<'s> Checker<'s> {
    /// `squash`: `--squash`, or the policy at the target's tip asks for it.
    pub fn new(store: &'s Store, opts: &LandOptions, squash: bool) -> Checker<'s> {
        Checker {
            store,
            batch: opts.batch,
            remote: opts.remote.clone(),
            reuse: opts.reuse,
            stream: opts.stream,
            squash,
            checks_run: 0,
            checks_reused: 0,
            validations: 0,
            signer: None,
            policies: Policies::default(),
            untrusted: HashMap::new(),
            failed: HashMap::new(),
            failures: HashMap::new(),
            deferred: None,
            provenance: None,
            executions: Vec::new(),
            retrying: false,
            left: Vec::new(),
            more_waiting: false,
        }
    }

    /// Sign every record this checker writes with `signer`.
    pub fn signing(mut self, signer: Option<RecordSigner>) -> Checker<'s> {
        self.signer = signer;
        self
    }

    /// Validate `commit` with `checks`; the records (run or reused) are noted on the commit and
    /// its tree whether they pass or not. True when every check passed.
    pub fn validate(
        &mut self,
        commit: gix::ObjectId,
        run_id: Option<&str>,
        checks: &[ResolvedCheck],
    ) -> Result<bool> {
        let store = self.store;
        self.validations += 1;
        let mut records: Vec<EvidenceRecord> = Vec::new();
        let mut to_run: Vec<ResolvedCheck> = Vec::new();
        let mut passed = true;
        let tree = store.tree_of(commit)?;
        for check in checks {
            if let Some(seen) = self.seen_failing(tree, check)?.filter(|_| !self.retrying) {
                self.checks_reused += 1;
                passed = false;
                records.push(stamped(
                    maybe_sign(
                        self.signer.as_ref(),
                        reused_failure(store, &seen, commit, run_id)?,
                    )?,
                    self.provenance.as_ref(),
                    self.signer.as_ref(),
                )?);
                continue;
            }
            // Evidence of this very commit (a run landing unchanged) needs no new record.
            if self.reuse == Reuse::Allowed
                && passing_on_commit(store, commit, check, self.signer.as_ref())?
            {
                self.checks_reused += 1;
                continue;
            }
            match try_reuse(
                store,
                self.reuse,
                commit,
                run_id,
                check,
                self.signer.as_ref(),
            )? {
                Some(rec) => {
                    self.checks_reused += 1;
                    records.push(stamped(
                        rec,
                        self.provenance.as_ref(),
                        self.signer.as_ref(),
                    )?);
                }
                None => to_run.push(check.clone()),
            }
        }
        if !to_run.is_empty() {
            if let Some(deferred) = self.deferred.as_mut() {
                if run_id.is_none() {
                    // The tip itself, validated when the first run on it fails.
                    deferred.asking.clear();
                }
                return deferred.decide(store, commit, &to_run);
            }
            let ran = self.run(commit, run_id, &to_run)?;
            self.checks_run += ran.len();
            for rec in ran.iter().filter(|r| !r.passed()) {
                if let Some(scoped) = &rec.scoped_tree {
                    let key = (scoped.clone(), rec.check.digest.clone());
                    self.failed.insert(key, rec.clone());
                }
            }
            self.executions
                .extend(ran.iter().map(crate::evidence::history::Execution::of));
            passed = ran.iter().all(EvidenceRecord::passed);
            let failed: Vec<FailedCheck> = ran
                .iter()
                .filter(|r| !r.passed())
                .map(|r| FailedCheck {
                    check: r.check.name.clone(),
                    evidence: r.digest.clone(),
                })
                .collect();
            // A retry of one check replaces what the commit's earlier validation found for it
            // and keeps the rest.
            if let Some(known) = self.failures.get_mut(&commit) {
                known.retain(|k| !ran.iter().any(|r| r.check.name == k.check));
            }
            if !failed.is_empty() {
                self.failures.entry(commit).or_default().extend(failed);
            }
            records.extend(ran);
        }
        if !records.is_empty() {
            let message = format!("tabellio: land validates {commit}");
            note_records(store, commit, &records, &message)?;
        }
        Ok(passed)
    }

    /// The failing record of `check` this landing saw on `tree`'s inputs, if it has inputs.
    fn seen_failing(
        &self,
        tree: gix::ObjectId,
        check: &ResolvedCheck,
    ) -> Result<Option<EvidenceRecord>> {
        if self.failed.is_empty() {
            return Ok(None);
        }
        let Some(inputs) = check.def.scope() else {
            return Ok(None);
        };
        let scoped = self
            .store
            .scoped_tree(tree, &inputs, Materialise::HashOnly)?;
        Ok(self
            .failed
            .get(&(scoped.to_string(), check.def.digest()))
            .cloned())
    }

    /// Remove the worktrees of the validations so far.
    pub fn clean_up(&mut self) -> Result<()> {
        let mut first = Ok(());
        for scratch in self.left.drain(..) {
            let removed = scratch.remove();
            if first.is_ok() {
                first = removed;
            }
        }
        first
    }

    /// Run `checks` on `commit` in a temporary detached worktree, left for [`Self::clean_up`].
    fn run(
        &mut self,
        commit: gix::ObjectId,
        run_id: Option<&str>,
        checks: &[ResolvedCheck],
    ) -> Result<Vec<EvidenceRecord>> {
        let store = self.store;
        let cap = policy_at(store, commit)?.map_or(DEFAULT_EXCERPT_BYTES, |p| p.excerpt_bytes());
        // The previous validation's worktrees: its records are noted by now.
        self.clean_up()?;
        let run = DetachedRun {
            commit,
            run_id,
            excerpt_cap: cap,
            stream: self.stream,
            reuse: Reuse::Never,
            signer: self.signer.as_ref(),
            provenance: self.provenance.as_ref(),
        };
        let (records, scratch) = match run_detached(store, &run, checks)? {
            Detached::Done { records, scratch } => (records, scratch),
            Detached::Interrupted(sig) => {
                return Err(Error::refused(format!(
                    "landing was interrupted by signal {sig} while validating {commit}; nothing was landed"
                ))
                .hint("run `git tabellio land` again"))
            }
        };
        self.left.push(scratch);
        Ok(records)
    }

    /// Does the prefix of the first `k` runs of `stack` (on top of `accepted`, which passed)
    /// pass, validated (`Run`) or its failure re-run on the same tree where the policy gives
    /// retries (`Confirm`)?
    /// Judged as `promote` and the hooks judge it: the tip's `flaky`, `baseline` and `trust`
    /// decide whether what ran counts; evidence that ran but does not count is remembered with
    /// its verdicts, for the refusal.
    fn probe(
        &mut self,
        tip: gix::ObjectId,
        (accepted, stack, k): (&[Stacked], &[Stacked], usize),
        how: Probe,
    ) -> Result<bool> {
        let top = &stack[k - 1];
        let runs: Vec<Candidate> = accepted
            .iter()
            .chain(&stack[..k])
            .map(|s| s.candidate.clone())
            .collect();
        let provenance = crate::run::actor::provenance_of_runs(
            self.store,
            runs.iter().map(|c| &c.ledger.record),
            Some(tip),
        );
        // A required check with `when` runs unless the records there and the ones this landing
        // writes prove, as the gates judge them, that it is not asked of this change.
        let kind = crate::evidence::sign::kind_proven_by(
            self.store,
            self.signer.as_ref(),
            (Some(tip), top.head),
            &provenance.actor,
        )?;
        let mut checks = requirements(self.store, tip, &runs)?;
        checks.retain(|c| c.def.when.as_ref().is_none_or(|w| w.holds(kind.as_deref())));
        self.provenance = Some(provenance);
        let run_id = Some(top.candidate.run_id());
        let judged = match how {
            // Nothing to validate with: only runs that land exactly as validated by `finish`
            // (no restack) may go, as `promote` lets them.
            Probe::Run if checks.is_empty() => {
                return Ok(runs.len() == 1 && top.mode == crate::model::land::RestackMode::None)
            }
            Probe::Run => {
                if let Some(deferred) = self.deferred.as_mut() {
                    deferred.asking = runs.iter().map(|c| c.run_id().to_string()).collect();
                }
                self.validate(top.head, run_id, &checks)?;
                self.judge_top(tip, top.head, &checks)?
            }
            // What does not count is not retried: running it again changes nothing.
            Probe::Confirm if checks.is_empty() || self.untrusted.contains_key(&top.head) => {
                return Ok(false)
            }
            Probe::Confirm => {
                if let Some(deferred) = self.deferred.as_mut() {
                    deferred.asking = runs.iter().map(|c| c.run_id().to_string()).collect();
                }
                self.confirm(tip, top.head, run_id, &checks)?
            }
        };
        match judged {
            Judged::Passes => Ok(true),
            Judged::Fails(_) => Ok(false),
            Judged::NotCounted(verdicts) => {
                self.untrusted.insert(top.head, verdicts);
                Ok(false)
            }
        }
    }

    /// Does the target's tip pass `checks` by its own policy (run where it has no evidence,
    /// a failure confirmed as the policy's retries allow)?
    fn tip_passes(&mut self, tip: gix::ObjectId, checks: &[ResolvedCheck]) -> Result<bool> {
        self.validate(tip, None, checks)?;
        Ok(matches!(
            self.confirm(tip, tip, None, checks)?,
            Judged::Passes
        ))
    }

    /// The runs stacked after a culprit: to stack again and validate here (returned), or, when
    /// more runs wait, [`Settled::requeued`] to lead the next batch.
    fn take_rest(&self, settled: &mut Settled, rest: Vec<Stacked>) -> Vec<Candidate> {
        if self.more_waiting && !rest.is_empty() {
            settled.requeued = requeued(rest);
            return Vec::new();
        }
        rest.into_iter().map(|s| s.candidate).collect()
    }

    /// Why the stack topped by `head` passed its checks yet did not count: the verdicts of the
    /// evidence the tip's `trust` refused, if that is why.
    fn untrusted(&self, head: gix::ObjectId) -> Option<&[String]> {
        self.untrusted.get(&head).map(Vec::as_slice)
    }
}

/// The stack after validation: what lands, and what was refused and why.
pub struct Settled {
    pub accepted: Vec<Stacked>,
    pub refused: Vec<Unstacked>,
    /// Each culprit's failing records and whether the stack without it was shown to pass,
    /// by its restacked head (the refusal's `commit`).
    pub culprits: HashMap<gix::ObjectId, (Vec<FailedCheck>, bool)>,
    /// The runs stacked after a culprit, not validated here: they go back to the front of the
    /// queue, so the next batch stacks them with the runs that follow (one validation for
    /// both, instead of one for them alone and one for the next batch).
    pub requeued: Vec<String>,
}

/// No required checks anywhere: a run landing exactly as `finish` validated it (not
/// restacked, first on the tip) goes, as `promote` would let it; every other run is refused,
/// since nothing says what its restacked tree must pass.
fn refuse_unvalidatable(settled: &mut Settled, stack: Vec<Stacked>, tip: gix::ObjectId) {
    for s in stack {
        if settled.accepted.is_empty()
            && s.mode == crate::model::land::RestackMode::None
            && s.onto == tip
        {
            settled.accepted.push(s);
            continue;
        }
        settled.refused.push(Unstacked {
            onto: s.onto,
            result: Landing::Refused,
            commit: None,
            paths: Vec::new(),
            reason: format!(
                "the policy at {tip} requires no checks, so the restacked run cannot be validated; add required checks to {} on the target, or restart the run from the new tip",
                policy::PATH
            ),
            candidate: s.candidate,
        });
    }
}

/// A stacked run that changes guarded paths needs an approval of the move it lands with, as
/// `promote` judges it (the guarded list at `tip` plus the run's own): refused otherwise, and
/// the others go on. A restacked run has a new tree: its approval carries over only when the
/// guarded part of the move is exactly the one approved ([`judge_restacked`]), and is then
/// noted on the restacked head, where the hooks and `verify` judge it the same way.
fn unapproved(store: &Store, tip: gix::ObjectId, s: &Stacked) -> Result<Option<Unstacked>> {
    let run = &s.candidate.ledger.record;
    let restacked = s.head != s.candidate.head;
    let check = if restacked {
        let (check, carried) = judge_restacked(
            store,
            Some(tip),
            (s.onto, s.head),
            s.candidate.head,
            Some(&run.actor),
        )?;
        if let Some(record) = carried {
            // A true statement about objects anyone can re-judge; left behind harmlessly if
            // the landing fails, like the evidence of a stack that did not land.
            let line = record.to_line();
            publish(
                store,
                None,
                &[(APPROVALS, vec![(s.head, vec![line])])],
                &format!("tabellio: land carries {}'s approval", run.run_id),
            )?;
        }
        check
    } else {
        judge_run_step(store, Some(tip), s.onto, s.head, Some(&run.actor))?
    };
    if !check.is_needed() {
        return Ok(None);
    }
    let why_restacked = if restacked {
        "; an approval of the run's head carries over to its restacked commit only when the guarded change is the one approved (same content before and after at every guarded path the restack changes)"
    } else {
        ""
    };
    Ok(Some(Unstacked {
        onto: s.onto,
        result: Landing::Refused,
        commit: None,
        paths: check.paths.clone(),
        reason: format!(
            "{}; approve it with `git tabellio approve {}`{why_restacked}",
            check.describe(),
            run.run_id
        ),
        candidate: s.candidate.clone(),
    }))
}

/// What a stack top's evidence says under the tip's policy.
pub(super) enum Judged {
    /// Every required check is satisfied (a flaky pass only where the policy accepts it).
    Passes,
    /// These checks failed (confirming them may clear them).
    Fails(Vec<ResolvedCheck>),
    /// The checks ran, but the verdicts do not count (`flaky-pass`, a signature): why.
    NotCounted(Vec<String>),
}

/// How a prefix is probed: validated, or its failure confirmed by re-running it.
#[derive(Clone, Copy)]
enum Probe {
    Run,
    Confirm,
}

/// A verdict about flakiness rather than signatures (`name (flaky-pass)`, a flake budget).
fn is_flaky_verdict(verdict: &str) -> bool {
    verdict.starts_with("flake budget exceeded") || verdict.ends_with("(flaky-pass)")
}

/// The length of the smallest failing prefix of `stack` (whose whole failed), 0 when none
/// fails after all: a bisection whose probes are not confirmed, and whose result is confirmed
/// (re-run where the policy gives retries) before it blames a run. A prefix that passes on a
/// retry is no culprit: the bisection goes on between it and the next prefix seen failing, and
/// when there is none (the whole stack's failure was the flake) nothing is to blame. A prefix
/// is never blamed once a longer one passed (`lo` only grows), which is how a pass on a
/// superset clears the failure of its subset.
///
/// The failed top is not re-run before bisecting, but once, as soon as a probe below it
/// passed while the top is still the only failure seen: the failure is then either a run in
/// the part above the probe or a flake, and one re-run of the top tells which. If the top
/// passes, nothing is to blame and the bisection stops there (a flake costs the probe and the
/// re-run, not a whole bisection); if it fails again, its failure is confirmed, and the prefix
/// the bisection then isolates below the top is blamed without being re-run itself (the top's
/// own prefix, already failed as often as the retries allow, is not re-run either). Confirming
/// the top before any probe would cost an execution for every stack a real culprit fails;
/// confirming only the isolated prefix costs a whole bisection for every flake of a top.
/// docs/land.md ("The simulation") has the numbers.
fn isolate(
    checker: &mut Checker<'_>,
    tip: gix::ObjectId,
    accepted: &[Stacked],
    stack: &[Stacked],
) -> Result<usize> {
    let len = stack.len();
    let mut failing = std::collections::BTreeSet::from([len]);
    let (mut lo, mut hi) = (0, len);
    // The top re-run (once), and whether it failed again, counted under the policy.
    let (mut top_retried, mut top_confirmed) = (false, false);
    let mut probe_passed = false;
    loop {
        while hi - lo > 1 {
            if probe_passed && hi == len && !top_retried {
                top_retried = true;
                if checker.probe(tip, (accepted, stack, len), Probe::Confirm)? {
                    // The whole stack passed on a retry: no culprit.
                    return Ok(0);
                }
                // A verdict that does not count (a signature, a flake budget) confirms nothing.
                top_confirmed = checker.untrusted(stack[len - 1].head).is_none();
                continue;
            }
            let mid = (lo + hi) / 2;
            if checker.probe(tip, (accepted, stack, mid), Probe::Run)? {
                lo = mid;
                probe_passed = true;
            } else {
                hi = mid;
                failing.insert(mid);
            }
        }
        // The stack's failure was confirmed: the prefix bisection isolates below it is blamed.
        if top_confirmed && hi < len {
            return Ok(hi);
        }
        if !checker.probe(tip, (accepted, stack, hi), Probe::Confirm)? {
            return Ok(hi);
        }
        lo = hi;
        match failing.range(hi + 1..).next() {
            Some(next) => hi = *next,
            // The whole stack passed on a retry, counted under the policy: no culprit.
            None => return Ok(0),
        }
    }
}

/// The run ids of `rest`, the runs stacked after a culprit, for the front of the queue.
fn requeued(rest: Vec<Stacked>) -> Vec<String> {
    rest.into_iter()
        .map(|s| s.candidate.run_id().to_string())
        .collect()
}

/// Why a run is refused whose checks ran but whose `verdicts` do not count under `tip`'s policy.
fn untrusted_reason(checker: &Checker<'_>, tip: gix::ObjectId, verdicts: &[String]) -> String {
    if verdicts.iter().all(|v| is_flaky_verdict(v)) {
        return format!(
            "its evidence does not count under the policy at {tip}: {}",
            verdicts.join(", ")
        );
    }
    let who = if checker.deferred.is_some() {
        "the workers (`land --lanes`) sign what they record with `git tabellio worker --sign-key <file>`"
    } else {
        "land signs what it records with `--sign-key <file>`"
    };
    format!(
        "its evidence does not count under the trust of the policy at {tip}: {}; {who} or git's signing key, which must be an allowed signer there",
        verdicts.join(", ")
    )
}

/// Stack `candidates` on `tip`, validate, and bisect a failing stack until every failing run
/// is isolated: the runs before a culprit stay accepted (their prefix passed); the runs after
/// it are stacked again without it and validated again, or, when more runs wait behind this
/// batch ([`Checker::more_waiting`]), [`Settled::requeued`] to the front of the queue.
pub fn settle(
    store: &Store,
    checker: &mut Checker<'_>,
    tip: gix::ObjectId,
    candidates: Vec<Candidate>,
) -> Result<Settled> {
    let committer = replay::committer(store);
    let mut settled = Settled {
        accepted: Vec::new(),
        refused: Vec::new(),
        culprits: HashMap::new(),
        requeued: Vec::new(),
    };
    let mut pending = candidates;
    while !pending.is_empty() {
        let mut onto = settled.accepted.last().map_or(tip, |s| s.head);
        let mut stack: Vec<Stacked> = Vec::new();
        for candidate in pending.drain(..) {
            match stack_one(store, &candidate, onto, checker.squash, &committer)? {
                Ok(s) => match unapproved(store, tip, &s)? {
                    Some(refused) => settled.refused.push(refused),
                    None => {
                        onto = s.head;
                        stack.push(s);
                    }
                },
                Err(refused) => settled.refused.push(refused),
            }
        }
        if stack.is_empty() {
            break;
        }
        let runs: Vec<Candidate> = settled
            .accepted
            .iter()
            .chain(&stack)
            .map(|s| s.candidate.clone())
            .collect();
        if requirements(store, tip, &runs)?.is_empty() {
            refuse_unvalidatable(&mut settled, stack, tip);
            break;
        }
        if checker.probe(tip, (&settled.accepted, &stack, stack.len()), Probe::Run)? {
            settled.accepted.extend(stack);
            break;
        }
        let hi = isolate(checker, tip, &settled.accepted, &stack)?;
        if hi == 0 {
            settled.accepted.extend(stack);
            break;
        }
        let rest = stack.split_off(hi);
        let culprit = stack
            .pop()
            .expect("hi >= 1: the failing prefix is not empty");
        if let Some(verdicts) = checker.untrusted(culprit.head) {
            // Its checks ran; what they gave does not count under the tip's policy (a flaky
            // pass it refuses, a flake budget exceeded, a signature). That is no validation
            // failure: the run stays as it is, refused with the verdicts.
            let reason = untrusted_reason(checker, tip, verdicts);
            settled.accepted.extend(stack);
            pending = checker.take_rest(&mut settled, rest);
            settled.refused.push(Unstacked {
                onto: culprit.onto,
                result: Landing::Refused,
                commit: None,
                paths: Vec::new(),
                reason,
                candidate: culprit.candidate,
            });
            continue;
        }
        // Isolated: what is under the culprit passed (a passing prefix, the accepted runs, or
        // the tip validated below); only a tip without required checks shows nothing.
        let mut isolated = true;
        if hi == 1 && settled.accepted.is_empty() {
            // The first run on the tip fails: unless the tip itself passes, no run is to blame.
            // With evidence on the tip (a landed tip has it), this runs nothing.
            let checks = requirements(store, tip, &[])?;
            isolated = !checks.is_empty();
            checker.provenance = Some(crate::run::actor::validating_actor(store, Some(tip)));
            if !checks.is_empty() && !checker.tip_passes(tip, &checks)? {
                return Err(Error::refused(format!(
                    "the target's tip {tip} fails its own required checks; no run is landed on it"
                ))
                .hint("fix the target first (its failing evidence is noted on it: `git tabellio evidence <tip>`)"));
            }
        }
        let runs: Vec<Candidate> = settled
            .accepted
            .iter()
            .chain(&stack)
            .chain(std::iter::once(&culprit))
            .map(|s| s.candidate.clone())
            .collect();
        let why = checker.explain(tip, culprit.head, &requirements(store, tip, &runs)?)?;
        settled.accepted.extend(stack);
        pending = checker.take_rest(&mut settled, rest);
        let failed = checker
            .failures
            .get(&culprit.head)
            .cloned()
            .unwrap_or_default();
        settled.culprits.insert(culprit.head, (failed, isolated));
        settled.refused.push(Unstacked {
            onto: culprit.onto,
            result: Landing::ValidationFailed,
            commit: Some(culprit.head),
            paths: Vec::new(),
            reason: format!("fails on {tip}{why}"),
            candidate: culprit.candidate,
        });
    }
    Ok(settled)
}
