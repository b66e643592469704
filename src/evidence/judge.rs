//! Verdicts: which required checks a commit has passing, untampered records for.
//!
//! The one place verdicts are decided, shared by status, promote, verify and the hooks: each
//! record's digest, the object it names and the check definition it was made with are
//! re-checked every time.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::error::Result;
use crate::model::evidence::CheckStatus;
use crate::model::policy::FlakyPolicy;
use crate::model::EvidenceRecord;
use crate::store::policy::TrustAt;
use crate::store::Store;
use crate::trust::{judge_signature, SignatureVerdict};

use super::read::{records_for, Line};
use super::requirements::{trusted_for, Gate, Requirement};

/// The verdict on one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Satisfied,
    Missing,
    Failed,
    StaleCheck,
    Tampered,
    MismatchedObject,
    /// Passing and intact, but the judging policy requires a signature and it has none.
    Unsigned,
    /// Its signature does not verify over its digest (edited, or copied from another record).
    BadSignature,
    /// Signed by a key the allowed signers do not grant (for the claimed principal).
    UnknownSigner,
    /// Signed by an allowed key outside its `valid-after`/`valid-before` window.
    SignerExpired,
    /// Signed by an agent's key (`tabellio.agent` in the allowed signers) but naming another
    /// actor: a human, or another agent (docs/signing.md#who-is-who).
    ForgedActor,
    /// A `not_applicable` record that does not hold: the judging policy declares no inputs
    /// for the check, or the commit's inputs differ from the tree it claims to stand on, or
    /// the passing record it names is not there or does not count.
    NotApplicableRefused,
    /// Passed, and failed too: the same tree and check digest have both outcomes. Satisfies
    /// only where the judging policy says `"flaky": "accept"` for the check.
    FlakyPass,
    /// Failed, but every failing test id also fails on the target's tip (same check digest),
    /// where the judging policy says `"baseline": "allow"` for the check.
    NoNewFailures,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Satisfied => "satisfied",
            Verdict::Missing => "missing",
            Verdict::Failed => "failed",
            Verdict::StaleCheck => "stale-check",
            Verdict::Tampered => "tampered",
            Verdict::MismatchedObject => "mismatched-object",
            Verdict::Unsigned => "unsigned",
            Verdict::BadSignature => "bad-signature",
            Verdict::UnknownSigner => "unknown-signer",
            Verdict::SignerExpired => "signer-expired",
            Verdict::ForgedActor => "forged-actor",
            Verdict::NotApplicableRefused => "not-applicable-refused",
            Verdict::FlakyPass => "flaky-pass",
            Verdict::NoNewFailures => "no-new-failures",
        }
    }
    /// Which verdict to report when no record satisfies: the most alarming wins.
    pub(crate) fn rank(self) -> u8 {
        match self {
            // A flaky pass is a pass seen beside a failure: it is decided after the ranking.
            Verdict::Satisfied | Verdict::FlakyPass => 10,
            Verdict::Tampered => 9,
            Verdict::BadSignature => 8,
            Verdict::ForgedActor => 8,
            Verdict::MismatchedObject | Verdict::NotApplicableRefused => 7,
            Verdict::UnknownSigner => 6,
            Verdict::SignerExpired => 5,
            // A failure with a new failing test beats one with inherited failures only.
            Verdict::Failed => 4,
            Verdict::NoNewFailures => 3,
            Verdict::Unsigned => 2,
            Verdict::StaleCheck => 1,
            Verdict::Missing => 0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckVerdict {
    pub name: String,
    pub verdict: Verdict,
    /// The digest of the record that decided the verdict.
    pub record: Option<String>,
    /// Who signed the satisfying record, when the check needed a trusted signature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<Signer>,
    /// `flaky-pass`: the digest of a failing record beside the passing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_record: Option<String>,
    /// `no-new-failures`: the failing test ids inherited from the target's tip.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inherited: Vec<String>,
    /// `failed` under a baseline: the failing test ids the target's tip does not have.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_failures: Vec<String>,
    /// Under a baseline: the tip's failing test ids that no longer fail here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixed: Vec<String>,
    /// Whether the verdict satisfies the requirement (`satisfied`; `flaky-pass` where the
    /// policy accepts it; `no-new-failures`).
    #[serde(skip)]
    pub accepted: bool,
    /// Until [`settle`]: the definition digest of the deciding record, and (definition digest,
    /// record digest) of each failing record on the tree that counts, for `flaky-pass`.
    #[serde(skip)]
    pub(crate) check_digest: Option<String>,
    #[serde(skip)]
    pub(crate) failures: Vec<(String, String)>,
}

impl CheckVerdict {
    /// Does this verdict satisfy its requirement under the judging policy?
    pub fn satisfies(&self) -> bool {
        self.accepted
    }

    /// `name (verdict)`, with the test ids that explain a baseline verdict.
    pub fn describe(&self) -> String {
        let more = match self.verdict {
            Verdict::NoNewFailures if !self.inherited.is_empty() => {
                format!(": {} inherited", self.inherited.join(", "))
            }
            Verdict::Failed if !self.new_failures.is_empty() => {
                format!(": new failures {}", self.new_failures.join(", "))
            }
            _ => String::new(),
        };
        format!("{} ({}{more})", self.name, self.verdict.as_str())
    }

    fn of(name: &str, verdict: Verdict, record: Option<String>, signer: Option<Signer>) -> Self {
        CheckVerdict {
            name: name.to_string(),
            verdict,
            record,
            signer,
            failed_record: None,
            inherited: Vec::new(),
            new_failures: Vec::new(),
            fixed: Vec::new(),
            accepted: verdict == Verdict::Satisfied,
            check_digest: None,
            failures: Vec::new(),
        }
    }
}

/// The allowed signer whose signature made a record count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signer {
    pub principal: String,
    pub fingerprint: String,
}

/// Does the policy at `tip` (the target's) let failing `rec` pass as `no-new-failures`: its
/// check allows a baseline, with the same definition, and every failing test id of `rec`
/// fails on `tip` too? Where `finish` and `loop` decide whether an attempt completes the run.
pub fn inherits_failures(
    store: &crate::store::Store,
    tip: Option<gix::ObjectId>,
    rec: &crate::model::EvidenceRecord,
) -> crate::error::Result<bool> {
    let Some(tip) = tip else {
        return Ok(false);
    };
    if rec.passed() || rec.tests.is_none() {
        return Ok(false);
    }
    let policy = crate::store::policy::policy_at(store, tip).map_err(crate::error::Error::from)?;
    let reqs = super::requirements::of_policy(policy.as_ref(), &[]);
    let Some(req) = reqs
        .into_iter()
        .find(|r| r.name == rec.check.name && r.baseline.is_some())
    else {
        return Ok(false);
    };
    // The record is judged on its own commit and tree: declared inputs change nothing here.
    let req = Requirement { scope: None, ..req };
    let reqs = super::requirements::with_baselines(store, vec![req], Some(tip))?;
    Ok(judge(rec, &reqs[0], &rec.commit, &rec.tree) == Verdict::NoNewFailures)
}

/// The verdict on one record for one requirement. A `not_applicable` record never satisfies
/// alone: the record it stands on is among the other lines ([`best_for`] judges it).
pub fn judge(rec: &EvidenceRecord, req: &Requirement, commit: &str, tree: &str) -> Verdict {
    match judge_signed(rec, req, commit, tree).0 {
        Verdict::Satisfied if rec.status == CheckStatus::NotApplicable => {
            Verdict::NotApplicableRefused
        }
        v => v,
    }
}

/// [`judge`], with the signer when the requirement needs a signature and the record's is
/// trusted. The signature is judged last: only a record that would satisfy without trust
/// can be refused for its signature, so `unsigned` never hides `failed` or `tampered`.
pub fn judge_signed(
    rec: &EvidenceRecord,
    req: &Requirement,
    commit: &str,
    tree: &str,
) -> (Verdict, Option<Signer>) {
    let verdict = judge_unsigned(rec, req, commit, tree);
    let Some(signers) = req.signers.as_deref() else {
        return (verdict, None);
    };
    if !matches!(verdict, Verdict::Satisfied | Verdict::NoNewFailures) {
        return (verdict, None);
    }
    // `digest` was just recomputed from the content and found equal ([`judge_unsigned`]).
    match judge_signature(
        rec.signature.as_ref(),
        &rec.digest,
        &rec.finished_at,
        signers,
    ) {
        SignatureVerdict::Trusted {
            principal,
            fingerprint,
        } if crate::trust::refuse_attribution(
            signers,
            &principal,
            &fingerprint,
            rec.actor.as_ref(),
        )
        .is_some() =>
        {
            (Verdict::ForgedActor, None)
        }
        SignatureVerdict::Trusted {
            principal,
            fingerprint,
        } => (
            verdict,
            Some(Signer {
                principal,
                fingerprint,
            }),
        ),
        SignatureVerdict::Unsigned => (Verdict::Unsigned, None),
        SignatureVerdict::BadSignature { .. } => (Verdict::BadSignature, None),
        SignatureVerdict::UnknownSigner { .. } => (Verdict::UnknownSigner, None),
        SignatureVerdict::SignerExpired { .. } => (Verdict::SignerExpired, None),
    }
}

fn judge_unsigned(rec: &EvidenceRecord, req: &Requirement, commit: &str, tree: &str) -> Verdict {
    if !rec.digest_is_valid() {
        return Verdict::Tampered;
    }
    // Under declared inputs a record is about the commit's scoped tree: one made on any tree
    // with the same inputs counts, and one naming this commit with other inputs does not.
    let scoped = req.scope.as_ref().map(|s| s.tree.as_deref());
    let on_scope = matches!(scoped, Some(Some(s)) if rec.scoped_tree.as_deref() == Some(s));
    if rec.commit != commit && rec.tree != tree && !on_scope {
        return Verdict::MismatchedObject;
    }
    if let Some(d) = &req.digest {
        if &rec.check.digest != d {
            return Verdict::StaleCheck;
        }
    }
    if scoped.is_some() && !on_scope {
        return match rec.status {
            CheckStatus::NotApplicable => Verdict::NotApplicableRefused,
            _ => Verdict::MismatchedObject,
        };
    }
    match rec.status {
        CheckStatus::Passed => Verdict::Satisfied,
        // Provisional: [`best_for`] checks the record it stands on.
        CheckStatus::NotApplicable if scoped.is_some() => Verdict::Satisfied,
        CheckStatus::NotApplicable => Verdict::NotApplicableRefused,
        _ if baseline_diff(rec, req).is_some_and(|d| d.new.is_empty()) => Verdict::NoNewFailures,
        _ => Verdict::Failed,
    }
}

/// Does the `not_applicable` record `rec` stand on a record among `records` that satisfies
/// `req` by itself: passed (not another `not_applicable`), intact, trusted, on the same
/// scoped tree?
fn stands(
    rec: &EvidenceRecord,
    records: &[Line],
    req: &Requirement,
    commit: &str,
    tree: &str,
) -> bool {
    let Some(on) = rec.reused_from.as_deref() else {
        return false;
    };
    records.iter().any(|(_, r)| {
        r.as_ref().is_some_and(|r| {
            r.digest == on
                && r.status == CheckStatus::Passed
                && r.check.name == req.name
                && judge_signed(r, req, commit, tree).0 == Verdict::Satisfied
        })
    })
}

/// A failing record's test ids against the requirement's baseline, when both are known.
struct BaselineDiff {
    inherited: Vec<String>,
    new: Vec<String>,
    fixed: Vec<String>,
}

/// Where the requirement has a read baseline: which of `rec`'s failing ids are inherited, new,
/// and which of the baseline's are fixed. `None` without a baseline, or when the record lists
/// no tests or not all of its failing ids (a cut list proves nothing about the rest).
fn baseline_diff(rec: &EvidenceRecord, req: &Requirement) -> Option<BaselineDiff> {
    let inherited = req.baseline.as_ref()?.inherited.as_ref()?;
    let failing: Vec<String> = if rec.passed() {
        Vec::new()
    } else {
        let tests = rec.tests.as_ref().filter(|t| t.complete())?;
        // A check that failed without naming a failing test failed for another reason.
        if tests.failing.is_empty() {
            return None;
        }
        tests.failing.clone()
    };
    let (old, new): (Vec<String>, Vec<String>) = failing
        .iter()
        .cloned()
        .partition(|id| inherited.contains(id));
    let fixed = inherited
        .iter()
        .filter(|id| !failing.contains(id))
        .cloned()
        .collect();
    Some(BaselineDiff {
        inherited: old,
        new,
        fixed,
    })
}

/// Judge every requirement against the records on `commit` and its tree (and, for checks with
/// declared inputs, on its scoped trees); a check whose `when` the records prove does not hold
/// is not judged (no verdict).
pub fn evaluate(
    store: &Store,
    commit: gix::ObjectId,
    requirements: &[Requirement],
) -> Result<Vec<CheckVerdict>> {
    let (tree, reqs, records) = lines_for(store, commit, requirements)?;
    let reqs = super::requirements::applicable(reqs, &records);
    Ok(evaluate_records(
        &records,
        &commit.to_string(),
        &tree.to_string(),
        &reqs,
    ))
}

/// The record that satisfies `req` on `commit`, if one does.
pub fn deciding_record(
    store: &Store,
    commit: gix::ObjectId,
    req: &Requirement,
) -> Result<Option<EvidenceRecord>> {
    let (tree, reqs, records) = lines_for(store, commit, std::slice::from_ref(req))?;
    let best = best_for(&reqs[0], &records, &commit.to_string(), &tree.to_string());
    Ok(best
        .filter(|(v, _)| v.verdict == Verdict::Satisfied)
        .and_then(|(_, i)| records[i].1.clone()))
}

/// `commit`'s tree, `requirements` with their scoped trees filled in, and the lines noted on
/// the commit, its tree and those scoped trees (sorted, unique).
fn lines_for(
    store: &Store,
    commit: gix::ObjectId,
    requirements: &[Requirement],
) -> Result<(gix::ObjectId, Vec<Requirement>, Vec<Line>)> {
    let tree = store.tree_of(commit)?;
    let mut reqs = requirements.to_vec();
    let scoped = super::scope::scope_requirements(store, tree, &mut reqs)?;
    let mut records = records_for(store, commit, tree)?;
    if !scoped.is_empty() {
        for id in scoped {
            records.extend(super::read::lines_on(
                store,
                super::read::Notes::Local,
                None,
                id,
            )?);
        }
        records.sort_by(|a, b| a.0.cmp(&b.0));
        records.dedup_by(|a, b| a.0 == b.0);
    }
    Ok((tree, reqs, records))
}

/// Judge every requirement against already read evidence lines (as
/// [`super::read::lines_on`] returns them): the one place verdicts are decided, shared by status, promote, verify and the hooks.
///
/// A line that does not parse as a known record but names the required check is judged too:
/// when its own digest is wrong it was edited (`tampered`, e.g. a hand-changed `schema`); when
/// the digest is right it is a genuine record of a schema this tool cannot read, which never
/// satisfies and is otherwise ignored.
pub fn evaluate_records(
    records: &[Line],
    commit: &str,
    tree: &str,
    requirements: &[Requirement],
) -> Vec<CheckVerdict> {
    requirements
        .iter()
        .map(|req| match best_for(req, records, commit, tree) {
            Some((best, _)) => settle(best, req),
            None => missing(req),
        })
        .collect()
}

/// The final verdict of a deciding one ([`best_for`]): a pass beside a failure of the same
/// tree and check digest is a `flaky-pass`, accepted where the requirement's policy says so.
pub(crate) fn settle(mut best: CheckVerdict, req: &Requirement) -> CheckVerdict {
    let failures = std::mem::take(&mut best.failures);
    if best.verdict == Verdict::Satisfied {
        let same = best.check_digest.take();
        best.failed_record = failures
            .into_iter()
            .find(|(def, _)| Some(def) == same.as_ref())
            .map(|(_, record)| record);
        if best.failed_record.is_some() {
            best.verdict = Verdict::FlakyPass;
        }
    }
    best.check_digest = None;
    best.accepted = match best.verdict {
        Verdict::Satisfied | Verdict::NoNewFailures => true,
        Verdict::FlakyPass => req.flaky == FlakyPolicy::Accept,
        _ => false,
    };
    best
}

/// The verdict of `req` when no line decides it.
pub(crate) fn missing(req: &Requirement) -> CheckVerdict {
    CheckVerdict::of(&req.name, Verdict::Missing, None, None)
}

/// The deciding verdict of `req` among `records` (sorted by line) and the index of the line
/// that decided it: the most alarming, or satisfied; among equals the first line. `None` when
/// no line is about `req`. Not final: `failures` holds the (trusted) failing records of the
/// tree, which [`settle`] turns into `flaky-pass` when one has the deciding pass's definition.
pub(crate) fn best_for(
    req: &Requirement,
    records: &[Line],
    commit: &str,
    tree: &str,
) -> Option<(CheckVerdict, usize)> {
    let mut best: Option<(CheckVerdict, usize)> = None;
    let mut failures: Vec<(String, String)> = Vec::new();
    for (i, (line, rec)) in records.iter().enumerate() {
        let v = match rec {
            Some(rec) if rec.check.name == req.name => {
                let (mut v, signer) = judge_signed(rec, req, commit, tree);
                if v == Verdict::Satisfied
                    && rec.status == CheckStatus::NotApplicable
                    && !stands(rec, records, req, commit, tree)
                {
                    v = Verdict::NotApplicableRefused;
                }
                // A failure of this tree, or (declared inputs) of a tree with the same inputs,
                // is a failure of the same evidence.
                let same_inputs = req
                    .scope
                    .as_ref()
                    .and_then(|s| s.tree.as_deref())
                    .is_some_and(|s| rec.scoped_tree.as_deref() == Some(s));
                if matches!(v, Verdict::Failed | Verdict::NoNewFailures)
                    && (rec.tree == tree || same_inputs)
                    && trusted_for(rec, req)
                {
                    failures.push((rec.check.digest.clone(), rec.digest.clone()));
                }
                let mut verdict = CheckVerdict::of(&req.name, v, Some(rec.digest.clone()), signer);
                verdict.check_digest = Some(rec.check.digest.clone());
                if let Some(diff) = baseline_diff(rec, req) {
                    verdict.inherited = diff.inherited;
                    verdict.fixed = diff.fixed;
                    if v == Verdict::Failed {
                        verdict.new_failures = diff.new;
                    }
                }
                verdict
            }
            Some(_) => continue,
            None => match judge_unreadable(line, &req.name) {
                Some((v, digest)) => CheckVerdict::of(&req.name, v, Some(digest), None),
                None => continue,
            },
        };
        if best
            .as_ref()
            .is_none_or(|(b, _)| v.verdict.rank() > b.verdict.rank())
        {
            best = Some((v, i));
        }
    }
    let mut best = best.filter(|(b, _)| b.verdict.rank() > Verdict::Missing.rank())?;
    best.0.failures = failures;
    Some(best)
}

/// The verdict under [`Gate::AnyPassing`] when no line is a readable record: `tampered` when
/// some line is an edited record, else `missing`, named [`ANY_CHECK`].
pub(crate) fn no_records(tampered: bool) -> CheckVerdict {
    let verdict = if tampered {
        Verdict::Tampered
    } else {
        Verdict::Missing
    };
    CheckVerdict::of(ANY_CHECK, verdict, None, None)
}

/// Under [`Gate::AnyPassing`] with no readable record at all: is `line` (unreadable) an edited
/// record? A line that is not a genuine record is an alarm, not an absence (a genuine record
/// of a newer schema is still ignored).
pub(crate) fn unreadable_is_tampered(line: &str) -> bool {
    let name = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| {
            v.pointer("/check/name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default();
    judge_unreadable(line, &name).is_some()
}

/// The verdict on a line that is not a readable record, if it claims to be evidence for `name`.
///
/// A line that is not JSON, or names no check at all, cannot be attributed: it was a record
/// once (only records are written there) and was edited into this, so it counts as tampered
/// for every check that has nothing better. A readable record of another check is not ours.
fn judge_unreadable(line: &str, name: &str) -> Option<(Verdict, String)> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
        return Some((Verdict::Tampered, String::new()));
    };
    // A record of another (newer) evidence schema with an intact digest is not ours to judge:
    // it never satisfies a check and is otherwise ignored (docs/verify.md). One whose digest no
    // longer matches (a v1 record with its schema edited) is tampered.
    if value
        .get("schema")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|s| s.starts_with("tabellio.evidence/") && s != crate::model::evidence::SCHEMA)
    {
        let claimed = value
            .get("digest")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let intact = crate::trust::signed_digest(&value).is_ok_and(|d| d == claimed);
        return (!intact).then(|| (Verdict::Tampered, claimed.to_string()));
    }
    match value
        .pointer("/check/name")
        .and_then(serde_json::Value::as_str)
    {
        None => return Some((Verdict::Tampered, String::new())),
        Some(n) if n != name => return None,
        Some(_) => {}
    }
    let claimed = value
        .get("digest")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let genuine = crate::trust::signed_digest(&value).is_ok_and(|d| d == claimed);
    (!genuine).then_some((Verdict::Tampered, claimed))
}

