//! Evidence you can trust: `verify` judges commits by the evidence notes alone, and `validate`
//! ([`validate`]) makes evidence for any commit outside the run lifecycle.
//!
//! A commit verifies when every required check has a record, noted on the commit or on its tree,
//! that parses with a known schema, has a correct digest, names this commit or this tree, passed,
//! and was made with the check definition the policy has now. Nothing else is trusted: not the
//! run ledger, not who wrote the note. Verdicts are decided in one place,
//! [`crate::evidence::judge::evaluate_records`], shared with `status`, `promote` and the
//! hooks.
//!
//! Verification only reads; it never writes a ref, nor an object but those a partial clone lacks
//! and git would fetch lazily.

pub mod validate;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::evidence::judge::Verdict;
use crate::evidence::requirements::Gate;
use crate::evidence::verifier::{
    CommitVerdict, GuardedVerdict, Verifier, UNAPPROVED_GUARDED_CHANGE,
};
use crate::model::provenance::ProvenanceVerdict;
use crate::store::notes::{APPROVALS, EVIDENCE, VSA};
use crate::store::notes_view::NotesView;
use crate::store::policy::Policies;
use crate::store::remote::fetch::NOTES_PREFIX;
use crate::store::remote::promisor;
use crate::store::Store;
use crate::trust::approval::{self, ApprovalCheck};

/// What `verify` was asked.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Revisions (`HEAD`, `main~2`, an id) and ranges `a..b`; empty means `HEAD`.
    pub revs: Vec<String>,
    /// `--check`: names required in addition to the policy's.
    pub checks: Vec<String>,
    /// `--policy-from`: the commit whose policy applies (default: each commit's own).
    pub policy_from: Option<String>,
    /// `--first-parent`: a range follows only first parents (the commits a branch pointed at
    /// when every move was a fast-forward or a landing).
    pub first_parent: bool,
    /// `--require-provenance`: every commit judged must resolve to the run that landed it
    /// (the landed map of the ledgers), with its actor.
    pub require_provenance: bool,
    /// List every check execution noted for each commit's tree (`executions` in `--json`); a
    /// person's summary does not show them, and a tree shared by many commits makes the list
    /// long.
    pub executions: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyOutcome {
    pub verified: bool,
    /// The commit whose policy was applied to all, when `--policy-from` was given.
    pub policy_from: Option<String>,
    pub commits: Vec<CommitVerdict>,
    /// What to do about the commits that did not verify (fetch the evidence notes, or make
    /// evidence); absent when every commit verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// What this clone's history did not let verify judge, and how to let it (a shallow clone).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
}

/// Verify every commit the revisions name.
pub fn verify(store: &Store, opts: &VerifyOptions) -> Result<VerifyOutcome> {
    verify_keeping_caches(store, opts).map(|(outcome, _)| outcome)
}

/// [`verify`], handing back the verifier with what it read (notes, policies, judged trees):
/// a process that exits next need not free them one by one.
pub fn verify_keeping_caches<'s>(
    store: &'s Store,
    opts: &VerifyOptions,
) -> Result<(VerifyOutcome, Verifier<'s>)> {
    // Only reads: each ref and each revision once, the notes refs in one listing (reftable).
    store.snapshot_refs(|| {
        store.snapshot_refs_under(NOTES_PREFIX)?;
        verify_now(store, opts)
    })
}

