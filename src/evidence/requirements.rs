//! The one rule for what a commit must prove, and by which checks.
//!
//! The policy committed at the commit decides: every check it lists under `required`, judged
//! against the definition it has there (evidence made with an older definition is stale). A
//! commit without such a policy falls back to what its claim names: a run head to the checks
//! the run was last finished with, a promotion to the checks of the passing attempt that
//! validated it, `verify` to any passing record ([`Gate::AnyPassing`]). Never to nothing: a
//! commit is never proved by zero records.
//!
//! A promotion is judged by the gate it passes, not by the commit that asks to pass it: the
//! policy at the target's tip (the run's base: promotion only fast-forwards from it) decides,
//! with its definitions, and the validated commit's own policy only adds the checks it
//! requires besides. A run that edits its policy to weaken a required check cannot promote.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;

use crate::model::policy::{FlakyPolicy, GuardWhen, Policy};
use crate::model::run::Attempt;
use crate::model::EvidenceRecord;
use crate::model::RunRecord;
use crate::store::policy::{policy_at, PolicyAtError, TrustAt};
use crate::store::Store;
use crate::trust::approval::proven_kinds;
use crate::trust::{judge_signature, AllowedSigners, SignatureVerdict};

use super::read::Line;

/// One check a commit must have evidence for: its name and, when a definition is known, the
/// digest that definition has now (older evidence is stale).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub name: String,
    pub digest: Option<String>,
    /// When the judging policy's `trust` covers this check: the allowed signers (read from
    /// that policy's commit) a record must be signed by to count.
    #[serde(skip)]
    pub signers: Option<Arc<AllowedSigners>>,
    /// When the judging policy declares the check's inputs: they, and the scoped tree of the
    /// commit being judged ([`super::scope::scope_requirements`] fills it in). Only then does a
    /// `not_applicable` record or a record of another tree with the same inputs count.
    #[serde(skip)]
    pub scope: Option<Scope>,
    /// The check's `when`: it is required only when this holds of who made the change
    /// ([`applicable`]).
    #[serde(skip)]
    pub when: Option<GuardWhen>,
    /// The allowed signers of the judging policy (it has `trust`): who made the change is proven
    /// by them, never by what a record claims ([`applicable`]).
    #[serde(skip)]
    pub prove_with: Option<Arc<AllowedSigners>>,
    /// Whether a `flaky-pass` satisfies it: the judging policy's `flaky` for the check.
    #[serde(skip)]
    pub flaky: FlakyPolicy,
    /// When the judging policy sets `"baseline": "allow"` for the check: the failing test ids
    /// of the target's tip, once read ([`with_baselines`]). Until then (`inherited: None`) a
    /// failure is a failure.
    #[serde(skip)]
    pub baseline: Option<Baseline>,
}

/// A requirement's declared inputs and the scoped tree they give on the judged commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub inputs: crate::model::inputs::Inputs,
    /// The id (hex) of the judged tree restricted to the inputs, once computed.
    pub tree: Option<String>,
}

/// The failing test ids a run may inherit from the target's tip.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Baseline {
    /// The tip's failing ids for the same check digest; `None` until read, or when the tip has
    /// no failing record with a complete list of them.
    pub inherited: Option<Arc<BTreeSet<String>>>,
}

impl Requirement {
    /// A requirement of check `name` with definition digest `digest`, no signature needed.
    pub fn new(name: impl Into<String>, digest: Option<String>) -> Requirement {
        Requirement {
            name: name.into(),
            digest,
            signers: None,
            scope: None,
            when: None,
            prove_with: None,
            flaky: FlakyPolicy::Refuse,
            baseline: None,
        }
    }

    /// A requirement of check `name` as `def` defines it: its digest, and its inputs. How a
    /// flaky pass or a failing test is judged (`flaky`, `baseline`) is the judging policy's
    /// alone ([`of_policy`]), never a definition's that a run brings.
    pub fn of_def(name: impl Into<String>, def: &crate::model::policy::CheckDef) -> Requirement {
        Requirement {
            scope: def.scope().map(|inputs| Scope { inputs, tree: None }),
            when: def.when.clone(),
            ..Requirement::new(name, Some(def.digest()))
        }
    }

    /// A requirement of the check `check` will run.
    pub fn of_check(check: &crate::model::policy::ResolvedCheck) -> Requirement {
        Requirement::of_def(check.name.clone(), &check.def)
    }
}

/// `reqs`, each needing a trusted signature when `trust` (read from the commit whose policy
/// judges) covers its check. Without `trust` they are returned as they are.
pub fn under_trust(mut reqs: Vec<Requirement>, trust: Option<&TrustAt>) -> Vec<Requirement> {
    if let Some(trust) = trust {
        for req in &mut reqs {
            req.signers = trust.signers_for(&req.name);
            if req.when.is_some() {
                req.prove_with = Some(Arc::clone(&trust.signers));
            }
        }
    }
    reqs
}

