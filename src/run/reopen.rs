//! Reopening a refused run: moving it onto its target's current tip so that it can be repaired
//! and land. Its commits are replayed where they replay cleanly (or squashed, when only the
//! whole change merges); otherwise the run branch moves to the tip and the run's change is left
//! in its worktree, uncommitted, with the conflicts written out (conflict markers in the files,
//! the paths in the run's record). The base is frozen again at the tip; the previous base and
//! every attempt stay in the record (`reopens[]`, `attempts[]`, `land_attempts[]`).
//!
//! Shared by `reopen`, `land --reopen` and `start --task-from` (which carries the change into a
//! new run the same way). Guarantees: every precondition is checked before anything is
//! written; the run branch and the ledger move in one compare-and-swap transaction, with the
//! worktree's files moved while its locks are held (put back when the transaction fails).
//! Left behind by a failure: unreachable objects of the replay or merge.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::land::{Reopen, ReopenMode};
use crate::model::{time, RunRecord, RunState};
use crate::store::checkout;
use crate::store::ledger::{self, Ledger};
use crate::store::replay::{
    self, commits_since, has_conflict_markers, merge_with_conflicts, Objects, ReplayError,
    SquashRequest,
};
use crate::store::tx::{self, Cas};
use crate::store::Store;

use super::workspace::clean_workspace;
use super::Env;

/// The run's change put on a new tip, objects written, no ref moved yet.
#[derive(Debug, Clone)]
pub struct Carried {
    pub mode: ReopenMode,
    /// The new head of the run branch: the replayed (or squashed) head, or the tip itself
    /// when the change conflicts.
    pub head: gix::ObjectId,
    /// `conflict`: the tree the worktree's files get (the tip with the run's change and the
    /// conflict markers); otherwise the new head's tree.
    pub files: gix::ObjectId,
    /// The conflicting paths, sorted.
    pub conflicts: Vec<String>,
}

