//! The gate itself: whether one protected ref may move to one commit, judged by the policy at
//! the commit the move starts from (never the moved commit's own), its evidence, the signers
//! that policy allows and the approvals its guarded paths need. Every hook asks it.

use std::collections::HashMap;

use crate::error::Result;
use crate::evidence::requirements::Gate;
use crate::evidence::verifier::{CommitVerdict, Verifier};
use crate::model::policy::{ref_pattern_matches, Policy};
use crate::store::notes::{APPROVALS, EVIDENCE};
use crate::store::notes_view::NotesView;
use crate::store::policy::Policies;
use crate::store::Store;
use crate::trust::approval::{self, ApprovalCheck};

use super::{never_gated, Allowed, HookOutcome, Refusal};

/// Where the evidence a gate judges by comes from.
#[derive(Debug, Clone, Copy)]
pub enum EvidenceSource {
    /// The current value of `refs/notes/tabellio/evidence`.
    CurrentRef,
    /// A notes commit (or none): what a push is about to store.
    Commit(Option<gix::ObjectId>),
}

/// A policy lookup: absent, parsed, or invalid (with the error message).
#[derive(Debug, Clone)]
enum Found {
    None,
    Valid(Box<Policy>),
    Invalid(String),
}

impl Found {
    fn policy(&self) -> Option<&Policy> {
        match self {
            Found::Valid(p) => Some(p),
            _ => None,
        }
    }
    fn protects(&self, name: &str) -> bool {
        self.policy().is_some_and(|p| p.protects(name))
    }
}

/// The gate every hook applies to each ref update.
pub struct Gatekeeper<'s> {
    verifier: Verifier<'s>,
    source: EvidenceSource,
    notes_loaded: bool,
    config_patterns: Vec<String>,
    /// `HEAD`'s referent and commit.
    head_ref: Option<String>,
    head_commit: Option<gix::ObjectId>,
    found: HashMap<gix::ObjectId, Found>,
    /// Where approvals of changes to guarded paths are read from, and the view once opened.
    approvals_source: EvidenceSource,
    approvals: Option<NotesView>,
    /// Who each approved run is (its evidence read from where the evidence comes from), once
    /// an approval is judged.
    run_actors: Option<approval::RunActors>,
    policies: Policies,
    /// Evidence notes commits no ref holds (fetched under a reftable lock), read beside the
    /// evidence notes when they come from the current ref.
    also: Vec<(String, gix::ObjectId)>,
}

impl<'s> Gatekeeper<'s> {
    pub fn new(store: &'s Store, source: EvidenceSource) -> Result<Gatekeeper<'s>> {
        let config_patterns = store
            .repo
            .config_snapshot()
            .plumbing()
            .strings("tabellio.protect")
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.to_string())
            .filter(|p| !p.trim().is_empty())
            .collect();
        // HEAD read once for its branch and its commit (with reftable each read is a process).
        let head = store.head().unwrap_or_default();
        let (head_ref, head_commit) = (head.branch, head.id);
        Ok(Gatekeeper {
            // Notes are read only once something turns out to be protected.
            verifier: Verifier::with_notes(store, NotesView::at_commit(store, None, EVIDENCE)?),
            source,
            notes_loaded: false,
            config_patterns,
            head_ref,
            head_commit,
            found: HashMap::new(),
            approvals_source: EvidenceSource::CurrentRef,
            approvals: None,
            run_actors: None,
            policies: Policies::default(),
            also: Vec::new(),
        })
    }

    /// Read approvals from `source` (what a push carries) instead of the current notes.
    /// Read the evidence notes commits `also` (`(what, tip)`) beside the current evidence notes.
    pub fn read_evidence_also(&mut self, also: &[(String, gix::ObjectId)]) {
        self.also = also.to_vec();
        self.notes_loaded = false;
        self.run_actors = None;
    }

    pub fn set_approvals_source(&mut self, source: EvidenceSource) {
        self.approvals_source = source;
        self.approvals = None;
    }

