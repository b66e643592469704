//! `rewind`: put a run's worktree and branch back to one of its checkpoints — the whole tree,
//! untracked files included, ignored files untouched — and record it in the ledger.
//!
//! A checkpoint's snapshot is its commit's tree (`checkpoint` needs a clean worktree), or the
//! commit its `snapshot` names when `rewind --force` saved uncommitted work. Rewinding moves
//! the run branch to the checkpoint's commit and the files to its snapshot; the index is the
//! commit's tree, so saved uncommitted work comes back uncommitted.
//!
//! Failure model. Every precondition is checked first; a refused rewind writes no ref and
//! touches no file (a `--force` snapshot may have written unreachable objects, which `git gc`
//! prunes). Then one transaction: the checkpoint note of a `--force` save, the ledger (the
//! save's checkpoint commit and the rewind's, each keeping what it leaves reachable as a
//! second parent) and the run branch, by compare-and-swap. The files move last, under the
//! worktree's index lock; if they cannot, they are put back and the error says how to finish:
//! a rewind killed after its transaction leaves the worktree as it was on the checkpoint's
//! commit, and `rewind --force` again saves it and moves it.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::run::{CheckpointEntry, Rewind};
use crate::model::{time, RunRecord, RunState};
use crate::run::workspace::{descends_from_base, refuse_switched_branch};
use crate::run::{resolve_run, run_workspace, Env};
use crate::runner::is_secret_path;
use crate::store::checkout;
use crate::store::diff::tree_changes;
use crate::store::ledger::{self, Ledger};
use crate::store::notes::CHECKPOINTS;
use crate::store::publish::publish_with;
use crate::store::tx::Cas;
use crate::store::worktree::snapshot::snapshot;
use crate::store::Store;

/// What to do with uncommitted work in the run worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Uncommitted {
    /// Refuse the rewind (exit 3).
    #[default]
    Refuse,
    /// Save it as a checkpoint first (`--force`).
    Save,
}

/// What `rewind` is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct RewindOptions<'a> {
    /// The run, or `None` for the one whose worktree the command runs in.
    pub run: Option<&'a str>,
    /// The checkpoint: its number (`1`, `2`, …), its commit, or a unique prefix of it.
    pub checkpoint: &'a str,
    pub uncommitted: Uncommitted,
}

#[derive(Debug, Serialize)]
pub struct RewindOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    /// The checkpoint rewound to, by number (1-based).
    pub checkpoint: usize,
    /// Its commit: the run branch's head now.
    pub commit: String,
    /// The run branch's head before.
    pub from: String,
    /// The checkpoint `--force` saved the uncommitted work in, by number.
    pub saved: Option<usize>,
    /// Untracked files with secret names: neither saved nor removed.
    pub left_out: Vec<String>,
    /// False when the worktree already was that checkpoint (nothing was written).
    pub rewound: bool,
}

