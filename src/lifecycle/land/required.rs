//! What a landing must prove: the required checks a stack is validated with (the target tip's
//! policy, plus the required checks of a run's own policy when the run changed
//! `.tabellio/policy.json`), and whether a tree already has passing evidence for them.

use crate::error::Result;
use crate::evidence::applies::landing_checks;
use crate::evidence::reuse::find_reusable;
use crate::model::policy::ResolvedCheck;
use crate::store::Store;

use super::queue::Candidate;

/// The required checks a stack of `runs` on `tip` is validated with
/// ([`crate::evidence::applies::landing_checks`]).
pub fn requirements(
    store: &Store,
    tip: gix::ObjectId,
    runs: &[Candidate],
) -> Result<Vec<ResolvedCheck>> {
    let changes: Vec<(gix::ObjectId, gix::ObjectId)> =
        runs.iter().map(|c| (c.base, c.head)).collect();
    landing_checks(store, tip, &changes)
}

/// Does `tree` have passing, untampered evidence for every check?
pub fn satisfied(store: &Store, tree: gix::ObjectId, checks: &[ResolvedCheck]) -> Result<bool> {
    for check in checks {
        if find_reusable(store, tree, check, None)?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}
