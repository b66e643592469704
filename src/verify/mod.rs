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
//! Verification only reads; it never writes a ref or an object.

pub mod validate;

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::evidence::requirements::Gate;
use crate::evidence::verifier::{
    CommitVerdict, GuardedVerdict, Verifier, UNAPPROVED_GUARDED_CHANGE,
};
use crate::store::policy::Policies;
use crate::store::remote::fetch::NOTES_PREFIX;
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
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyOutcome {
    pub verified: bool,
    /// The commit whose policy was applied to all, when `--policy-from` was given.
    pub policy_from: Option<String>,
    pub commits: Vec<CommitVerdict>,
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
    let commits = commits_of(store, &opts.revs, opts.first_parent)?;
    let mut verifier = Verifier::new(store)?;
    let fixed_gate = match &opts.policy_from {
        Some(rev) => {
            let at = store.resolve_commit(rev)?;
            let policy = verifier.policy_at(at)?;
            let trust = verifier.trust_at(at)?;
            Some((at, Gate::from_policy(policy.as_ref(), &opts.checks), trust))
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
    for commit in commits {
        // The allowed signers come from the same commit as the policy that judges.
        let (gate, trust) = match &fixed_gate {
            Some((_, gate, trust)) => (gate.clone(), trust.clone()),
            None => (
                Gate::from_policy(verifier.policy_at(commit)?.as_ref(), &opts.checks),
                verifier.trust_at(commit)?,
            ),
        };
        out.push(verifier.check_trusted(commit, &gate, trust.as_ref())?);
    }
    let gating = fixed_gate.as_ref().map(|(at, _, _)| *at);
    let mut steps = guarded_steps(
        store,
        &mut verifier.policies,
        &opts.revs,
        gating,
        walked.as_ref(),
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
    let outcome = VerifyOutcome {
        verified: out.iter().all(|c| c.verified),
        policy_from: fixed_gate.map(|(at, _, _)| at.to_string()),
        commits: out,
    };
    Ok((outcome, verifier))
}

/// The guarded-path verdict of the first-parent steps `revs` name: each commit of a range
/// `a..b` on `b`'s first-parent line back to `a` (approved by an approval on it or a later
/// commit of that line), and a single commit against its first parent. Each step is guarded
/// by the policy at its parent (or at `gating`, `--policy-from`) plus its own.
fn guarded_steps(
    store: &Store,
    policies: &mut Policies,
    revs: &[String],
    gating: Option<gix::ObjectId>,
    walked: Option<&HashSet<gix::ObjectId>>,
) -> Result<HashMap<gix::ObjectId, ApprovalCheck>> {
    let default = ["HEAD".to_string()];
    let revs = if revs.is_empty() { &default[..] } else { revs };
    let mut notes = approval::notes(store)?;
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
                let commit = store
                    .repo
                    .find_commit(to)
                    .context(|| format!("could not read commit {to}"))?;
                let parent = commit.parent_ids().next().map(|p| p.detach());
                match parent {
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
            &mut notes,
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
