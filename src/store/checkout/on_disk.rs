//! What is on disk where a move of a worktree goes: the leftovers of a move a killed process
//! left (finished or put back by the next move), someone's own changes (refused, never
//! touched), and untracked or ignored files in the move's way.

use std::path::Path;

use gix::bstr::{BString, ByteSlice};

use super::is_absent;
use super::journal::killed_move;
use crate::error::{Context, Error, Result};
use crate::store::diff::{tree_changes, PathChange, TreeEntry};
use crate::store::Store;

/// Which of `paths` (the worktree's changes against its index) are not what an interrupted
/// move from `old` to `new` leaves behind: foreign, someone's work. A leftover is a path the
/// move touches that holds the old content, the new content, nothing, or the start of the new
/// content (gix writes a file in place, so a kill mid-write leaves it truncated): finishing
/// the move loses nobody's work. So is a leftover of the move a killed process left from the
/// same files toward another tree ([`killed_move`]): the next move puts those files back
/// first. Every other change is foreign.
pub fn foreign_to_move(
    store: &Store,
    path: &Path,
    old: gix::ObjectId,
    new: gix::ObjectId,
    paths: &[String],
) -> Result<Vec<String>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let repo = crate::store::repo::open_path(path)?;
    let trees = (store.tree_of(old)?, store.tree_of(new)?);
    let foreign = foreign_to_trees(&repo, path, trees, paths)?;
    match killed_move_from(path, trees) {
        Some(killed) if !foreign.is_empty() => foreign_to_trees(&repo, path, killed, &foreign),
        _ => Ok(foreign),
    }
}

/// The move a killed process left in the worktree at `path` from the same files as a move
/// `(old, new)` (trees), toward another tree: the one the next move puts back first.
pub fn killed_move_from(
    path: &Path,
    (old, new): (gix::ObjectId, gix::ObjectId),
) -> Option<(gix::ObjectId, gix::ObjectId)> {
    killed_move(path).filter(|&(o, n)| o == old && n != new)
}

/// [`foreign_to_move`] for a move between two trees.
fn foreign_to_trees(
    repo: &gix::Repository,
    path: &Path,
    (old_tree, new_tree): (gix::ObjectId, gix::ObjectId),
    paths: &[String],
) -> Result<Vec<String>> {
    let mut foreign = Vec::new();
    let (mut pipeline, pipeline_index) = repo
        .filter_pipeline(None)
        .context(|| "could not set up the to-git filters".into())?;
    let index_entry =
        |e: Option<TreeEntry>| e.map(|(mode, id)| (id, gix::index::entry::Mode::from(mode)));
    let moved: std::collections::HashMap<BString, _> = tree_changes(repo, old_tree, new_tree)?
        .into_iter()
        .map(|c| (c.path, (index_entry(c.old), index_entry(c.new))))
        .collect();
    for p in paths {
        let rel = p.trim_end_matches('/');
        let Some(&(o, n)) = moved.get(rel.as_bytes().as_bstr()) else {
            foreign.push(p.clone()); // the move does not touch it: an edit of someone's
            continue;
        };
        let file = path.join(rel);
        if n.is_some_and(|(_, mode)| {
            mode == gix::index::entry::Mode::FILE
                || mode == gix::index::entry::Mode::FILE_EXECUTABLE
        }) && partly_written(repo, &file, n)?
        {
            continue;
        }
        let content = match std::fs::symlink_metadata(&file) {
            Err(e) if is_absent(&e) => continue,
            Err(e) => {
                return Err(Error::internal(format!(
                    "could not read {}: {e}",
                    file.display()
                )))
            }
            Ok(md) if md.file_type().is_symlink() => std::fs::read_link(&file)
                .map(|t| t.as_os_str().as_encoded_bytes().to_vec())
                .context(|| format!("could not read {}", file.display()))?,
            // A directory where the old tree had a file the new one drops: the move made it.
            Ok(md) if md.is_dir() => {
                if n.is_some() {
                    foreign.push(p.clone());
                }
                continue;
            }
            Ok(_) => {
                // Compare in git's form: eol conversion and clean filters apply, as for `git add`.
                let data = std::fs::File::open(&file).map_err(|e| {
                    Error::internal(format!("could not read {}: {e}", file.display()))
                })?;
                let mut out = Vec::new();
                use std::io::Read;
                pipeline
                    .convert_to_git(data, Path::new(rel), &pipeline_index)
                    .context(|| format!("could not filter {rel}"))?
                    .read_to_end(&mut out)
                    .map_err(|e| {
                        Error::internal(format!("could not read {}: {e}", file.display()))
                    })?;
                out
            }
        };
        let id = gix::objs::compute_hash(repo.object_hash(), gix::object::Kind::Blob, &content)
            .context(|| format!("could not hash {}", file.display()))?;
        if Some(id) != o.map(|(id, _)| id) && Some(id) != n.map(|(id, _)| id) {
            foreign.push(p.clone());
        }
    }
    Ok(foreign)
}

