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
use crate::model::policy::Policy;
use crate::model::run::Actor;
use crate::store::notes_view::NotesView;
use crate::store::policy::{Policies, PolicyAtError};
use crate::store::Store;

use super::{AllowedSigners, Signature};

mod actors;
mod guard;

pub use actors::{proven_kind, proven_kinds, RunActors, RunIds};
pub use guard::Guard;

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
    use crate::trust::GuardedPaths;

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
