//! Judging commits by the evidence notes alone: a [`Verifier`] reads one view of
//! `refs/notes/tabellio/evidence`, caches policies by blob and trees' judgements, and gives a
//! [`CommitVerdict`] per commit (with a [`GuardedVerdict`] when the commit's first-parent step
//! changes guarded paths). Shared by `verify` and the hooks. It only reads.

use std::borrow::Cow;
use std::rc::Rc;

use serde::Serialize;

use crate::error::Result;
use crate::evidence::judge::CheckVerdict;
use crate::evidence::read::Line;
use crate::evidence::requirements::{Gate, Requirement};
use crate::evidence::tree_judge::TreeJudgements;
use crate::model::policy::Policy;
use crate::store::notes::EVIDENCE;
use crate::store::notes_view::NotesView;
use crate::store::policy::{Policies, PolicyAtError, TrustAt};
use crate::store::Store;
use crate::trust::approval::ApprovalCheck;

/// The verdict on one commit.
#[derive(Debug, Clone, Serialize)]
pub struct CommitVerdict {
    pub commit: String,
    pub tree: String,
    pub verified: bool,
    pub checks: Vec<CheckVerdict>,
    /// Present when the commit's first-parent step changes guarded paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<GuardedVerdict>,
    /// With `--require-provenance`: the run that landed the commit, or `unresolved`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::model::provenance::ProvenanceVerdict>,
    /// The verification summaries noted on the commit (`refs/notes/tabellio/vsa`), judged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vsa: Vec<crate::trust::vsa::VsaVerdict>,
    /// Every check execution noted for the commit's tree, each with its attempt number (as
    /// noted: the verdicts above say which records are intact).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub executions: Vec<crate::evidence::history::Execution>,
}

/// The verdict on a commit's change to guarded paths.
#[derive(Debug, Clone, Serialize)]
pub struct GuardedVerdict {
    /// `approved` or `unapproved-guarded-change`.
    pub verdict: &'static str,
    /// The guarded paths the commit's first-parent step changes.
    pub paths: Vec<String>,
    pub approved_by: Option<String>,
    /// Approvals found that do not count, and why.
    pub not_counted: Vec<String>,
}

/// The verdict string of a first-parent step that changes guarded paths without an approval.
pub const UNAPPROVED_GUARDED_CHANGE: &str = "unapproved-guarded-change";

impl GuardedVerdict {
    pub fn of(check: ApprovalCheck) -> Option<GuardedVerdict> {
        if check.paths.is_empty() {
            return None;
        }
        Some(GuardedVerdict {
            verdict: if check.is_needed() {
                UNAPPROVED_GUARDED_CHANGE
            } else {
                "approved"
            },
            paths: check.paths,
            approved_by: check.approved_by,
            not_counted: check.not_counted,
        })
    }
}

impl CommitVerdict {
    /// The checks that are not satisfied, with why: `name (verdict)`.
    pub fn unsatisfied(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.satisfies())
            .map(CheckVerdict::describe)
            .collect()
    }
}

/// Judges commits against one view of the evidence notes, caching policies by blob.
pub struct Verifier<'s> {
    store: &'s Store,
    notes: NotesView,
    /// A range of a thousand commits usually shares a few policies.
    pub(crate) policies: Policies,
    /// Each tree's records judged once (many commits may share a tree).
    trees: TreeJudgements,
    /// The executions noted on each tree, found once (a thousand commits sharing a tree each
    /// list them).
    tree_executions:
        std::collections::HashMap<gix::ObjectId, Vec<crate::evidence::history::Execution>>,
    /// The gate of each policy blob (`None`: no policy) with the extra checks asked for, built
    /// once: a range of a thousand commits shares a few policies.
    gates: std::collections::HashMap<(Option<gix::ObjectId>, Vec<String>), Rc<Gate>>,
    /// Whether verdicts list the executions on each commit's tree (off: nobody reads them).
    executions: bool,
}

