//! What the evidence notes already say about one tree for a set of checks, without running
//! anything: the lander of `land --lanes` decides by it instead of running checks, and a worker
//! skips a candidate whose tree has its verdict already.

use crate::error::Result;
use crate::evidence::reuse::find_reusable;
use crate::model::policy::ResolvedCheck;
use crate::model::EvidenceRecord;
use crate::store::notes::EVIDENCE;
use crate::store::Store;
/// The verdict the evidence on one tree gives for a set of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Passing, untampered evidence of every check.
    Pass,
    /// Some check has only failing (untampered) evidence of its very definition.
    Fail,
    /// Some check has no evidence yet.
    Unknown,
}

/// What the notes say about `tree` for `checks`.
pub fn tree_verdict(store: &Store, tree: gix::ObjectId, checks: &[ResolvedCheck]) -> Result<Known> {
    let mut known = Known::Pass;
    for check in checks {
        if find_reusable(store, tree, check, None)?.is_some() {
            continue;
        }
        if failing_on(store, tree, check)? {
            return Ok(Known::Fail);
        }
        known = Known::Unknown;
    }
    Ok(known)
}

/// Is there an untampered, non-passing record of exactly `check` made for `tree`?
fn failing_on(store: &Store, tree: gix::ObjectId, check: &ResolvedCheck) -> Result<bool> {
    let hex = tree.to_string();
    let digest = check.def.digest();
    for line in store.note_lines(EVIDENCE, tree)? {
        let Ok(rec) = EvidenceRecord::from_line(&line) else {
            continue;
        };
        if rec.check.name == check.name
            && rec.check.digest == digest
            && rec.tree == hex
            && rec.digest_is_valid()
            && !rec.passed()
        {
            return Ok(true);
        }
    }
    Ok(false)
}