fn verify_now<'s>(store: &'s Store, opts: &VerifyOptions) -> Result<(VerifyOutcome, Verifier<'s>)> {
    for name in &opts.checks {
        crate::model::ids::check_run_id(name).map_err(|why| {
            Error::usage(format!("invalid check name {name:?}: {why}"))
                .hint("check names match [A-Za-z0-9][A-Za-z0-9._-]*")
        })?;
    }
    let commits = commits_of(store, &opts.revs, opts.first_parent).map_err(|e| {
        // A revision older than a shallow clone's history is not here either.
        if e.kind == crate::error::ErrorKind::NotFound && store.repo.is_shallow().unwrap_or(false)
        {
            let remote = crate::store::remote::fetch::default_remote(store)
                .unwrap_or_else(|_| "origin".to_string());
            let before = e.hint.clone().map_or(String::new(), |h| format!("; else {h}"));
            e.hint(format!(
                "this is a shallow clone: `git fetch --deepen=<n> {remote}` (or `git fetch --unshallow {remote}`) brings older history{before}"
            ))
        } else {
            e
        }
    })?;
    fetch_what_a_partial_clone_lacks(store, &commits, opts.policy_from.as_deref())?;
    let mut verifier = Verifier::new(store)?;
    verifier.list_executions(opts.executions);
    let fixed_gate = match &opts.policy_from {
        Some(rev) => {
            let at = store.resolve_commit(rev)?;
            let policy = verifier.policy_at(at)?;
            let trust = verifier.trust_at(at)?;
            // The failing tests a commit may inherit are those of the tip that judges.
            let gate = Gate::from_policy(policy.as_ref(), &opts.checks);
            let gate = verifier.with_baselines(gate, Some(at), trust.as_ref())?;
            Some((at, Rc::new(gate), trust))
        }
        None => None,
    };
    if fixed_gate.is_none() {
        verifier.read_policies_oldest_first(&commits);
    }
    // The ranges' commits as walked (all of them, unless only first parents were walked).
    let walked: Option<HashSet<gix::ObjectId>> =
        (!opts.first_parent).then(|| commits.iter().copied().collect());
    let mut out = Vec::with_capacity(commits.len());
    let mut summaries = NotesView::at_ref_and_tracking(store, VSA)?;
    for commit in commits {
        // The allowed signers come from the same commit as the policy that judges.
        let (gate, trust) = match &fixed_gate {
            Some((_, gate, trust)) => (Rc::clone(gate), trust.clone()),
            None => {
                let trust = verifier.trust_at(commit)?;
                // Judged by its own policy, a commit may inherit the failing tests of the
                // commit it was landed on (its first parent).
                let gate = verifier.gate_at(commit, &opts.checks)?;
                let gate = if gate.wants_baselines() {
                    let parent = crate::store::ancestry::first_parent(store, commit)?;
                    let gate = Rc::unwrap_or_clone(gate);
                    Rc::new(verifier.with_baselines(gate, parent, trust.as_ref())?)
                } else {
                    gate
                };
                (gate, trust)
            }
        };
        let mut verdict = verifier.check_trusted(commit, &gate, trust.as_ref())?;
        verdict.vsa = judge_summaries(&mut verifier, &mut summaries, commit, trust.as_ref())?;
        if verdict.vsa.iter().any(|v| v.is_invalid()) {
            verdict.verified = false;
        }
        out.push(verdict);
    }
    let gating = fixed_gate.as_ref().map(|(at, _, _)| *at);
    let mut limits = Vec::new();
    let mut steps = guarded_steps(
        store,
        &mut verifier.policies,
        &opts.revs,
        (gating, walked.as_ref()),
        &mut limits,
    )?;
    for verdict in &mut out {
        let id = store.parse_oid(&verdict.commit)?;
        if let Some(g) = steps.remove(&id).and_then(GuardedVerdict::of) {
            if g.verdict == UNAPPROVED_GUARDED_CHANGE {
                verdict.verified = false;
            }
            verdict.approval = Some(g);
        }
    }
    if opts.require_provenance {
        resolve_provenance(store, &mut out)?;
    }
    let verified = out.iter().all(|c| c.verified);
    let advice = if verified {
        None
    } else {
        Some(advice_with_provenance(store, &out)?)
    };
    let outcome = VerifyOutcome {
        verified,
        policy_from: fixed_gate.map(|(at, _, _)| at.to_string()),
        commits: out,
        advice,
        limits,
    };
    Ok((outcome, verifier))
}

