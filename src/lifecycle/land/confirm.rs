//! Honest verdicts while landing: a stack top is judged as `promote`, `verify` and the hooks
//! judge it (the tip's policy: `flaky`, `baseline`, `trust`), and a failure is confirmed only
//! when a refusal depends on it.
//!
//! Confirming costs executions, so it is lazy: a failing stack top is bisected without being
//! re-run, and the prefixes bisection probes are not re-run either. The top is re-run (per the
//! check's `retries`) once a probe below it passed; a prefix isolated before the top was
//! confirmed is re-run before its last run is refused (`isolate` in `check.rs`). A prefix that
//! passes on a retry is no culprit; the bisection goes on above it. A tree this landing saw
//! fail as often as the retries allow is not re-run again. Every execution is its own record
//! with its attempt number. A check whose measured flake rate is over its
//! `max_flake_rate` is not retried: the stack is refused with `flake budget exceeded` and the
//! numbers, since its failures cannot blame a run.

use crate::error::Result;
use crate::evidence::explain::{describe, explain};
use crate::evidence::history::History;
use crate::evidence::judge::{evaluate, CheckVerdict, Verdict};
use crate::evidence::produce::ResolvedCheck;
use crate::evidence::requirements::{under_trust, with_baselines, Requirement};
use crate::model::evidence::CheckStatus;
use crate::model::policy::Rate;
use crate::store::policy::policy_at;

use super::check::{Checker, Judged};