/// The kinds of actor the whole-tree records among `lines` prove ([`proven_kinds`]). Records
/// of a check's declared inputs are left out: noted on a scoped tree, they may be another
/// change's.
pub fn kinds_proven(lines: &[Line], signers: Option<&AllowedSigners>) -> Vec<String> {
    proven_kinds(
        lines
            .iter()
            .filter(|(_, r)| r.as_ref().is_some_and(|r| r.scoped_tree.is_none()))
            .map(|(l, _)| l.as_str()),
        signers,
    )
}

/// `reqs` less the checks whose `when` does not hold of who made the change, as the evidence
/// `lines` (noted on the judged commit and its tree) prove it: the kind of its actor as
/// guarded paths judge it ([`proven_kind`]), by the allowed signers of the judging policy when
/// it has `trust` (an actor's own signature with a key declared of its kind), else by what
/// every record claims. An actor not proven drops nothing: a check with `when` is asked for
/// unless the evidence shows it need not be.
pub fn applicable(reqs: Vec<Requirement>, lines: &[Line]) -> Vec<Requirement> {
    if reqs.iter().all(|r| r.when.is_none()) {
        return reqs;
    }
    let signers = reqs.iter().find_map(|r| r.prove_with.clone());
    let kind = match kinds_proven(lines, signers.as_deref()).as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    reqs.into_iter()
        .filter(|r| r.when.as_ref().is_none_or(|w| w.holds(kind.as_deref())))
        .collect()
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

    /// Does a requirement allow a baseline (so [`Gate::with_baselines`] has something to read)?
    pub fn wants_baselines(&self) -> bool {
        matches!(self, Gate::Required(reqs) if reqs.iter().any(|r| r.baseline.is_some()))
    }

    /// This gate under `trust` with the baselines of the tip read from `lines` (its records
    /// and its tree's, the tree being `tree_hex`; see [`fill_baselines`]): the target's tip
    /// whose failing tests a commit may inherit.
    pub fn with_baselines(
        self,
        lines: &[super::read::Line],
        tree_hex: &str,
        trust: Option<&TrustAt>,
    ) -> Gate {
        match self {
            Gate::AnyPassing => Gate::AnyPassing,
            Gate::Required(reqs) => {
                Gate::Required(fill_baselines(under_trust(reqs, trust), lines, tree_hex))
            }
        }
    }

    /// This gate with its requirements under `trust` (see [`under_trust`]); [`Gate::AnyPassing`]
    /// is judged under trust by [`super::judge::judge_gate_trusted`].
    pub fn under_trust(self, trust: Option<&TrustAt>) -> Gate {
        match self {
            Gate::AnyPassing => Gate::AnyPassing,
            Gate::Required(reqs) => Gate::Required(under_trust(reqs, trust)),
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
    /// A run's validated commit at promotion, judged by the policy at the target's tip (the
    /// run's base) plus the checks its own policy adds; else the checks of the passing attempt
    /// of it.
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
        .map(|name| match policy.and_then(|p| p.checks.get(&name)) {
            Some(def) => Requirement {
                flaky: def.flaky.unwrap_or_default(),
                baseline: def.baseline.map(|_| Baseline::default()),
                ..Requirement::of_def(name, def)
            },
            None => Requirement::new(name, None),
        })
        .collect()
}

/// `reqs` with the failing test ids of `tip` filled into every requirement whose policy
/// allows a baseline: the union of the failing ids of the intact, failing records of the same
/// check digest made on the tip's tree (under `trust`, only trusted ones), each with the whole
/// list of its failing ids. A tip without such a record leaves the baseline empty: nothing is
/// inherited.
pub fn with_baselines(
    store: &Store,
    reqs: Vec<Requirement>,
    tip: Option<gix::ObjectId>,
) -> crate::error::Result<Vec<Requirement>> {
    let Some(tip) = tip else {
        return Ok(reqs);
    };
    if reqs.iter().all(|r| r.baseline.is_none()) {
        return Ok(reqs);
    }
    let tree = store.tree_of(tip)?;
    let lines = super::read::records_for(store, tip, tree)?;
    Ok(fill_baselines(reqs, &lines, &tree.to_string()))
}

/// [`with_baselines`] from the records `lines` read on the tip and its tree `tree_hex`.
pub fn fill_baselines(
    mut reqs: Vec<Requirement>,
    lines: &[super::read::Line],
    tree_hex: &str,
) -> Vec<Requirement> {
    for req in reqs.iter_mut() {
        if req.baseline.is_none() {
            continue;
        }
        let mut ids = BTreeSet::new();
        let mut found = false;
        for rec in lines.iter().filter_map(|(_, r)| r.as_ref()) {
            let counts = rec.check.name == req.name
                && rec.tree == tree_hex
                && !rec.passed()
                && req.digest.as_ref().is_none_or(|d| &rec.check.digest == d)
                && rec.digest_is_valid()
                && trusted_for(rec, req);
            match &rec.tests {
                Some(t) if counts && t.complete() => {
                    found = true;
                    ids.extend(t.failing.iter().cloned());
                }
                _ => {}
            }
        }
        req.baseline = Some(Baseline {
            inherited: found.then(|| Arc::new(ids)),
        });
    }
    reqs
}

/// Does `rec` count as who made it under the requirement's trust (always, without one)? Used
/// for failing records, which [`judge_signed`] does not ask for a signature: a failure nobody
/// trusted signed must not make a tree flaky nor set a baseline.
pub fn trusted_for(rec: &EvidenceRecord, req: &Requirement) -> bool {
    signed_by(rec, req.signers.as_deref())
}

/// Is `rec` signed by one of `signers` (always true without signers to ask)?
pub fn signed_by(rec: &EvidenceRecord, signers: Option<&crate::trust::AllowedSigners>) -> bool {
    let Some(signers) = signers else {
        return true;
    };
    matches!(
        judge_signature(
            rec.signature.as_ref(),
            &rec.digest,
            &rec.finished_at,
            signers
        ),
        SignatureVerdict::Trusted { .. }
    )
}

/// The checks an attempt ran, with the digests their definitions had.
pub fn of_attempt(attempt: &Attempt) -> Vec<Requirement> {
    attempt
        .checks
        .iter()
        .map(|c| Requirement::new(c.name.clone(), Some(c.digest.clone())))
        .collect()
}

/// What a promotion to `commit` must prove: every check `gate` (the policy at the target's tip)
/// requires, with its definitions there, then those `own` (the commit's policy) requires
/// besides, with its own. `own` never removes nor redefines what the gate asks.
pub fn of_promotion(gate: Option<&Policy>, own: Option<&Policy>) -> Vec<Requirement> {
    let mut reqs = of_policy(gate, &[]);
    for added in of_policy(own, &[]) {
        if !reqs.iter().any(|r| r.name == added.name) {
            // What satisfies a check is the gate's to say: a run's own policy cannot accept
            // flaky passes or inherited failures of the checks it adds.
            reqs.push(Requirement::new(added.name, added.digest));
        }
    }
    reqs
}

/// What `commit` (hex) must prove for `claim` under `policy` (the one committed at it).
pub fn for_claim(policy: Option<&Policy>, claim: Claim<'_>, commit: &str) -> Vec<Requirement> {
    for_gated_claim(policy, policy, claim, commit)
}

/// [`for_claim`] where the gate's policy may differ from the commit's own: a promotion is judged
/// by [`of_promotion`]`(gate, own)`, every other claim by `own` alone.
fn for_gated_claim(
    gate: Option<&Policy>,
    own: Option<&Policy>,
    claim: Claim<'_>,
    commit: &str,
) -> Vec<Requirement> {
    let reqs = match claim {
        Claim::Promotion(_) => of_promotion(gate, own),
        _ => of_policy(own, &[]),
    };
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
            .find(|a| a.commit == commit && a.status == crate::model::run::AttemptStatus::Passed)
            .map(of_attempt)
            .unwrap_or_default(),
    }
}

/// What `commit` must prove for `claim`, by the policy committed at it (and, for a promotion,
/// the one at the run's base, the tip the target must be at to move).
pub fn required_at(
    store: &Store,
    commit: gix::ObjectId,
    claim: Claim<'_>,
) -> Result<Vec<Requirement>, PolicyAtError> {
    let own = policy_at(store, commit)?;
    let gate = match claim {
        Claim::Promotion(run) => {
            let base = store
                .parse_oid(&run.base.commit)
                .map_err(PolicyAtError::Read)?;
            policy_at(store, base)?
        }
        _ => None,
    };
    Ok(for_gated_claim(
        gate.as_ref(),
        own.as_ref(),
        claim,
        &commit.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::policy::CheckDef;

    fn policy(required: &[&str], defined: &[&str]) -> Policy {
        let checks: serde_json::Map<String, serde_json::Value> = defined
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    serde_json::json!({"argv": [n], "timeout_s": 60}),
                )
            })
            .collect();
        Policy::parse(
            &serde_json::json!({
                "schema": crate::model::policy::SCHEMA,
                "checks": checks,
                "required": required,
            })
            .to_string(),
        )
        .expect("a valid policy")
    }

    fn digest_of(name: &str) -> String {
        CheckDef {
            timeout_s: 60,
            ..CheckDef::of_argv(vec![name.into()])
        }
        .digest()
    }

    fn run_with_attempts(attempts: serde_json::Value) -> RunRecord {
        let mut run = crate::model::run::tests::sample(crate::model::RunState::Completed);
        run.attempts = serde_json::from_value(attempts).expect("valid attempts");
        run
    }

    fn attempt(commit: &str, status: &str, check: &str) -> serde_json::Value {
        serde_json::json!({
            "n": 1, "commit": commit, "tree": "2".repeat(40), "status": status,
            "checks": [{"name": check, "digest": "adhoc", "status": status, "exit_code": 0}],
            "evidence_digest": "3".repeat(64), "at": "2026-01-01T00:00:00Z",
        })
    }

    fn names(reqs: &[Requirement]) -> Vec<&str> {
        reqs.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn the_policy_decides_with_current_definitions() {
        let p = policy(&["test", "lint"], &["test", "lint", "doc"]);
        let reqs = of_policy(Some(&p), &["doc".into(), "test".into(), "extra".into()]);
        assert_eq!(names(&reqs), ["test", "lint", "doc", "extra"]);
        assert_eq!(reqs[0].digest, Some(digest_of("test")));
        assert_eq!(reqs[2].digest, Some(digest_of("doc")));
        // Named on the command line, not defined: any definition.
        assert_eq!(reqs[3].digest, None);
        assert!(of_policy(None, &[]).is_empty());
    }

    #[test]
    fn a_policy_that_requires_nothing_never_means_zero_records() {
        let empty = policy(&[], &["test"]);
        assert_eq!(Gate::from_policy(Some(&empty), &[]), Gate::AnyPassing);
        assert_eq!(Gate::from_policy(None, &[]), Gate::AnyPassing);
        let gate = Gate::from_policy(None, &["test".into()]);
        assert_eq!(gate, Gate::Required(vec![Requirement::new("test", None)]));
    }

    #[test]
    fn each_claim_falls_back_to_its_own_attempts() {
        let validated = "4".repeat(40);
        let run = run_with_attempts(serde_json::json!([
            attempt(&validated, "passed", "unit"),
            attempt(&"5".repeat(40), "failed", "later"),
        ]));
        // The policy wins over any attempt.
        let p = policy(&["test"], &["test"]);
        for claim in [Claim::Policy, Claim::RunHead(&run), Claim::Promotion(&run)] {
            assert_eq!(names(&for_claim(Some(&p), claim, &validated)), ["test"]);
        }
        // Without one: the run head by the last attempt, the promotion by the passing attempt
        // of the validated commit, the policy claim by nothing.
        assert!(for_claim(None, Claim::Policy, &validated).is_empty());
        let head = for_claim(None, Claim::RunHead(&run), &validated);
        assert_eq!(names(&head), ["later"]);
        assert_eq!(head[0].digest.as_deref(), Some("adhoc"));
        assert_eq!(
            names(&for_claim(None, Claim::Promotion(&run), &validated)),
            ["unit"]
        );
        assert!(for_claim(None, Claim::Promotion(&run), &"5".repeat(40)).is_empty());
        let empty = policy(&[], &[]);
        assert_eq!(
            names(&for_claim(Some(&empty), Claim::RunHead(&run), "")),
            ["later"]
        );
    }

    #[test]
    fn a_promotion_is_gated_by_the_target_and_only_strengthened_by_the_run() {
        let gate = policy(&["test"], &["test"]);
        // The run redefines `test`, drops it from `required`, and adds `lint`.
        let own = Policy::parse(
            &serde_json::json!({
                "schema": crate::model::policy::SCHEMA,
                "checks": {
                    "test": {"argv": ["true"], "timeout_s": 60},
                    "lint": {"argv": ["lint"], "timeout_s": 60},
                },
                "required": ["lint"],
            })
            .to_string(),
        )
        .expect("a valid policy");
        let reqs = of_promotion(Some(&gate), Some(&own));
        assert_eq!(names(&reqs), ["test", "lint"]);
        assert_eq!(reqs[0].digest, Some(digest_of("test")));
        assert_eq!(reqs[1].digest, Some(digest_of("lint")));
        // No policy at the target: the run's own decides; none anywhere: the attempt.
        assert_eq!(names(&of_promotion(None, Some(&own))), ["lint"]);
        let run = run_with_attempts(serde_json::json!([attempt(
            &"4".repeat(40),
            "passed",
            "unit"
        )]));
        assert_eq!(
            names(&for_gated_claim(
                None,
                None,
                Claim::Promotion(&run),
                &"4".repeat(40)
            )),
            ["unit"]
        );
        // Other claims never look at the gate.
        assert_eq!(
            names(&for_gated_claim(Some(&gate), Some(&own), Claim::Policy, "")),
            ["lint"]
        );
    }
}
