//! Linked worktrees of runs, and what a worktree looks like right now (branch, head, changes).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::ByteSlice;

use crate::error::{Context, Error, Result};

use super::Store;

/// The live state of one worktree.
#[derive(Debug, Clone)]
pub struct WorkspaceState {
    pub path: PathBuf,
    /// The branch checked out (`refs/heads/…`), `None` when HEAD is detached.
    pub branch: Option<String>,
    pub head: Option<gix::ObjectId>,
    /// Paths with staged or unstaged changes to tracked files.
    pub changed: Vec<String>,
    /// Untracked, not ignored paths.
    pub untracked: Vec<String>,
}

impl WorkspaceState {
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.untracked.is_empty()
    }
}

impl Store {
    /// Every worktree (main and linked) with the branch it has checked out.
    pub fn worktrees_with_branches(&self) -> Result<Vec<(PathBuf, Option<String>)>> {
        let mut out = Vec::new();
        let main = self.main_workdir()?;
        if let Some(main) = main {
            let repo = gix::open(&main).context(|| format!("could not open {}", main.display()))?;
            out.push((main, head_branch(&repo)));
        }
        for proxy in self
            .repo
            .worktrees()
            .context(|| "could not list worktrees".into())?
        {
            let Ok(base) = proxy.base() else { continue };
            let branch = proxy
                .into_repo_with_possibly_inaccessible_worktree()
                .ok()
                .and_then(|r| head_branch(&r));
            out.push((base, branch));
        }
        Ok(out)
    }

    /// The worktrees in which `branch` is checked out.
    pub fn worktrees_of_branch(&self, branch: &str) -> Result<Vec<PathBuf>> {
        Ok(self
            .worktrees_with_branches()?
            .into_iter()
            .filter(|(_, b)| b.as_deref() == Some(branch))
            .map(|(p, _)| p)
            .collect())
    }

    /// A rebase or bisect in some worktree that holds `branch` while its HEAD is detached:
    /// `("rebased" | "bisected", worktree)`. Moving the branch under it breaks the operation.
    pub fn branch_in_operation(&self, branch: &str) -> Result<Option<(&'static str, PathBuf)>> {
        let mut admin = Vec::new();
        if let Some(main) = self.main_workdir()? {
            admin.push((self.repo.common_dir().to_path_buf(), main));
        }
        for proxy in self
            .repo
            .worktrees()
            .context(|| "could not list worktrees".into())?
        {
            let base = proxy
                .base()
                .unwrap_or_else(|_| proxy.git_dir().to_path_buf());
            admin.push((proxy.git_dir().to_path_buf(), base));
        }
        let short = branch.trim_start_matches("refs/heads/");
        for (git_dir, worktree) in admin {
            for (file, what) in [
                ("rebase-merge/head-name", "rebased"),
                ("rebase-apply/head-name", "rebased"),
                ("BISECT_START", "bisected"),
            ] {
                if let Ok(text) = std::fs::read_to_string(git_dir.join(file)) {
                    let name = text.trim();
                    if name == branch || name == short {
                        return Ok(Some((what, worktree)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Add a linked worktree at `path` with `branch` checked out.
    pub fn add_worktree(&self, path: &Path, branch: &str) -> Result<()> {
        let name = gix::refs::FullName::try_from(branch)
            .map_err(|e| Error::usage(format!("{branch:?} is not a valid branch name: {e:#}")))?;
        let interrupt = AtomicBool::new(false);
        self.repo
            .add_worktree(
                path,
                gix::worktree::add::Head::Attached(name),
                gix::progress::Discard,
                &interrupt,
            )
            .context(|| format!("could not add the worktree at {}", path.display()))?;
        Ok(())
    }

    /// Forget linked worktrees registered at `path` whose directory is gone (what
    /// `git worktree prune` does for them): their administrative directory is removed.
    pub fn prune_missing_worktree(&self, path: &Path) -> Result<bool> {
        if path.exists() {
            return Ok(false);
        }
        let mut pruned = false;
        for proxy in self
            .repo
            .worktrees()
            .context(|| "could not list worktrees".into())?
        {
            if proxy.base().ok().as_deref() == Some(path) {
                let admin = proxy.git_dir().to_path_buf();
                std::fs::remove_dir_all(&admin)
                    .context(|| format!("could not remove {}", admin.display()))?;
                pruned = true;
            }
        }
        Ok(pruned)
    }

    /// Remove the linked worktree at `path`; with `force`, even with changes in it.
    pub fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let target = self
            .repo
            .prepare_remove_worktree(path)
            .context(|| format!("could not find the worktree at {}", path.display()))?;
        let force = if force {
            gix::worktree::remove::Force::OverrideLock
        } else {
            gix::worktree::remove::Force::Never
        };
        target
            .remove(force, gix::progress::Discard)
            .context(|| format!("could not remove the worktree at {}", path.display()))
    }
}

fn head_branch(repo: &gix::Repository) -> Option<String> {
    repo.head_name()
        .ok()
        .flatten()
        .map(|n| n.as_bstr().to_str_lossy().into_owned())
}

/// Inspect the worktree at `path`: branch, head, tracked changes and untracked files.
pub fn inspect(path: &Path) -> Result<WorkspaceState> {
    if !path.exists() {
        return Err(
            Error::refused(format!("the worktree {} no longer exists", path.display()))
                .hint("it was deleted by hand; `git worktree prune` forgets it"),
        );
    }
    let repo =
        gix::open(path).context(|| format!("could not open the worktree at {}", path.display()))?;
    let branch = head_branch(&repo);
    let head = repo.head_id().ok().map(|id| id.detach());
    let mut changed = Vec::new();
    let mut untracked = Vec::new();
    let iter = repo
        .status(gix::progress::Discard)
        .context(|| format!("could not compute the status of {}", path.display()))?
        .untracked_files(gix::status::UntrackedFiles::Files)
        .index_worktree_rewrites(None)
        .into_iter(None)
        .context(|| format!("could not compute the status of {}", path.display()))?;
    for item in iter {
        let item =
            item.context(|| format!("could not compute the status of {}", path.display()))?;
        let location = item.location().to_str_lossy().into_owned();
        match &item {
            gix::status::Item::IndexWorktree(
                gix::status::index_worktree::Item::DirectoryContents { entry, .. },
            ) => {
                if matches!(entry.status, gix::dir::entry::Status::Untracked) {
                    untracked.push(location);
                }
            }
            _ => changed.push(location),
        }
    }
    changed.sort();
    changed.dedup();
    untracked.sort();
    Ok(WorkspaceState {
        path: path.to_path_buf(),
        branch,
        head,
        changed,
        untracked,
    })
}