/// The verification summaries noted on `commit` (`refs/notes/tabellio/vsa`), each judged: its
/// signature under `trust`, and what it claims against the evidence. None looked up when there
/// are no summaries at all.
fn judge_summaries(
    verifier: &mut Verifier<'_>,
    summaries: &mut NotesView,
    commit: gix::ObjectId,
    trust: Option<&crate::store::policy::TrustAt>,
) -> Result<Vec<crate::trust::vsa::VsaVerdict>> {
    if summaries.is_empty() {
        return Ok(Vec::new());
    }
    let hex = commit.to_string();
    let signers = trust.map(|t| &*t.signers);
    let mut out = Vec::new();
    for line in summaries.lines(verifier.store(), commit)? {
        let mut judged = crate::trust::vsa::judge(&line, &hex, signers);
        if !judged.is_invalid() {
            if let Some(why) = summary_overclaims(verifier, &line, commit)? {
                judged = crate::trust::vsa::VsaVerdict::invalid(why);
            }
        }
        out.push(judged);
    }
    Ok(out)
}

/// `--require-provenance`: each verdict names the run that landed its commit, and a commit no
/// run landed is not verified.
fn resolve_provenance(store: &Store, out: &mut [CommitVerdict]) -> Result<()> {
    let landed = crate::run::landed::LandedMap::read(store)?;
    for verdict in out {
        let run = landed.resolve(store, store.parse_oid(&verdict.commit)?)?;
        if run.is_none() {
            verdict.verified = false;
        }
        verdict.provenance = Some(ProvenanceVerdict {
            verdict: if run.is_some() {
                "resolved"
            } else {
                "unresolved"
            },
            run,
        });
    }
    Ok(())
}

/// [`advice`] for verdicts that are not all verified, with the way to provenance when a commit
/// lacks it.
fn advice_with_provenance(store: &Store, out: &[CommitVerdict]) -> Result<String> {
    let advice = advice(store, out)?;
    if out
        .iter()
        .any(|c| c.provenance.as_ref().is_some_and(|p| p.run.is_none()))
    {
        return Ok(format!(
            "{advice}; a commit no run landed has no provenance: fetch the runs' ledgers (`git fetch <remote> 'refs/tabellio/runs/*:refs/tabellio/runs/*'`), or land such changes through `git tabellio promote` or `land`"
        ));
    }
    Ok(advice)
}

/// Why the well-formed summary `line` on `commit` claims more than is true, if it does: its
/// levels and inputs are recomputed from the evidence (the notes `verifier` reads, tracking
/// ones included) under the policy it names, for the target it names (a signature proves who
/// wrote a summary, not that it is right). A named policy commit that is not here cannot be
/// judged: the summary stands on its signature.
fn summary_overclaims(
    verifier: &mut Verifier<'_>,
    line: &str,
    commit: gix::ObjectId,
) -> Result<Option<String>> {
    let store = verifier.store();
    let Some((target, policy)) = crate::trust::vsa::judged_by(line) else {
        return Ok(None);
    };
    let Ok(gating) = store.parse_oid(&policy) else {
        return Ok(Some(format!(
            "its policy commit {policy:?} is not a commit id"
        )));
    };
    if !store.repo.has_object(gating) {
        return Ok(None);
    }
    let policy = verifier.policy_at(gating)?;
    let trust = verifier.trust_at(gating)?;
    let mut records = verifier.record_digests(commit)?;
    // A summary is written only for a policy that requires checks (never for any passing one).
    let earned = match Gate::from_policy(policy.as_ref(), &[]) {
        Gate::AnyPassing => None,
        gate => {
            let judged = verifier.check_trusted(commit, &gate, trust.as_ref())?;
            // Records on a check's scoped tree count as inputs too.
            records.extend(judged.checks.iter().filter_map(|c| c.record.clone()));
            judged
                .verified
                .then(|| crate::run::vsa::levels(policy.as_ref(), &target, &judged.checks))
        }
    };
    Ok(crate::trust::vsa::overclaims(
        line,
        earned.as_deref(),
        &records,
    ))
}

