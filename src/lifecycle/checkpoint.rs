//! `checkpoint`: record progress on a commit of the run branch, as a note and in the ledger,
//! in one transaction.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::run::CheckpointEntry;
use crate::model::{time, CheckpointRecord, RunRecord, RunState};
use crate::store::ledger::{self, Ledger};
use crate::store::notes::CHECKPOINTS;
use crate::store::Store;

use crate::run::{resolve_run, run_workspace, Env};

#[derive(Debug, Serialize)]
pub struct CheckpointOutcome {
    pub run: RunRecord,
    pub workspace: Option<std::path::PathBuf>,
    pub commit: String,
    /// False when this commit was already checkpointed (nothing was written).
    pub recorded: bool,
}

/// The live workspace of a run, checked: it exists, has the run branch checked out, and is
/// clean including untracked files. Returns its path and head.
pub fn clean_workspace(env: &Env, ledger: &Ledger) -> Result<(std::path::PathBuf, gix::ObjectId)> {
    let run = &ledger.record;
    let path = run_workspace(&env.store, ledger)?.ok_or_else(|| {
        Error::refused(format!("the worktree of run {} is missing", run.run_id))
            .hint("it may have been removed by hand; abandon the run or recreate the worktree with `git worktree add`")
    })?;
    // Before anything in it is judged: a worktree of another repository is not the run's, even
    // when its branch has the run branch's name.
    let ws = env.store.inspect_own(&path)?;
    if ws.branch.as_deref() != Some(run.branch.as_str()) {
        return Err(Error::refused(format!(
            "the run worktree has {} checked out instead of the run branch {}",
            ws.branch.as_deref().unwrap_or("a detached HEAD"),
            run.branch
        ))
        .hint(format!(
            "switch back with `git -C {} switch {}`",
            path.display(),
            run.branch.trim_start_matches("refs/heads/")
        )));
    }
    if !ws.changed.is_empty() || !ws.untracked.is_empty() {
        let mut paths: Vec<String> = ws
            .changed
            .iter()
            .map(|p| format!("modified: {p}"))
            .collect();
        paths.extend(ws.untracked.iter().map(|p| format!("untracked: {p}")));
        return Err(Error::refused(format!(
            "the run worktree has uncommitted changes ({})",
            paths.into_iter().take(10).collect::<Vec<_>>().join(", ")
        ))
        .hint("commit them (or remove them) in the run worktree first"));
    }
    let head = ws
        .head
        .ok_or_else(|| Error::refused("the run worktree has no HEAD commit"))?;
    let tip = env.store.ref_target(&run.branch)?;
    if tip != Some(head) {
        return Err(Error::refused(format!(
            "the run worktree {} is at {head}, but this repository's {} is at {}",
            path.display(),
            run.branch,
            tip.map_or("nothing".into(), |t| t.to_string())
        ))
        .hint("the worktree is not this repository's checkout of the run branch"));
    }
    Ok((path, head))
}

/// [`clean_workspace`], and a head with work on it: beyond the base, and descending from it.
pub fn workspace_with_work(
    env: &Env,
    ledger: &Ledger,
) -> Result<(std::path::PathBuf, gix::ObjectId)> {
    let (path, head) = clean_workspace(env, ledger)?;
    let base = env.store.parse_oid(&ledger.record.base.commit)?;
    if head == base {
        return Err(
            Error::refused("the run branch has no commits beyond its base yet")
                .hint("commit your work in the run worktree first"),
        );
    }
    if !descends_from_base(&env.store, &ledger.record, head)? {
        return Err(Error::refused(format!(
            "the run head {head} does not descend from the run's base {base}"
        ))
        .hint("the run branch was rewritten; rebase it onto the base commit or start a new run"));
    }
    Ok((path, head))
}

/// Does `head` descend from the run's base? Every checkpoint was checked to descend from the
/// base when it was recorded, and the base never changes, so a head that descends from the
/// newest checkpoint does too: the walk then covers the commits since that checkpoint instead
/// of the run's whole history. Otherwise (the branch was rewritten, the checkpoint's commit is
/// gone) the base itself is asked.
pub fn descends_from_base(store: &Store, run: &RunRecord, head: gix::ObjectId) -> Result<bool> {
    let base = store.parse_oid(&run.base.commit)?;
    let newest = run
        .checkpoints
        .last()
        .and_then(|c| gix::ObjectId::from_hex(c.commit.as_bytes()).ok())
        .filter(|c| *c != base);
    if let Some(checkpoint) = newest {
        // A checkpoint commit that cannot be read (pruned after a rewrite) answers no.
        if store.is_ancestor(checkpoint, head).unwrap_or(false) {
            return Ok(true);
        }
    }
    store.is_ancestor(base, head)
}

