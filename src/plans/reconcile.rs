//! Moving misplaced plans on disk and in the index, as `git mv` would.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use gix::bstr::BStr;

use super::scan::{rel_path, scan_dir_found, FoundPlan};
use super::{PathKind, PlanClass, PlanError};
use crate::error::one_line as chain_message;

/// One plan moved by [`reconcile`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Move {
    /// Old path, relative to the worktree root.
    pub from: String,
    /// New path, relative to the worktree root.
    pub to: String,
}

/// What [`reconcile`] did.
#[derive(Debug, Default)]
pub struct ReconcileOutcome {
    /// Plans moved (and, if tracked, renamed in the index), in path order of their old names.
    pub moved: Vec<Move>,
    /// Per-path problems: scan errors (those files were not considered) and failed moves.
    pub errors: Vec<PlanError>,
}

impl ReconcileOutcome {
    /// `{moved: [{from, to}], errors: [{path, message}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "moved": self.moved,
            "errors": self.errors.iter().map(PlanError::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Failures that stop [`reconcile`] before any file is touched.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// `worktree_root` is not a git worktree.
    #[error("cannot open a git repository at {}", path.display())]
    Open {
        /// The directory given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: crate::Error,
    },
    /// The repository has no worktree to reconcile.
    #[error("the repository at {} is bare", path.display())]
    Bare {
        /// The directory given.
        path: PathBuf,
    },
    /// `worktree_root` is inside a worktree but not its root.
    #[error("{} is not the root of its worktree {}", path.display(), workdir.display())]
    NotWorktreeRoot {
        /// The directory given.
        path: PathBuf,
        /// The worktree root.
        workdir: PathBuf,
    },
    /// The index lock could not be taken (another git process, or a stale `index.lock`).
    #[error("cannot lock the index {}", path.display())]
    LockIndex {
        /// The index file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: gix::Error,
    },
    /// The index exists but could not be read.
    #[error("cannot read the index {}", path.display())]
    ReadIndex {
        /// The index file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: gix::Error,
    },
}

/// Move every misplaced plan of the worktree at `worktree_root` to the folder it belongs in,
/// renaming tracked files in the index as `git mv` would; see the module docs for the rules and
/// the failure model.
pub fn reconcile(worktree_root: &Path) -> Result<ReconcileOutcome, ReconcileError> {
    reconcile_with(worktree_root, write_index)
}

/// The index writer taken by [`reconcile_with`]: the index, its held lock, `index.skipHash`.
pub(super) type IndexWriter = fn(&gix::index::File, gix::lock::File, bool) -> Result<(), String>;

/// [`reconcile`] with the final index write injectable, so tests can make it fail.
pub(super) fn reconcile_with(
    worktree_root: &Path,
    write_index: IndexWriter,
) -> Result<ReconcileOutcome, ReconcileError> {
    // Opened by path as every worktree is: a hook's `GIT_*` variables do not redirect it.
    let repo =
        crate::store::repo::open_path(worktree_root).map_err(|source| ReconcileError::Open {
            path: worktree_root.to_owned(),
            source,
        })?;
    let workdir = repo.workdir().ok_or_else(|| ReconcileError::Bare {
        path: worktree_root.to_owned(),
    })?;
    // Index paths are relative to the worktree root, so the files we move must be under it.
    if !same_directory(workdir, worktree_root) {
        return Err(ReconcileError::NotWorktreeRoot {
            path: worktree_root.to_owned(),
            workdir: workdir.to_owned(),
        });
    }

    let (mut found, errors) = scan_dir_found(worktree_root);
    let mut outcome = ReconcileOutcome {
        moved: Vec::new(),
        errors,
    };
    found.retain(|found| found.plan.class == PlanClass::Misplaced);
    found.sort_by(|a, b| a.plan.path.cmp(&b.plan.path));
    if found.is_empty() {
        outcome.errors.sort_by(|a, b| a.path().cmp(b.path()));
        return Ok(outcome);
    }

    // Hold the lock from before reading the index until it is written, as git does, so no other
    // git process can slip an index update in between that we would then overwrite.
    let index_path = repo.index_path();
    let lock = gix::lock::File::acquire_to_update_resource(
        &index_path,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .map_err(|source| ReconcileError::LockIndex {
        path: index_path.clone(),
        source,
    })?;
    let mut index = match std::fs::symlink_metadata(&index_path) {
        // A repository where nothing was ever added has no index: every plan is untracked.
        Err(err) if err.kind() == io::ErrorKind::NotFound => gix::index::File::from_state(
            gix::index::State::new(repo.object_hash()),
            index_path.clone(),
        ),
        _ => repo
            .open_index()
            .map_err(|source| ReconcileError::ReadIndex {
                path: index_path.clone(),
                source,
            })?,
    };

    let mut tracked_moves: Vec<Move> = Vec::new();
    for plan in &found {
        match move_plan(worktree_root, &mut index, plan) {
            Ok((moved, tracked)) => {
                if tracked {
                    tracked_moves.push(moved.clone());
                }
                outcome.moved.push(moved);
            }
            Err(err) => outcome.errors.push(err),
        }
    }

    if !tracked_moves.is_empty() {
        index.sort_entries();
        // gix writes the cached-tree extension back as it was read, which would now claim the
        // old contents of plans/ and plans_completed/ and mislead the next `git commit`.
        index.remove_tree();
        let skip_hash = repo
            .config_snapshot()
            .boolean("index.skipHash")
            .unwrap_or(false);
        if let Err(reason) = write_index(&index, lock, skip_hash) {
            undo_moves(worktree_root, &tracked_moves, &reason, &mut outcome);
        }
    }
    outcome.errors.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(outcome)
}

fn same_directory(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Move one misplaced plan on disk and in `index`; returns the move and whether it was tracked.
fn move_plan(
    root: &Path,
    index: &mut gix::index::File,
    plan: &FoundPlan,
) -> Result<(Move, bool), PlanError> {
    let from = plan.plan.path.clone();
    let target = plan.folder.other();
    let target_dir = root.join(target.dir_name());

    let tracked_at = match index.entry_range(from.as_str().into()) {
        None => None,
        Some(range) => {
            let unconflicted = range.len() == 1
                && index.entry(range.start).stage() == gix::index::entry::Stage::Unconflicted;
            if !unconflicted {
                return Err(PlanError::Conflicted { path: from });
            }
            Some(range.start)
        }
    };

    match std::fs::symlink_metadata(&target_dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => {
            return Err(PlanError::TargetNotADirectory {
                path: target.dir_name().to_owned(),
                plan: from,
                found: PathKind::of_file_type(meta.file_type()),
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&target_dir).map_err(|source| PlanError::CreateDir {
                path: target.dir_name().to_owned(),
                plan: from.clone(),
                source,
            })?;
        }
        Err(source) => {
            return Err(PlanError::CreateDir {
                path: target.dir_name().to_owned(),
                plan: from,
                source,
            })
        }
    }

    let stem = plan.name.strip_suffix(".md").unwrap_or(&plan.name);
    let src = root.join(plan.folder.dir_name()).join(&plan.name);
    let mut attempt = 0_usize;
    let to = loop {
        let name = match attempt {
            0 => plan.name.clone(),
            n => format!("{stem}_{n}.md"),
        };
        attempt += 1;
        let to = rel_path(target, &name);
        let to_key: &BStr = to.as_str().into();
        if index.entry_range(to_key).is_some() || index.path_is_directory(to_key) {
            continue;
        }
        match move_no_clobber(&src, &target_dir.join(&name)) {
            Ok(()) => break to,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(PlanError::Move { from, to, source }),
        }
    };

    if let Some(position) = tracked_at {
        // git mv keeps the entry as it is under the new name (rename_index_entry_at): the staged
        // blob, mode, flags and stat; a stale ctime only makes git re-hash the file once.
        let entry = index.remove_entry_at_index(position);
        index.dangerously_push_entry(
            entry.stat,
            entry.id,
            entry.flags,
            entry.mode,
            to.as_str().into(),
        );
        // Later lookups (the next plan's source and destination) need sorted entries.
        index.sort_entries();
    }
    Ok((Move { from, to }, tracked_at.is_some()))
}

/// Rename `src` to `dst` without ever replacing an existing `dst` (which `rename` would).
fn move_no_clobber(src: &Path, dst: &Path) -> io::Result<()> {
    match std::fs::hard_link(src, dst) {
        Ok(()) => std::fs::remove_file(src).inspect_err(|_| {
            // Leave things as they were: the only name is the old one again.
            let _ = std::fs::remove_file(dst);
        }),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // No hard links here (filesystem without them, or a mount boundary): check, then rename.
        Err(_) => match std::fs::symlink_metadata(dst) {
            Ok(_) => Err(io::ErrorKind::AlreadyExists.into()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => std::fs::rename(src, dst),
            Err(err) => Err(err),
        },
    }
}

fn write_index(
    index: &gix::index::File,
    lock: gix::lock::File,
    skip_hash: bool,
) -> Result<(), String> {
    let options = gix::index::write::Options {
        skip_hash,
        ..Default::default()
    };
    let mut out = io::BufWriter::with_capacity(64 * 1024, lock);
    index
        .write_to(&mut out, options)
        .map_err(|err| chain_message(&err))?;
    out.flush().map_err(|err| chain_message(&err))?;
    let lock = out.into_inner().map_err(|err| chain_message(err.error()))?;
    lock.commit().map_err(|err| chain_message(&err.error))?;
    Ok(())
}

/// The index was not written: put tracked files back where the index still expects them.
fn undo_moves(root: &Path, tracked: &[Move], reason: &str, outcome: &mut ReconcileOutcome) {
    for undo in tracked.iter().rev() {
        outcome.moved.retain(|moved| moved != undo);
        let error = match move_no_clobber(&root.join(&undo.to), &root.join(&undo.from)) {
            Ok(()) => PlanError::IndexNotWritten {
                from: undo.from.clone(),
                to: undo.to.clone(),
                reason: reason.to_owned(),
            },
            Err(source) => PlanError::Restore {
                from: undo.from.clone(),
                to: undo.to.clone(),
                source,
            },
        };
        outcome.errors.push(error);
    }
}
