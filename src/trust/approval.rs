//! Approvals (`tabellio.approval/v1`): a person's word that a run may change guarded paths.
//!
//! An approval is noted, like evidence, on the approved commit and on its tree in
//! `refs/notes/tabellio/approvals` (JSON Lines, sorted and unique). It names the tree it
//! approves and the guarded paths it covers, so it is void as soon as the tree changes. A step
//! from one commit to another that touches guarded paths is approved when a record on the new
//! commit (or its tree) has an intact digest, the same tree, covers every guarded path touched,
//! and — when the gating policy has `trust` — is signed by an allowed signer.
//!
//! Which paths are guarded is decided by the policy at the commit the step starts from (the
//! target's tip: a run cannot loosen its own gate) together with the candidate's own `guarded`
//! list (a run that adds guarded paths guards them at once). Judging only reads.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::canonical;
use crate::model::policy::{ApproverRole, GuardRule, GuardWhen, Policy};
use crate::model::run::{same_id, Actor};
use crate::store::notes_view::NotesView;
use crate::store::policy::{Policies, PolicyAtError};
use crate::store::Store;

use super::{judge_signature, AllowedSigners, GuardedPaths, Signature, SignatureVerdict};

pub const SCHEMA: &str = "tabellio.approval/v1";

/// One approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRecord {
    pub schema: String,
    pub run_id: String,
    pub repository: String,
    /// The run's base commit when approved: the approved change is base → `commit`, so the
    /// approval can carry over to the run restacked onto another base with the same guarded
    /// change (docs/land.md). Absent in records of older tools: those never carry over.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub base: Option<String>,
    /// The approved commit (the run's head when approved).
    pub commit: String,
    /// Its tree: the approval holds only for this tree.
    pub tree: String,
    /// The guarded paths the approval covers, sorted.
    pub paths: Vec<String>,
    pub approver: Actor,
    /// The run's actor as its ledger named it when approved, signed with the rest, so a judge
    /// without the ledger (a server's pre-receive) can still tell the approver from the actor.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run_actor: Option<Actor>,
    /// The run's initiator as its ledger named it when approved, signed with the rest, for the
    /// same reason (`approver_not: ["initiator"]`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run_initiator: Option<String>,
    /// Why, in the approver's words (`-m`).
    pub reason: Option<String>,
    pub at: String,
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signature: Option<Signature>,
    pub digest: String,
}

impl ApprovalRecord {
    /// The digest this record's content calls for (without `digest` and `signature`): the
    /// message a signature is made over.
    pub fn compute_digest(&self) -> String {
        super::signed_digest(&crate::model::to_value(self))
            .expect("approval records hold no floats")
    }

    /// Set `digest` from the content.
    pub fn seal(mut self) -> Self {
        self.digest = self.compute_digest();
        self
    }

    pub fn digest_is_valid(&self) -> bool {
        self.digest == self.compute_digest()
    }

    /// The one line stored in the notes blob.
    pub fn to_line(&self) -> String {
        canonical::to_canonical_string(&crate::model::to_value(self))
            .expect("approval records hold no floats")
    }

    pub fn from_line(line: &str) -> Result<Self, crate::model::SchemaError> {
        crate::model::parse_record(line, SCHEMA, "approval record")
    }
}

/// The guarded paths of a step and whom may approve them.
pub struct Guard {
    lists: Vec<GuardedPaths>,
    /// `guarded_paths`: globs guarded when their `when` holds, with the approvers they exclude.
    rules: Vec<(GuardedPaths, GuardRule)>,
    /// The kind of the change's actor, when the evidence proves it ([`proven_kind`]); unknown,
    /// every `when` holds.
    actor_kind: Option<String>,
    /// The allowed signers, when the gating policy has `trust`: an approval counts only when
    /// one of them signed it.
    signers: Option<AllowedSigners>,
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
    fn has_conditions(&self) -> bool {
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

/// Who a run is known to be by, as approvals are judged: the ids of its actor and of its
/// initiator, and the fingerprints of the keys that signed its evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunIds {
    pub actors: Vec<String>,
    pub initiators: Vec<String>,
    pub evidence_keys: Vec<String>,
}

impl RunIds {
    fn of(&self, role: ApproverRole) -> &[String] {
        match role {
            ApproverRole::Actor => &self.actors,
            ApproverRole::Initiator => &self.initiators,
        }
    }