impl<'s> Verifier<'s> {
    /// Judge by the current value of `refs/notes/tabellio/evidence`.
    pub fn new(store: &'s Store) -> Result<Self> {
        Ok(Self::with_notes(
            store,
            NotesView::at_ref_and_tracking(store, EVIDENCE)?,
        ))
    }

    /// Judge by the notes of `notes`.
    pub fn with_notes(store: &'s Store, notes: NotesView) -> Self {
        Verifier {
            store,
            notes,
            policies: Policies::default(),
            trees: TreeJudgements::default(),
            tree_executions: Default::default(),
            gates: Default::default(),
            executions: false,
        }
    }

    /// Whether each verdict lists every check execution noted for its commit's tree
    /// ([`CommitVerdict::executions`]); off by default: only `verify --json` prints them.
    pub fn list_executions(&mut self, yes: bool) {
        self.executions = yes;
    }

    /// Judge by `notes` from now on.
    pub fn set_notes(&mut self, notes: NotesView) {
        self.notes = notes;
        self.trees.clear();
        self.tree_executions.clear();
    }

    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// The digests of the readable records noted on `commit` and on its tree, in these notes.
    pub fn record_digests(&mut self, commit: gix::ObjectId) -> Result<Vec<String>> {
        let tree = self.store.tree_of(commit)?;
        let mut lines = self.notes.records(self.store, commit)?;
        lines.extend(self.notes.records(self.store, tree)?);
        Ok(lines
            .into_iter()
            .filter_map(|(_, r)| r.map(|r| r.digest))
            .collect())
    }

    /// The policy committed at `commit`, `None` when it has none. An invalid policy is an error
    /// naming the commit, the file and the field.
    pub fn policy_at(&mut self, commit: gix::ObjectId) -> Result<Option<Policy>> {
        self.policies
            .at(self.store, commit)
            .map_err(PolicyAtError::naming_commit)
    }

    /// The gate of the policy committed at `commit` with the checks in `extra` required too
    /// ([`Gate::from_policy`]). An invalid policy is an error naming the commit, the file and
    /// the field.
    pub fn gate_at(&mut self, commit: gix::ObjectId, extra: &[String]) -> Result<Rc<Gate>> {
        let blob = self
            .policies
            .blob(self.store, commit)
            .map_err(PolicyAtError::naming_commit)?;
        let key = (blob, extra.to_vec());
        if let Some(gate) = self.gates.get(&key) {
            return Ok(Rc::clone(gate));
        }
        let policy = self
            .policies
            .at_ref(self.store, commit)
            .map_err(PolicyAtError::naming_commit)?;
        let gate = Rc::new(Gate::from_policy(policy, extra));
        self.gates.insert(key, Rc::clone(&gate));
        Ok(gate)
    }

    /// The policy's `trust` at `commit` with the allowed signers read from `commit`; `None`
    /// without one. Each signers file is parsed once per verifier.
    pub fn trust_at(&mut self, commit: gix::ObjectId) -> Result<Option<TrustAt>> {
        self.policies
            .trust_at(self.store, commit)
            .map_err(PolicyAtError::naming_commit)
    }

    /// Look up the policy of each of `commits` (given newest first) oldest first, so that the
    /// judging that follows finds every one remembered. The order is what makes it cheap: a pack
    /// stores a newer root tree as a delta of an older one, chains dozens deep, and the
    /// delta-base cache keeps each tree it resolves; read newest first, every tree walks its
    /// whole chain again, read oldest first each one is a single step from the one before.
    /// Nothing is reported here: a policy that cannot be read or parsed is not remembered, and
    /// the judging asks again and names the commit.
    pub fn read_policies_oldest_first(&mut self, commits: &[gix::ObjectId]) {
        for &commit in commits.iter().rev() {
            let _ = self.policies.blob(self.store, commit);
        }
    }