    /// The step `from` → `commit` onto a protected ref, gated by the policy at `gating`: the
    /// guarded paths it touches without an approval, if any.
    fn unapproved(
        &mut self,
        gating: Option<gix::ObjectId>,
        from: gix::ObjectId,
        commit: gix::ObjectId,
    ) -> Result<Option<ApprovalCheck>> {
        let store = self.verifier.store();
        if self.approvals.is_none() {
            self.approvals = Some(match self.approvals_source {
                EvidenceSource::CurrentRef => approval::notes(store)?,
                EvidenceSource::Commit(tip) => NotesView::at_commit(store, tip, APPROVALS)?,
            });
        }
        if self.run_actors.is_none() {
            self.run_actors = Some(approval::RunActors::with_evidence(self.evidence_notes()?));
        }
        let notes = self.approvals.as_mut().expect("opened just above");
        let actors = self.run_actors.as_mut().expect("opened just above");
        let steps = approval::judge_chain(
            store,
            &mut self.policies,
            (notes, actors),
            gating,
            (from, commit, approval::Steps::FirstParent),
            None,
            None,
        )?;
        let check = approval::fold(&steps);
        Ok(check.is_needed().then_some(check))
    }

    fn policy_at(&mut self, commit: Option<gix::ObjectId>) -> Found {
        let Some(commit) = commit else {
            return Found::None;
        };
        if let Some(f) = self.found.get(&commit) {
            return f.clone();
        }
        let f = match self.verifier.policy_at(commit) {
            Ok(None) => Found::None,
            Ok(Some(p)) => Found::Valid(Box::new(p)),
            Err(e) => Found::Invalid(e.message),
        };
        self.found.insert(commit, f.clone());
        f
    }

    /// The evidence notes the gate judges by: the current ones (with `also`), or those a push
    /// carries.
    fn evidence_notes(&self) -> Result<NotesView> {
        let store = self.verifier.store();
        match self.source {
            EvidenceSource::CurrentRef => {
                NotesView::at_ref_and_tracking(store, EVIDENCE)?.with(store, &self.also)
            }
            EvidenceSource::Commit(tip) => NotesView::at_commit(store, tip, EVIDENCE),
        }
    }

    fn load_notes(&mut self) -> Result<()> {
        if !self.notes_loaded {
            let notes = self.evidence_notes()?;
            self.verifier.set_notes(notes);
            self.notes_loaded = true;
        }
        Ok(())
    }

    /// Gate moving `name` from `base` (its current value, when known and present here) to
    /// `new`, recording the decision in `out`.
    pub fn gate(
        &mut self,
        name: &str,
        base: Option<gix::ObjectId>,
        new: Option<gix::ObjectId>,
        out: &mut HookOutcome,
    ) -> Result<()> {
        self.gate_from(name, base, base, new, out)
    }

