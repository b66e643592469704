//! Every execution of a check is evidence: attempt numbers, and what a check's recorded
//! history says about it (executions, flakes, durations).
//!
//! An execution is a record that ran (no `reused_from`) and is intact (its digest matches). Its
//! `attempt` counts the executions of the same check digest on the same tree, from the records
//! noted on the tree when it started: two writers executing the same check on the same tree at
//! the same moment may both write the same number, and both records are kept (they differ in
//! their times and output). Nothing here writes.
//!
//! A *flake* is a failing execution on a tree on which the same check digest later passed. The
//! flake rate of a check is the share of flakes among its last [`FLAKE_WINDOW`] executions; it
//! counts as measured from [`MIN_MEASURED`] executions on, so one early flake does not decide a
//! budget. Under the judging policy's `trust`, only records signed by an allowed signer count,
//! as everywhere else.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::error::Result;
use crate::model::evidence::CheckStatus;
use crate::model::EvidenceRecord;
use crate::store::notes::EVIDENCE;
use crate::store::policy::TrustAt;
use crate::store::Store;

/// How many of a check's most recent executions its flake rate is measured over.
pub const FLAKE_WINDOW: usize = 50;
/// How many executions a flake rate needs before a budget is judged by it.
pub const MIN_MEASURED: usize = 10;

/// The attempt number of the next execution of the check with definition digest `check_digest`
/// on `tree`: one more than the executions already noted there.
pub fn next_attempt(store: &Store, tree: gix::ObjectId, check_digest: &str) -> Result<u32> {
    let hex = tree.to_string();
    let mut count = 0u32;
    let mut highest = 0u32;
    for line in store.note_lines(EVIDENCE, tree)? {
        let Ok(rec) = EvidenceRecord::from_line(&line) else {
            continue;
        };
        if rec.tree != hex
            || rec.check.digest != check_digest
            || rec.reused_from.is_some()
            || !rec.digest_is_valid()
        {
            continue;
        }
        count += 1;
        highest = highest.max(rec.attempt.unwrap_or(0));
    }
    Ok(count.max(highest) + 1)
}

/// One execution as the outputs list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Execution {
    pub check: String,
    /// The check definition's digest.
    pub check_digest: String,
    /// `null` for records made before attempts were counted.
    pub attempt: Option<u32>,
    pub status: CheckStatus,
    pub started_at: String,
    pub duration_ms: u64,
    pub commit: String,
    /// The record's digest.
    pub record: String,
}

impl Execution {
    pub fn of(rec: &EvidenceRecord) -> Execution {
        Execution {
            check: rec.check.name.clone(),
            check_digest: rec.check.digest.clone(),
            attempt: rec.attempt,
            status: rec.status,
            started_at: rec.started_at.clone(),
            duration_ms: rec.duration_ms,
            commit: rec.commit.clone(),
            record: rec.digest.clone(),
        }
    }
}

/// Every execution noted on `commit` or its tree that was made on that tree (intact, not
/// reused), each once, by check name then start time: a later pass never hides an earlier
/// failure.
pub fn executions_on(store: &Store, commit: gix::ObjectId) -> Result<Vec<Execution>> {
    let tree = store.tree_of(commit)?;
    let lines = super::read::records_for(store, commit, tree)?;
    Ok(executions_in(
        lines
            .iter()
            .filter(|(_, r)| r.as_ref().is_some_and(EvidenceRecord::digest_is_valid)),
        &tree.to_string(),
    ))
}

/// The executions among `lines` made on tree `tree_hex` (not reused), each once, by check
/// name then start time.
pub fn executions_in<'a>(
    lines: impl IntoIterator<Item = &'a super::read::Line>,
    tree_hex: &str,
) -> Vec<Execution> {
    let mut seen = HashSet::new();
    let mut out: Vec<Execution> = lines
        .into_iter()
        .filter_map(|(_, r)| r.as_ref())
        .filter(|r| r.tree == tree_hex && r.reused_from.is_none())
        .filter(|r| seen.insert(r.digest.clone()))
        .map(Execution::of)
        .collect();
    out.sort_by(|a, b| {
        (&a.check, &a.started_at, a.attempt).cmp(&(&b.check, &b.started_at, b.attempt))
    });
    out
}

