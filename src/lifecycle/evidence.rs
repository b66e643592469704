//! Judging evidence: which required checks a commit has passing, untampered records for.
//!
//! The ledger is never trusted about validation: status, promote and verify all re-read the
//! records from `refs/notes/tabellio/evidence` (on the commit and on its tree) and re-check each
//! record's digest, the object it names and the check definition it was made with.

use serde::Serialize;

use crate::error::Result;
use crate::model::EvidenceRecord;
use crate::store::notes::EVIDENCE;
use crate::store::Store;

/// One check a commit must have evidence for: its name and, when a definition is known, the
/// digest that definition has now (older evidence is stale).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub name: String,
    pub digest: Option<String>,
}

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
        }
    }
    /// Which verdict to report when no record satisfies: the most alarming wins.
    fn rank(self) -> u8 {
        match self {
            Verdict::Satisfied => 6,
            Verdict::Tampered => 5,
            Verdict::MismatchedObject => 4,
            Verdict::Failed => 3,
            Verdict::StaleCheck => 2,
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
}

/// All evidence lines on `commit` and on its tree, as (line, parsed record or `None`).
pub fn records_for(
    store: &Store,
    commit: gix::ObjectId,
    tree: gix::ObjectId,
) -> Result<Vec<(String, Option<EvidenceRecord>)>> {
    let mut lines = store.note_lines(EVIDENCE, commit)?;
    lines.extend(store.note_lines(EVIDENCE, tree)?);
    lines.sort();
    lines.dedup();
    Ok(lines
        .into_iter()
        .map(|l| {
            let rec = EvidenceRecord::from_line(&l).ok();
            (l, rec)
        })
        .collect())
}

/// The verdict on one record for one requirement.
pub fn judge(rec: &EvidenceRecord, req: &Requirement, commit: &str, tree: &str) -> Verdict {
    if !rec.digest_is_valid() {
        return Verdict::Tampered;
    }
    if rec.commit != commit && rec.tree != tree {
        return Verdict::MismatchedObject;
    }
    if let Some(d) = &req.digest {
        if &rec.check.digest != d {
            return Verdict::StaleCheck;
        }
    }
    if rec.passed() {
        Verdict::Satisfied
    } else {
        Verdict::Failed
    }
}

/// Judge every requirement against the records on `commit` and its tree.
pub fn evaluate(
    store: &Store,
    commit: gix::ObjectId,
    requirements: &[Requirement],
) -> Result<Vec<CheckVerdict>> {
    let tree = store.tree_of(commit)?;
    let records = records_for(store, commit, tree)?;
    Ok(evaluate_records(
        &records,
        &commit.to_string(),
        &tree.to_string(),
        requirements,
    ))
}

/// Judge every requirement against already read evidence lines (as [`records_for`] returns
/// them): the one place verdicts are decided, shared by status, promote, verify and the hooks.
///
/// A line that does not parse as a known record but names the required check is judged too:
/// when its own digest is wrong it was edited (`tampered`, e.g. a hand-changed `schema`); when
/// the digest is right it is a genuine record of a schema this tool cannot read, which never
/// satisfies and is otherwise ignored.
pub fn evaluate_records(
    records: &[(String, Option<EvidenceRecord>)],
    commit: &str,
    tree: &str,
    requirements: &[Requirement],
) -> Vec<CheckVerdict> {
    requirements
        .iter()
        .map(|req| {
            let mut best = CheckVerdict {
                name: req.name.clone(),
                verdict: Verdict::Missing,
                record: None,
            };
            for (line, rec) in records {
                let (v, digest) = match rec {
                    Some(rec) if rec.check.name == req.name => {
                        (judge(rec, req, commit, tree), rec.digest.clone())
                    }
                    Some(_) => continue,
                    None => match judge_unreadable(line, &req.name) {
                        Some(found) => found,
                        None => continue,
                    },
                };
                if v.rank() > best.verdict.rank() {
                    best = CheckVerdict {
                        name: req.name.clone(),
                        verdict: v,
                        record: Some(digest),
                    };
                }
            }
            best
        })
        .collect()
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
        let intact =
            crate::model::canonical::digest_without_field(&value).is_ok_and(|d| d == claimed);
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
    let genuine = crate::model::canonical::digest_without_field(&value).is_ok_and(|d| d == claimed);
    (!genuine).then_some((Verdict::Tampered, claimed))
}

/// The policy's required checks at `commit`, each with the digest its definition has there;
/// `None` when there is no policy or it requires nothing.
pub fn policy_requirements(
    store: &Store,
    commit: gix::ObjectId,
) -> Result<Option<Vec<Requirement>>> {
    let Some(policy) = super::finish::policy_at(store, commit)? else {
        return Ok(None);
    };
    if policy.required.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        policy
            .required
            .iter()
            .map(|n| Requirement {
                name: n.clone(),
                digest: policy.checks.get(n).map(|d| d.digest()),
            })
            .collect(),
    ))
}

/// The checks an attempt ran, with the digests their definitions had.
pub fn attempt_requirements(attempt: &crate::model::run::Attempt) -> Vec<Requirement> {
    attempt
        .checks
        .iter()
        .map(|c| Requirement {
            name: c.name.clone(),
            digest: Some(c.digest.clone()),
        })
        .collect()
}