    /// [`Gatekeeper::gate`] where the value the ref moves from (`old`: `None` when the ref does
    /// not exist or its value is not known here) and the commit whose policy gates the move
    /// (`policy_base`) are not the same: a push knows the remote's old value only by its id.
    pub(super) fn gate_from(
        &mut self,
        name: &str,
        old: Option<gix::ObjectId>,
        policy_base: Option<gix::ObjectId>,
        new: Option<gix::ObjectId>,
        out: &mut HookOutcome,
    ) -> Result<()> {
        let Some(new) = new else {
            return Ok(()); // deletions pass
        };
        if never_gated(name) || old == Some(new) {
            // A ref rewritten to the value it has (`git reset --hard`) is not moved.
            return Ok(());
        }
        let store = self.verifier.store();
        // The policy lives in a commit: peel a tag, ignore what is not here or not a commit.
        let base = policy_base.and_then(|b| peel_to_commit(store, b));
        let head_policy = self.policy_at(self.head_commit);
        let base_policy = match base {
            Some(_) => self.policy_at(base),
            None => head_policy.clone(),
        };
        let by_others = self
            .config_patterns
            .iter()
            .any(|p| ref_pattern_matches(p, name))
            || head_policy.protects(name);
        let protected = by_others || base_policy.protects(name);
        let new_hex = new.to_string();
        if let Found::Invalid(why) = &base_policy {
            // Fail closed where we know the ref matters: a broken policy must not open the gate
            // of a ref that config or HEAD's policy protects, nor a server's default branch.
            let is_default_branch = store.is_bare() && self.head_ref.as_deref() == Some(name);
            if by_others || is_default_branch {
                out.refused.push(Refusal::new(
                    name,
                    new_hex,
                    format!("the policy that gates it cannot be read: {why}"),
                ));
            } else {
                out.warnings.push(format!(
                    "{name} is not gated: the policy at its tip cannot be read: {why}"
                ));
            }
            return Ok(());
        }
        if !protected {
            return Ok(());
        }
        let commit = match peel_to_commit(store, new) {
            Some(c) => c,
            None => {
                out.refused.push(Refusal::new(
                    name,
                    new_hex,
                    "a protected ref must point to a commit (or a tag of one) that is present"
                        .into(),
                ));
                return Ok(());
            }
        };
        // The commit must not bring a broken policy onto a protected ref either.
        if let Found::Invalid(why) = self.policy_at(Some(commit)) {
            out.refused.push(Refusal::new(
                name,
                commit.to_string(),
                format!("its own policy is invalid: {why}"),
            ));
            return Ok(());
        }
        // The allowed signers are read from the commit whose policy gates the move.
        let (gate, policy_commit) = match (base_policy.policy(), head_policy.policy()) {
            (Some(p), _) => (Gate::from_policy(Some(p), &[]), base.or(self.head_commit)),
            (None, Some(p)) => (Gate::from_policy(Some(p), &[]), self.head_commit),
            (None, None) => (Gate::AnyPassing, None),
        };
        // Fail closed: signers that cannot be read never open a protected ref.
        let trust = match policy_commit
            .map(|at| self.verifier.trust_at(at))
            .transpose()
        {
            Ok(trust) => trust.flatten(),
            Err(e) => {
                let why = format!(
                    "the allowed signers that gate it cannot be read: {}",
                    e.message
                );
                out.refused
                    .push(Refusal::new(name, commit.to_string(), why));
                return Ok(());
            }
        };
        self.load_notes()?;
        // Failing tests the gating tip already has may be inherited where its policy allows.
        let gate = self
            .verifier
            .with_baselines(gate, policy_commit, trust.as_ref())?;
        let verdict: CommitVerdict = self.verifier.check_trusted(commit, &gate, trust.as_ref())?;
        self.settle(name, (old, base), commit, verdict, out)
    }

    /// Record `verdict` on `name` moving to `commit` (from `old`, gated at `base`): allowed,
    /// or refused for its evidence or for a guarded change nobody approved.
    fn settle(
        &mut self,
        name: &str,
        (old, base): (Option<gix::ObjectId>, Option<gix::ObjectId>),
        commit: gix::ObjectId,
        verdict: CommitVerdict,
        out: &mut HookOutcome,
    ) -> Result<()> {
        let store = self.verifier.store();
        // A change to guarded paths needs an approval, whatever its evidence says.
        let from = old
            .and_then(|o| peel_to_commit(store, o))
            .or(base)
            .or(self.head_commit);
        let gating = base.or(self.head_commit);
        if let (true, Some(from)) = (verdict.verified, from) {
            if let Some(check) = self.unapproved(gating, from, commit)? {
                out.refused.push(Refusal::new(name, verdict.commit, format!(
                        "{}; a person approves the run that made it with `git tabellio approve <run>`",
                        check.describe()
                    )));
                return Ok(());
            }
        }
        if verdict.verified {
            out.allowed.push(Allowed {
                refname: name.into(),
                commit: verdict.commit,
            });
        } else {
            let missing = verdict.unsatisfied();
            out.refused.push(Refusal {
                refname: name.into(),
                commit: verdict.commit,
                reason: format!("it has no passing evidence for {}", missing.join(", ")),
                missing,
                from_remote: None,
            });
        }
        Ok(())
    }
}

/// The commit `id` is or (as a tag) points to, if it is present.
pub(super) fn peel_to_commit(store: &Store, id: gix::ObjectId) -> Option<gix::ObjectId> {
    store
        .repo
        .find_object(id)
        .ok()
        .and_then(|o| o.peel_to_kind(gix::object::Kind::Commit).ok())
        .map(|c| c.id)
}