pub fn rewind(env: &Env, opts: &RewindOptions<'_>) -> Result<RewindOutcome> {
    let store = &env.store;
    let ledger = resolve_run(env, opts.run)?;
    let rec = &ledger.record;
    let id = rec.run_id.as_str();
    refuse_state(rec)?;
    let index = find_checkpoint(rec, opts.checkpoint)?;
    let target = &rec.checkpoints[index];
    let number = index + 1;
    let commit = store.parse_oid(&target.commit)?;
    let index_tree = store.parse_oid(&target.tree)?;
    let files_tree = checkpoint_files(store, rec, number)?;

    let path = run_workspace(store, &ledger)?.ok_or_else(|| {
        Error::refused(format!("the worktree of run {id} is missing")).hint(
            "rewind restores a worktree; recreate it with `git worktree add`, or start a new run",
        )
    })?;
    let ws = store.inspect_own(&path)?;
    refuse_switched_branch(rec, &ws, &path)?;
    let head = ws
        .head
        .ok_or_else(|| Error::refused("the run worktree has no HEAD commit"))?;
    let head_tree = store.tree_of(head)?;
    let dirty = dirty_paths(&ws);
    if !dirty.is_empty() && opts.uncommitted == Uncommitted::Refuse {
        return Err(Error::refused(format!(
            "the run worktree has uncommitted changes ({})",
            dirty.into_iter().take(10).collect::<Vec<_>>().join(", ")
        ))
        .hint(format!(
            "`git tabellio rewind --force {id} {number}` saves them as a checkpoint first; or commit them"
        )));
    }
    checkout::refuse_index_lock(store, &path)?;
    if dirty.is_empty() && head == commit && files_tree == head_tree {
        return Ok(RewindOutcome {
            run: rec.clone(),
            workspace: Some(path),
            checkpoint: number,
            commit: target.commit.clone(),
            from: head.to_string(),
            saved: None,
            left_out: Vec::new(),
            rewound: false,
        });
    }

    // What the files hold now, as a tree: the head's when nothing is uncommitted.
    let repo = store.worktree_repo(&path)?;
    let (now_tree, left_out) = if dirty.is_empty() {
        (head_tree, Vec::new())
    } else {
        let snap = snapshot(&repo, &path, head_tree, &is_secret_path)?;
        (snap.tree, snap.left_out)
    };
    let in_the_way =
        checkout::ignored_in_the_way(&path, &tree_changes(&repo, now_tree, files_tree)?);
    if !in_the_way.is_empty() {
        return Err(Error::refused(format!(
            "checkpoint {number} has files where ignored or secret-named files are now: {}",
            in_the_way.join(", ")
        ))
        .hint("rewind never touches ignored files; move these away, then rewind again"));
    }

    let message = format!("tabellio: rewind {id} to checkpoint {number}");
    let mut current = ledger.clone();
    let mut notes = Vec::new();
    let mut saved = None;
    if now_tree != head_tree {
        let (save, entry) = save_uncommitted(store, &current, (head, head_tree, now_tree), number)?;
        notes.push((CHECKPOINTS, vec![(head, vec![entry])]));
        saved = Some(save.record.checkpoints.len());
        current = save;
    }
    let mut next = ledger::transition(&current.record, RunState::Active);
    // The head moves: what was validated is no longer the run's head.
    next.validated = None;
    next.rewound = Some(Rewind {
        checkpoint: number,
        commit: target.commit.clone(),
        from: head.to_string(),
        saved,
        at: time::now(),
    });
    // The commits the branch leaves stay reachable from the ledger (a save keeps them already).
    let keep = (saved.is_none() && !store.is_ancestor(head, commit)?).then_some(head);
    let tip = store.write_ledger_commit_keeping(Some(&current), &next, "rewind", keep)?;
    let edits = [
        Cas::update(ledger::ref_name(id), Some(ledger.tip), tip, &message),
        Cas::update(&rec.branch, Some(head), commit, &message),
    ];
    publish_with(store, &edits, &notes, &message)?;

    checkout::restore_worktree(&path, now_tree, files_tree, index_tree).map_err(|e| {
        let again = format!("git tabellio rewind --force {id} {number}");
        Error::new(
            e.kind,
            format!(
                "run {id} is recorded at checkpoint {number} (its branch is at {commit}), but its worktree could not be restored: {}",
                e.message
            ),
        )
        .hint(format!(
            "the worktree still holds what it had; `{again}` saves it as a checkpoint and restores again"
        ))
    })?;
    Ok(RewindOutcome {
        run: next,
        workspace: Some(path),
        checkpoint: number,
        commit: target.commit.clone(),
        from: head.to_string(),
        saved,
        left_out,
        rewound: true,
    })
}

/// A run that is looping or finished is not rewound (exit 3, with what to do instead).
fn refuse_state(rec: &RunRecord) -> Result<()> {
    if !rec.state.is_terminal() && rec.state != RunState::Looping {
        return Ok(());
    }
    Err(Error::refused(format!(
        "run {} is {}; rewind needs a run that is not looping or finished",
        rec.run_id, rec.state
    ))
    .hint(if rec.state == RunState::Looping {
        "a loop is driving it: wait for it to stop (or stop it), then rewind"
    } else {
        "a finished run is not rewound; `git tabellio start --task-from <run>` starts over"
    }))
}

/// The tree of the files checkpoint `number` (1-based) holds: its snapshot's, or its commit's
/// (exit 5 when they are not in this repository).
fn checkpoint_files(store: &Store, rec: &RunRecord, number: usize) -> Result<gix::ObjectId> {
    let target = &rec.checkpoints[number - 1];
    let files = match &target.snapshot {
        Some(s) => store.parse_oid(s).and_then(|s| store.tree_of(s)),
        None => store
            .parse_oid(&target.commit)
            .and_then(|c| store.tree_of(c))
            .and_then(|_| store.parse_oid(&target.tree)),
    };
    files.map_err(|e| {
        Error::not_found(format!(
            "checkpoint {number} of run {} ({}) is not in this repository: {}",
            rec.run_id, target.commit, e.message
        ))
        .hint("its commit came from another clone, or was pruned; `git tabellio sync` brings ledgers and what they keep")
    })
}

