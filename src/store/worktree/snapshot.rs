//! A snapshot of a worktree: the tree `git add -A` would stage on top of its `HEAD` (tracked
//! changes, staged or not, and untracked files that are not ignored), built in-process from gix
//! parts (status, the to-git filter pipeline, blob writes, the tree editor). Only objects are
//! written, never a ref, the index or a file: the caller makes the tree reachable or not.
//!
//! The loop commits such a tree after each agent run; `rewind --force` keeps one as the
//! checkpoint of uncommitted work. Untracked paths the caller leaves out (secret-named files)
//! are reported, not stored.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;

use crate::error::{Context, Error, Result};

/// What [`snapshot`] built.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The worktree's tree; `head_tree` itself when nothing differs.
    pub tree: gix::ObjectId,
    /// The paths that were read (every path that may differ from `HEAD`), without those left
    /// out.
    pub touched: BTreeSet<String>,
    /// Untracked paths left out, sorted.
    pub left_out: Vec<String>,
}

/// The tree of the worktree `repo` (opened at `path`) on top of `head_tree`: every change to
/// tracked files and every untracked, not ignored file, except the untracked paths for which
/// `leave_out` is true.
pub fn snapshot(
    repo: &gix::Repository,
    path: &Path,
    head_tree: gix::ObjectId,
    leave_out: &dyn Fn(&str) -> bool,
) -> Result<Snapshot> {
    let workdir = crate::store::repo::workdir_of(repo, path)?;
    let (mut touched, untracked) = candidate_paths(repo, path)?;
    let left_out: Vec<String> = untracked.iter().filter(|p| leave_out(p)).cloned().collect();
    for p in &left_out {
        touched.remove(p);
    }
    if touched.is_empty() {
        return Ok(Snapshot {
            tree: head_tree,
            touched,
            left_out,
        });
    }
    let file_mode = repo
        .config_snapshot()
        .boolean("core.fileMode")
        .unwrap_or(true);
    let (mut pipeline, index) = repo
        .filter_pipeline(None)
        .context(|| "could not set up the to-git filters".into())?;
    let mut editor = repo
        .edit_tree(head_tree)
        .context(|| format!("could not edit tree {head_tree}"))?;

    let mut present = Vec::new();
    for rel in &touched {
        match read_path(&workdir, rel, file_mode, &mut pipeline, &index)? {
            OnDisk::Gone => {
                editor
                    .remove(rel.as_str())
                    .context(|| format!("could not remove {rel} from the tree"))?;
            }
            other => present.push((rel, other)),
        }
    }
    // Removals first: a file replaced by a directory (or the reverse) is a removal and additions.
    for (rel, on_disk) in present {
        let (kind, id) = match on_disk {
            OnDisk::Blob(kind, data) => {
                let id = repo
                    .write_blob(&data)
                    .context(|| format!("could not store {rel}"))?
                    .detach();
                (kind, id)
            }
            OnDisk::Gitlink(id) => (EntryKind::Commit, id),
            OnDisk::Gone => continue,
        };
        editor
            .upsert(rel.as_str(), kind, id)
            .context(|| format!("could not add {rel} to the tree"))?;
    }
    let tree = editor
        .write()
        .context(|| "could not write the tree".into())?
        .detach();
    Ok(Snapshot {
        tree,
        touched,
        left_out,
    })
}

/// Every path where the worktree or the index may differ from `HEAD`: staged and unstaged
/// changes to tracked files and untracked, not ignored files, without rename detection (a
/// rename is its two paths), and which of them are untracked.
fn candidate_paths(
    repo: &gix::Repository,
    path: &Path,
) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let what = || format!("could not compute the status of {}", path.display());
    let mut repo = repo.clone();
    let head = crate::store::refs::head(&repo)?;
    let _shadow = crate::store::worktree::shadow_head(&mut repo, &head)?;
    let iter = repo
        .status(gix::progress::Discard)
        .context(what)?
        .untracked_files(gix::status::UntrackedFiles::Files)
        .index_worktree_rewrites(None)
        .tree_index_track_renames(gix::status::tree_index::TrackRenames::Disabled)
        .into_iter(None)
        .context(what)?;
    let mut out = BTreeSet::new();
    let mut untracked = BTreeSet::new();
    for item in iter {
        let item = item.context(what)?;
        if let gix::status::Item::IndexWorktree(
            gix::status::index_worktree::Item::DirectoryContents { entry, .. },
        ) = &item
        {
            // Ignored entries are not reported with the options above; be explicit anyway.
            if !matches!(entry.status, gix::dir::entry::Status::Untracked) {
                continue;
            }
        }
        let location = item.location().to_str_lossy();
        let location = location.trim_end_matches('/').to_string();
        if matches!(
            item,
            gix::status::Item::IndexWorktree(
                gix::status::index_worktree::Item::DirectoryContents { .. }
            )
        ) {
            untracked.insert(location.clone());
        }
        out.insert(location);
    }
    Ok((out, untracked))
}

/// What a worktree path holds now.
enum OnDisk {
    Gone,
    Blob(EntryKind, Vec<u8>),
    Gitlink(gix::ObjectId),
}

fn read_path(
    workdir: &Path,
    rel: &str,
    file_mode: bool,
    pipeline: &mut gix::filter::Pipeline<'_>,
    index: &gix::index::State,
) -> Result<OnDisk> {
    let full = workdir.join(rel);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(m) => m,
        // ENOTDIR: a parent became a file.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(OnDisk::Gone)
        }
        Err(e) => return Err(Error::internal(format!("could not read {rel}: {e}"))),
    };
    if meta.file_type().is_symlink() {
        let target =
            std::fs::read_link(&full).context(|| format!("could not read the link {rel}"))?;
        return Ok(OnDisk::Blob(
            EntryKind::Link,
            target.as_os_str().as_bytes().to_vec(),
        ));
    }
    if meta.is_dir() {
        // A submodule or an embedded repository: git records its checked-out commit.
        if full.join(".git").exists() {
            let sub = crate::store::repo::open_path(&full).map_err(|e| {
                // The relative path only: this reason is stored in the loop's ledger.
                Error::new(e.kind, format!("could not open the repository at {rel}"))
            })?;
            let head = crate::store::refs::head(&sub)
                .map_err(|e| Error::new(e.kind, format!("could not read HEAD at {rel}")))?;
            let id = head.id.ok_or_else(|| {
                Error::refused(format!(
                    "the repository embedded at {rel} has no commit to record"
                ))
                .hint("commit in it, or remove it")
            })?;
            return Ok(OnDisk::Gitlink(id));
        }
        // A tracked file replaced by a directory: the file is gone, the directory's files are
        // candidates of their own.
        return Ok(OnDisk::Gone);
    }
    let file = std::fs::File::open(&full).context(|| format!("could not read {rel}"))?;
    let mut data = Vec::new();
    pipeline
        .convert_to_git(file, Path::new(rel), index)
        .context(|| format!("could not filter {rel}"))?
        .read_to_end(&mut data)
        .context(|| format!("could not read {rel}"))?;
    let executable = if file_mode {
        meta.permissions().mode() & 0o111 != 0
    } else {
        // Without core.fileMode the executable bit on disk means nothing: keep the index's.
        index
            .entry_by_path(rel.as_bytes().as_bstr())
            .is_some_and(|e| e.mode == gix::index::entry::Mode::FILE_EXECUTABLE)
    };
    Ok(OnDisk::Blob(
        if executable {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        },
        data,
    ))
}
