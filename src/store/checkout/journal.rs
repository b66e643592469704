//! The move a worktree's files are in, kept beside its index as `tabellio-move` (`<old tree>
//! <new tree>`): written before the first file moves, removed once the transaction the move
//! belongs to has committed or been dropped and the files put back. A process killed in between
//! leaves it, so the next move of that worktree knows what the files were moving to, even when
//! it moves them somewhere else (another lane of a landing went first).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The journal's file name in a worktree's git directory.
const NAME: &str = "tabellio-move";

/// A move under way: its journal is removed when this is dropped (the move finished, or was
/// put back). A killed process drops nothing, and the journal stays.
#[must_use = "the journal of a move lives until its transaction committed or was dropped"]
pub struct Journal {
    file: PathBuf,
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Record the move of the worktree at `path` from `old` to `new` (trees), replacing what a
/// killed move left.
pub(super) fn begin(path: &Path, old: gix::ObjectId, new: gix::ObjectId) -> Result<Journal> {
    let file = file_of(path)?;
    // Written whole, then renamed: a kill never leaves half a journal.
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{old} {new}\n"))
        .and_then(|()| std::fs::rename(&tmp, &file))
        .map_err(|e| {
            Error::internal(format!("could not write {}: {e}", file.display()))
                .hint("the worktree's git directory must be writable")
        })?;
    Ok(Journal { file })
}

/// The move a killed process left in the worktree at `path`: `(old, new)` trees. None when no
/// move is under way, or its journal cannot be read (then nothing is taken for a leftover).
pub fn killed_move(path: &Path) -> Option<(gix::ObjectId, gix::ObjectId)> {
    let text = std::fs::read_to_string(file_of(path).ok()?).ok()?;
    let (old, new) = text.trim_end().split_once(' ')?;
    Some((
        gix::ObjectId::from_hex(old.as_bytes()).ok()?,
        gix::ObjectId::from_hex(new.as_bytes()).ok()?,
    ))
}

/// The journal's path: in the git directory of the worktree at `path` (`.git` itself, or the
/// directory a linked worktree's `.git` file names).
fn file_of(path: &Path) -> Result<PathBuf> {
    let dot_git = path.join(".git");
    let md = std::fs::metadata(&dot_git)
        .map_err(|e| Error::internal(format!("could not read {}: {e}", dot_git.display())))?;
    if md.is_dir() {
        return Ok(dot_git.join(NAME));
    }
    let text = std::fs::read_to_string(&dot_git)
        .map_err(|e| Error::internal(format!("could not read {}: {e}", dot_git.display())))?;
    let gitdir = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir: "))
        .ok_or_else(|| Error::internal(format!("{} names no gitdir", dot_git.display())))?;
    // A relative gitdir (`worktree.useRelativePaths`) is relative to the worktree.
    Ok(path.join(gitdir.trim_end()).join(NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_is_read_back_until_its_move_ends() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let (old, new) = (
            gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").unwrap(),
            gix::ObjectId::from_hex(b"2222222222222222222222222222222222222222").unwrap(),
        );
        assert_eq!(killed_move(dir.path()), None);
        let journal = begin(dir.path(), old, new).unwrap();
        assert_eq!(killed_move(dir.path()), Some((old, new)));
        drop(journal);
        assert_eq!(killed_move(dir.path()), None);
        // A linked worktree's `.git` file, with a relative gitdir.
        let linked = dir.path().join("wt");
        std::fs::create_dir_all(dir.path().join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir(&linked).unwrap();
        std::fs::write(linked.join(".git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        let journal = begin(&linked, old, new).unwrap();
        assert!(dir.path().join(".git/worktrees/wt").join(NAME).exists());
        std::mem::forget(journal); // a killed process drops nothing
        assert_eq!(killed_move(&linked), Some((old, new)));
    }
}
