//! Plan hygiene for runs: where a run's plans stand, mechanical reconciling, and the completion
//! gate of `plans.require_hygiene`. The rules themselves live in [`crate::plans`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};
use crate::plans::{self, Move, ReconcileOutcome};
use crate::store::tx::{self, Cas};
use crate::store::{worktree, Store};

use crate::run::{resolve_run, run_workspace, Env};

/// Which directory's plans: a run's worktree, an explicit directory, or where we are.
pub enum PlanTarget<'a> {
    Run(&'a str),
    Dir(&'a Path),
    Here,
}

/// The worktree whose plans are meant, and the run when there is one.
pub fn locate(env: &Env, target: PlanTarget<'_>) -> Result<(PathBuf, Option<String>)> {
    match target {
        PlanTarget::Dir(d) => Ok((locate_dir(d)?, None)),
        PlanTarget::Run(id) => {
            let ledger = resolve_run(env, Some(id))?;
            let path = run_workspace(&env.store, &ledger)?
                .ok_or_else(|| Error::refused(format!("the worktree of run {id} is missing")))?;
            Ok((path, Some(ledger.record.run_id)))
        }
        PlanTarget::Here => match resolve_run(env, None) {
            Ok(ledger) => {
                let path = run_workspace(&env.store, &ledger)?
                    .ok_or_else(|| Error::refused("the run worktree is missing"))?;
                Ok((path, Some(ledger.record.run_id)))
            }
            Err(_) => {
                let dir = env.store.repo.workdir().ok_or_else(|| {
                    Error::usage("a bare repository has no plans").hint("name a run or --dir")
                })?;
                Ok((dir.to_path_buf(), None))
            }
        },
    }
}

/// An explicit plans directory: it must be one, and needs no repository.
pub fn locate_dir(d: &Path) -> Result<PathBuf> {
    if !d.is_dir() {
        return Err(Error::not_found(format!(
            "{} is not a directory",
            d.display()
        )));
    }
    Ok(d.to_path_buf())
}

pub struct Reconciled {
    pub path: PathBuf,
    pub outcome: ReconcileOutcome,
    /// With `--commit`: moves an earlier reconcile staged without committing, committed now
    /// with the new ones.
    pub staged: Vec<Move>,
    /// The commit made with `--commit`, when anything tracked moved.
    pub commit: Option<String>,
}

/// What `plans reconcile` is asked to do.
pub struct ReconcileOptions<'a> {
    pub target: PlanTarget<'a>,
    /// Commit the moves (in a run worktree, on the run branch) instead of leaving them staged.
    pub commit: bool,
}

pub fn reconcile(env: &Env, opts: ReconcileOptions<'_>) -> Result<Reconciled> {
    let ReconcileOptions { target, commit } = opts;
    let (path, run) = locate(env, target)?;
    let mut staged = Vec::new();
    if commit {
        // The commit must hold the moves and nothing else: start from a clean worktree, but
        // for the moves an earlier plain reconcile staged (they are the same moves).
        staged = plans::staged_moves(&path)?;
        let ws = worktree::inspect(&path)?;
        let own: HashSet<&str> = staged
            .iter()
            .flat_map(|m| [m.from.as_str(), m.to.as_str()])
            .collect();
        let others: Vec<&str> = ws
            .changed
            .iter()
            .map(String::as_str)
            .filter(|p| !own.contains(p))
            .collect();
        if !others.is_empty() {
            return Err(Error::refused(format!(
                "{} has uncommitted changes to tracked files: {}",
                path.display(),
                others
                    .iter()
                    .take(10)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .hint("commit them first, or reconcile without --commit"));
        }
    }
    let outcome = plans::reconcile(&path).map_err(|e| {
        Error::refused(e.to_string()).hint("fix the worktree and run reconcile again")
    })?;
    let mut moves = staged.clone();
    moves.extend(outcome.moved.iter().cloned());
    let commit = if commit && !moves.is_empty() {
        commit_moves(&path, &moves, run.as_deref())?.map(|c| c.to_string())
    } else {
        None
    };
    Ok(Reconciled {
        path,
        outcome,
        staged,
        commit,
    })
}

/// Commit the tracked moves on the worktree's branch: HEAD's tree with each moved entry
/// renamed, compare-and-swap on the branch.
fn commit_moves(path: &Path, moves: &[Move], run: Option<&str>) -> Result<Option<gix::ObjectId>> {
    let store = Store::open(path)?;
    let repo = &store.repo;
    let here = store.head()?;
    let branch = here
        .branch
        .ok_or_else(|| Error::refused("HEAD is detached; --commit needs a branch"))?;
    let head = here
        .id
        .ok_or_else(|| Error::refused(format!("{branch} has no commit yet")))?;
    let tree = store.tree_of(head)?;
    let mut editor = repo
        .edit_tree(tree)
        .context(|| "could not edit the tree".into())?;
    let head_tree = repo
        .find_tree(tree)
        .context(|| "could not read the tree".into())?;
    let mut any = false;
    for m in moves {
        let Some(entry) = head_tree
            .lookup_entry_by_path(&m.from)
            .context(|| format!("could not look up {}", m.from))?
        else {
            continue; // untracked: nothing to commit
        };
        let (mode, id) = (entry.mode(), entry.object_id());
        editor
            .remove(m.from.as_str())
            .context(|| format!("could not remove {}", m.from))?;
        editor
            .upsert(m.to.as_str(), mode.kind(), id)
            .context(|| format!("could not add {}", m.to))?;
        any = true;
    }
    if !any {
        return Ok(None);
    }
    let new_tree = editor
        .write()
        .context(|| "could not write the tree".into())?
        .detach();
    let message = match run {
        Some(r) => format!("tabellio: reconcile plans of run {r}"),
        None => "tabellio: reconcile plans".to_string(),
    };
    let commit = store
        .write_commit(&message, new_tree, [head])
        .context(|| "could not write the commit".into())?;
    tx::apply(&store, &[Cas::update(branch, Some(head), commit, message)])
        .map_err(|e| e.into_error())?;
    Ok(Some(commit))
}
