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
    let (commit_hex, tree_hex) = (commit.to_string(), tree.to_string());
    Ok(requirements
        .iter()
        .map(|req| {
            let mut best = CheckVerdict {
                name: req.name.clone(),
                verdict: Verdict::Missing,
                record: None,
            };
            for rec in records
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .filter(|r| r.check.name == req.name)
            {
                let v = judge(rec, req, &commit_hex, &tree_hex);
                if v.rank() > best.verdict.rank() {
                    best = CheckVerdict {
                        name: req.name.clone(),
                        verdict: v,
                        record: Some(rec.digest.clone()),
                    };
                }
            }
            best
        })
        .collect())
}