/// The command that fetches every evidence note of `remote`, as docs/ci.md gives it.
fn fetch_notes_command(remote: &str) -> String {
    format!("git fetch {remote} '{NOTES_PREFIX}*:{NOTES_PREFIX}*'")
}

/// What to do about the commits of `verdicts` that did not verify. A clone does not fetch notes:
/// when this one has no evidence notes at all, or no record names a commit that failed, the
/// evidence may well exist on the remote, and the advice is the fetch that brings it (with its
/// exact refspec); otherwise it is to make evidence.
fn advice(store: &Store, verdicts: &[CommitVerdict]) -> Result<String> {
    let validate = "make evidence with `git tabellio validate <commit>`";
    let Ok(remote) = crate::store::remote::fetch::default_remote(store) else {
        return Ok(validate.to_string());
    };
    let fetch = fetch_notes_command(&remote);
    let have_notes = store.ref_target(EVIDENCE)?.is_some()
        || !store
            .refs_under(crate::store::remote::fetch::NOTES_REMOTES)?
            .is_empty();
    if !have_notes {
        return Ok(format!(
            "this clone has no evidence notes (a clone does not fetch them): fetch the evidence notes, `{fetch}`, and verify again; \
             evidence never made is made with `git tabellio validate <commit>`"
        ));
    }
    let unrecorded = verdicts.iter().any(|c| {
        !c.verified
            && !c.checks.is_empty()
            && c.checks.iter().all(|v| v.verdict == Verdict::Missing)
    });
    if unrecorded {
        return Ok(format!(
            "no record here names a commit that failed: if it was validated elsewhere, fetch the evidence notes, `{fetch}`, and verify again; \
             otherwise {validate}"
        ));
    }
    Ok(validate.to_string())
}

/// In a partial clone (`git clone --filter=blob:none`) the blobs judging reads — the notes on
/// each commit and its tree, the policies — are fetched first, through git, as git fetches a
/// missing object the moment it needs one (gix does not).
fn fetch_what_a_partial_clone_lacks(
    store: &Store,
    commits: &[gix::ObjectId],
    policy_from: Option<&str>,
) -> Result<()> {
    if promisor::promisor_remote(store).is_none() {
        return Ok(());
    }
    let mut policies_at = Vec::new();
    if let Some(rev) = policy_from {
        policies_at.push(store.resolve_commit(rev)?);
    }
    // A commit's guarded-path step reads the policy at its first parent.
    for &commit in commits {
        if let Some(parent) = first_parent(store, commit)? {
            if store.repo.has_object(parent) {
                policies_at.push(parent);
            }
        }
    }
    promisor::fetch_for_judging(store, &[EVIDENCE, APPROVALS], commits, &policies_at)
}

fn first_parent(store: &Store, commit: gix::ObjectId) -> Result<Option<gix::ObjectId>> {
    let c = store
        .repo
        .find_commit(commit)
        .context(|| format!("could not read commit {commit}"))?;
    let parent = c.parent_ids().next().map(|p| p.detach());
    Ok(parent)
}

/// The first parent `parent` of `commit` is not here: the boundary of a shallow clone (`git
/// clone --depth 1`). Its step is guarded by the policy at `--policy-from` (`gating`), else at
/// the parent, and by the commit's own. What can be judged without the parent is: with
/// `gating`, when neither guards a path, there is nothing to judge; without it, when the commit's
/// own policy guards nothing, the step is judged by that policy alone and `limits` says so.
/// Otherwise the change from the parent must be read: refused, with the fetch that brings it.
fn beyond_boundary(
    store: &Store,
    policies: &mut Policies,
    (gating, commit, parent): (Option<gix::ObjectId>, gix::ObjectId, gix::ObjectId),
    limits: &mut Vec<String>,
) -> Result<()> {
    let mut guards = |c| {
        policies
            .guards_at(store, c)
            .map_err(crate::store::policy::PolicyAtError::naming_commit)
    };
    let own = guards(commit)?;
    let gated = match gating {
        Some(g) => guards(g)?,
        None => false,
    };
    let remote =
        crate::store::remote::fetch::default_remote(store).unwrap_or_else(|_| "origin".to_string());
    let deepen = format!("git fetch --deepen=1 {remote}");
    let shallow = store.repo.is_shallow().unwrap_or(false);
    let where_ = if shallow {
        "beyond this shallow clone's boundary"
    } else {
        "not in this repository"
    };
    if !own && !gated {
        if gating.is_none() {
            limits.push(format!(
                "the first parent {parent} of {commit} is {where_}: its step was judged for guarded paths by {commit}'s own policy only, which guards none (`{deepen}` lets the policy at the parent judge it too, or `--policy-from <rev>` another commit's)"
            ));
        }
        return Ok(());
    }
    Err(Error::refused(format!(
        "the first parent {parent} of {commit} is {where_}, and the policy guards paths: the change from it must be read to judge them"
    ))
    .hint(format!("fetch one more commit of history, `{deepen}`, and verify again")))
}