/// The name shown for the requirement of [`Gate::AnyPassing`] when no record exists at all.
pub const ANY_CHECK: &str = "*";

/// Judge already read lines against `gate`: the verdict on each check, and whether the commit
/// is verified. Under [`Gate::AnyPassing`] every check with a readable record is judged and one
/// satisfied check verifies; a commit with no record at all is `missing` [`ANY_CHECK`].
pub fn judge_gate(
    records: &[Line],
    commit: &str,
    tree: &str,
    gate: &Gate,
) -> (Vec<CheckVerdict>, bool) {
    judge_gate_trusted(records, commit, tree, gate, None)
}

/// [`judge_gate`] under the `trust` of the judging policy: a [`Gate::Required`] is expected to
/// carry it already ([`Gate::under_trust`]); the checks judged under [`Gate::AnyPassing`] get it
/// here.
pub fn judge_gate_trusted(
    records: &[Line],
    commit: &str,
    tree: &str,
    gate: &Gate,
    trust: Option<&TrustAt>,
) -> (Vec<CheckVerdict>, bool) {
    match gate {
        Gate::Required(reqs) => {
            let checks = evaluate_records(records, commit, tree, reqs);
            let verified = checks.iter().all(CheckVerdict::satisfies);
            (checks, verified)
        }
        Gate::AnyPassing => {
            let names: BTreeSet<&str> = records
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .map(|r| r.check.name.as_str())
                .collect();
            let reqs: Vec<Requirement> = names
                .into_iter()
                .map(|name| Requirement::new(name, None))
                .collect();
            let reqs = super::requirements::under_trust(reqs, trust);
            let mut checks = evaluate_records(records, commit, tree, &reqs);
            let verified = checks.iter().any(CheckVerdict::satisfies);
            if checks.is_empty() {
                // Nothing readable: a line that is not a genuine record is an alarm, not an
                // absence (a genuine record of a newer schema is still ignored).
                let tampered = records
                    .iter()
                    .any(|(line, r)| r.is_none() && unreadable_is_tampered(line));
                checks.push(no_records(tampered));
            }
            (checks, verified)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