    /// Is `id` the run's `role` by any of the ids it is known by?
    fn is(&self, role: ApproverRole, id: &str) -> bool {
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
            let declared = super::declared_kind(signers, &principal, &fingerprint);
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
                    if let Ok(key) =
                        super::sshsig::verify(&sig.sig, super::NAMESPACE, rec.digest.as_bytes())
                    {
                        ids.evidence_keys.push(super::sshsig::fingerprint(&key));
                    }
                }
            }
        }
        self.by_commit.insert(key, ids.clone());
        Ok(ids)
    }
}

/// The allowed signers `policy` names (`trust.allowed_signers`), read at `at` as the policy
/// was; `None` without `trust`. A file that is not there allows nobody.
pub fn allowed_signers_at(
    store: &Store,
    policy: &Policy,
    at: gix::ObjectId,
) -> Result<Option<AllowedSigners>> {
    let Some(trust) = &policy.trust else {
        return Ok(None);
    };
    let text = store
        .read_file_at(at, &trust.allowed_signers)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok(Some(AllowedSigners::parse(&text, &trust.allowed_signers)?))
}

/// What a step needs and has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApprovalCheck {
    /// The guarded paths the step touches, sorted; empty when it needs no approval.
    pub paths: Vec<String>,
    /// Who approved it (`type:id`), when an approval counts.
    pub approved_by: Option<String>,
    /// Approvals found that do not count, and why.
    pub not_counted: Vec<String>,
}

impl ApprovalCheck {
    /// The step touches guarded paths and no approval counts.
    pub fn is_needed(&self) -> bool {
        !self.paths.is_empty() && self.approved_by.is_none()
    }

    /// The refusal's words: the paths, and what was found that did not count.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "it changes guarded paths without an approval: {}",
            self.paths.join(", ")
        );
        if !self.not_counted.is_empty() {
            s.push_str(&format!(" (not counted: {})", self.not_counted.join("; ")));
        }
        s
    }
}

/// How a move is cut into steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steps {
    /// The whole move is one step, approved only by an approval of its final tree: a run's
    /// promotion (an approval is void once the run's tree changes after it).
    Whole,
    /// Each first-parent commit is a step, approved by an approval on it or on a later commit
    /// of the line: a protected branch's history, where several runs may land in one move.
    FirstParent,
}

/// One step of a chain and what it needs.
#[derive(Debug, Clone)]
pub struct Step {
    pub commit: gix::ObjectId,
    pub check: ApprovalCheck,
}