/// The regular file at `file` holds a (possibly empty) prefix of the blob the move writes
/// there, `n`, as written before git's filters (the common case: no eol or smudge filter).
fn partly_written(
    repo: &gix::Repository,
    file: &Path,
    n: Option<(gix::ObjectId, gix::index::entry::Mode)>,
) -> Result<bool> {
    let Some((id, _)) = n else {
        return Ok(false);
    };
    let Ok(md) = std::fs::symlink_metadata(file) else {
        return Ok(false);
    };
    if !md.is_file() {
        return Ok(false);
    }
    let blob = repo
        .find_object(id)
        .context(|| format!("could not read blob {id}"))?;
    if md.len() >= blob.data.len() as u64 {
        return Ok(false); // complete: judged by its content, as any other
    }
    let on_disk = std::fs::read(file).context(|| format!("could not read {}", file.display()))?;
    Ok(blob.data.starts_with(&on_disk))
}

/// Whether nothing is on disk in the worktree at `worktree` where the move `moved` (its
/// [`tree_changes`]) adds a path: not at the path itself (a file, a directory, a symlink, anything), and no leading
/// directory of it that is something other than a directory (a file, or a symlink, through
/// which a write would leave the worktree). Then no untracked file can be in the move's way,
/// and the worktree's directories need not be read for them. Anything else there, or a path
/// that cannot be looked at, answers `false`: [`untracked_in_the_way`] judges it.
pub fn additions_are_free(worktree: &Path, moved: &[PathChange]) -> bool {
    // What is at `rel` on disk: `None` when nothing is, `Some(false)` for anything but a
    // directory, and for a name this platform cannot spell (judged by the full walk).
    let on_disk = |rel: &[u8]| -> Option<bool> {
        let Ok(rel) = gix::path::from_bstr(rel.as_bstr()) else {
            return Some(false);
        };
        match std::fs::symlink_metadata(worktree.join(rel)) {
            Ok(m) => Some(m.file_type().is_dir()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => Some(false),
        }
    };
    let mut directories = std::collections::HashMap::<BString, Option<bool>>::new();
    'changes: for change in moved {
        if change.old.is_some() {
            continue; // tracked before the move: changes to it are the status's to find
        }
        let path = change.path.as_slice();
        // Its leading directories, outermost first: a missing one means nothing is below it.
        for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            let dir = &path[..at];
            let found = *directories
                .entry(dir.into())
                .or_insert_with(|| on_disk(dir));
            match found {
                None => continue 'changes,
                Some(true) => {}
                Some(false) => return false,
            }
        }
        if on_disk(path).is_some() {
            return false;
        }
    }
    true
}

/// The paths where the move `moved` (from a tree that holds everything of the worktree at
/// `worktree` but its ignored files) would write over something on disk: an ignored file at a
/// path it adds, or one where it needs a directory. A path the move itself removes first is
/// not in the way. Sorted.
pub fn ignored_in_the_way(worktree: &Path, moved: &[PathChange]) -> Vec<String> {
    let removed: std::collections::HashSet<&[u8]> = moved
        .iter()
        .filter(|c| c.old.is_some())
        .map(|c| c.path.as_slice())
        .collect();
    let exists = |rel: &[u8]| -> Option<bool> {
        let rel = gix::path::from_bstr(rel.as_bstr()).ok()?;
        std::fs::symlink_metadata(worktree.join(rel))
            .ok()
            .map(|m| m.file_type().is_dir())
    };
    let mut out = std::collections::BTreeSet::new();
    for change in moved.iter().filter(|c| c.old.is_none() && c.new.is_some()) {
        let path = change.path.as_slice();
        for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            let dir = &path[..at];
            if exists(dir) == Some(false) && !removed.contains(dir) {
                out.insert(dir.to_str_lossy().into_owned());
            }
        }
        let emptied = |dir: &[u8]| {
            removed
                .iter()
                .any(|r| r.len() > dir.len() && r.starts_with(dir) && r[dir.len()] == b'/')
        };
        match exists(path) {
            Some(false) => {
                out.insert(change.path.to_str_lossy().into_owned());
            }
            Some(true) if !emptied(path) => {
                out.insert(change.path.to_str_lossy().into_owned());
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

/// The `untracked` files of the worktree that the move `moved` (its [`tree_changes`]) would
/// overwrite.
pub fn untracked_in_the_way(moved: &[PathChange], untracked: &[String]) -> Vec<String> {
    let written: Vec<_> = moved
        .iter()
        .filter(|c| c.new.is_some())
        .map(|c| c.path.to_str_lossy())
        .collect();
    let mut out: Vec<String> = untracked
        .iter()
        .filter(|u| {
            let u = u.trim_end_matches('/');
            written.iter().any(|c| {
                // The file itself, a file where a directory must go, or a directory holding it.
                c == u || c.starts_with(&format!("{u}/")) || u.starts_with(&format!("{c}/"))
            })
        })
        .cloned()
        .collect();
    out.sort();
    out
}
