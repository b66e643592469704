//! Who a run is known to be by, as approvals are judged: its actor, its initiator and the
//! keys that signed its evidence, and the kind of actor the evidence proves.

use std::collections::HashMap;

use crate::error::Result;
use crate::model::policy::ApproverRole;
use crate::model::run::{same_id, Actor};
use crate::store::notes_view::NotesView;
use crate::store::Store;

use super::super::{judge_signature, AllowedSigners, SignatureVerdict};
use super::ApprovalRecord;

/// Who a run is known to be by, as approvals are judged: the ids of its actor and of its
/// initiator, and the fingerprints of the keys that signed its evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunIds {
    pub actors: Vec<String>,
    pub initiators: Vec<String>,
    pub evidence_keys: Vec<String>,
}

impl RunIds {
    pub(super) fn of(&self, role: ApproverRole) -> &[String] {
        match role {
            ApproverRole::Actor => &self.actors,
            ApproverRole::Initiator => &self.initiators,
        }
    }

    /// Is `id` the run's `role` by any of the ids it is known by?
    pub(super) fn is(&self, role: ApproverRole, id: &str) -> bool {
        self.of(role).iter().any(|a| same_id(a, id))
    }
}

/// The kind of actor the evidence `lines` prove: without `signers`, the kind every intact
/// record that names an actor claims (when they agree); with them, the kind of an actor that
/// signed its own record with a key the allowed signers declare of that kind
/// (`tabellio.<kind>`, docs/signing.md#who-is-who). `None`: not proven.
pub fn proven_kind<'l>(
    lines: impl IntoIterator<Item = &'l str>,
    signers: Option<&AllowedSigners>,
) -> Option<String> {
    match proven_kinds(lines, signers).as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Every kind of actor the evidence `lines` prove (see [`proven_kind`]), sorted, each once:
/// empty when none is, several when records disagree.
pub fn proven_kinds<'l>(
    lines: impl IntoIterator<Item = &'l str>,
    signers: Option<&AllowedSigners>,
) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for line in lines {
        let Ok(rec) = crate::model::EvidenceRecord::from_line(line) else {
            continue;
        };
        let Some(actor) = rec.actor.as_ref().filter(|_| rec.digest_is_valid()) else {
            continue;
        };
        let Some(signers) = signers else {
            kinds.push(actor.kind.clone());
            continue;
        };
        if let SignatureVerdict::Trusted {
            principal,
            fingerprint,
        } = judge_signature(
            rec.signature.as_ref(),
            &rec.digest,
            &rec.finished_at,
            signers,
        ) {
            let declared = super::super::declared_kind(signers, &principal, &fingerprint);
            if declared == Some(actor.kind.as_str()) && same_id(&actor.id, &principal) {
                kinds.push(actor.kind.clone());
            } else if declared == Some("agent") {
                // An agent's key signed it: whatever the record claims, an agent made it.
                kinds.push("agent".into());
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

/// Who a run is known to be by, as approvals are judged: its actor and initiator by every id
/// the caller knows (the ledger it read), the approval record names, the run's ledger here
/// (read once per run) and the run's evidence names, and the keys that signed that evidence.
/// Any of the ids equal to the approver (or its signer) voids an approval the policy wants
/// from someone else: each is a claim someone with write access could make, so the rule takes
/// all of them rather than trusting one.
#[derive(Default)]
pub struct RunActors {
    ledgers: HashMap<String, Option<(String, Option<String>)>>,
    /// The evidence notes, read when an approval is judged (`None`: the local ones).
    evidence: Option<NotesView>,
    /// What the evidence of each approved commit says, by commit and tree.
    by_commit: HashMap<(String, String), RunIds>,
}

impl RunActors {
    /// Read the run's evidence from `evidence` (the notes a push carries, in a hook).
    pub fn with_evidence(evidence: NotesView) -> RunActors {
        RunActors {
            evidence: Some(evidence),
            ..RunActors::default()
        }
    }

    /// The evidence lines on `commit` and its tree.
    pub fn evidence_lines(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
        tree: gix::ObjectId,
    ) -> Result<Vec<String>> {
        if self.evidence.is_none() {
            self.evidence = Some(NotesView::at_ref_and_tracking(
                store,
                crate::store::notes::EVIDENCE,
            )?);
        }
        let view = self.evidence.as_mut().expect("opened just above");
        let mut lines = view.lines(store, commit)?;
        lines.extend(view.lines(store, tree)?);
        lines.sort();
        lines.dedup();
        Ok(lines)
    }

    /// Who `record`'s run is, with `known` (the run's actor, when the caller has it).
    pub fn of(
        &mut self,
        store: &Store,
        record: &ApprovalRecord,
        known: Option<&Actor>,
    ) -> Result<RunIds> {
        let mut ids = self.named_by_evidence(store, record)?;
        ids.actors.extend(known.map(|a| a.id.clone()));
        ids.actors
            .extend(record.run_actor.as_ref().map(|a| a.id.clone()));
        ids.initiators.extend(record.run_initiator.clone());
        let from_ledger = self
            .ledgers
            .entry(record.run_id.clone())
            .or_insert_with(|| {
                // A run id that is not one, or a ledger that cannot be read, names nobody.
                crate::model::ids::check_run_id(&record.run_id).ok()?;
                let ledger = store.try_find_ledger(&record.run_id).ok()??;
                Some((ledger.record.actor.id, ledger.record.initiator))
            });
        if let Some((actor, initiator)) = from_ledger.clone() {
            ids.actors.push(actor);
            ids.initiators.extend(initiator);
        }
        for list in [&mut ids.actors, &mut ids.initiators, &mut ids.evidence_keys] {
            list.sort();
            list.dedup();
        }
        Ok(ids)
    }

    /// The actors, initiators and signing keys of the intact evidence on the approved commit.
    fn named_by_evidence(&mut self, store: &Store, record: &ApprovalRecord) -> Result<RunIds> {
        let key = (record.commit.clone(), record.tree.clone());
        if let Some(ids) = self.by_commit.get(&key) {
            return Ok(ids.clone());
        }
        let mut ids = RunIds::default();
        let parsed = (
            gix::ObjectId::from_hex(record.commit.as_bytes()),
            gix::ObjectId::from_hex(record.tree.as_bytes()),
        );
        if let (Ok(commit), Ok(tree)) = parsed {
            for line in self.evidence_lines(store, commit, tree)? {
                let Ok(rec) = crate::model::EvidenceRecord::from_line(&line) else {
                    continue;
                };
                if !rec.digest_is_valid() {
                    continue;
                }
                ids.actors.extend(rec.actor.as_ref().map(|a| a.id.clone()));
                ids.initiators.extend(rec.initiator.clone());
                if let Some(sig) = &rec.signature {
                    // The key that really signed it, not the fingerprint the record claims.
                    if let Ok(key) = super::super::sshsig::verify(
                        &sig.sig,
                        super::super::NAMESPACE,
                        rec.digest.as_bytes(),
                    ) {
                        ids.evidence_keys
                            .push(super::super::sshsig::fingerprint(&key));
                    }
                }
            }
        }
        self.by_commit.insert(key, ids.clone());
        Ok(ids)
    }
}