/// Judge the first-parent steps from `from` to `to`: each step's guarded paths need an
/// approval noted on that commit or on a later commit of the chain (or their trees) that has
/// that commit's tree, covers the paths and counts under the guard. A run's approval is noted
/// on its head, so it covers every step of the run.
///
/// `gating` is the commit whose policy guards every step (the target's tip for promote and the
/// hooks); `None` guards each step by the policy at its parent (`verify` on a branch's
/// history). The policy at each step's commit adds its own `guarded` list.
///
/// `within`, from a caller that has already walked the commits the move brings, holds at least
/// every commit reachable from `to` and not from `from` (as `verify`'s range walk finds them).
/// The first-parent line is then followed only while it stays among them, which decides
/// whether it reaches `from` without an ancestry walk first: every commit of that line above
/// `from` is one the move brings, and a commit it does not bring is reachable from `from`, so
/// `from` cannot be further down that line.
pub fn judge_chain(
    store: &Store,
    policies: &mut Policies,
    (notes, actors): (&mut NotesView, &mut RunActors),
    gating: Option<gix::ObjectId>,
    (from, to, steps_of): (gix::ObjectId, gix::ObjectId, Steps),
    within: Option<&std::collections::HashSet<gix::ObjectId>>,
    actor: Option<&Actor>,
) -> Result<Vec<Step>> {
    if let Some(at) = gating {
        if !guards_anything(store, policies, at, to)? {
            return Ok(Vec::new());
        }
    }
    let chain = match steps_of {
        Steps::Whole => vec![to],
        Steps::FirstParent if within.is_some() => {
            crate::store::ancestry::first_parent_chain_within(store, from, to, within)?
        }
        Steps::FirstParent if !store.is_ancestor(from, to)? => vec![to],
        Steps::FirstParent => crate::store::ancestry::first_parent_chain(store, from, to)?,
    };
    let mut steps = guarded_steps(store, policies, gating, from, &chain, actors)?;
    let mut search = ChainApprovals {
        store,
        notes,
        from,
        chain: &chain,
        steps_of,
        actor,
        records: vec![None; chain.len()],
        bad_lines: Vec::new(),
        actors,
        carried: Carried::default(),
    };
    for (i, (guard, check)) in steps.iter_mut().enumerate() {
        if let Some(guard) = guard.as_ref() {
            if !check.paths.is_empty() {
                search.approve(i, guard, check)?;
            }
        }
    }
    if steps_of == Steps::Whole {
        if let Some((Some(guard), check)) = steps.first_mut() {
            search.note_earlier_approvals(to, guard, check)?;
        }
    }
    Ok(chain
        .into_iter()
        .zip(steps)
        .map(|(commit, (_, check))| Step { commit, check })
        .collect())
}

/// Whether the policy at `gating` or at `to` guards anything: the usual case costs two cached
/// policy lookups, and with nothing guarded there is nothing to walk.
fn guards_anything(
    store: &Store,
    policies: &mut Policies,
    gating: gix::ObjectId,
    to: gix::ObjectId,
) -> Result<bool> {
    let mut guards = |c| {
        policies
            .at(store, c)
            .map(|p| p.is_some_and(|p| p.guards_paths()))
            .map_err(PolicyAtError::naming_commit)
    };
    Ok(guards(gating)? || guards(to)?)
}

/// Each step of `chain` (which starts after `from`) with its guard and the guarded paths it
/// touches, not yet approved.
fn guarded_steps(
    store: &Store,
    policies: &mut Policies,
    gating: Option<gix::ObjectId>,
    from: gix::ObjectId,
    chain: &[gix::ObjectId],
    actors: &mut RunActors,
) -> Result<Vec<(Option<Guard>, ApprovalCheck)>> {
    let mut steps = Vec::with_capacity(chain.len());
    let mut prev = from;
    for (i, &commit) in chain.iter().enumerate() {
        let guard = match Guard::for_step(store, policies, gating.or(Some(prev)), commit)? {
            Some(g) if g.has_conditions() => {
                Some(g.for_change(&change_evidence(store, actors, &chain[i..])?))
            }
            other => other,
        };
        let paths = match &guard {
            Some(g) => g.touched(store, store.tree_of(prev)?, store.tree_of(commit)?)?,
            None => Vec::new(),
        };
        steps.push((
            guard,
            ApprovalCheck {
                paths,
                ..ApprovalCheck::default()
            },
        ));
        prev = commit;
    }
    Ok(steps)
}

/// The evidence of the change a step belongs to: the lines on the first commit of `rest` (the
/// step's commit and the ones after it on the line) that has any, which is the head of the run
/// that brought the step.
fn change_evidence(
    store: &Store,
    actors: &mut RunActors,
    rest: &[gix::ObjectId],
) -> Result<Vec<String>> {
    for &commit in rest {
        let lines = actors.evidence_lines(store, commit, store.tree_of(commit)?)?;
        if !lines.is_empty() {
            return Ok(lines);
        }
    }
    Ok(Vec::new())
}