/// [`executions_in`] of `lines` followed by the lines whose executions are `known` (what
/// [`executions_in`] found among them, on the same tree): the same list, without reading those
/// lines again.
pub fn executions_beside(
    lines: &[super::read::Line],
    known: &[Execution],
    tree_hex: &str,
) -> Vec<Execution> {
    let mut out = executions_in(lines, tree_hex);
    let seen: HashSet<&str> = out.iter().map(|e| e.record.as_str()).collect();
    let more: Vec<Execution> = known
        .iter()
        .filter(|e| !seen.contains(e.record.as_str()))
        .cloned()
        .collect();
    out.extend(more);
    // Stable, as in `executions_in`: equal keys keep `lines` first, then `known` in its order.
    out.sort_by(|a, b| {
        (&a.check, &a.started_at, a.attempt).cmp(&(&b.check, &b.started_at, b.attempt))
    });
    out
}

/// What a check's recorded history says about it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckStats {
    pub name: String,
    /// The check definition's digest: a changed definition starts a new history.
    pub digest: String,
    /// Every execution recorded.
    pub executions: usize,
    /// Those of the last [`FLAKE_WINDOW`] the rate is measured over.
    pub window: usize,
    /// Flakes among them (failing, then passing on the same tree).
    pub flakes: usize,
    /// `flakes / window`.
    pub flake_rate: f64,
    /// At least [`MIN_MEASURED`] executions: a budget is judged by this rate.
    pub measured: bool,
    pub failures: usize,
    pub mean_duration_ms: u64,
    /// Trees with both a passing and a failing execution, and the first such failure.
    pub flaky_trees: usize,
    pub flaky_since: Option<String>,
}

impl CheckStats {
    /// `0.50 over the last 12 executions (6 flakes)`.
    pub fn describe_rate(&self) -> String {
        format!(
            "{:.2} over the last {} executions ({} flakes)",
            self.flake_rate, self.window, self.flakes
        )
    }
}

/// The executions recorded in the evidence notes, each once.
pub struct History {
    /// By (check name, check digest), oldest first.
    by_check: BTreeMap<(String, String), Vec<EvidenceRecord>>,
}

impl History {
    /// Every intact execution in `refs/notes/tabellio/evidence`; under `trust`, only those a
    /// record of the check needs a signature for and has a trusted one.
    pub fn read(store: &Store, trust: Option<&TrustAt>) -> Result<History> {
        let mut seen = HashSet::new();
        let mut records = Vec::new();
        for line in store.all_note_lines(EVIDENCE)? {
            let Ok(rec) = EvidenceRecord::from_line(&line) else {
                continue;
            };
            if rec.reused_from.is_some() || !seen.insert(rec.digest.clone()) {
                continue;
            }
            if rec.digest_is_valid() && trusted(&rec, trust) {
                records.push(rec);
            }
        }
        Ok(History::of(records))
    }

    /// The history of these executions.
    pub fn of(records: Vec<EvidenceRecord>) -> History {
        let mut by_check: BTreeMap<(String, String), Vec<EvidenceRecord>> = BTreeMap::new();
        for rec in records {
            by_check
                .entry((rec.check.name.clone(), rec.check.digest.clone()))
                .or_default()
                .push(rec);
        }
        for recs in by_check.values_mut() {
            recs.sort_by(|a, b| (&a.started_at, a.attempt).cmp(&(&b.started_at, b.attempt)));
        }
        History { by_check }
    }

    /// The statistics of check `name` with definition digest `digest`.
    pub fn stats(&self, name: &str, digest: &str) -> CheckStats {
        let key = (name.to_string(), digest.to_string());
        stats_of(
            name,
            digest,
            self.by_check.get(&key).map_or(&[], Vec::as_slice),
        )
    }

    /// The statistics of every check definition with executions, by name.
    pub fn all(&self) -> Vec<CheckStats> {
        self.by_check
            .iter()
            .map(|((name, digest), recs)| stats_of(name, digest, recs))
            .collect()
    }
}

fn trusted(rec: &EvidenceRecord, trust: Option<&TrustAt>) -> bool {
    let signers = trust.and_then(|t| t.signers_for(&rec.check.name));
    super::requirements::signed_by(rec, signers.as_deref())
}

