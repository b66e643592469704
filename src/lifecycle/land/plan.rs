//! What landing a run would cost, check by check ([`crate::evidence::applies`]): which required
//! checks apply to its change, which are `not_applicable` and which are reused. Shown per run by
//! `land --dry-run` and `land --json`, and by `status` for a run not landed yet.

use crate::error::Result;
use crate::evidence::applies::plan_now;
use crate::store::Store;

pub use crate::evidence::applies::ChecksPlan;

use super::queue::Candidate;

/// How the required checks of the tip `tip` stand for `c`'s change landing there; `stacked`
/// is the tree it lands as, when that tree exists already.
pub fn plan(
    store: &Store,
    tip: gix::ObjectId,
    c: &Candidate,
    stacked: Option<gix::ObjectId>,
) -> Result<ChecksPlan> {
    crate::evidence::applies::plan(store, tip, (c.base, c.head), stacked)
}

/// The plan of every candidate on `tip`, by run id, for `land --json` (before validating).
pub fn plans(
    store: &Store,
    tip: gix::ObjectId,
    candidates: &[Candidate],
) -> Result<Vec<(String, ChecksPlan)>> {
    candidates
        .iter()
        .map(|c| {
            Ok((
                c.run_id().to_string(),
                plan_now(store, tip, (c.base, c.head))?,
            ))
        })
        .collect()
}
