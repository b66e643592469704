//! What a landing must prove: the required checks a stack is validated with (the target tip's
//! policy, plus the required checks of a run's own policy when the run changed
//! `.tabellio/policy.json`), and whether a tree already has passing evidence for them.

use crate::error::{Error, Result};
use crate::evidence::reuse::find_reusable;
use crate::model::policy::{self, ResolvedCheck};
use crate::store::policy::policy_at;
use crate::store::Store;

use super::queue::Candidate;

/// The required checks a stack of `runs` on `tip` is validated with, and the output cap.
pub fn requirements(
    store: &Store,
    tip: gix::ObjectId,
    runs: &[Candidate],
) -> Result<Vec<ResolvedCheck>> {
    let mut out: Vec<ResolvedCheck> = Vec::new();
    let mut add = |at: gix::ObjectId| -> Result<()> {
        let Some(policy) = policy_at(store, at)? else {
            return Ok(());
        };
        for name in &policy.required {
            let def = policy.checks.get(name).ok_or_else(|| {
                Error::refused(format!(
                    "the policy at {at} requires {name:?} but does not define it"
                ))
                .hint(format!("define it under \"checks\" in {}", policy::PATH))
            })?;
            if !out
                .iter()
                .any(|c| &c.name == name && c.def.digest() == def.digest())
            {
                out.push(ResolvedCheck {
                    name: name.clone(),
                    def: def.clone(),
                });
            }
        }
        Ok(())
    };
    add(tip)?;
    for run in runs {
        let before = store.read_file_at(run.base, policy::PATH)?;
        if before != store.read_file_at(run.head, policy::PATH)? {
            add(run.head)?;
        }
    }
    Ok(out)
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
