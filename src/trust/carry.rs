//! Approvals carried over a restack: a run `land` restacked onto a moved target has another
//! tree than the one its approval names, and the approval still counts when the guarded change
//! is exactly the one it approved ([`Guard::carries`]). Judging only reads.

use crate::error::{Context, Result};
use crate::model::run::Actor;
use crate::store::policy::Policies;
use crate::store::Store;

use super::approval::{
    approval_lines, judge_run_step, notes, ApprovalCheck, ApprovalRecord, Guard, RunActors,
};

impl Guard {
    /// Why the approval `record` (of the change `record.base` → `record.commit`) does not
    /// carry over to the move `from` → `to`, `None` when it does: every guarded path the move
    /// changes is one the approval covers, with the same content before (at `from` as at the
    /// approved base) and after (at `to` as at the approved commit). Then the guarded part of
    /// what moves is exactly a part of what was approved, whatever else the tree holds.
    pub fn carries(
        &self,
        store: &Store,
        record: &ApprovalRecord,
        from: gix::ObjectId,
        to: gix::ObjectId,
    ) -> Result<Option<String>> {
        let to_tree = store.tree_of(to)?;
        let Some(base) = &record.base else {
            return Ok(Some(format!(
                "it approves tree {}, not {to_tree}, and names no base to carry over from",
                record.tree
            )));
        };
        let approved = (
            gix::ObjectId::from_hex(base.as_bytes()).ok(),
            gix::ObjectId::from_hex(record.commit.as_bytes()).ok(),
        );
        let (Some(base), Some(approved)) = approved else {
            return Ok(Some("its base or commit is not an object id".into()));
        };
        let (Ok(base_tree), Ok(approved_tree)) = (store.tree_of(base), store.tree_of(approved))
        else {
            return Ok(Some(format!(
                "it approves tree {}, not {to_tree}, and its commits are not here to compare",
                record.tree
            )));
        };
        if gix::ObjectId::from_hex(record.tree.as_bytes()).ok() != Some(approved_tree) {
            return Ok(Some(format!(
                "its commit {approved} does not have the tree it names"
            )));
        }
        let from_tree = store.tree_of(from)?;
        let mut differ = Vec::new();
        for path in self.touched(store, from_tree, to_tree)? {
            let same = record.paths.contains(&path)
                && entry_at(store, from_tree, &path)? == entry_at(store, base_tree, &path)?
                && entry_at(store, to_tree, &path)? == entry_at(store, approved_tree, &path)?;
            if !same {
                differ.push(path);
            }
        }
        if differ.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!(
            "it approves tree {}, not {to_tree}, and the change to {} is not the one it approved",
            record.tree,
            differ.join(", ")
        )))
    }
}

/// The mode and object at `path` in `tree`, `None` when there is nothing there.
fn entry_at(
    store: &Store,
    tree: gix::ObjectId,
    path: &str,
) -> Result<Option<(gix::object::tree::EntryMode, gix::ObjectId)>> {
    let id = tree;
    let tree = store
        .repo
        .find_tree(id)
        .context(|| format!("could not read tree {id}"))?;
    let entry = tree
        .lookup_entry_by_path(path)
        .context(|| format!("could not look up {path} in tree {id}"))?;
    Ok(entry.map(|e| (e.mode(), e.object_id())))
}

/// A run `land` restacked: its move `onto` → `landed` judged as one step, with the approvals
/// of its head before the restack (`approved`) carried over when the guarded change is the one
/// they approved ([`Guard::carries`]). The record that counts is returned with the check: it
/// must be noted on `landed`, where the hooks and `verify` look for it and judge it the same way.
pub fn judge_restacked(
    store: &Store,
    gating: Option<gix::ObjectId>,
    (onto, landed): (gix::ObjectId, gix::ObjectId),
    approved: gix::ObjectId,
    actor: Option<&Actor>,
) -> Result<(ApprovalCheck, Option<ApprovalRecord>)> {
    let mut check = judge_run_step(store, gating, onto, landed, actor)?;
    if !check.is_needed() {
        return Ok((check, None));
    }
    let Some(guard) = Guard::for_step(store, &mut Policies::default(), gating, landed)? else {
        return Ok((check, None));
    };
    let lines = approval_lines(
        store,
        &mut notes(store)?,
        approved,
        store.tree_of(approved)?,
    )?;
    let mut actors = RunActors::default();
    for line in lines {
        let Ok(record) = ApprovalRecord::from_line(&line) else {
            continue;
        };
        let who = format!("{}:{}", record.approver.kind, record.approver.id);
        let why = match guard.carries(store, &record, onto, landed)? {
            Some(why) => Some(why),
            None => {
                let ids = actors.of(store, &record, actor)?;
                guard.refuse(&record, &record.tree, &check.paths, &ids)
            }
        };
        match why {
            None => {
                check.approved_by = Some(who);
                check.not_counted.clear();
                return Ok((check, Some(record)));
            }
            Some(why) => check
                .not_counted
                .push(format!("approval by {who} of {approved}: {why}")),
        }
    }
    check.not_counted.sort();
    check.not_counted.dedup();
    Ok((check, None))
}
