//! The guard of a step: which paths it guards (the gating policy's `guarded` lists and
//! `guarded_paths` rules, and the candidate's own additions) and who may approve them.

use crate::error::Result;
use crate::model::policy::{ApproverRole, GuardRule, GuardWhen, Policy};
use crate::store::policy::{Policies, PolicyAtError};
use crate::store::Store;

use super::super::{judge_signature, AllowedSigners, GuardedPaths, SignatureVerdict};
use super::{allowed_signers_at, proven_kind, ApprovalRecord, RunIds};

/// The guarded paths of a step and whom may approve them.
pub struct Guard {
    pub(super) lists: Vec<GuardedPaths>,
    /// `guarded_paths`: globs guarded when their `when` holds, with the approvers they exclude.
    pub(super) rules: Vec<(GuardedPaths, GuardRule)>,
    /// The kind of the change's actor, when the evidence proves it ([`proven_kind`]); unknown,
    /// every `when` holds.
    pub(super) actor_kind: Option<String>,
    /// The allowed signers, when the gating policy has `trust`: an approval counts only when
    /// one of them signed it.
    pub(super) signers: Option<AllowedSigners>,
    /// `approval.distinct_from_actor` of the gating policy.
    pub distinct_from_actor: bool,
}

impl Guard {
    /// The guard of a step gated by `gating` (the policy at `gating_commit`, the target's tip)
    /// onto a commit whose own policy is `own`; `None` when neither guards anything.
    pub fn new(
        store: &Store,
        gating: Option<(&Policy, gix::ObjectId)>,
        own: Option<&Policy>,
    ) -> Result<Option<Guard>> {
        let mut lists = Vec::new();
        let mut rules = Vec::new();
        for policy in gating.map(|(p, _)| p).into_iter().chain(own) {
            if let Some(g) = GuardedPaths::from_policy(policy)? {
                lists.push(g);
            }
            rules.extend(GuardedPaths::rules(policy)?);
        }
        if lists.is_empty() {
            return Ok(None);
        }
        let signers = match gating {
            Some((policy, at)) => allowed_signers_at(store, policy, at)?,
            None => None,
        };
        Ok(Some(Guard {
            lists,
            rules,
            actor_kind: None,
            signers,
            distinct_from_actor: gating
                .and_then(|(p, _)| p.approval.as_ref())
                .is_some_and(|a| a.distinct_from_actor),
        }))
    }

    /// The guard of the step `from` → `to`, reading the policies at `gating` and at `to`.
    pub fn for_step(
        store: &Store,
        policies: &mut Policies,
        gating: Option<gix::ObjectId>,
        to: gix::ObjectId,
    ) -> Result<Option<Guard>> {
        let gating_policy = match gating {
            Some(at) => policies
                .at(store, at)
                .map_err(PolicyAtError::naming_commit)?
                .map(|p| (p, at)),
            None => None,
        };
        let own = policies
            .at(store, to)
            .map_err(PolicyAtError::naming_commit)?;
        Self::new(
            store,
            gating_policy.as_ref().map(|(p, at)| (p, *at)),
            own.as_ref(),
        )
    }

    pub fn is_guarded(&self, path: &str) -> bool {
        self.lists.iter().any(|g| g.is_guarded(path))
            || self.rules.iter().any(|(g, rule)| {
                g.is_guarded(path) && rule.when.as_ref().is_none_or(|w| self.holds(w))
            })
    }

    /// Does a glob of `guarded_paths` depend on who made the change?
    pub(super) fn has_conditions(&self) -> bool {
        self.rules.iter().any(|(_, r)| r.when.is_some())
    }

    /// Does `when` hold of the change's actor? Always, unless its kind is proven another.
    fn holds(&self, when: &GuardWhen) -> bool {
        when.holds(self.actor_kind.as_deref())
    }

