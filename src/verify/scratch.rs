//! Temporary detached worktrees, for running checks at exactly one commit without touching the
//! user's checkout or index.
//!
//! They live under `<common-dir>/tabellio/tmp/validate-<pid>-<n>`: inside the git dir, never in
//! a checkout, so no `git status` anywhere shows them. A [`ScratchWorktree`] removes itself
//! (checkout and registration) when dropped, on success and on every error path. A process
//! killed by SIGKILL cannot clean up: the next `validate` in the same repository removes
//! scratch worktrees whose process is gone ([`sweep_stale`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::error::{Context, Error, Result};
use crate::store::Store;
use crate::sys::{flock, process};

const PREFIX: &str = "validate-";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where scratch worktrees of this repository live.
pub fn scratch_root(store: &Store) -> PathBuf {
    store.repo.common_dir().join("tabellio").join("tmp")
}

/// A linked worktree with a detached HEAD at one commit, removed on drop.
pub struct ScratchWorktree<'s> {
    store: &'s Store,
    path: PathBuf,
    removed: bool,
}

impl<'s> ScratchWorktree<'s> {
    /// Check out `commit` (detached) in a new scratch worktree. `interrupt` stops the checkout.
    pub fn create(
        store: &'s Store,
        commit: gix::ObjectId,
        interrupt: &AtomicBool,
    ) -> Result<ScratchWorktree<'s>> {
        let root = scratch_root(store);
        std::fs::create_dir_all(&root)
            .context(|| format!("could not create {}", root.display()))?;
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path = root.join(format!("{PREFIX}{}-{n}", std::process::id()));
        let mut scratch = ScratchWorktree {
            store,
            path,
            removed: false,
        };
        let added = {
            let _lock = ScratchLock::acquire(&root)?;
            store.repo.add_worktree(
                &scratch.path,
                gix::worktree::add::Head::Detached(commit),
                gix::progress::Discard,
                interrupt,
            )
        };
        if let Err(e) = added {
            // gix removes what it created on failure; make sure nothing is left either way.
            let _ = scratch.remove_now();
            scratch.removed = true;
            return Err(Error::internal(format!(
                "could not check out {commit} in a temporary worktree at {}: {e:#}",
                scratch.path.display()
            )));
        }
        Ok(scratch)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove the worktree now, reporting a failure (drop only tries).
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        self.remove_now()
    }

    fn remove_now(&self) -> Result<()> {
        remove_scratch(self.store, &self.path)
    }
}

impl Drop for ScratchWorktree<'_> {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.remove_now();
        }
    }
}

/// Serializes registering and unregistering scratch worktrees between processes.
///
/// Adding a worktree reads every other registration's `gitdir` file; a concurrent `validate`
/// caught halfway through writing or deleting its own would make that read fail. An `flock` is
/// released by the kernel when its holder dies, so it can never be left stale. Checks do not run
/// under it.
struct ScratchLock(std::fs::File);

impl ScratchLock {
    fn acquire(root: &Path) -> Result<ScratchLock> {
        let path = root.join(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .context(|| format!("could not open {}", path.display()))?;
        match flock::lock_exclusive(&file, flock::Wait::Yes) {
            Ok(_) => Ok(ScratchLock(file)),
            Err(err) => Err(Error::internal(format!(
                "could not lock {}: {err}",
                path.display()
            ))),
        }
    }
}

impl Drop for ScratchLock {
    fn drop(&mut self) {
        // Closing the file would release the lock too; unlocking says so at the right moment.
        flock::unlock(&self.0);
    }
}

/// Remove the checkout at `path` and its registration, whatever state either is in.
fn remove_scratch(store: &Store, path: &Path) -> Result<()> {
    let _lock = match path.parent() {
        Some(root) => Some(ScratchLock::acquire(root)?),
        None => None,
    };
    // The private git dir, from the checkout's `.git` file, before anything is deleted.
    let admin = std::fs::read_to_string(path.join(".git"))
        .ok()
        .and_then(|s| s.strip_prefix("gitdir:").map(|p| PathBuf::from(p.trim())));
    let via_gix = store
        .repo
        .prepare_remove_worktree(path)
        .map_err(|e| e.to_string())
        .and_then(|target| {
            target
                .remove(
                    gix::worktree::remove::Force::OverrideLock,
                    gix::progress::Discard,
                )
                .map_err(|e| e.to_string())
        });
    if via_gix.is_err() {
        // Half-created or half-removed: delete what exists, by hand.
        if path.exists() {
            std::fs::remove_dir_all(path).context(|| {
                format!("could not remove the temporary worktree {}", path.display())
            })?;
        }
        if let Some(admin) =
            admin.filter(|a| a.starts_with(store.repo.common_dir().join("worktrees")))
        {
            if admin.exists() {
                std::fs::remove_dir_all(&admin)
                    .context(|| format!("could not remove {}", admin.display()))?;
            }
        }
    }
    if path.exists() {
        return Err(Error::internal(format!(
            "the temporary worktree {} could not be removed",
            path.display()
        ))
        .hint("remove it with `git worktree remove --force <path>`"));
    }
    Ok(())
}

/// Remove scratch worktrees left by `validate` processes that no longer exist (killed by
/// SIGKILL, or a machine crash). Best effort: failures are ignored.
pub fn sweep_stale(store: &Store) {
    let Ok(dir) = std::fs::read_dir(scratch_root(store)) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == std::process::id() {
            continue;
        }
        if process::is_gone(pid) {
            let _ = remove_scratch(store, &entry.path());
        }
    }
}
