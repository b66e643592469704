//! The one rule for what a commit must prove, and by which checks.
//!
//! The policy committed at the commit decides: every check it lists under `required`, judged
//! against the definition it has there (evidence made with an older definition is stale). A
//! commit without such a policy falls back to what its claim names: a run head to the checks
//! the run was last finished with, a promotion to the checks of the passing attempt that
//! validated it, `verify` to any passing record ([`Gate::AnyPassing`]). Never to nothing: a
//! commit is never proved by zero records.

use serde::Serialize;

use crate::model::policy::Policy;
use crate::model::run::Attempt;
use crate::model::RunRecord;
use crate::store::policy::{policy_at, PolicyAtError};
use crate::store::Store;

/// One check a commit must have evidence for: its name and, when a definition is known, the
/// digest that definition has now (older evidence is stale).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub name: String,
    pub digest: Option<String>,
}

/// What a commit must have evidence for, as `verify` and the hooks judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No policy and no named check: any passing, untampered record on the commit or its tree.
    AnyPassing,
    /// Every one of these checks.
    Required(Vec<Requirement>),
}

impl Gate {
    /// The policy's required checks plus `extra` names (see [`of_policy`]). A policy that
    /// requires nothing, with no `extra`, is the same as no policy: a commit still needs one
    /// passing record, never zero.
    pub fn from_policy(policy: Option<&Policy>, extra: &[String]) -> Gate {
        let reqs = of_policy(policy, extra);
        if reqs.is_empty() {
            Gate::AnyPassing
        } else {
            Gate::Required(reqs)
        }
    }
}

/// Whose proof is asked for, which decides the fallback when the policy requires nothing.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    /// The policy alone: nothing when it requires nothing.
    Policy,
    /// A run's head: else the checks the run was last finished with (ad-hoc checks).
    RunHead(&'a RunRecord),
    /// A run's validated commit at promotion: else the checks of the passing attempt of it.
    Promotion(&'a RunRecord),
}

/// The policy's required checks plus `extra` names, each once, in that order. A named check
/// the policy defines is judged against its current definition; one it does not define
/// accepts any definition.
pub fn of_policy(policy: Option<&Policy>, extra: &[String]) -> Vec<Requirement> {
    let mut names: Vec<String> = policy.map(|p| p.required.clone()).unwrap_or_default();
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
        .into_iter()
        .map(|name| {
            let digest = policy
                .and_then(|p| p.checks.get(&name))
                .map(|def| def.digest());
            Requirement { name, digest }
        })
        .collect()
}

/// The checks an attempt ran, with the digests their definitions had.
pub fn of_attempt(attempt: &Attempt) -> Vec<Requirement> {
    attempt
        .checks
        .iter()
        .map(|c| Requirement {
            name: c.name.clone(),
            digest: Some(c.digest.clone()),
        })
        .collect()
}

/// What `commit` (hex) must prove for `claim` under `policy` (the one committed at it).
pub fn for_claim(policy: Option<&Policy>, claim: Claim<'_>, commit: &str) -> Vec<Requirement> {
    let reqs = of_policy(policy, &[]);
    if !reqs.is_empty() {
        return reqs;
    }
    match claim {
        Claim::Policy => Vec::new(),
        Claim::RunHead(run) => run.last_attempt().map(of_attempt).unwrap_or_default(),
        Claim::Promotion(run) => run
            .attempts
            .iter()
            .rev()
            .find(|a| a.commit == commit && a.status == "passed")
            .map(of_attempt)
            .unwrap_or_default(),
    }
}

/// What `commit` must prove for `claim`, by the policy committed at it.
pub fn required_at(
    store: &Store,
    commit: gix::ObjectId,
    claim: Claim<'_>,
) -> Result<Vec<Requirement>, PolicyAtError> {
    let policy = policy_at(store, commit)?;
    Ok(for_claim(policy.as_ref(), claim, &commit.to_string()))
}