/// The lines noted on `commit` and on its `tree`, sorted and unique.
pub(super) fn approval_lines(
    store: &Store,
    notes: &mut NotesView,
    commit: gix::ObjectId,
    tree: gix::ObjectId,
) -> Result<Vec<String>> {
    let mut lines = notes.lines(store, commit)?;
    lines.extend(notes.lines(store, tree)?);
    lines.sort();
    lines.dedup();
    Ok(lines)
}

/// The search for the approvals of a chain's steps.
struct ChainApprovals<'a> {
    store: &'a Store,
    notes: &'a mut NotesView,
    from: gix::ObjectId,
    chain: &'a [gix::ObjectId],
    steps_of: Steps,
    actor: Option<&'a Actor>,
    /// The approvals on each commit of the chain, read once, only when a step needs them.
    records: Vec<Option<Vec<ApprovalRecord>>>,
    /// Why lines read so far are not approval records.
    bad_lines: Vec<String>,
    actors: &'a mut RunActors,
    carried: Carried,
}

impl ChainApprovals<'_> {
    /// Approve step `i` with the first record, on it or a later commit of the chain, that
    /// counts under `guard`; otherwise list in `check` what did not count.
    fn approve(&mut self, i: usize, guard: &Guard, check: &mut ApprovalCheck) -> Result<()> {
        'found: for j in i..self.chain.len() {
            let tree = self.store.tree_of(self.chain[j])?;
            self.read(j, tree)?;
            let tree_hex = tree.to_string();
            for record in self.records[j].iter().flatten() {
                let who = format!("{}:{}", record.approver.kind, record.approver.id);
                let ids = self.actors.of(self.store, record, self.actor)?;
                let mut judged_tree = tree_hex.as_str();
                if record.tree != tree_hex && self.steps_of == Steps::FirstParent {
                    let line = (self.from, self.chain);
                    match self
                        .carried
                        .refuse(self.store, guard, record, line, (i, j))?
                    {
                        None => judged_tree = record.tree.as_str(),
                        Some(why) => {
                            check.not_counted.push(format!("approval by {who}: {why}"));
                            continue;
                        }
                    }
                }
                match guard.refuse(record, judged_tree, &check.paths, &ids) {
                    None => {
                        check.approved_by = Some(who);
                        break 'found;
                    }
                    Some(why) => check.not_counted.push(format!("approval by {who}: {why}")),
                }
            }
        }
        if check.approved_by.is_some() {
            check.not_counted.clear();
        } else {
            check.not_counted.extend(self.bad_lines.iter().cloned());
            check.not_counted.sort();
            check.not_counted.dedup();
        }
        Ok(())
    }

    /// Read the approvals on `chain[j]` (whose tree is `tree`), unless read already.
    fn read(&mut self, j: usize, tree: gix::ObjectId) -> Result<()> {
        if self.records[j].is_some() {
            return Ok(());
        }
        let mut parsed = Vec::new();
        for line in approval_lines(self.store, self.notes, self.chain[j], tree)? {
            match ApprovalRecord::from_line(&line) {
                Ok(r) => parsed.push(r),
                Err(e) => self.bad_lines.push(e.to_string()),
            }
        }
        self.records[j] = Some(parsed);
        Ok(())
    }

    /// A whole move that needs an approval: approvals of the run's earlier trees do not count;
    /// say so in `check`, it is the usual story.
    fn note_earlier_approvals(
        &mut self,
        to: gix::ObjectId,
        guard: &Guard,
        check: &mut ApprovalCheck,
    ) -> Result<()> {
        let Ok(earlier) = crate::store::ancestry::first_parent_chain(self.store, self.from, to)
        else {
            return Ok(());
        };
        if !check.is_needed() {
            return Ok(());
        }
        let tree_hex = self.store.tree_of(to)?.to_string();
        for &c in earlier.iter().filter(|c| **c != to) {
            for line in self.notes.lines(self.store, c)? {
                let Ok(record) = ApprovalRecord::from_line(&line) else {
                    continue;
                };
                let ids = self.actors.of(self.store, &record, self.actor)?;
                if let Some(why) = guard.refuse(&record, &tree_hex, &check.paths, &ids) {
                    check.not_counted.push(format!(
                        "approval by {}:{}: {why}",
                        record.approver.kind, record.approver.id
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The steps of a chain folded into one check: every guarded path some step touches without
/// an approval (and what did not count), or, when every step is approved, all paths and the
/// approvers.
pub fn fold(steps: &[Step]) -> ApprovalCheck {
    let unapproved: Vec<&ApprovalCheck> = steps
        .iter()
        .map(|s| &s.check)
        .filter(|c| c.is_needed())
        .collect();
    let mut out = ApprovalCheck::default();
    let take: Vec<&ApprovalCheck> = if unapproved.is_empty() {
        steps.iter().map(|s| &s.check).collect()
    } else {
        unapproved.clone()
    };
    for c in take {
        out.paths.extend(c.paths.iter().cloned());
        out.not_counted.extend(c.not_counted.iter().cloned());
        if unapproved.is_empty() {
            if let Some(by) = &c.approved_by {
                let joined = match out.approved_by.take() {
                    Some(prev) if prev.split(", ").any(|p| p == by) => prev,
                    Some(prev) => format!("{prev}, {by}"),
                    None => by.clone(),
                };
                out.approved_by = Some(joined);
            }
        }
    }
    out.paths.sort();
    out.paths.dedup();
    out.not_counted.sort();
    out.not_counted.dedup();
    out
}

/// The approvals notes together with their remote-tracking copies.
pub fn notes(store: &Store) -> Result<NotesView> {
    NotesView::at_ref_and_tracking(store, crate::store::notes::APPROVALS)
}

/// Judge a run's move from `base` to `candidate` as one step, gated by the policy at `gating`
/// (the target's tip), with the local approvals notes.
pub fn judge_run_step(
    store: &Store,
    gating: Option<gix::ObjectId>,
    base: gix::ObjectId,
    candidate: gix::ObjectId,
    actor: Option<&Actor>,
) -> Result<ApprovalCheck> {
    let steps = judge_chain(
        store,
        &mut Policies::default(),
        (&mut notes(store)?, &mut RunActors::default()),
        gating,
        (base, candidate, Steps::Whole),
        None,
        actor,
    )?;
    Ok(fold(&steps))
}

/// The error a refused step becomes: exit 3, the paths, and `approve` as the way out.
pub fn refusal(run_id: &str, check: &ApprovalCheck) -> Error {
    Error::refused(format!("run {run_id}: {}", check.describe())).hint(format!(
        "a person must approve this change to guarded paths: `git tabellio approve {run_id}`"
    ))
}

/// Approvals carried over to a commit of a first-parent line with another tree (a run `land`
/// restacked), by (index of that commit, record digest): the first step the carried move
/// covers. Later steps of the same run are covered by the same move, not judged alone: a run's
/// middle commit does not start from the approved base.
#[derive(Default)]
pub(super) struct Carried(HashMap<(usize, String), usize>);

impl Carried {
    /// Why `record`, noted on `chain[j]`, does not carry over to step `i` of `chain` (which
    /// starts after `from`), `None` when it does.
    pub(super) fn refuse(
        &mut self,
        store: &Store,
        guard: &Guard,
        record: &ApprovalRecord,
        (from, chain): (gix::ObjectId, &[gix::ObjectId]),
        (i, j): (usize, usize),
    ) -> Result<Option<String>> {
        let key = (j, record.digest.clone());
        if self.0.get(&key).is_some_and(|&start| start <= i) {
            return Ok(None);
        }
        let step_from = if i == 0 { from } else { chain[i - 1] };
        let why = guard.carries(store, record, step_from, chain[j])?;
        if why.is_none() {
            self.0.insert(key, i);
        }
        Ok(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ApprovalRecord {
        ApprovalRecord {
            schema: SCHEMA.into(),
            run_id: "r1".into(),
            repository: "local/demo".into(),
            base: Some("c".repeat(40)),
            commit: "a".repeat(40),
            tree: "b".repeat(40),
            paths: vec![".tabellio/policy.json".into()],
            approver: Actor::new("human", "ada@example.com"),
            run_actor: Some(Actor::new("agent", "bot")),
            run_initiator: None,
            reason: Some("dropping a flaky check".into()),
            at: "2026-01-01T00:00:00Z".into(),
            tool: "git-tabellio/0.1.0".into(),
            signature: None,
            digest: String::new(),
        }
        .seal()
    }

    #[test]
    fn roundtrip_and_tamper() {
        let rec = sample();
        assert!(rec.digest_is_valid());
        let line = rec.to_line();
        assert!(!line.contains("signature"));
        let back = ApprovalRecord::from_line(&line).unwrap();
        assert_eq!(back, rec);
        let mut forged = back;
        forged.paths.push("tests/a.rs".into());
        assert!(!forged.digest_is_valid());
    }

    #[test]
    fn refusals_name_why() {
        let policy = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","guarded":["tests/**"],
                "approval":{"distinct_from_actor":true}}"#,
        )
        .unwrap();
        let guard = Guard {
            lists: vec![GuardedPaths::from_policy(&policy).unwrap().unwrap()],
            rules: Vec::new(),
            actor_kind: None,
            signers: None,
            distinct_from_actor: true,
        };
        assert!(guard.is_guarded(".tabellio/policy.json"));
        assert!(guard.is_guarded("tests/x.rs"));
        assert!(!guard.is_guarded("src/x.rs"));
        let rec = sample();
        let tree = "b".repeat(40);
        let paths = vec![".tabellio/policy.json".to_string()];
        let ids = |actors: &[&str], initiators: &[&str]| RunIds {
            actors: actors.iter().map(|a| a.to_string()).collect(),
            initiators: initiators.iter().map(|a| a.to_string()).collect(),
            evidence_keys: Vec::new(),
        };
        let bot = ids(&["bot"], &["ada@example.com"]);
        assert_eq!(guard.refuse(&rec, &tree, &paths, &bot), None);
        assert!(guard
            .refuse(&rec, &"c".repeat(40), &paths, &bot)
            .unwrap()
            .contains("not"));
        assert!(guard
            .refuse(&rec, &tree, &["tests/x.rs".to_string()], &bot)
            .unwrap()
            .contains("does not cover tests/x.rs"));
        // The approver is the run's actor by any of the ids it is known by, in any case.
        let actors = ids(&["bot", "ADA@example.com"], &[]);
        assert!(guard
            .refuse(&rec, &tree, &paths, &actors)
            .unwrap()
            .contains("own actor"));
        // Nobody knows the run's actor: the approval cannot be shown to be someone else's.
        assert!(guard
            .refuse(&rec, &tree, &paths, &RunIds::default())
            .unwrap()
            .contains("not known"));
        // `approver_not: ["initiator"]` on a glob: the initiator's approval does not count.
        let rules = Policy::parse(
            r#"{"schema":"tabellio.policy/v1",
                "guarded_paths":{"db/**":{"approver_not":["initiator"]}}}"#,
        )
        .unwrap();
        let by_initiator = Guard {
            lists: Vec::new(),
            rules: GuardedPaths::rules(&rules).unwrap(),
            actor_kind: None,
            signers: None,
            distinct_from_actor: false,
        };
        let mut rec_db = rec.clone();
        rec_db.paths = vec!["db/1.sql".into()];
        let rec_db = rec_db.seal();
        let db = vec!["db/1.sql".to_string()];
        assert!(by_initiator
            .refuse(&rec_db, &tree, &db, &bot)
            .unwrap()
            .contains("own initiator"));
        assert_eq!(
            by_initiator.refuse(&rec_db, &tree, &db, &ids(&[], &["eve"])),
            None
        );
        assert!(by_initiator
            .refuse(&rec_db, &tree, &db, &ids(&[], &[]))
            .unwrap()
            .contains("initiator is not known"));
        let trusting = Guard {
            signers: Some(AllowedSigners::default()),
            ..guard
        };
        assert!(trusting
            .refuse(&rec, &tree, &paths, &bot)
            .unwrap()
            .starts_with("unsigned"));
    }
}