/// The guarded-path verdict of the first-parent steps `revs` name: each commit of a range
/// `a..b` on `b`'s first-parent line back to `a` (approved by an approval on it or a later
/// commit of that line), and a single commit against its first parent. Each step is guarded
/// by the policy at its parent (or at `gating`, `--policy-from`) plus its own.
fn guarded_steps(
    store: &Store,
    policies: &mut Policies,
    revs: &[String],
    (gating, walked): (Option<gix::ObjectId>, Option<&HashSet<gix::ObjectId>>),
    limits: &mut Vec<String>,
) -> Result<HashMap<gix::ObjectId, ApprovalCheck>> {
    let default = ["HEAD".to_string()];
    let revs = if revs.is_empty() { &default[..] } else { revs };
    let mut notes = approval::notes(store)?;
    let mut actors = approval::RunActors::default();
    let mut out = HashMap::new();
    for rev in revs {
        let (from, to, within) = match rev.split_once("..") {
            Some((from, to)) => (
                store.resolve_commit(if from.is_empty() { "HEAD" } else { from })?,
                store.resolve_commit(if to.is_empty() { "HEAD" } else { to })?,
                walked,
            ),
            None => {
                let to = store.resolve_commit(rev)?;
                match first_parent(store, to)? {
                    Some(p) if !store.repo.has_object(p) => {
                        beyond_boundary(store, policies, (gating, to, p), limits)?;
                        continue;
                    }
                    Some(p) => (p, to, None),
                    None => continue,
                }
            }
        };
        if let (None, Some(range)) = (gating, within) {
            if from != to && !any_guards(store, policies, range, [from, to]) {
                continue;
            }
        }
        let steps = approval::judge_chain(
            store,
            policies,
            (&mut notes, &mut actors),
            gating,
            (from, to, approval::Steps::FirstParent),
            within,
            None,
        )?;
        for step in steps {
            out.entry(step.commit).or_insert(step.check);
        }
    }
    Ok(out)
}

/// The commits named by `revs`, each once, in the order given; a range newest first, along
/// first parents only when `first_parent`.
pub fn commits_of(
    store: &Store,
    revs: &[String],
    first_parent: bool,
) -> Result<Vec<gix::ObjectId>> {
    let default = ["HEAD".to_string()];
    let revs = if revs.is_empty() { &default[..] } else { revs };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for rev in revs {
        if rev.contains("...") {
            return Err(Error::usage(format!(
                "{rev:?}: symmetric ranges (a...b) are not supported"
            ))
            .hint(
                "name a range a..b (commits reachable from b but not from a) or single commits",
            ));
        }
        let ids = match rev.split_once("..") {
            None => vec![store.resolve_commit(rev)?],
            Some((from, to)) => {
                let from = store.resolve_commit(if from.is_empty() { "HEAD" } else { from })?;
                let to = store.resolve_commit(if to.is_empty() { "HEAD" } else { to })?;
                let line = walk_range(store, from, to, first_parent)?;
                if first_parent {
                    pointed_at(store, line, from)?
                } else {
                    line
                }
            }
        };
        for id in ids {
            if seen.insert(id) {
                out.push(id);
            }
        }
    }
    Ok(out)
}