/// `recs`: one check definition's executions, oldest first.
fn stats_of(name: &str, digest: &str, recs: &[EvidenceRecord]) -> CheckStats {
    // The last pass on each tree: a failure before it is a flake. Times have whole seconds;
    // the attempt number orders executions of one tree within a second.
    let mut last_pass: HashMap<&str, (&str, u32)> = HashMap::new();
    let mut first_fail: HashMap<&str, &str> = HashMap::new();
    for r in recs {
        if r.passed() {
            last_pass.insert(&r.tree, (&r.started_at, r.attempt.unwrap_or(0)));
        } else {
            first_fail.entry(&r.tree).or_insert(&r.started_at);
        }
    }
    let is_flake = |r: &EvidenceRecord| {
        !r.passed()
            && last_pass
                .get(r.tree.as_str())
                .is_some_and(|pass| *pass > (r.started_at.as_str(), r.attempt.unwrap_or(0)))
    };
    let window = &recs[recs.len().saturating_sub(FLAKE_WINDOW)..];
    let flakes = window.iter().filter(|r| is_flake(r)).count();
    let flaky: Vec<&str> = first_fail
        .iter()
        .filter(|(tree, _)| last_pass.contains_key(*tree))
        .map(|(_, at)| *at)
        .collect();
    let total_ms: u64 = recs.iter().map(|r| r.duration_ms).sum();
    CheckStats {
        name: name.to_string(),
        digest: digest.to_string(),
        executions: recs.len(),
        window: window.len(),
        flakes,
        flake_rate: if window.is_empty() {
            0.0
        } else {
            flakes as f64 / window.len() as f64
        },
        measured: window.len() >= MIN_MEASURED,
        failures: recs.iter().filter(|r| !r.passed()).count(),
        mean_duration_ms: total_ms.checked_div(recs.len() as u64).unwrap_or(0),
        flaky_trees: flaky.len(),
        flaky_since: flaky.iter().min().map(|s| s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::judge::tests::record_on;

    fn exec(status: &str, tree: char, at: u32) -> EvidenceRecord {
        let mut r = record_on(
            "test",
            status,
            "d1",
            &"1".repeat(40),
            &tree.to_string().repeat(40),
        );
        r.started_at = format!("2026-01-01T00:00:{at:02}Z");
        r.duration_ms = u64::from(at) * 10;
        r.seal()
    }

    /// The executions of a commit's own lines beside those already found among its tree's are
    /// the executions of both read together: each record once, own lines first among equal keys.
    #[test]
    fn executions_beside_known_ones_are_those_of_both_lines() {
        let line = |r: EvidenceRecord| (String::new(), Some(r));
        let tree = "a".repeat(40);
        let mut tie = exec("failed", 'a', 3);
        tie.duration_ms = 7;
        let shared = exec("passed", 'a', 2);
        let own = vec![
            line(exec("passed", 'a', 3)),
            line(shared.clone()),
            line(exec("passed", 'b', 1)),
        ];
        let on_tree = vec![line(tie.seal()), line(shared), line(exec("failed", 'a', 1))];
        let both = executions_in(own.iter().chain(&on_tree), &tree);
        let known = executions_in(&on_tree, &tree);
        let beside = executions_beside(&own, &known, &tree);
        let key = |e: &[Execution]| -> Vec<(String, u64)> {
            e.iter()
                .map(|x| (x.record.clone(), x.duration_ms))
                .collect()
        };
        assert_eq!(key(&beside), key(&both));
        assert_eq!(beside.len(), 4);
    }

    #[test]
    fn a_failure_then_a_pass_on_one_tree_is_a_flake() {
        let history = History::of(vec![
            exec("failed", 'a', 1),
            exec("passed", 'a', 2),
            // A pass before the failure: the failure stands (not a flake), the tree is flaky.
            exec("passed", 'b', 3),
            exec("failed", 'b', 4),
            exec("failed", 'c', 5),
            exec("passed", 'd', 6),
        ]);
        let s = history.stats("test", "d1");
        assert_eq!((s.executions, s.window, s.flakes, s.failures), (6, 6, 1, 3));
        assert!((s.flake_rate - 1.0 / 6.0).abs() < 1e-9);
        assert!(!s.measured);
        assert_eq!(s.flaky_trees, 2);
        assert_eq!(s.flaky_since.as_deref(), Some("2026-01-01T00:00:01Z"));
        assert_eq!(s.mean_duration_ms, 35);
        assert_eq!(history.stats("test", "other").executions, 0);
    }

    #[test]
    fn the_rate_is_over_the_last_executions() {
        let mut recs = Vec::new();
        // Old flakes, then a long clean stretch: the window sees only the clean part.
        for i in 0..5u32 {
            recs.push(exec("failed", 'a', i * 2));
            recs.push(exec("passed", 'a', i * 2 + 1));
        }
        for i in 0..FLAKE_WINDOW as u32 {
            let mut r = exec("passed", 'e', 0);
            r.started_at = format!("2026-01-02T00:{:02}:{:02}Z", i / 60, i % 60);
            recs.push(r.seal());
        }
        let s = History::of(recs).stats("test", "d1");
        assert_eq!((s.window, s.flakes), (FLAKE_WINDOW, 0));
        assert!(s.measured);
        assert_eq!(s.flaky_trees, 1);
    }
}
