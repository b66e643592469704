//! A landing killed half-way through its ref transaction, finished by the next `land`.
//!
//! With the files backend the transaction's loose refs are renamed into place one after the
//! other (the target first, then each run's branch and ledger), so a landing killed in between
//! can leave the target holding a run's landed commit while that run's ledger still says
//! `completed`, its branch moved or not. Such a run is not to be landed again (its change is on
//! the target already): `land` recognises the commit it landed as and records the landing, the
//! ledger to `promoted` and the branch to the landed commit, in one compare-and-swap
//! transaction. Stale `.lock` files of the killed transaction are named first, as any lock is
//! (the person removes them); a lock held by a live writer is that writer's business, and the
//! run is left to the queue's usual wait.

use crate::error::Result;
use crate::model::land::{Restack, RestackMode};
use crate::model::run::Promotion;
use crate::model::{time, RunState};
use crate::store::checkout;
use crate::store::ledger::{self, Ledger};
use crate::store::replay::commits_since;
use crate::store::tx::{self, Cas};
use crate::store::Store;

use super::{Landing, RunLanding};

/// How far down the target's first-parent line a run's landed commit is looked for.
const SEARCH_DEPTH: usize = 1000;

/// When `ledger` (a `completed` run of `target`) was landed by a landing killed before its
/// ledger was written: record it now and say so; `None` when it was not (or a lock says a
/// writer may still be at it).
pub fn finish_interrupted(
    store: &Store,
    ledger: &Ledger,
    target: &str,
) -> Result<Option<RunLanding>> {
    let rec = &ledger.record;
    if rec.state != RunState::Completed || rec.base.reference != target {
        return Ok(None);
    }
    // Only a landing of this very run moved the target (its reflog names the run): a run whose
    // identical commit another run landed, or whose target someone moved by hand, stays in the
    // queue. With reftable a landing is atomic and leaves nothing to finish.
    let landing_of_this_run = store.reflog_messages(target, 64).iter().any(|m| {
        m.strip_prefix("tabellio: land ")
            .is_some_and(|ids| ids.split_whitespace().any(|id| id == rec.run_id))
    });
    if !landing_of_this_run {
        return Ok(None);
    }
    let Some(validated) = rec.validated.as_ref() else {
        return Ok(None);
    };
    let (Ok(head), Ok(base)) = (
        store.parse_oid(&validated.commit),
        store.parse_oid(&rec.base.commit),
    ) else {
        return Ok(None);
    };
    let Some(tip) = store.ref_target(target)? else {
        return Ok(None);
    };
    let ledger_ref = ledger::ref_name(&rec.run_id);
    if tx::held_lock(store, &[rec.branch.as_str(), ledger_ref.as_str()]).is_some() {
        return Ok(None);
    }
    let branch = store.ref_target(&rec.branch)?;
    let Some((landed, mode)) = landed_as(store, ledger, (base, head, branch), tip)? else {
        return Ok(None);
    };
    let commits = commits_since(store, base, head).unwrap_or_default();
    let base_after = match mode {
        RestackMode::None => base,
        RestackMode::Squash => first_parent(store, landed)?.unwrap_or(base),
        RestackMode::Replay => {
            let mut at = landed;
            for _ in 0..commits.len() {
                at = first_parent(store, at)?.unwrap_or(at);
            }
            at
        }
    };
    let mut next = ledger::transition(rec, RunState::Promoted);
    next.promotion = Some(Promotion {
        target: target.to_string(),
        old: base_after.to_string(),
        new: tip.to_string(),
        mode: crate::model::run::PromotionMode::Ref,
        remote: None,
        at: time::now(),
    });
    next.landed = Some(landed.to_string());
    next.completion = crate::run::completion::completion_record(store, rec, landed)?;
    next.restack = Some(Restack {
        mode,
        base_before: rec.base.commit.clone(),
        base_after: base_after.to_string(),
        head_before: head.to_string(),
        head_after: landed.to_string(),
    });
    let message = format!(
        "tabellio: land {} (recording a landing that was interrupted)",
        rec.run_id
    );
    let commit = store.write_ledger_commit(Some(ledger), &next, "land")?;
    let mut edits = vec![Cas::update(&ledger_ref, Some(ledger.tip), commit, &message)];
    if branch != Some(landed) {
        if let Some(at) = branch {
            edits.push(Cas::update(&rec.branch, Some(at), landed, &message));
        }
    }
    // The run's own worktree moves with its branch, as in a landing: from the validated head's
    // files to the landed commit's, while the transaction's locks are held.
    let moves = worktree_moves(store, &rec.branch, head, landed)?;
    let prepared = tx::prepare(store, &edits).map_err(|e| e.into_error())?;
    let moved = checkout::move_all(&moves)?;
    if let Err(e) = prepared.commit(store) {
        moved.undo();
        return Err(e.into_error());
    }
    drop(moved);
    Ok(Some(RunLanding {
        run_id: rec.run_id.clone(),
        result: Landing::AlreadyLanded,
        state: RunState::Promoted,
        landed: Some(landed.to_string()),
        restack: Some(mode),
        base_before: rec.base.commit.clone(),
        base_after: Some(base_after.to_string()),
        paths: Vec::new(),
        commit: None,
        reason: Some(format!(
            "landed on {target} as {landed} by a landing that was interrupted; its ledger now \
             says so"
        )),
        satisfied: None,
        checks: None,
    }))
}

