//! Judging many commits that share a tree, each tree's records judged once per command.
//!
//! Evidence is noted on the commit and on its tree, and a tree shared by many commits (empty
//! commits, reverts, many runs reaching the same content) carries every record made for any of
//! them: verifying a range of a thousand such commits would judge the tree's thousand records
//! again for every commit (a digest recomputed per record each time). The verdict of a line of
//! the tree's note on a requirement does not depend on the commit when the line names this tree
//! or does not parse: digest, check definition, status and signature are the record's own. Those
//! lines are judged once per (tree, requirement) and the result kept; the commit's own lines,
//! and the rare tree lines naming another tree, are judged per commit. The verdicts are the
//! ones [`super::judge::judge_gate_trusted`] gives for the merged lines: the most alarming
//! verdict wins, and among equals the line that sorts first.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::judge::{best_for, missing, no_records, settle, unreadable_is_tampered, CheckVerdict};
use super::read::Line;
use super::requirements::{under_trust, Gate, Requirement};
use crate::store::policy::TrustAt;
use crate::trust::AllowedSigners;

/// A requirement as a cache key. The allowed signers are compared by identity and held, so a
/// freed set can never be mistaken for a new one at the same address.
#[derive(Clone)]
struct RequirementKey {
    name: String,
    digest: Option<String>,
    /// The scoped tree the requirement judges by (declared inputs).
    scoped: Option<Option<String>>,
    signers: Option<Arc<AllowedSigners>>,
}

impl RequirementKey {
    fn of(req: &Requirement) -> Self {
        RequirementKey {
            name: req.name.clone(),
            digest: req.digest.clone(),
            scoped: req.scope.as_ref().map(|s| s.tree.clone()),
            signers: req.signers.clone(),
        }
    }
}

impl PartialEq for RequirementKey {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.digest == other.digest
            && self.scoped == other.scoped
            && match (&self.signers, &other.signers) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for RequirementKey {}

impl std::hash::Hash for RequirementKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.digest.hash(state);
        self.scoped.hash(state);
        self.signers.as_ref().map(Arc::as_ptr).hash(state);
    }
}

/// The lines of one tree's note, split by whether their verdict depends on the commit.
struct TreeLines {
    /// Lines naming this tree, or not parsing: judged once per requirement.
    fixed: Vec<Line>,
    /// Parsed records naming another tree: they may still name the commit being judged.
    per_commit: Vec<Line>,
    /// The check names of every readable record (for [`Gate::AnyPassing`]).
    names: BTreeSet<String>,
    /// Some unreadable line is an edited record (for [`Gate::AnyPassing`] without records).
    tampered_unreadable: bool,
    /// The deciding verdict of `fixed` per requirement, and the line that decided it.
    judged: HashMap<RequirementKey, Option<(CheckVerdict, String)>>,
}

/// Per command: the judged lines of each tree seen. Valid for one view of the notes.
#[derive(Default)]
pub struct TreeJudgements {
    trees: HashMap<gix::ObjectId, TreeLines>,
}

impl TreeJudgements {
    /// Forget everything (the notes read changed).
    pub fn clear(&mut self) {
        self.trees.clear();
    }

    /// Is `tree`'s note already read?
    pub fn knows(&self, tree: gix::ObjectId) -> bool {
        self.trees.contains_key(&tree)
    }

    /// Keep the lines of `tree`'s note (sorted, unique), `tree_hex` being its id.
    pub fn insert(&mut self, tree: gix::ObjectId, tree_hex: &str, lines: &[Line]) {
        let names = lines
            .iter()
            .filter_map(|(_, r)| r.as_ref().map(|r| r.check.name.clone()))
            .collect();
        let tampered_unreadable = lines
            .iter()
            .any(|(line, r)| r.is_none() && unreadable_is_tampered(line));
        let (fixed, per_commit) = lines
            .iter()
            .cloned()
            .partition(|(_, r)| r.as_ref().is_none_or(|r| r.tree == tree_hex));
        self.trees.insert(
            tree,
            TreeLines {
                fixed,
                per_commit,
                names,
                tampered_unreadable,
                judged: HashMap::new(),
            },
        );
    }

    /// Judge `commit` (with tree `tree`, read with [`Self::insert`]) against `gate`: its own
    /// lines `commit_lines` (sorted, unique) and its tree's. The same verdicts as
    /// [`super::judge::judge_gate_trusted`] on the merged lines.
    pub fn judge(
        &mut self,
        tree: gix::ObjectId,
        commit_lines: &[Line],
        (commit_hex, tree_hex): (&str, &str),
        gate: &Gate,
        trust: Option<&TrustAt>,
    ) -> (Vec<CheckVerdict>, bool) {
        // A tree never read is judged as having no note (`Verifier` always reads it first).
        let entry = self.trees.entry(tree).or_insert_with(TreeLines::empty);
        let mut own = std::borrow::Cow::Borrowed(commit_lines);
        if !entry.per_commit.is_empty() {
            let own = own.to_mut();
            own.extend(entry.per_commit.iter().cloned());
            own.sort_by(|a, b| a.0.cmp(&b.0));
            own.dedup_by(|a, b| a.0 == b.0);
        }
        match gate {
            Gate::Required(reqs) => {
                let checks = entry.judge_all(reqs, &own, commit_hex, tree_hex);
                let verified = checks.iter().all(CheckVerdict::satisfies);
                (checks, verified)
            }
            Gate::AnyPassing => {
                let mut names = entry.names.clone();
                names.extend(
                    own.iter()
                        .filter_map(|(_, r)| r.as_ref().map(|r| r.check.name.clone())),
                );
                let reqs: Vec<Requirement> = names
                    .into_iter()
                    .map(|name| Requirement::new(name, None))
                    .collect();
                let reqs = under_trust(reqs, trust);
                let mut checks = entry.judge_all(&reqs, &own, commit_hex, tree_hex);
                let verified = checks.iter().any(CheckVerdict::satisfies);
                if checks.is_empty() {
                    let tampered = entry.tampered_unreadable
                        || own
                            .iter()
                            .any(|(line, r)| r.is_none() && unreadable_is_tampered(line));
                    checks.push(no_records(tampered));
                }
                (checks, verified)
            }
        }
    }
}