/// Put the change `base` → `head` (the run's commits) on `tip`.
pub fn carry(
    store: &Store,
    rec: &RunRecord,
    [base, head, tip]: [gix::ObjectId; 3],
) -> Result<Carried> {
    let committer = replay::committer(store);
    let commits = commits_since(store, base, head).map_err(Error::from)?;
    match replay::replay(store, &commits, base, tip, &committer) {
        Ok(r) => {
            return Ok(Carried {
                mode: ReopenMode::Replay,
                head: r.tip,
                files: r.tree,
                conflicts: Vec::new(),
            })
        }
        Err(ReplayError::Conflict { .. } | ReplayError::MergeCommit { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let (merged, _) =
        merge_with_conflicts(store, [base, head, tip], Objects::Written, 0).map_err(Error::from)?;
    if merged.paths.is_empty() {
        // Commit by commit it conflicts, as a whole it merges: one commit on the tip.
        let request = SquashRequest {
            base,
            head,
            onto: tip,
            summary: &rec.task.summary,
            run_id: &rec.run_id,
        };
        let squashed = replay::squash(store, &request, &committer).map_err(Error::from)?;
        return Ok(Carried {
            mode: ReopenMode::Squash,
            head: squashed.commit,
            files: squashed.tree,
            conflicts: Vec::new(),
        });
    }
    Ok(Carried {
        mode: ReopenMode::Conflict,
        head: tip,
        files: merged.tree,
        conflicts: merged.paths,
    })
}

/// Move the worktree at `path` from `old_head`'s tree to what `carried` leaves there; the
/// move's journal, to keep until the transaction it belongs to has committed or been dropped.
pub fn move_files(
    store: &Store,
    path: &Path,
    old_head: gix::ObjectId,
    carried: &Carried,
) -> Result<checkout::Journal> {
    let old = store.tree_of(old_head)?;
    let new_head = store.tree_of(carried.head)?;
    let journal = checkout::move_worktree(path, old, new_head)?;
    if carried.files != new_head {
        if let Err(e) = checkout::write_files(path, new_head, carried.files) {
            let _ = checkout::move_worktree(path, new_head, old);
            return Err(e);
        }
    }
    Ok(journal)
}

/// Put the worktree at `path` back where [`move_files`] took it from.
pub fn unmove_files(store: &Store, path: &Path, old_head: gix::ObjectId, carried: &Carried) {
    let (Ok(old), Ok(new_head)) = (store.tree_of(old_head), store.tree_of(carried.head)) else {
        return;
    };
    if carried.files != new_head {
        let _ = checkout::write_files(path, carried.files, new_head);
    }
    let _ = checkout::move_worktree(path, new_head, old);
}

/// A reopened run.
#[derive(Debug, Clone)]
pub struct Reopened {
    pub ledger: Ledger,
    pub reopen: Reopen,
    pub workspace: PathBuf,
}

/// The states a run may be reopened from: refused by `land` (`completed` with a conflict,
/// `validation_failed` as a culprit), stopped by a loop, or reopened already (the target moved
/// again during the repair).
pub fn reopenable(state: RunState) -> bool {
    matches!(
        state,
        RunState::Completed | RunState::ValidationFailed | RunState::Blocked | RunState::Reopened
    )
}

/// Reopen the run of `ledger` onto its target's current tip; `by` names what reopened it
/// (`reopen`, `land`). Refused (exit 3, nothing written): a run in another state, a worktree
/// that is missing or not clean, a target that has not moved from the run's base.
pub fn reopen(env: &Env, ledger: &Ledger, by: &str) -> Result<Reopened> {
    let store = &env.store;
    let rec = &ledger.record;
    let id = &rec.run_id;
    if !reopenable(rec.state) {
        return Err(Error::refused(format!(
            "run {id} is {}; only a completed, failed, blocked or reopened run is reopened",
            rec.state
        ))
        .hint(format!("`git tabellio status {id}` says what to do next")));
    }
    let (path, head, leftover) = match clean_workspace(env, ledger) {
        Ok((path, head)) => (path, head, None),
        // A reopen killed while it moved the files leaves them half-way: recognised below,
        // once what it was moving to is known, and finished.
        Err(e) => match dirty_workspace(env, ledger)? {
            Some((path, head, changed)) => (path, head, Some((changed, e))),
            None => return Err(e),
        },
    };
    let tip = store.ref_target(&rec.base.reference)?.ok_or_else(|| {
        Error::not_found(format!("the target {} does not exist", rec.base.reference))
            .hint("a run is reopened onto its target's tip; the target must exist")
    })?;
    let base = store.parse_oid(&rec.base.commit)?;
    if tip == base {
        return Err(Error::refused(format!(
            "the target {} is still at the run's base {base}: there is nothing to reopen onto",
            rec.base.reference
        ))
        .hint(format!(
            "`git tabellio status {id}` says what to do next (finish, land)"
        )));
    }
    let carried = carry(store, rec, [base, head, tip])?;
    if let Some((changed, refused)) = leftover {
        let trees = [
            store.tree_of(head)?,
            store.tree_of(carried.head)?,
            carried.files,
        ];
        if !left_by_a_move(store, &path, &changed, trees)? {
            return Err(refused);
        }
    }
    let reopen = Reopen {
        n: rec.reopens.len() as u32 + 1,
        base_before: base.to_string(),
        base_after: tip.to_string(),
        head_before: head.to_string(),
        head_after: carried.head.to_string(),
        mode: carried.mode,
        conflicts: carried.conflicts.clone(),
        after_attempts: rec.land_attempts.len() as u32,
        by: by.to_string(),
        at: time::now(),
    };
    let mut next = ledger::transition(rec, RunState::Reopened);
    next.base.commit = tip.to_string();
    next.validated = None;
    next.reason = None;
    next.reopens.push(reopen.clone());
    let commit = store.write_ledger_commit(Some(ledger), &next, by)?;
    let message = format!("tabellio: {by} {id} onto {tip}");
    let edits = [
        Cas::update(&rec.branch, Some(head), carried.head, &message),
        Cas::update(ledger::ref_name(id), Some(ledger.tip), commit, &message),
    ];
    let prepared = tx::prepare(store, &edits).map_err(|e| e.into_error())?;
    checkout::refuse_index_lock(store, &path)?;
    let journal = move_files(store, &path, head, &carried)?;
    if let Err(e) = prepared.commit(store) {
        unmove_files(store, &path, head, &carried);
        return Err(e.into_error());
    }
    drop(journal);
    Ok(Reopened {
        ledger: Ledger {
            tip: commit,
            record: next,
        },
        reopen,
        workspace: path,
    })
}

/// The run's worktree with uncommitted changes, on the run branch at its head: its path, head
/// and the changed and untracked paths (`None` for any other state).
fn dirty_workspace(
    env: &Env,
    ledger: &Ledger,
) -> Result<Option<(PathBuf, gix::ObjectId, Vec<String>)>> {
    let store = &env.store;
    let rec = &ledger.record;
    let Some(path) = super::run_workspace(store, ledger)? else {
        return Ok(None);
    };
    let Ok(ws) = store.inspect_own(&path) else {
        return Ok(None);
    };
    let tip = store.ref_target(&rec.branch)?;
    if ws.branch.as_deref() != Some(rec.branch.as_str()) || ws.head.is_none() || ws.head != tip {
        return Ok(None);
    }
    let mut changed = ws.changed;
    changed.extend(ws.untracked);
    Ok(ws.head.map(|head| (path, head, changed)))
}

/// Whether every one of `changed` in the worktree at `path` holds what a killed move between
/// `trees` (the old head's, the new head's, the files' a reopen writes) leaves: one of their
/// contents, nothing, or the start of one (a file cut mid-write). Then finishing the move
/// loses nobody's work; anything else is someone's change, and the reopen is refused.
fn left_by_a_move(
    store: &Store,
    path: &Path,
    changed: &[String],
    trees: [gix::ObjectId; 3],
) -> Result<bool> {
    for p in changed {
        let Ok(on_disk) = std::fs::read(path.join(p)) else {
            continue;
        };
        let mut known = false;
        for tree in trees {
            if let Some(blob) = blob_at(store, tree, p)? {
                if blob.starts_with(&on_disk) {
                    known = true;
                    break;
                }
            }
        }
        if !known {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The blob at `path` in `tree`, `None` when there is none.
fn blob_at(store: &Store, tree: gix::ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = store
        .repo
        .find_tree(tree)
        .map_err(|e| Error::internal(format!("could not read tree {tree}: {e}")))?;
    let Some(entry) = tree
        .lookup_entry_by_path(path)
        .map_err(|e| Error::internal(format!("could not look up {path}: {e}")))?
    else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    Ok(Some(
        store
            .repo
            .find_blob(entry.object_id())
            .map_err(|e| Error::internal(format!("could not read {path}: {e}")))?
            .data
            .clone(),
    ))
}

/// The paths of the run's open conflicts (its newest reopen's) that still hold conflict
/// markers: in the worktree at `worktree` when given, else at the commit `head`.
pub fn conflicts_remaining(
    store: &Store,
    rec: &RunRecord,
    worktree: Option<&Path>,
    head: Option<gix::ObjectId>,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for path in rec.open_conflicts() {
        let data = match (worktree, head) {
            (Some(dir), _) => std::fs::read(dir.join(path)).ok(),
            (None, Some(head)) => store.read_file_at(head, path)?,
            (None, None) => None,
        };
        if data.is_some_and(|d| has_conflict_markers(&d)) {
            out.push(path.clone());
        }
    }
    Ok(out)
}
