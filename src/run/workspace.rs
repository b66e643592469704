//! The run's workspace and its neighbours, checked before an operation writes: the run's
//! worktree is there, clean and on the run branch; the head descends from the frozen base; the
//! worktree root is not reached through a link; a start killed inside its transaction is
//! recognised by its lock; and where `cleanup` must be run from.

use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};
use crate::model::{RunRecord, RunState};
use crate::store::ledger::Ledger;
use crate::store::Store;

use super::{run_workspace, Env};

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
    refuse_switched_branch(run, &ws, &path)?;
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

/// The run worktree at `path` (as `ws` found it) must have the run branch checked out (exit 3,
/// with the `git switch` back).
pub fn refuse_switched_branch(
    run: &RunRecord,
    ws: &crate::store::worktree::WorkspaceState,
    path: &Path,
) -> Result<()> {
    if ws.branch.as_deref() == Some(run.branch.as_str()) {
        return Ok(());
    }
    Err(Error::refused(format!(
        "the run worktree has {} checked out instead of the run branch {}",
        ws.branch.as_deref().unwrap_or("a detached HEAD"),
        run.branch
    ))
    .hint(format!(
        "switch back with `git -C {} switch {}`",
        path.display(),
        run.branch.trim_start_matches("refs/heads/")
    )))
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

/// The stale lock on the run's branch when `ledger` is the residue of a start killed inside
/// its ref transaction: one parentless start commit of an active run with no work recorded, no
/// branch, and the branch's `.lock` file still there. Without the lock the same ledger is a
/// run synced from another machine, whose branch did not travel with it: `None`.
pub fn torn_start_lock(store: &Store, ledger: &Ledger) -> Result<Option<PathBuf>> {
    let run = &ledger.record;
    let fresh = run.state == RunState::Active
        && run.checkpoints.is_empty()
        && run.attempts.is_empty()
        && store.ref_target(&run.branch)?.is_none();
    if !fresh {
        return Ok(None);
    }
    let lock = store.repo.common_dir().join(format!("{}.lock", run.branch));
    if !lock.is_file() {
        return Ok(None);
    }
    let commit = store
        .commit(ledger.tip)
        .context(|| format!("could not read commit {}", ledger.tip))?;
    Ok((commit.parent_ids().count() == 0).then_some(lock))
}

/// Refuse a default worktree root reached through a symbolic link (see
/// [`Store::worktree_root_link`]).
pub fn refuse_root_link(store: &Store) -> Result<()> {
    match store.worktree_root_link()? {
        None => Ok(()),
        Some(link) => Err(Error::refused(format!(
            "the worktree root {} is reached through the symbolic link {}",
            store.worktree_root()?.display(),
            link.display()
        ))
        .hint(
            "a committed or stray link must not decide where runs are written or deleted: \
             remove it, or choose the place with `git config tabellio.worktreeRoot <dir>`",
        )),
    }
}

/// Where `cleanup` of a run must be run from when `cwd` lies inside the run's worktree (which
/// cleanup removes, so it refuses to run there): the main worktree (the git directory of a bare
/// repository), as one shell word for `git -C`. `None` when `cwd` is elsewhere, so the plain
/// command works.
pub fn cleanup_from(store: &Store, cwd: &Path, workspace: Option<&Path>) -> Option<String> {
    let workspace = workspace?;
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if !(cwd.starts_with(workspace) || canonical(cwd).starts_with(canonical(workspace))) {
        return None;
    }
    Some(main_dir(store))
}

/// The main worktree (a bare repository: its git directory) as one shell word.
fn main_dir(store: &Store) -> String {
    let main = match store.main_workdir() {
        Ok(Some(main)) => main,
        _ => store.repo.common_dir().to_path_buf(),
    };
    crate::error::shell_path(&main)
}

/// The command that cleans up run `id`, run from `from` (see [`cleanup_from`]) when given.
pub fn cleanup_command(from: Option<&str>, id: &str, force: bool) -> String {
    let force = if force { " --force" } else { "" };
    match from {
        Some(dir) => format!("git -C {dir} tabellio cleanup {id}{force}"),
        None => format!("git tabellio cleanup {id}{force}"),
    }
}

/// The hint of a cleanup refused because it runs inside the worktree it would remove.
pub(crate) fn run_it_elsewhere(store: &Store, id: &str, force: bool) -> String {
    format!(
        "run it from the main worktree: `{}`",
        cleanup_command(Some(&main_dir(store)), id, force)
    )
}

/// How a run worktree that `gc` removes is named while it goes: the directory is first renamed
/// to `.tabellio-gc-<run-id>` beside it (no run id starts with `.`), then its registration and
/// the directory are removed. A `gc` killed half-way leaves either the worktree as it was
/// (checked again next time) or a directory of this name, which the next `gc` removes
/// ([`sweep_retired_worktrees`]): it was clean when it was renamed, so nothing of anyone's is
/// in it that is not in git.
pub const RETIRED_PREFIX: &str = ".tabellio-gc-";

/// Remove the clean run worktree `path` of run `run_id` (the caller checked it is clean, on the
/// run branch, and not where the command runs): rename, forget, delete.
pub fn retire_worktree(store: &Store, path: &Path, run_id: &str) -> Result<()> {
    let retired = path.with_file_name(format!("{RETIRED_PREFIX}{run_id}"));
    if std::fs::symlink_metadata(&retired).is_ok() {
        std::fs::remove_dir_all(&retired)
            .context(|| format!("could not remove {}", retired.display()))?;
    }
    match std::fs::rename(path, &retired) {
        Ok(()) => {}
        // Gone since it was checked (another gc removed it): nothing left to remove here.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(e).context(|| {
                format!(
                    "could not move the worktree {} to {}",
                    path.display(),
                    retired.display()
                )
            })
        }
    }
    finish_retiring(store, path, &retired)
}

/// The worktree of a run that was renamed to `retired`: its registration (still naming
/// `path`) and the directory go.
fn finish_retiring(store: &Store, path: &Path, retired: &Path) -> Result<()> {
    store.prune_missing_worktree(path)?;
    std::fs::remove_dir_all(retired).context(|| format!("could not remove {}", retired.display()))
}

/// Finish removing the worktrees a killed `gc` renamed (see [`RETIRED_PREFIX`]); the paths the
/// runs' worktrees had.
pub fn sweep_retired_worktrees(store: &Store) -> Result<Vec<PathBuf>> {
    let root = store.worktree_root()?;
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(run_id) = name.to_str().and_then(|n| n.strip_prefix(RETIRED_PREFIX)) else {
            continue;
        };
        if crate::model::ids::check_run_id(run_id).is_err() {
            continue;
        }
        // Only a directory, never through a link.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = root.join(run_id);
        finish_retiring(store, &path, &entry.path())?;
        out.push(path);
    }
    Ok(out)
}
