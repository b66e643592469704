//! `checkpoint`: record progress on a commit of the run branch, as a note and in the ledger,
//! in one transaction.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::run::CheckpointEntry;
use crate::model::{time, RunRecord, RunState};
use crate::store::ledger::{self, Ledger};
use crate::store::notes::CHECKPOINTS;
use crate::store::Store;

use crate::run::workspace::workspace_with_work;
use crate::run::{resolve_run, run_workspace, Env};

#[derive(Debug, Serialize)]
pub struct CheckpointOutcome {
    pub run: RunRecord,
    pub workspace: Option<std::path::PathBuf>,
    pub commit: String,
    /// False when this commit was already checkpointed (nothing was written).
    pub recorded: bool,
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
            let note = entry.note(&rec.run_id);
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
    let summary = crate::run::non_empty(summary).unwrap_or_else(|| store.commit_subject(head));
    // A summary written in the worktree may name it; the record travels, the path must not.
    let summary =
        crate::store::paths::LocalPaths::scrub(store, || run_workspace(store, ledger), summary)?;
    let at = time::now();
    let entry = CheckpointEntry {
        commit: head_hex,
        tree: tree.to_string(),
        summary,
        at,
        snapshot: None,
    };
    let note = entry.note(&rec.run_id);
    let mut next = ledger::transition(rec, rec.state);
    update(&mut next);
    next.checkpoints.push(entry);
    let advanced = crate::run::advance(
        store,
        ledger,
        next,
        command,
        &[(CHECKPOINTS, vec![(head, vec![note.to_line()])])],
    )?;
    Ok((advanced.record.clone(), advanced))
}
