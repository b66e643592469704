//! Why a check failed, from evidence already in the notes (nothing runs): the failure is new
//! on this tree, the check is proven flaky (it passed and failed on one tree, since a date, on
//! some trees), or the target's tip fails it too.

use serde::Serialize;

use crate::error::Result;
use crate::store::Store;

use super::history::History;
use super::read::records_for;

/// One failing check, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureExplanation {
    pub check: String,
    /// `new_on_this_tree`, `proven_flaky` or `also_failing_on_target`.
    pub kind: &'static str,
    /// In a person's words: "new on this tree", "proven flaky since <date> on <n> trees",
    /// "also failing on the target".
    pub explanation: String,
}

/// Explain each of `failing` (check name, definition digest) on a commit whose target's tip is
/// `target_tip`: the tip's own evidence first (its latest execution of the same definition
/// failed), then the check's history across trees, else new.
pub fn explain(
    store: &Store,
    target_tip: Option<gix::ObjectId>,
    failing: &[(String, String)],
) -> Result<Vec<FailureExplanation>> {
    if failing.is_empty() {
        return Ok(Vec::new());
    }
    let on_tip = match target_tip {
        Some(tip) => {
            let tree = store.tree_of(tip)?;
            let hex = tree.to_string();
            let lines = records_for(store, tip, tree)?;
            let mut latest: Vec<(String, String, String, bool)> = Vec::new();
            for rec in lines.iter().filter_map(|(_, r)| r.as_ref()) {
                if rec.tree == hex && rec.reused_from.is_none() && rec.digest_is_valid() {
                    latest.push((
                        rec.check.name.clone(),
                        rec.check.digest.clone(),
                        rec.started_at.clone(),
                        rec.passed(),
                    ));
                }
            }
            latest.sort();
            latest
        }
        None => Vec::new(),
    };
    let mut history: Option<History> = None;
    let mut out = Vec::new();
    for (name, digest) in failing {
        let tip_failed = on_tip
            .iter()
            .rev()
            .find(|(n, d, _, _)| n == name && d == digest)
            .is_some_and(|(_, _, _, passed)| !passed);
        if tip_failed {
            out.push(FailureExplanation {
                check: name.clone(),
                kind: "also_failing_on_target",
                explanation: "also failing on the target".into(),
            });
            continue;
        }
        if history.is_none() {
            history = Some(History::read(store, None)?);
        }
        let stats = history
            .as_ref()
            .expect("read just above")
            .stats(name, digest);
        out.push(match stats.flaky_since {
            Some(since) => FailureExplanation {
                check: name.clone(),
                kind: "proven_flaky",
                explanation: format!(
                    "proven flaky since {since} on {} tree{}",
                    stats.flaky_trees,
                    if stats.flaky_trees == 1 { "" } else { "s" }
                ),
            },
            None => FailureExplanation {
                check: name.clone(),
                kind: "new_on_this_tree",
                explanation: "new on this tree".into(),
            },
        });
    }
    Ok(out)
}

/// Where the policy at `target_tip` allows a baseline for a check (`"baseline": "allow"`): a
/// failing record of `records` whose complete list of failing tests has ids the tip does not
/// fail is explained by them (`new failures suite::t_new`), not as "also failing on the
/// target".
pub fn name_new_failures(
    store: &Store,
    target_tip: Option<gix::ObjectId>,
    records: &[crate::model::EvidenceRecord],
    explained: &mut [FailureExplanation],
) -> Result<()> {
    let Some(tip) = target_tip else {
        return Ok(());
    };
    if explained.is_empty() {
        return Ok(());
    }
    let policy = crate::store::policy::policy_at(store, tip).map_err(crate::error::Error::from)?;
    let reqs = super::requirements::of_policy(policy.as_ref(), &[]);
    let reqs = super::requirements::with_baselines(store, reqs, Some(tip))?;
    for e in explained.iter_mut() {
        let inherited = reqs
            .iter()
            .find(|r| r.name == e.check)
            .and_then(|r| r.baseline.as_ref())
            .and_then(|b| b.inherited.as_ref());
        let failing = records
            .iter()
            .find(|r| r.check.name == e.check && !r.passed())
            .and_then(|r| r.tests.as_ref())
            .filter(|t| t.complete());
        let (Some(inherited), Some(failing)) = (inherited, failing) else {
            continue;
        };
        let new: Vec<&str> = failing
            .failing
            .iter()
            .filter(|id| !inherited.contains(*id))
            .map(String::as_str)
            .collect();
        if !new.is_empty() {
            e.kind = "new_on_this_tree";
            e.explanation = format!("new failures {}", new.join(", "));
        }
    }
    Ok(())
}

/// `test: new on this tree; lint: also failing on the target`.
pub fn describe(explanations: &[FailureExplanation]) -> String {
    explanations
        .iter()
        .map(|e| format!("{}: {}", e.check, e.explanation))
        .collect::<Vec<_>>()
        .join("; ")
}