    /// `gate` with the failing tests of `tip` (read from this verifier's notes) as the
    /// baselines its policy allows; unchanged when it allows none or there is no tip.
    pub fn with_baselines(
        &mut self,
        gate: Gate,
        tip: Option<gix::ObjectId>,
        trust: Option<&TrustAt>,
    ) -> Result<Gate> {
        let Some(tip) = tip.filter(|_| gate.wants_baselines()) else {
            return Ok(gate);
        };
        let tree = self.store.tree_of(tip)?;
        let mut lines = self.notes.records(self.store, tip)?;
        lines.extend(self.notes.records(self.store, tree)?);
        Ok(gate.with_baselines(&lines, &tree.to_string(), trust))
    }

    /// Judge `commit` against `gate`.
    pub fn check(&mut self, commit: gix::ObjectId, gate: &Gate) -> Result<CommitVerdict> {
        self.check_trusted(commit, gate, None)
    }

    /// Judge `commit` against `gate` under `trust` (read from the commit whose policy the gate
    /// came from).
    pub fn check_trusted(
        &mut self,
        commit: gix::ObjectId,
        gate: &Gate,
        trust: Option<&TrustAt>,
    ) -> Result<CommitVerdict> {
        // Copied only when something changes it: signers to judge by, or requirements that
        // depend on the commit.
        let mut gate = match trust {
            Some(_) => Cow::Owned(gate.clone().under_trust(trust)),
            None => Cow::Borrowed(gate),
        };
        let tree = self.store.tree_of(commit)?;
        let (commit_hex, tree_hex) = (commit.to_string(), tree.to_string());
        if !self.trees.knows(tree) {
            let lines = self.notes.shared(self.store, tree)?;
            self.trees.insert(tree, &tree_hex, &lines);
        }
        let shared = self.notes.shared(self.store, commit)?;
        let mut own: Cow<[Line]> = Cow::Borrowed(&shared);
        // Checks with declared inputs are judged on the commit's scoped trees too.
        let depends = |r: &Requirement| r.when.is_some() || r.scope.is_some();
        let per_commit = matches!(&*gate, Gate::Required(reqs) if reqs.iter().any(depends));
        // The gate is copied only then.
        let reqs = match per_commit.then(|| gate.to_mut()) {
            Some(Gate::Required(reqs)) => Some(reqs),
            _ => None,
        };
        if let Some(reqs) = reqs {
            // A check whose `when` the evidence proves does not hold is not asked for.
            if reqs.iter().any(|r| r.when.is_some()) {
                let mut lines = self.notes.records(self.store, tree)?;
                lines.extend(own.iter().cloned());
                *reqs = crate::evidence::requirements::applicable(std::mem::take(reqs), &lines);
            }
            let scoped = crate::evidence::scope::scope_requirements(self.store, tree, reqs)?;
            if !scoped.is_empty() {
                let own = own.to_mut();
                for id in scoped {
                    own.extend(self.notes.shared(self.store, id)?.iter().cloned());
                }
                own.sort_by(|a, b| a.0.cmp(&b.0));
                own.dedup_by(|a, b| a.0 == b.0);
            }
        }
        let (checks, verified) =
            self.trees
                .judge(tree, &own, (&commit_hex, &tree_hex), &gate, trust);
        let executions = if self.executions {
            self.executions_of(tree, &tree_hex, &own)?
        } else {
            Vec::new()
        };
        Ok(CommitVerdict {
            commit: commit_hex,
            tree: tree_hex,
            verified,
            checks,
            approval: None,
            provenance: None,
            vsa: Vec::new(),
            executions,
        })
    }

    /// Every check execution noted for `tree` (with `tree_hex` its id), together with those
    /// among the commit's own lines `own`; the tree's found once per command.
    fn executions_of(
        &mut self,
        tree: gix::ObjectId,
        tree_hex: &str,
        own: &[Line],
    ) -> Result<Vec<crate::evidence::history::Execution>> {
        let on_tree = match self.tree_executions.entry(tree) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => {
                let lines = self.notes.records(self.store, tree)?;
                new.insert(crate::evidence::history::executions_in(&lines, tree_hex))
            }
        };
        Ok(crate::evidence::history::executions_beside(
            own, on_tree, tree_hex,
        ))
    }
}