/// The commit the run landed as on the target (at `tip`), and how, when the target holds it:
/// the run branch already moved onto the target's history; the validated head itself on the
/// target (landed as it was); or, searched down the target's first-parent line to the run's
/// base, the restacked copy of the validated head (same author, date and message; a squash
/// names the run).
fn landed_as(
    store: &Store,
    ledger: &Ledger,
    (base, head, branch): (gix::ObjectId, gix::ObjectId, Option<gix::ObjectId>),
    tip: gix::ObjectId,
) -> Result<Option<(gix::ObjectId, RestackMode)>> {
    let run_id = &ledger.record.run_id;
    if head == base {
        return Ok(None);
    }
    let squash_mark = format!(" of run {run_id}:\n");
    let mode_of = |commit: gix::ObjectId| -> Result<RestackMode> {
        if commit == head {
            return Ok(RestackMode::None);
        }
        let message = message_of(store, commit)?;
        Ok(if message.contains(&squash_mark) {
            RestackMode::Squash
        } else {
            RestackMode::Replay
        })
    };
    match branch {
        // The transaction moved the branch before the kill: its value is the landed commit.
        Some(b) if b != head => {
            if b != base && store.is_ancestor(b, tip)? {
                return Ok(Some((b, mode_of(b)?)));
            }
            return Ok(None);
        }
        // Not there at all: a run synced from elsewhere, not ours to judge.
        None => return Ok(None),
        Some(_) => {}
    }
    if store.is_ancestor(head, tip)? {
        return Ok(Some((head, RestackMode::None)));
    }
    let want = signature_of(store, head)?;
    let change = change_of(store, head)?;
    let mut at = Some(tip);
    for _ in 0..SEARCH_DEPTH {
        let Some(commit) = at else { break };
        if commit == base || store.is_ancestor(commit, base)? {
            break;
        }
        let message = message_of(store, commit)?;
        let copy = signature_of(store, commit)? == want && change_of(store, commit)? == change;
        if message.contains(&squash_mark) || copy {
            return Ok(Some((commit, mode_of(commit)?)));
        }
        at = first_parent(store, commit)?;
    }
    Ok(None)
}

/// The run's worktrees whose files are still the validated head's: clean at `head` (the branch
/// did not move), or at `landed` with only the paths the landing changes differing (the branch
/// moved, the files did not). Each with the trees to move between.
fn worktree_moves(
    store: &Store,
    branch: &str,
    head: gix::ObjectId,
    landed: gix::ObjectId,
) -> Result<Vec<checkout::FileMove>> {
    if head == landed {
        return Ok(Vec::new());
    }
    let (from, to) = (store.tree_of(head)?, store.tree_of(landed)?);
    let moved: Vec<String> = crate::store::diff::tree_changes(&store.objects(), from, to)?
        .into_iter()
        .map(|c| c.path.to_string())
        .collect();
    let mut out = Vec::new();
    for path in store.worktrees_of_branch(branch)? {
        if !path.exists() {
            continue;
        }
        checkout::refuse_index_lock(store, &path)?;
        let ws = store.inspect(&path)?;
        let unmoved = if ws.head == Some(head) {
            ws.is_clean()
        } else {
            ws.head == Some(landed)
                && !ws.changed.is_empty()
                && ws.untracked.is_empty()
                && ws.changed.iter().all(|p| moved.contains(p))
        };
        if unmoved {
            out.push((path, from, to));
        }
    }
    Ok(out)
}

/// What `commit` changes against its first parent: each path with its new entry.
fn change_of(
    store: &Store,
    commit: gix::ObjectId,
) -> Result<Vec<(String, Option<crate::store::diff::TreeEntry>)>> {
    let Some(parent) = first_parent(store, commit)? else {
        return Ok(Vec::new());
    };
    let changes = crate::store::diff::tree_changes(
        &store.objects(),
        store.tree_of(parent)?,
        store.tree_of(commit)?,
    )?;
    Ok(changes
        .into_iter()
        .map(|c| (c.path.to_string(), c.new))
        .collect())
}

fn first_parent(store: &Store, commit: gix::ObjectId) -> Result<Option<gix::ObjectId>> {
    Ok(store
        .commit(commit)?
        .parent_ids()
        .next()
        .map(|p| p.detach()))
}

fn message_of(store: &Store, commit: gix::ObjectId) -> Result<String> {
    Ok(store.commit(commit)?.message_raw_sloppy().to_string())
}

/// What a restack keeps of a commit: its author (with the date) and its message.
fn signature_of(store: &Store, commit: gix::ObjectId) -> Result<(String, String)> {
    let c = store.commit(commit)?;
    let author = c
        .author()
        .map(|a| format!("{} <{}> {}", a.name, a.email, a.time))
        .unwrap_or_default();
    Ok((author, c.message_raw_sloppy().to_string()))
}