impl TreeLines {
    fn empty() -> Self {
        TreeLines {
            fixed: Vec::new(),
            per_commit: Vec::new(),
            names: BTreeSet::new(),
            tampered_unreadable: false,
            judged: HashMap::new(),
        }
    }

    fn judge_all(
        &mut self,
        reqs: &[Requirement],
        own: &[Line],
        commit_hex: &str,
        tree_hex: &str,
    ) -> Vec<CheckVerdict> {
        reqs.iter()
            .map(|req| {
                // A tree without lines of its own decides nothing: nothing to remember.
                let fixed = if self.fixed.is_empty() {
                    None
                } else {
                    self.judged
                        .entry(RequirementKey::of(req))
                        .or_insert_with(|| {
                            best_for(req, &self.fixed, commit_hex, tree_hex)
                                .map(|(v, i)| (v, self.fixed[i].0.clone()))
                        })
                        .clone()
                };
                let own = best_for(req, own, commit_hex, tree_hex).map(|(v, i)| (v, &own[i].0));
                let best = match (fixed, own) {
                    (None, None) => return missing(req),
                    (Some((v, _)), None) => v,
                    (None, Some((v, _))) => v,
                    // As if merged and sorted: the more alarming wins, among equals the line
                    // that sorts first; a failure on either side makes a pass flaky.
                    (Some((f, fline)), Some((o, oline))) => {
                        let (fr, or) = (f.verdict.rank(), o.verdict.rank());
                        let mut failures = f.failures.clone();
                        failures.extend(o.failures.iter().cloned());
                        let mut best = if fr > or || (fr == or && fline.as_str() <= oline.as_str())
                        {
                            f
                        } else {
                            o
                        };
                        best.failures = failures;
                        best
                    }
                };
                settle(best, req)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::TreeJudgements;
    use crate::evidence::judge::judge_gate_trusted;
    use crate::evidence::read::Line;
    use crate::evidence::requirements::{Gate, Requirement};

    const TREE: &str = "2222222222222222222222222222222222222222";
    const OTHER_TREE: &str = "3333333333333333333333333333333333333333";

    use crate::evidence::judge::tests::record_on as record;

    /// Every kind of line a note can hold, for commits `c0`..`c2`.
    fn pool(commits: &[String]) -> Vec<Line> {
        let mut out: Vec<Line> = Vec::new();
        for (i, c) in commits.iter().enumerate() {
            for (name, status, digest) in [
                ("test", "passed", "d1"),
                ("test", "failed", "d1"),
                ("test", "passed", "d0"),
                ("lint", "passed", "d1"),
            ] {
                for tree in [TREE, OTHER_TREE] {
                    let r = record(name, status, digest, c, tree);
                    out.push((r.to_line(), Some(r)));
                }
            }
            let mut forged = record("test", "passed", "d1", c, TREE);
            forged.exit_code = Some(i as i32 + 1);
            out.push((forged.to_line(), Some(forged)));
        }
        out.push(("not json".into(), None));
        out.push((r#"{"check":{"name":"test"},"digest":"x"}"#.into(), None));
        out.push((r#"{"check":{"name":"lint"},"digest":"x"}"#.into(), None));
        out
    }

    fn sorted(mut lines: Vec<Line>) -> Vec<Line> {
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        lines.dedup_by(|a, b| a.0 == b.0);
        lines
    }

    #[test]
    fn the_same_verdicts_as_judging_the_merged_lines() {
        let commits: Vec<String> = (1..=3).map(|i| i.to_string().repeat(40)).collect();
        let pool = pool(&commits);
        let gates = [
            Gate::AnyPassing,
            Gate::Required(vec![Requirement::new("test", Some("d1".into()))]),
            Gate::Required(vec![
                Requirement::new("test", None),
                Requirement::new("lint", Some("d1".into())),
                Requirement::new("absent", None),
            ]),
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            seed >> 33
        };
        let tree = gix::ObjectId::from_hex(TREE.as_bytes()).expect("an id");
        for _ in 0..60 {
            let pick = |next: &mut dyn FnMut() -> u64| -> Vec<Line> {
                sorted(
                    pool.iter()
                        .filter(|_| next().is_multiple_of(4))
                        .cloned()
                        .collect(),
                )
            };
            let tree_lines = pick(&mut next);
            let mut cache = TreeJudgements::default();
            cache.insert(tree, TREE, &tree_lines);
            for commit in &commits {
                let own = pick(&mut next);
                let merged = sorted(own.iter().chain(&tree_lines).cloned().collect());
                for gate in &gates {
                    let want = judge_gate_trusted(&merged, commit, TREE, gate, None);
                    let got = cache.judge(tree, &own, (commit, TREE), gate, None);
                    let show =
                        |(checks, ok): &(Vec<crate::evidence::judge::CheckVerdict>, bool)| {
                            let checks: Vec<_> = checks
                                .iter()
                                .map(|c| (c.name.clone(), c.verdict, c.record.clone()))
                                .collect();
                            (checks, *ok)
                        };
                    assert_eq!(show(&got), show(&want), "{gate:?} on {commit}");
                }
            }
        }
    }
}
