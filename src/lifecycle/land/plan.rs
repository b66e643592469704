//! What landing a run would cost, check by check: which required checks apply to its change,
//! which are `not_applicable` (the change leaves their declared inputs alone and those have
//! passing evidence) and which are reused. Shown per run by `land --dry-run` and `land --json`.

use serde::Serialize;

use crate::error::Result;
use crate::evidence::reuse::{standing, Standing};
use crate::store::Store;

use super::queue::Candidate;
use super::required::requirements;

/// The required checks of one run, by how they stand before validating.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChecksPlan {
    pub run: Vec<String>,
    pub not_applicable: Vec<String>,
    pub reused: Vec<String>,
}

/// How the required checks of the tip `tip` stand for `c`'s change landing there; `stacked`
/// is the tree it lands as, when that tree exists already.
pub fn plan(
    store: &Store,
    tip: gix::ObjectId,
    c: &Candidate,
    stacked: Option<gix::ObjectId>,
) -> Result<ChecksPlan> {
    let checks = requirements(store, tip, std::slice::from_ref(c))?;
    let change = (store.tree_of(c.base)?, store.tree_of(c.head)?);
    let tip_tree = store.tree_of(tip)?;
    let mut out = ChecksPlan::default();
    for check in &checks {
        let name = check.name.clone();
        match standing(store, change, tip_tree, stacked, check)? {
            Standing::Run => out.run.push(name),
            Standing::Reused => out.reused.push(name),
            Standing::NotApplicable => out.not_applicable.push(name),
        }
    }
    Ok(out)
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
            let stacked = (c.base == tip).then(|| store.tree_of(c.head)).transpose()?;
            Ok((c.run_id().to_string(), plan(store, tip, c, stacked)?))
        })
        .collect()
}