/// Of a first-parent `line` (newest first, down to the excluded `from`), the commits the branch
/// pointed at: a commit that a run's ledger records as a promotion's new tip stands for its
/// whole landing, and the replayed commits below it down to the promotion's old tip are left
/// out (the target never pointed at them). Every other commit stays. The ledgers only choose
/// which commits are judged; the evidence alone judges them. A landing whose old tip is neither
/// on the line nor `from` is not trusted to end anywhere: its commits stay.
fn pointed_at(
    store: &Store,
    line: Vec<gix::ObjectId>,
    from: gix::ObjectId,
) -> Result<Vec<gix::ObjectId>> {
    let mut landings: std::collections::HashMap<gix::ObjectId, Vec<gix::ObjectId>> =
        Default::default();
    for (run_id, tip) in store.list_ledgers()? {
        // An unreadable ledger leaves its landing out: its commits are judged one by one.
        let Ok(record) = store.read_ledger_record(&run_id, tip) else {
            continue;
        };
        let Some(p) = record.promotion else { continue };
        if let (Ok(new), Ok(old)) = (
            gix::ObjectId::from_hex(p.new.as_bytes()),
            gix::ObjectId::from_hex(p.old.as_bytes()),
        ) {
            landings.entry(new).or_default().push(old);
        }
    }
    // Archived runs keep their landings: the archive entry carries the promotion's commits.
    for found in store.archived_runs()? {
        let Some(p) = found.entry.promotion else {
            continue;
        };
        if let (Ok(new), Ok(old)) = (
            gix::ObjectId::from_hex(p.new.as_bytes()),
            gix::ObjectId::from_hex(p.old.as_bytes()),
        ) {
            landings.entry(new).or_default().push(old);
        }
    }
    let position: std::collections::HashMap<gix::ObjectId, usize> =
        line.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&commit) = line.get(i) {
        out.push(commit);
        // The nearest recorded old tip below this commit ends its landing.
        let end = landings.get(&commit).and_then(|olds| {
            olds.iter()
                .filter_map(|old| match position.get(old) {
                    Some(&j) if j > i => Some(j),
                    _ if *old == from => Some(line.len()),
                    _ => None,
                })
                .min()
        });
        i = end.unwrap_or(i + 1);
    }
    Ok(out)
}

/// Whether a policy at one of `commits` or `ends` names guarded paths. Each first-parent step
/// of a range `from..to` is guarded by its own commit's policy and its parent's, and both are
/// among the range's commits, `from` and `to` (the line is followed only inside the range), so
/// when this says no, no step of the range is guarded. A policy that cannot be read says yes:
/// the chain's own judging then reports it as it always has.
fn any_guards(
    store: &Store,
    policies: &mut Policies,
    commits: &HashSet<gix::ObjectId>,
    ends: [gix::ObjectId; 2],
) -> bool {
    commits
        .iter()
        .copied()
        .chain(ends)
        .any(|c| policies.guards_at(store, c).unwrap_or(true))
}

/// Commits reachable from `to` but not from `from`, newest first (like `git rev-list from..to`,
/// with `--first-parent` when `first_parent`).
pub fn walk_range(
    store: &Store,
    from: gix::ObjectId,
    to: gix::ObjectId,
    first_parent: bool,
) -> Result<Vec<gix::ObjectId>> {
    use gix::revision::walk::Sorting;
    use gix::traverse::commit::simple::CommitTimeOrder;
    let mut platform = store
        .repo
        .rev_walk([to])
        .with_hidden([from])
        .sorting(Sorting::ByCommitTime(CommitTimeOrder::NewestFirst));
    if first_parent {
        platform = platform.first_parent_only();
    }
    let walk = platform
        .all()
        .context(|| format!("could not walk {from}..{to}"))?;
    let mut out = Vec::new();
    for info in walk {
        let info = info.context(|| format!("could not walk {from}..{to}"))?;
        out.push(info.id);
    }
    Ok(out)
}