/// The worktree's uncommitted changes as `modified: <path>` and `untracked: <path>`. Untracked
/// files with secret names are never saved, so they are never removed either: not listed.
fn dirty_paths(ws: &crate::store::worktree::WorkspaceState) -> Vec<String> {
    let mut dirty: Vec<String> = ws
        .changed
        .iter()
        .map(|p| format!("modified: {p}"))
        .collect();
    dirty.extend(
        ws.untracked
            .iter()
            .filter(|p| !is_secret_path(p.trim_end_matches('/')))
            .map(|p| format!("untracked: {p}")),
    );
    dirty
}

/// Save the uncommitted work (`now_tree`, on `head` whose tree is `head_tree`) as a checkpoint
/// of the run in `ledger` before rewinding to checkpoint `number`: the ledger commit that keeps
/// the snapshot commit (not yet published) and the checkpoint note's line for `head`.
fn save_uncommitted(
    store: &Store,
    ledger: &Ledger,
    (head, head_tree, now_tree): (gix::ObjectId, gix::ObjectId, gix::ObjectId),
    number: usize,
) -> Result<(Ledger, String)> {
    let rec = &ledger.record;
    let id = rec.run_id.as_str();
    if !descends_from_base(store, rec, head)? {
        return Err(Error::refused(format!(
            "the run head {head} does not descend from the run's base {}, so its uncommitted work cannot be checkpointed",
            rec.base.commit
        ))
        .hint("commit or remove the changes, then rewind"));
    }
    let kept = store.write_commit(
        &format!("tabellio: uncommitted work of {id}, saved by rewind --force\n"),
        now_tree,
        [head],
    )?;
    let entry = CheckpointEntry {
        commit: head.to_string(),
        tree: head_tree.to_string(),
        summary: format!("uncommitted work, saved before rewinding to checkpoint {number}"),
        at: time::now(),
        snapshot: Some(kept.to_string()),
    };
    let line = entry.note(id).to_line();
    let mut next = ledger::transition(rec, rec.state);
    next.checkpoints.push(entry);
    let tip = store.write_ledger_commit_keeping(
        Some(ledger),
        &next,
        "checkpoint (rewind --force)",
        Some(kept),
    )?;
    Ok((Ledger { tip, record: next }, line))
}

/// The index in `checkpoints` of the checkpoint `arg` names: its number (1-based, as `log`
/// shows it), its commit, or a unique prefix of at least 4 hex digits. A number that is also
/// the prefix of a checkpoint's commit, and a prefix (or commit) that several checkpoints
/// share, are ambiguous (exit 2); a well-formed name that matches nothing is not found (exit 5).
pub fn find_checkpoint(rec: &RunRecord, arg: &str) -> Result<usize> {
    let id = &rec.run_id;
    let count = rec.checkpoints.len();
    let listed = || {
        if count == 0 {
            format!("run {id} has no checkpoints yet; `git tabellio checkpoint` records one")
        } else {
            format!("`git tabellio log {id}` numbers its checkpoints (1 to {count})")
        }
    };
    let digits = !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit());
    let hex = (4..=64).contains(&arg.len()) && arg.bytes().all(|b| b.is_ascii_hexdigit());
    if !digits && !hex {
        return Err(Error::usage(format!(
            "{arg:?} names no checkpoint: give its number, its commit or a prefix of 4 or more hex digits"
        ))
        .hint(listed()));
    }
    let by_number = digits
        .then(|| arg.parse::<usize>().ok())
        .flatten()
        .filter(|n| (1..=count).contains(n));
    let prefix = arg.to_ascii_lowercase();
    let by_commit: Vec<usize> = if hex {
        (0..count)
            .filter(|i| rec.checkpoints[*i].commit.starts_with(&prefix))
            .collect()
    } else {
        Vec::new()
    };
    let numbers = |v: &[usize]| {
        v.iter()
            .map(|i| (i + 1).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (by_number, by_commit.as_slice()) {
        (Some(n), []) => Ok(n - 1),
        (None, [one]) => Ok(*one),
        (None, []) => Err(Error::not_found(format!(
            "run {id} has no checkpoint {arg}"
        ))
        .hint(listed())),
        (Some(n), many) => Err(Error::usage(format!(
            "{arg} is ambiguous: checkpoint {n}, and the commit of checkpoint {}",
            numbers(many)
        ))
        .hint("name the commit with more digits")),
        (None, many) => Err(Error::usage(format!(
            "{arg} is ambiguous: checkpoints {} are on commits starting with it",
            numbers(many)
        ))
        .hint(format!(
            "name one by its number ({}); a checkpoint saved by `rewind --force` shares its commit with the one before",
            listed()
        ))),
    }
}
