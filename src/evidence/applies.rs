//! Which required checks a change needs where it lands: the checks of the policy at the
//! target's tip (plus the required checks of the change's own policy when it edits
//! `.tabellio/policy.json`, so no change drops its own checks and none escapes the target's),
//! and how each stands before anything runs — it runs, it is `not_applicable` (the change
//! leaves its declared inputs alone and those have passing evidence), or passing evidence for
//! the same inputs is reused. `land --dry-run`, `land --json` and `status` show the same plan.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::policy::{self, ResolvedCheck};
use crate::store::policy::policy_at;
use crate::store::Store;

use super::reuse::{standing, Standing};

/// The required checks of one change, by how they stand before validating.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChecksPlan {
    pub run: Vec<String>,
    pub not_applicable: Vec<String>,
    pub reused: Vec<String>,
}

/// The required checks a stack of `changes` (each a run's base and head commit) on `tip` is
/// validated with: the tip's, then each change's own when it edits the policy, each check
/// (name and definition) once.
pub fn landing_checks(
    store: &Store,
    tip: gix::ObjectId,
    changes: &[(gix::ObjectId, gix::ObjectId)],
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
    for &(base, head) in changes {
        if store.read_file_at(base, policy::PATH)? != store.read_file_at(head, policy::PATH)? {
            add(head)?;
        }
    }
    Ok(out)
}

/// How the required checks stand for the change `base` → `head` (commits) landing on `tip`;
/// `stacked` is the tree it lands as, when that tree exists already.
pub fn plan(
    store: &Store,
    tip: gix::ObjectId,
    (base, head): (gix::ObjectId, gix::ObjectId),
    stacked: Option<gix::ObjectId>,
) -> Result<ChecksPlan> {
    let checks = landing_checks(store, tip, &[(base, head)])?;
    let change = (store.tree_of(base)?, store.tree_of(head)?);
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

/// [`plan`] of a change as it stands now: landing unchanged when `tip` is its base (the tree
/// it lands as is its head's), else restacked onto `tip` (a tree not known yet).
pub fn plan_now(
    store: &Store,
    tip: gix::ObjectId,
    (base, head): (gix::ObjectId, gix::ObjectId),
) -> Result<ChecksPlan> {
    let stacked = (base == tip).then(|| store.tree_of(head)).transpose()?;
    plan(store, tip, (base, head), stacked)
}
