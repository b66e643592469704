//! What landing a run would cost, check by check: which required checks apply to its change,
//! which are `not_applicable` (the change leaves their declared inputs alone and those have
//! passing evidence) and which are reused. Shown per run by `land --dry-run` and `land --json`.

use serde::Serialize;

use crate::error::Result;
use crate::evidence::produce::ResolvedCheck;
use crate::evidence::reuse::{standing, Standing};
use crate::store::Store;

/// The required checks of one run, by how they stand before validating.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChecksPlan {
    pub run: Vec<String>,
    pub not_applicable: Vec<String>,
    pub reused: Vec<String>,
}

/// How `checks` stand on `tree` (a run's stacked tree), reached from `onto` (the commit it was
/// stacked on).
pub fn plan(
    store: &Store,
    onto: gix::ObjectId,
    tree: gix::ObjectId,
    checks: &[ResolvedCheck],
) -> Result<ChecksPlan> {
    let from = store.tree_of(onto)?;
    let mut out = ChecksPlan::default();
    for check in checks {
        let name = check.name.clone();
        match standing(store, from, tree, check)? {
            Standing::Run => out.run.push(name),
            Standing::Reused => out.reused.push(name),
            Standing::NotApplicable => out.not_applicable.push(name),
        }
    }
    Ok(out)
}
