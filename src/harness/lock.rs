//! One loop per run at a time, including the processes a killed loop left behind.
//!
//! The loop holds an exclusive `flock` on `<git-common-dir>/tabellio/loop/<run>.lock` for its
//! whole life, and the descriptor is inherited by the agent and the checks it starts (it is
//! opened without close-on-exec). A lock belongs to the open file, so it is held until the
//! last process holding the descriptor exits: after the loop was SIGKILLed, an agent that is
//! still running keeps the lock, and `--resume` is refused until it has stopped, instead of
//! starting a second agent in the same worktree. The file is not state: its content is
//! nothing, and it is never deleted (deleting a lock file others may hold opens races).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};
use crate::sys::flock;

/// The held lock; dropping it closes our descriptor (children may still hold theirs).
#[derive(Debug)]
pub struct LoopLock {
    _file: File,
    pub path: PathBuf,
}

/// Where the lock of run `run_id` lives.
pub fn lock_path(common_dir: &Path, run_id: &str) -> PathBuf {
    common_dir
        .join("tabellio")
        .join("loop")
        .join(format!("{run_id}.lock"))
}

/// Take the lock without waiting: a held lock is a conflict (exit 4).
pub fn acquire(common_dir: &Path, run_id: &str) -> Result<LoopLock> {
    let path = lock_path(common_dir, run_id);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).context(|| format!("could not create {}", dir.display()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .context(|| format!("could not open {}", path.display()))?;
    let locked = flock::lock_exclusive(&file, flock::Wait::No)
        .context(|| format!("could not lock {}", path.display()))?;
    if locked == flock::Locked::Busy {
        return Err(Error::conflict(format!(
            "another loop of run {run_id}, or an agent or check a killed loop started, is still running (it holds {})",
            path.display()
        ))
        .hint(format!(
            "wait for it to end or stop it (`fuser {}` names the processes), then run the loop again",
            path.display()
        )));
    }
    // Inherited by children on purpose (see the module docs). Best effort, as before: without
    // it only the loop itself holds the lock.
    let _ = flock::inherit_across_exec(&file);
    Ok(LoopLock { _file: file, path })
}
