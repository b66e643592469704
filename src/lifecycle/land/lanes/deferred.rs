//! The lander's stand-in for running checks (`land --lanes`): where `land` would run checks on
//! a stack, the notes decide ([`crate::evidence::known`]), or the stack waits for the workers.

use crate::error::{Error, Result};
use crate::evidence::known::{tree_verdict, Known};
use crate::model::policy::ResolvedCheck;
use crate::store::Store;

/// The lander's stand-in for running checks: the stack a validation was asked for (its runs,
/// in order; empty: the tip itself) when the notes had no verdict for it.
#[derive(Debug, Default)]
pub struct Deferred {
    /// The runs of the stack being validated now (set before each validation).
    pub asking: Vec<String>,
    /// The stack whose validation had to wait for the workers.
    pub pending: Option<Vec<String>>,
    /// The smallest prefix of the queue the notes say fails: a stack that starts with it fails
    /// too, as bisection assumes, so it is not validated again.
    pub failing: Option<Vec<String>>,
}

impl Deferred {
    /// Decide a validation of `commit` with `to_run` (the checks no passing evidence covers)
    /// from the notes: `Ok(false)` when they say it fails; otherwise the stack is pending and
    /// the landing stops here (nothing written), for the workers to validate it.
    pub fn decide(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
        to_run: &[ResolvedCheck],
    ) -> Result<bool> {
        if tree_verdict(store, store.tree_of(commit)?, to_run)? == Known::Fail {
            return Ok(false);
        }
        if let Some(failing) = &self.failing {
            if self.asking.starts_with(failing) && !self.asking.is_empty() {
                return Ok(false);
            }
        }
        self.pending = Some(self.asking.clone());
        Err(Error::conflict(format!(
            "{commit} waits for a worker's validation"
        )))
    }
}
