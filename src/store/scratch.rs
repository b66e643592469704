//! Temporary detached worktrees, for running checks at exactly one commit without touching the
//! user's checkout or index.
//!
//! They live under `<common-dir>/tabellio/tmp/validate-<pid>-<n>`: inside the git dir, never in
//! a checkout, so no `git status` anywhere shows them. A [`ScratchWorktree`] removes itself
//! (checkout and registration) when dropped, on success and on every error path — also when
//! the check deleted its `.git` file or the whole checkout: the registration is then found by
//! the `gitdir` that points at it. A process killed by SIGKILL cannot clean up: the next
//! `validate` in the same repository removes scratch worktrees, and registrations of them,
//! whose process is gone ([`sweep_stale`]).

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
            store.add_worktree_at(
                &scratch.path,
                crate::store::worktree::NewHead::Detached(commit),
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

    /// Hand the worktree over to be removed later by [`remove_left`] (dropping it no longer
    /// removes it): its path.
    pub fn leave(mut self) -> PathBuf {
        self.removed = true;
        std::mem::take(&mut self.path)
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

/// Remove the checkout at `path` and its registration, whatever state either is in — also
/// when a check deleted the checkout's `.git` file or the whole checkout, which leaves git
/// nothing to find the registration by.
/// Remove the scratch worktree at `path` that [`ScratchWorktree::leave`] handed over. One a
/// killed process leaves is removed by the next sweep, as any orphaned scratch worktree.
pub fn remove_left(store: &Store, path: &Path) -> Result<()> {
    remove_scratch(store, path)
}

fn remove_scratch(store: &Store, path: &Path) -> Result<()> {
    let _lock = match path.parent() {
        Some(root) => Some(ScratchLock::acquire(root)?),
        None => None,
    };
    // The registrations, found before anything is deleted.
    let registrations = registrations_of(store, path);
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
    if via_gix.is_err() && path.exists() {
        // Half-created or half-removed: delete what exists, by hand.
        std::fs::remove_dir_all(path)
            .context(|| format!("could not remove the temporary worktree {}", path.display()))?;
    }
    for admin in registrations.iter().filter(|admin| admin.exists()) {
        std::fs::remove_dir_all(admin)
            .context(|| format!("could not remove {}", admin.display()))?;
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

/// The admin directories under `<common-dir>/worktrees/` that register a checkout at `path`:
/// the one its `.git` file names, and every one whose `gitdir` file points into `path` (the
/// `.git` file may be gone).
fn registrations_of(store: &Store, path: &Path) -> Vec<PathBuf> {
    let admin_root = store.repo.common_dir().join("worktrees");
    let mut found: Vec<PathBuf> = std::fs::read_to_string(path.join(".git"))
        .ok()
        .and_then(|s| s.strip_prefix("gitdir:").map(|p| PathBuf::from(p.trim())))
        .filter(|admin| admin.starts_with(&admin_root))
        .into_iter()
        .collect();
    for (admin, checkout) in registrations(store) {
        if same_place(&checkout, path) && !found.contains(&admin) {
            found.push(admin);
        }
    }
    found
}

/// Every registered linked worktree: its admin directory and the checkout its `gitdir` file
/// names (which may no longer exist).
fn registrations(store: &Store) -> Vec<(PathBuf, PathBuf)> {
    let Ok(dir) = std::fs::read_dir(store.repo.common_dir().join("worktrees")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let admin = entry.path();
            let gitdir = std::fs::read_to_string(admin.join("gitdir")).ok()?;
            let checkout = Path::new(gitdir.trim()).parent()?.to_path_buf();
            Some((admin, checkout))
        })
        .collect()
}

/// Whether two spellings name the same checkout, which may no longer exist: equal, or the
/// same name in the same directory.
fn same_place(a: &Path, b: &Path) -> bool {
    a == b
        || a.file_name() == b.file_name()
            && matches!((a.parent(), b.parent()), (Some(x), Some(y)) if same_dir(x, y))
}

/// Whether two spellings name the same existing directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The pid in a scratch worktree's name (`validate-<pid>-<n>`).
fn owner_pid(name: &std::ffi::OsStr) -> Option<libc::pid_t> {
    name.to_str()?
        .strip_prefix(PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
        .filter(|&pid: &libc::pid_t| pid > 0)
}

/// Whether the scratch worktree named `name` belongs to a `validate` process that is gone.
fn is_orphan(name: &std::ffi::OsStr) -> bool {
    owner_pid(name).is_some_and(|pid| pid as u32 != std::process::id() && process::is_gone(pid))
}

/// Remove scratch worktrees left by `validate` processes that no longer exist (killed by
/// SIGKILL, or a machine crash), and registrations of such worktrees whose checkout is gone.
/// Best effort: failures are ignored.
pub fn sweep_stale(store: &Store) {
    let root = scratch_root(store);
    if let Ok(dir) = std::fs::read_dir(&root) {
        for entry in dir.flatten() {
            if is_orphan(&entry.file_name()) {
                let _ = remove_scratch(store, &entry.path());
            }
        }
    }
    for (_, checkout) in registrations(store) {
        let (Some(name), Some(parent)) = (checkout.file_name(), checkout.parent()) else {
            continue;
        };
        if is_orphan(name) && !checkout.exists() && same_dir(parent, &root) {
            let _ = remove_scratch(store, &root.join(name));
        }
    }
    // A registration a killed process left half-written (its `gitdir` file empty or missing)
    // names no checkout, but bears the scratch worktree's name; git (and gix) refuse to add any
    // worktree while it is there.
    let Ok(_lock) = ScratchLock::acquire(&root) else {
        return;
    };
    if let Ok(dir) = std::fs::read_dir(store.repo.common_dir().join("worktrees")) {
        for entry in dir.flatten() {
            let name = entry.file_name();
            let unreadable = std::fs::read_to_string(entry.path().join("gitdir"))
                .map_or(true, |g| g.trim().is_empty());
            if is_orphan(&name) && unreadable && !root.join(&name).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}
