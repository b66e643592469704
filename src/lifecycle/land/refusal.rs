//! What a refused run's ledger records about the refusal: the tip it was stacked on, its head
//! then, and why — the conflicting paths with their hunks (the run's change merged onto the
//! tip in memory, conflict markers included, redacted and bounded), or the failing evidence
//! records and whether the failure was isolated to the run. `status`, `context` and `log`
//! show it; `reopen` and `loop` seed the repair with it.

use crate::error::Result;
use crate::model::land::{ConflictHunk, FailedCheck, LandAttempt, Refusal};
use crate::model::time;
use crate::runner::Redactor;
use crate::store::paths::LocalPaths;
use crate::store::replay::{merge_with_conflicts, Objects};
use crate::store::Store;

use super::stack::Unstacked;
use super::Landing;

/// At most this many bytes of one hunk are kept.
pub const HUNK_BYTES: usize = 2 * 1024;
/// At most this many hunks are kept (the paths are all listed).
pub const MAX_HUNKS: usize = 8;

/// The land attempt to record for `u`, refused on `target`; `culprit` is a culprit's failing
/// records and whether the failure was isolated. `None` for a refusal that writes nothing to
/// the run's ledger (a merge commit to replay).
pub fn attempt_of(
    store: &Store,
    target: &str,
    u: &Unstacked,
    culprit: Option<&(Vec<FailedCheck>, bool)>,
) -> Result<Option<LandAttempt>> {
    let c = &u.candidate;
    let mut attempt = LandAttempt {
        target: target.to_string(),
        onto: u.onto.to_string(),
        commit: u.commit.map(|c| c.to_string()).unwrap_or_default(),
        paths: u.paths.clone(),
        at: time::now(),
        result: None,
        head: Some(c.head.to_string()),
        hunks: Vec::new(),
        failed: Vec::new(),
        isolated: None,
        reason: Some(u.reason.clone()),
    };
    match u.result {
        Landing::Conflict => {
            attempt.result = Some(Refusal::Conflict);
            attempt.hunks = hunks(store, [c.base, c.head, u.onto])?;
        }
        Landing::ValidationFailed => {
            attempt.result = Some(Refusal::ValidationFailed);
            if let Some((failed, isolated)) = culprit {
                attempt.failed = failed.clone();
                attempt.isolated = Some(*isolated);
            }
        }
        _ => return Ok(None),
    }
    Ok(Some(attempt))
}

/// The conflicting hunks of the run's net change merged onto `onto`, in memory: redacted
/// (secret patterns and values, local paths), each bounded, at most [`MAX_HUNKS`].
fn hunks(store: &Store, commits: [gix::ObjectId; 3]) -> Result<Vec<ConflictHunk>> {
    // A run that conflicts commit by commit may still merge as a whole: then no hunk.
    let (_, found) = merge_with_conflicts(store, commits, Objects::InMemory, HUNK_BYTES)
        .map_err(crate::error::Error::from)?;
    let redactor = Redactor::from_env();
    let local = LocalPaths::new(store, None);
    Ok(found
        .into_iter()
        .take(MAX_HUNKS)
        .map(|h| ConflictHunk {
            path: h.path,
            text: local.apply(&redactor.redact(&h.text).0),
            truncated: h.truncated,
        })
        .collect())
}