    /// The guard for a change whose actor's kind the evidence `lines` (on the change's commit
    /// and tree) prove, if they do.
    pub fn for_change(mut self, lines: &[String]) -> Guard {
        self.actor_kind = proven_kind(lines.iter().map(String::as_str), self.signers.as_ref());
        self
    }

    /// Whom an approval of `paths` may not come from: the actor under `distinct_from_actor`,
    /// and the roles of every `guarded_paths` glob that holds one of them.
    pub fn excluded(&self, paths: &[String]) -> Vec<ApproverRole> {
        let mut roles: Vec<ApproverRole> = self
            .distinct_from_actor
            .then_some(ApproverRole::Actor)
            .into_iter()
            .collect();
        for (g, rule) in &self.rules {
            if paths.iter().any(|p| g.is_guarded(p)) {
                roles.extend(rule.approver_not.iter().copied());
            }
        }
        roles.sort();
        roles.dedup();
        roles
    }

    /// The guarded paths changed, added or removed from `from_tree` to `to_tree`, sorted.
    pub fn touched(
        &self,
        store: &Store,
        from_tree: gix::ObjectId,
        to_tree: gix::ObjectId,
    ) -> Result<Vec<String>> {
        Ok(
            crate::store::diff::touched_paths(&store.objects(), from_tree, to_tree)?
                .into_iter()
                .filter(|p| self.is_guarded(p))
                .collect(),
        )
    }

    /// Why `record` does not approve `paths` on `tree`, `None` when it does. `ids` are who the
    /// run is known to be by (see [`RunActors`]): an approver (and under `trust` its signer)
    /// the guard excludes ([`Guard::excluded`]) never counts, nor does one when the role it
    /// would have to differ from is not known at all; a key that signed the run's evidence never
    /// approves it.
    pub fn refuse(
        &self,
        record: &ApprovalRecord,
        tree: &str,
        paths: &[String],
        ids: &RunIds,
    ) -> Option<String> {
        if !record.digest_is_valid() {
            return Some("its digest does not match its content".into());
        }
        if record.tree != tree {
            return Some(format!(
                "it approves tree {}, not {tree} (the run changed after it)",
                record.tree
            ));
        }
        let uncovered: Vec<&str> = paths
            .iter()
            .filter(|p| !record.paths.contains(p))
            .map(String::as_str)
            .collect();
        if !uncovered.is_empty() {
            return Some(format!("it does not cover {}", uncovered.join(", ")));
        }
        let excluded = self.excluded(paths);
        for &role in &excluded {
            if ids.of(role).is_empty() {
                return Some(format!(
                    "the run's {} is not known here (the approval names none and the run's ledger is not here), and the policy wants an approver other than the {}",
                    role.as_str(), role.as_str()
                ));
            }
        }
        let excluded_as = |id: &str| excluded.iter().copied().find(|&r| ids.is(r, id));
        if let Some(role) = excluded_as(&record.approver.id) {
            return Some(format!(
                "{} is the run's own {}, and the policy wants another approver",
                record.approver.id,
                role.as_str()
            ));
        }
        if let Some(signers) = &self.signers {
            let verdict = judge_signature(
                record.signature.as_ref(),
                &record.compute_digest(),
                &record.at,
                signers,
            );
            match verdict {
                SignatureVerdict::Trusted { principal, .. }
                    if excluded_as(&principal).is_some() =>
                {
                    let role = excluded_as(&principal).map_or("actor", ApproverRole::as_str);
                    return Some(format!(
                        "it is signed by {principal}, the run's own {role}, and the policy wants another approver"
                    ));
                }
                SignatureVerdict::Trusted {
                    principal,
                    fingerprint,
                } if ids.evidence_keys.contains(&fingerprint) => {
                    return Some(format!(
                        "it is signed by {principal} with the key ({fingerprint}) that signed the run's evidence, which cannot also approve it"
                    ));
                }
                SignatureVerdict::Trusted { .. } => {}
                other => return Some(format!("{} ({})", other.as_str(), other.describe())),
            }
        }
        None
    }
}
