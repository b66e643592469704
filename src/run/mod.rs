//! Runs: where a command runs ([`Env`]), which run it names ([`resolve_run`]), where the run's
//! worktree is ([`run_workspace`]), and moving its ledger forward ([`advance`]).
//!
//! A ledger moves only by compare-and-swap on its tip, together with the notes that belong to
//! the transition, in one transaction ([`crate::store::publish`]).

pub mod actor;
pub mod completion;
pub mod landed;
pub mod promotion;
pub mod reopen;
pub mod unreadable;
pub mod views;
pub mod vsa;
pub mod workspace;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::ids::check_run_id;
use crate::model::RunRecord;
use crate::store::ledger::archive::Archived;
use crate::store::ledger::Ledger;
use crate::store::publish::{publish, NotesAdditions};
use crate::store::tx::Cas;
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

/// The full name of the branch checked out here, if HEAD is on one.
pub fn current_branch(store: &Store) -> Option<String> {
    store.head().ok().and_then(|h| h.branch)
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
    // A run started with `--branch` elsewhere: its worktree was added under the run's id, so
    // the linked worktree's administrative directory (`<git dir>/worktrees/<name>`) names it.
    // One ledger read, never a scan of every ledger (a repository may hold thousands of runs).
    if let Some(id) = linked_worktree_name(&env.store) {
        if let Some(ledger) = env.store.try_find_ledger(&id)? {
            if ledger.record.branch == branch {
                return Ok(ledger);
            }
        }
    }
    Err(no_run())
}

/// A run as the commands that only read it find it: its live ledger, else the ledger `gc`
/// archived.
#[derive(Debug, Clone)]
pub struct ReadableRun {
    pub ledger: Ledger,
    /// Where the run is archived; `None` for a live run.
    pub archived: Option<Archived>,
}

/// The run `id` for `log`, `export`, `status <run>` and `start --task-from`: the live ledger
/// first (a run synced back to life is that one), then the archive; neither is exit 5.
pub fn find_readable(store: &Store, id: &str) -> Result<ReadableRun> {
    valid_run_id(id)?;
    if let Some(ledger) = store.try_find_ledger(id)? {
        return Ok(ReadableRun {
            ledger,
            archived: None,
        });
    }
    match store.try_find_archived_ledger(id)? {
        Some((ledger, archived)) => Ok(ReadableRun {
            ledger,
            archived: Some(archived),
        }),
        None => store.find_ledger(id).map(|ledger| ReadableRun {
            ledger,
            archived: None,
        }),
    }
}

/// The name of the linked worktree the repository was opened in (`None` in the main one).
fn linked_worktree_name(store: &Store) -> Option<String> {
    if store.repo.worktree().is_none_or(|w| w.is_main()) {
        return None;
    }
    let id = store.repo.git_dir().file_name()?.to_str()?.to_string();
    check_run_id(&id).is_ok().then_some(id)
}

/// The run whose default worktree directory contains the current directory.
pub(crate) fn run_id_from_path(env: &Env) -> Option<String> {
    let root = env.store.worktree_root().ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    let cwd = std::fs::canonicalize(&env.cwd).ok()?;
    let id = cwd.strip_prefix(&root).ok()?.components().next()?;
    let id = id.as_os_str().to_str()?.to_string();
    check_run_id(&id).is_ok().then_some(id)
}

/// The worktree where the run's branch is checked out, if any.
pub fn run_workspace(store: &Store, ledger: &Ledger) -> Result<Option<PathBuf>> {
    // The usual place first: its HEAD is one file read (no repository is opened), where a
    // search reads every worktree's (a repository may hold hundreds of run worktrees).
    let usual = store.worktree_root()?.join(&ledger.record.run_id);
    if store.linked_worktree_branch(&usual).as_deref() == Some(ledger.record.branch.as_str()) {
        return Ok(Some(usual));
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

/// `Some(x)` when `x` is a non-empty string.
pub fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