pub fn checkpoint(
    env: &Env,
    run: Option<&str>,
    summary: Option<&str>,
) -> Result<CheckpointOutcome> {
    let store = &env.store;
    // The preconditions only read: each ref (the run worktree's `HEAD` above all) once.
    let (ledger, path, head) = store.snapshot_refs(|| -> Result<_> {
        let ledger = resolve_run(env, run)?;
        let rec = &ledger.record;
        if rec.state.is_terminal() || rec.state == RunState::Looping {
            return Err(Error::refused(format!(
                "run {} is {}; checkpoint needs an active run",
                rec.run_id, rec.state
            ))
            .hint(if rec.state == RunState::Looping {
                "the loop records its own checkpoints; `git tabellio loop --resume` continues it"
            } else {
                "a finished run takes no more checkpoints"
            }));
        }
        let (path, head) = workspace_with_work(env, &ledger)?;
        Ok((ledger, path, head))
    })?;
    let rec = &ledger.record;
    let head_hex = head.to_string();
    if let Some(entry) = rec.checkpoints.iter().find(|c| c.commit == head_hex) {
        // Recorded before. Make sure its note exists too (a ledger written by an older,
        // interrupted checkpoint may lack it): the note is rebuilt from the ledger's entry.
        let noted = store.note_lines(CHECKPOINTS, head)?.iter().any(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["run_id"] == rec.run_id.as_str())
        });
        if !noted {
            let note = CheckpointRecord::new(
                &rec.run_id,
                &entry.commit,
                &entry.tree,
                &entry.summary,
                entry.at.clone(),
            );
            let message = format!("tabellio: checkpoint {} (note restored)", rec.run_id);
            crate::store::publish::publish(
                store,
                None,
                &[(CHECKPOINTS, vec![(head, vec![note.to_line()])])],
                &message,
            )?;
        }
        return Ok(CheckpointOutcome {
            run: rec.clone(),
            workspace: Some(path),
            commit: head_hex,
            recorded: false,
        });
    }
    let (next, _) = record_checkpoint(store, &ledger, head, summary, "checkpoint", |_| {})?;
    Ok(CheckpointOutcome {
        run: next,
        workspace: Some(path),
        commit: head_hex,
        recorded: true,
    })
}

/// Record `head` as a checkpoint of the run: the note on `head` and a ledger commit on top of
/// `ledger` (its state kept), in one transaction. `update` may change the new record further
/// before it is written (the loop records its phase transition in the same commit), `command`
/// names the transition in the ledger commit's message. `summary` defaults to the subject of
/// `head`. Returns the new ledger.
pub fn record_checkpoint(
    store: &Store,
    ledger: &Ledger,
    head: gix::ObjectId,
    summary: Option<&str>,
    command: &str,
    update: impl FnOnce(&mut RunRecord),
) -> Result<(RunRecord, Ledger)> {
    let rec = &ledger.record;
    let head_hex = head.to_string();
    let tree = store.tree_of(head)?;
    let summary = super::non_empty(summary).unwrap_or_else(|| commit_subject(store, head));
    // A summary written in the worktree may name it; the record travels, the path must not.
    let summary =
        crate::store::paths::LocalPaths::scrub(store, || run_workspace(store, ledger), summary)?;
    let at = time::now();
    let note = CheckpointRecord::new(
        &rec.run_id,
        &head_hex,
        &tree.to_string(),
        &summary,
        at.clone(),
    );
    let mut next = ledger::transition(rec, rec.state);
    update(&mut next);
    next.checkpoints.push(CheckpointEntry {
        commit: head_hex,
        tree: tree.to_string(),
        summary,
        at,
    });
    let advanced = crate::run::advance(
        store,
        ledger,
        next,
        command,
        &[(CHECKPOINTS, vec![(head, vec![note.to_line()])])],
    )?;
    Ok((advanced.record.clone(), advanced))
}

/// The first line of `commit`'s message (empty when it cannot be read): a checkpoint's default
/// summary, and how the loop names an iteration's commit.
pub fn commit_subject(store: &Store, commit: gix::ObjectId) -> String {
    store
        .commit(commit)
        .ok()
        .and_then(|c| c.message_raw().ok().map(|m| m.to_string()))
        .and_then(|m| m.lines().next().map(str::to_string))
        .unwrap_or_default()
}
