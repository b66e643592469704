//! The run lifecycle: start, checkpoint, finish, status, abandon, cleanup, list, log, evidence.
//!
//! Every command checks all of its preconditions before its first write, then writes through one
//! compare-and-swap transaction (see [`crate::store::tx`]). A refused command leaves refs,
//! worktrees and files exactly as they were.

pub mod checkpoint;
pub mod evidence;
pub mod finish;
pub mod land;
pub mod manage;
pub mod plans;
pub mod reuse;
pub mod start;
pub mod status;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::ids::check_run_id;
use crate::model::RunRecord;
use crate::store::ledger::Ledger;
use crate::store::notes::PreparedNotes;
use crate::store::tx::{self, Cas, TxError};
use crate::store::Store;

/// Where and how a command runs.
pub struct Env {
    pub store: Store,
    /// The directory the command was started in (after `git -C`).
    pub cwd: PathBuf,
}

impl Env {
    pub fn discover(cwd: &Path) -> Result<Env> {
        Ok(Env {
            store: Store::discover(cwd)?,
            cwd: cwd.to_path_buf(),
        })
    }
}

/// Check a run id given on the command line (exit 2 when malformed).
pub fn valid_run_id(id: &str) -> Result<()> {
    check_run_id(id).map_err(|why| {
        Error::usage(format!("invalid run id {id:?}: {why}"))
            .hint("run ids match [A-Za-z0-9][A-Za-z0-9._-]{0,63}, e.g. fix-login-1")
    })
}

/// The run named on the command line, or the one whose worktree we are in.
pub fn resolve_run(env: &Env, run: Option<&str>) -> Result<Ledger> {
    if let Some(id) = run {
        valid_run_id(id)?;
        return env.store.find_ledger(id);
    }
    let branch = current_branch(&env.store);
    let no_run = || {
        Error::usage("no run given, and the current directory is not inside a run's worktree")
            .hint("name the run (`git tabellio list` shows them) or cd into its worktree")
    };
    // Inside `<worktree root>/<run>` the directory names the run, whatever is checked out
    // there (a switched branch or a detached HEAD is exactly what `status` must diagnose).
    if let Some(id) = run_id_from_path(env) {
        if let Some(ledger) = env.store.try_find_ledger(&id)? {
            return Ok(ledger);
        }
    }
    let Some(branch) = branch else {
        return Err(no_run());
    };
    if let Some(id) = branch.strip_prefix("refs/heads/tabellio/") {
        if check_run_id(id).is_ok() {
            if let Some(ledger) = env.store.try_find_ledger(id)? {
                if ledger.record.branch == branch {
                    return Ok(ledger);
                }
            }
        }
    }
    for (id, _) in env.store.list_ledgers()? {
        // One unreadable ledger (a newer schema from a teammate) must not hide the others.
        if let Ok(Some(ledger)) = env.store.try_find_ledger(&id) {
            if ledger.record.branch == branch {
                return Ok(ledger);
            }
        }
    }
    Err(no_run())
}

/// The full name of the branch checked out here, if HEAD is on one.
pub fn current_branch(store: &Store) -> Option<String> {
    store
        .repo
        .head_name()
        .ok()
        .flatten()
        .map(|n| n.as_bstr().to_string())
}

/// The run whose default worktree directory contains the current directory.
fn run_id_from_path(env: &Env) -> Option<String> {
    let root = env.store.worktree_root().ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    let cwd = std::fs::canonicalize(&env.cwd).ok()?;
    let id = cwd.strip_prefix(&root).ok()?.components().next()?;
    let id = id.as_os_str().to_str()?.to_string();
    check_run_id(&id).is_ok().then_some(id)
}

/// The worktree where the run's branch is checked out, if any.
pub fn run_workspace(store: &Store, ledger: &Ledger) -> Result<Option<PathBuf>> {
    // The usual place first: opening one worktree is cheap, opening all of them is not (a
    // repository may hold hundreds of run worktrees).
    let usual = store.worktree_root()?.join(&ledger.record.run_id);
    if usual.join(".git").is_file() {
        if let Ok(repo) = gix::open(&usual) {
            let branch = repo.head_name().ok().flatten();
            if branch.is_some_and(|b| b.as_bstr() == ledger.record.branch.as_str()) {
                return Ok(Some(usual));
            }
        }
    }
    // A registration whose directory was deleted by hand is no workspace.
    let found = store.worktrees_of_branch(&ledger.record.branch)?;
    if let Some(p) = found.into_iter().find(|p| p.exists()) {
        return Ok(Some(p));
    }
    // The branch may be switched away; the worktree still exists at its usual place.
    Ok(usual.exists().then_some(usual))
}

/// Extend `ledger` with `next` (a ledger commit whose message names `command`) and add
/// `notes`, in one transaction; the ledger is compare-and-swap on its current tip.
pub fn advance(
    store: &Store,
    ledger: &Ledger,
    next: RunRecord,
    command: &str,
    notes: &[NotesAdditions],
) -> Result<Ledger> {
    let tip = store.write_ledger_commit(Some(ledger), &next, command)?;
    let message = format!("tabellio: {command} {}", next.run_id);
    let cas = Cas::update(
        crate::store::ledger::ref_name(&next.run_id),
        Some(ledger.tip),
        tip,
        &message,
    );
    publish(store, Some(cas), notes, &message)?;
    Ok(Ledger { tip, record: next })
}

/// How many times a lost race on a shared notes ref is re-read and re-applied.
const NOTES_RETRIES: u32 = 12;

/// Publish a ledger transition together with notes additions in one transaction.
///
/// The ledger is compare-and-swap on `ledger.tip`: if it moved, that is a conflict (exit 4).
/// A notes ref that moved is re-read and the additions re-applied, with backoff, up to
/// `NOTES_RETRIES` times: records are never dropped.
/// Lines to add to the notes of one notes ref: (annotated object, lines).
pub type NotesAdditions = (&'static str, Vec<(gix::ObjectId, Vec<String>)>);

pub fn publish(
    store: &Store,
    ledger_cas: Option<Cas>,
    notes: &[NotesAdditions],
    notes_message: &str,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        // Notes first, the ledger last: gix commits loose refs one after the other, so a
        // process killed in between leaves at most a note the ledger does not mention yet
        // (harmless, and re-done idempotently), never a ledger entry whose note is missing.
        let mut edits: Vec<Cas> = Vec::new();
        for (notes_ref, additions) in notes {
            let prepared: PreparedNotes =
                store.prepare_notes(notes_ref, additions, notes_message)?;
            if prepared.changed {
                edits.push(Cas::update(
                    prepared.notes_ref,
                    prepared.previous,
                    prepared.commit,
                    notes_message,
                ));
            }
        }
        edits.extend(ledger_cas.iter().cloned());
        if edits.is_empty() {
            return Ok(());
        }
        match tx::apply(store, &edits) {
            Ok(()) => return Ok(()),
            Err(TxError::Moved { name, .. } | TxError::Locked { name, .. })
                if name.starts_with("refs/notes/") && attempt < NOTES_RETRIES =>
            {
                attempt += 1;
                backoff(attempt);
            }
            Err(e) => return Err(e.into_error()),
        }
    }
}

fn backoff(attempt: u32) {
    // Jittered exponential backoff: racing writers spread out instead of colliding again.
    let base = 5u64 << attempt.min(7);
    let jitter =
        (std::process::id() as u64 ^ u64::from(attempt).wrapping_mul(2_654_435_761)) % base.max(1);
    std::thread::sleep(Duration::from_millis(base + jitter));
}

/// `Some(x)` when `x` is a non-empty string.
pub(crate) fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