impl Checker<'_> {
    /// The requirements `checks` stand for at `tip`: each with the tip policy's `flaky` and
    /// `baseline` when the tip defines the check so (a run's own policy decides neither), under
    /// the tip's `trust`, with the tip's failing tests as the baseline.
    fn requirements_at(
        &mut self,
        tip: gix::ObjectId,
        checks: &[ResolvedCheck],
    ) -> Result<Vec<Requirement>> {
        let store = self.store;
        let policy = policy_at(store, tip)?;
        let reqs = checks
            .iter()
            .map(|c| {
                // The definition's inputs (covered by its digest); `flaky` and `baseline` only
                // from the tip's policy, for the same definition.
                let mut req = Requirement::of_check(c);
                if let Some(def) = policy
                    .as_ref()
                    .and_then(|p| p.checks.get(&c.name))
                    .filter(|def| def.digest() == c.def.digest())
                {
                    req.flaky = def.flaky.unwrap_or_default();
                    req.baseline = def.baseline.map(|_| Default::default());
                }
                req
            })
            .collect();
        let trust = self.policies.trust_at(store, tip)?;
        with_baselines(store, under_trust(reqs, trust.as_ref()), Some(tip))
    }

    /// Judge the evidence on `head` for `checks` under the policy at `tip`.
    pub(super) fn judge_top(
        &mut self,
        tip: gix::ObjectId,
        head: gix::ObjectId,
        checks: &[ResolvedCheck],
    ) -> Result<Judged> {
        let reqs = self.requirements_at(tip, checks)?;
        let verdicts = evaluate(self.store, head, &reqs)?;
        if verdicts.iter().all(CheckVerdict::satisfies) {
            // A check over its flake budget proves nothing either way, a pass included.
            return Ok(match self.over_budget(tip, checks)? {
                Some(over) => Judged::NotCounted(vec![over]),
                None => Judged::Passes,
            });
        }
        // By name: a check whose `when` the records prove does not hold has no verdict.
        let failing: Vec<ResolvedCheck> = checks
            .iter()
            .filter(|c| {
                verdicts.iter().any(|v| {
                    v.name == c.name && matches!(v.verdict, Verdict::Failed | Verdict::Missing)
                })
            })
            .cloned()
            .collect();
        if !failing.is_empty() {
            return Ok(Judged::Fails(failing));
        }
        Ok(Judged::NotCounted(
            verdicts
                .iter()
                .filter(|v| !v.satisfies())
                .map(CheckVerdict::describe)
                .collect(),
        ))
    }

    /// `: test: new on this tree` for the checks failing on `head`, from the notes alone
    /// (empty when none fails). Under `"baseline": "allow"` a check the target also fails is
    /// refused for its new failing tests, which are named: `suite: new failures suite::t_new`.
    pub(super) fn explain(
        &mut self,
        tip: gix::ObjectId,
        head: gix::ObjectId,
        checks: &[ResolvedCheck],
    ) -> Result<String> {
        let reqs = self.requirements_at(tip, checks)?;
        let verdicts = evaluate(self.store, head, &reqs)?;
        // By name: a check whose `when` the records prove does not hold has no verdict.
        let failing: Vec<(&ResolvedCheck, &CheckVerdict)> = checks
            .iter()
            .filter_map(|c| {
                verdicts
                    .iter()
                    .find(|v| v.name == c.name)
                    .filter(|v| matches!(v.verdict, Verdict::Failed | Verdict::Missing))
                    .map(|v| (c, v))
            })
            .collect();
        if failing.is_empty() {
            return Ok(String::new());
        }
        let keys: Vec<(String, String)> = failing
            .iter()
            .map(|(c, _)| (c.name.clone(), c.def.digest()))
            .collect();
        let mut explained = explain(self.store, Some(tip), &keys)?;
        for (e, (_, v)) in explained.iter_mut().zip(&failing) {
            if !v.new_failures.is_empty() {
                e.kind = "new_on_this_tree";
                e.explanation = format!("new failures {}", v.new_failures.join(", "));
            }
        }
        Ok(format!(": {}", describe(&explained)))
    }

    /// The verdicts on `new` (the target's tip after landing) under the policy at `tip` (the
    /// one it was landed on): what the landing proved, `flaky-pass` and `no-new-failures`
    /// (with the inherited test ids) included.
    pub(super) fn verdicts_of(
        &mut self,
        tip: gix::ObjectId,
        new: gix::ObjectId,
        checks: &[ResolvedCheck],
    ) -> Result<Vec<CheckVerdict>> {
        let reqs = self.requirements_at(tip, checks)?;
        evaluate(self.store, new, &reqs)
    }

    /// Re-run the failing checks of `head` on the same tree, each as often as its `retries`
    /// allows until it passes, and judge again. `Passes` when the failure did not hold. A check
    /// over its flake budget is not re-run: the verdict is `NotCounted` with the numbers.
    pub(super) fn confirm(
        &mut self,
        tip: gix::ObjectId,
        head: gix::ObjectId,
        run_id: Option<&str>,
        checks: &[ResolvedCheck],
    ) -> Result<Judged> {
        let failing = match self.judge_top(tip, head, checks)? {
            Judged::Fails(failing) => failing,
            other => return Ok(other),
        };
        if let Some(over) = self.over_budget(tip, &failing)? {
            return Ok(Judged::NotCounted(vec![over]));
        }
        let mut retried = false;
        for check in &failing {
            // Failures beyond the first this landing already saw on the tree are retries
            // spent: a failure confirmed before is not re-run to be confirmed again.
            let spent = self.failed_on(head, check)?.saturating_sub(1);
            for _ in spent..check.def.retries() {
                retried = true;
                self.retrying = true;
                let passed = self.validate(head, run_id, std::slice::from_ref(check));
                self.retrying = false;
                if passed? {
                    break;
                }
            }
        }
        if !retried {
            return Ok(Judged::Fails(failing));
        }
        // A pass on a retry is a flake: measured again with it.
        if let Some(over) = self.over_budget(tip, &failing)? {
            return Ok(Judged::NotCounted(vec![over]));
        }
        self.judge_top(tip, head, checks)
    }

    /// How many executions of `check` this landing saw fail on `head`'s tree.
    fn failed_on(&self, head: gix::ObjectId, check: &ResolvedCheck) -> Result<u32> {
        let tree = self.store.tree_of(head)?;
        let digest = check.def.digest();
        let mut failed = 0;
        for e in &self.executions {
            if e.check != check.name || e.check_digest != digest || e.status == CheckStatus::Passed
            {
                continue;
            }
            // Records this landing wrote: their commits are its own stacks.
            let Ok(commit) = gix::ObjectId::from_hex(e.commit.as_bytes()) else {
                continue;
            };
            if commit == head || self.store.tree_of(commit)? == tree {
                failed += 1;
            }
        }
        Ok(failed)
    }

    /// `flake budget exceeded: …` for the first of `checks` whose measured flake rate is over
    /// its `max_flake_rate`.
    fn over_budget(
        &mut self,
        tip: gix::ObjectId,
        checks: &[ResolvedCheck],
    ) -> Result<Option<String>> {
        let budgeted: Vec<(&ResolvedCheck, f64)> = checks
            .iter()
            .filter_map(|c| c.def.max_flake_rate.map(|Rate(max)| (c, max)))
            .collect();
        if budgeted.is_empty() {
            return Ok(None);
        }
        // Under the tip's `trust`, only executions its signers vouch for are measured.
        let trust = self.policies.trust_at(self.store, tip)?;
        let history = History::read(self.store, trust.as_ref())?;
        for (check, max) in budgeted {
            let stats = history.stats(&check.name, &check.def.digest());
            if stats.measured && stats.flake_rate > max {
                return Ok(Some(format!(
                    "flake budget exceeded: {} flake rate {} (max_flake_rate {max})",
                    check.name,
                    stats.describe_rate()
                )));
            }
        }
        Ok(None)
    }
}
