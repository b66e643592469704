//! Moving a checked-out worktree from one tree to another: the files that differ are checked
//! out (through gix's checkout, so attributes, filters, modes and symlinks are honoured), files
//! that are gone are removed, and the index is rewritten for the new tree with stat data that
//! matches the files, so `git status` is clean afterwards.
//!
//! Failure model: the index is written last. If checking out fails, the caller moves the
//! worktree back (new → old), which restores every file we touched.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BString, ByteSlice};

use crate::error::{Context, Error, Result};
use crate::store::diff::{tree_changes, PathChange};
use crate::store::Store;

mod cached_trees;
use cached_trees::move_cached_trees;
mod journal;
pub use journal::{killed_move, Journal};
mod on_disk;
pub use on_disk::{
    additions_are_free, foreign_to_move, ignored_in_the_way, killed_move_from, untracked_in_the_way,
};

/// Did git already move the index of the worktree `store` was opened in from `old` to `new`?
/// True when, for every path that differs between the two commits' trees, the index holds
/// `new`'s entry (or none, where `new` removed the path): what `git merge`, `git pull` and
/// `git reset` leave when the reference-transaction hook then refuses the branch's move, since
/// git updates the index and files before the ref. `false` when nothing differs or the index
/// cannot be read.
pub fn index_moved_to(store: &Store, old: gix::ObjectId, new: gix::ObjectId) -> Result<bool> {
    let moved = tree_changes(&store.objects(), store.tree_of(old)?, store.tree_of(new)?)?;
    let Ok(index) = store.repo.open_index() else {
        return Ok(false);
    };
    Ok(!moved.is_empty()
        && moved.iter().all(|change| {
            let entry = index.entry_by_path(change.path.as_bstr());
            match (&change.new, entry) {
                (None, None) => true,
                (Some((_, id)), Some(entry)) => entry.id == *id,
                _ => false,
            }
        }))
}

/// Move the files of the worktree at `path` from `from_tree` (what they hold now) to
/// `files_tree`, and rewrite its index for `index_tree`: an entry whose file holds the same
/// content gets the file's stat data, the others none, so git sees exactly the difference
/// between `index_tree` and the files as unstaged changes (untracked where `index_tree` has no
/// entry). What neither tree holds (ignored files) is not touched. The index is locked while
/// the files move and written last; on failure the files are moved back and the index is left
/// as it was.
pub fn restore_worktree(
    path: &Path,
    from_tree: gix::ObjectId,
    files_tree: gix::ObjectId,
    index_tree: gix::ObjectId,
) -> Result<()> {
    let repo = crate::store::repo::open_path(path)?;
    let workdir = crate::store::repo::workdir_of(&repo, path)?;
    let lock = lock_index(&repo, path)?;
    let changes = tree_changes(&repo, from_tree, files_tree)?;
    let moved = remove_deleted(&workdir, &changes)
        .and_then(|()| write_changed(&repo, &workdir, &changes, path, files_tree));
    if let Err(e) = moved {
        return Err(move_back(path, files_tree, from_tree, e).unwrap_or_else(|e| e));
    }
    let differ: std::collections::HashSet<BString> = tree_changes(&repo, index_tree, files_tree)?
        .into_iter()
        .map(|c| c.path)
        .collect();
    let mut index = repo
        .index_from_tree(&index_tree)
        .context(|| format!("could not read tree {index_tree}"))?;
    let (entries, backing) = index.entries_mut_and_pathbacking();
    for e in entries.iter_mut() {
        let p = e.path_in(backing);
        if differ.contains(p) {
            continue;
        }
        let Ok(rel) = gix::path::from_bstr(p) else {
            continue;
        };
        if let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&workdir.join(rel)) {
            if let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) {
                e.stat = stat;
            }
        }
    }
    write_locked(&index, lock, path)
}

/// The index of the worktree at `path` is locked (`index.lock` exists): a git process is
/// working there, or a killed one left the lock. Named with its removal, before anything moves.
pub fn refuse_index_lock(store: &Store, path: &Path) -> Result<()> {
    let repo = store.worktree_repo(path)?;
    let lock = repo.index_path().with_extension("lock");
    if lock.exists() {
        return Err(index_locked(path, &lock));
    }
    Ok(())
}

/// Why a checked-out worktree cannot be moved, found before anything is written: an index
/// lock held by a running git (exit 4), or a sparse checkout, whose skip-worktree entries
/// moving the worktree would materialise (exit 3).
pub fn refuse_unmovable(
    path: &Path,
    repo: &gix::Repository,
    index: &gix::index::State,
) -> Result<()> {
    let lock = repo.index_path().with_extension("lock");
    if lock.exists() {
        return Err(index_locked(path, &lock));
    }
    let sparse = index
        .entries()
        .iter()
        .any(|e| e.flags.contains(gix::index::entry::Flags::SKIP_WORKTREE));
    if sparse
        || repo
            .config_snapshot()
            .boolean("core.sparseCheckout")
            .unwrap_or(false)
    {
        return Err(Error::refused(format!("{} uses a sparse checkout, which promote does not move yet", path.display()))
            .hint("promote with the target branch checked out nowhere (e.g. switch that worktree to another branch), or disable the sparse checkout"));
    }
    Ok(())
}

/// Move the worktree at `path` (index and files) from `old_tree` to `new_tree`. On failure
/// every file touched is put back (the index is written last, so it still describes the old
/// tree) and the error is returned.
pub fn move_worktree(
    path: &Path,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<Journal> {
    move_worktree_read(path, (old_tree, new_tree), None)
}

/// A worktree whose files move with a branch: (path, old tree, new tree).
pub type FileMove = (PathBuf, gix::ObjectId, gix::ObjectId);

/// Worktrees moved for one transaction, each with its journal: dropped once the transaction
/// committed, or [`Moved::undo`]ne when it did not.
#[must_use = "moved worktrees are put back when their transaction does not commit"]
pub struct Moved<'m> {
    done: Vec<(&'m FileMove, Journal)>,
}

impl Moved<'_> {
    /// Put every moved worktree back, the last first (best effort: the transaction did not
    /// land).
    pub fn undo(self) {
        for (m, _journal) in self.done.into_iter().rev() {
            let _ = move_worktree(&m.0, m.2, m.1);
        }
    }
}

/// Move each of `moves` ([`move_worktree`]); on a failure, the ones already moved are put
/// back and the error returned.
pub fn move_all(moves: &[FileMove]) -> Result<Moved<'_>> {
    let mut moved = Moved { done: Vec::new() };
    for m in moves {
        match move_worktree(&m.0, m.1, m.2) {
            Ok(journal) => moved.done.push((m, journal)),
            Err(e) => {
                moved.undo();
                return Err(e);
            }
        }
    }
    Ok(moved)
}

/// [`move_worktree`], with `read`, the worktree's index as read before (checking that the
/// worktree can move): the index is edited from it instead of being read again when the file
/// under `index.lock` is still that one, byte for byte (the same trailing checksum, which every
/// index writer computes over the whole file).
pub fn move_worktree_read(
    path: &Path,
    (old_tree, new_tree): (gix::ObjectId, gix::ObjectId),
    mut read: Option<gix::index::File>,
) -> Result<Journal> {
    // A move a killed process left from the same files toward another tree: its files are put
    // back first (its journal stays until that is done), then this move is made.
    if let Some((o, n)) = killed_move_from(path, (old_tree, new_tree)) {
        let read = read.take().map(Box::new);
        try_move(path, n, o, Index::Write { read })?;
    }
    let journal = journal::begin(path, old_tree, new_tree)?;
    let read = read.map(Box::new);
    match try_move(path, old_tree, new_tree, Index::Write { read }) {
        Ok(()) => Ok(journal),
        Err(e) => match move_back(path, new_tree, old_tree, e) {
            Ok(failed) => Err(failed),
            // Half-way, and the journal stays: the next move knows where these files were going.
            Err(failed) => {
                std::mem::forget(journal);
                Err(failed)
            }
        },
    }
}

/// After `failed`, put back the files a move from `old_tree` to `new_tree` touched: the error
/// to return, as `Err` (saying so) when putting them back failed too.
fn move_back(
    path: &Path,
    new_tree: gix::ObjectId,
    old_tree: gix::ObjectId,
    failed: Error,
) -> std::result::Result<Error, Error> {
    match try_move(path, new_tree, old_tree, Index::Leave) {
        Ok(()) => Ok(failed),
        Err(undo) => Err(Error::internal(format!(
            "{}; moving {} back to {old_tree} failed too: {}",
            failed.message,
            path.display(),
            undo.message
        ))
        .hint(format!(
            "inspect {} with `git status` and restore it with `git checkout -f`",
            path.display()
        ))),
    }
}

/// Write the files of the worktree at `path` from `old_tree` to `new_tree`, leaving its index
/// as it is: the difference shows as uncommitted changes (what a reopen leaves for a repair:
/// the index at the new base, the files with the run's change and its conflicts). On failure
/// every file touched is put back.
pub fn write_files(path: &Path, old_tree: gix::ObjectId, new_tree: gix::ObjectId) -> Result<()> {
    match try_move(path, old_tree, new_tree, Index::Leave) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = try_move(path, new_tree, old_tree, Index::Leave);
            Err(e)
        }
    }
}

/// What a move does with the worktree's index.
enum Index {
    /// Left as it is (the files alone move).
    Leave,
    /// Edited for the moved paths, from `read` (the index as read before) when the file is
    /// still that one.
    Write { read: Option<Box<gix::index::File>> },
}

/// Move the files of the worktree at `path` from `old_tree` to `new_tree`, and its index as
/// `index` says.
fn try_move(
    path: &Path,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
    index: Index,
) -> Result<()> {
    let repo = crate::store::repo::open_path(path)?;
    let workdir = crate::store::repo::workdir_of(&repo, path)?;
    // As git's checkout does, hold `index.lock` while the files move, then read, edit and
    // write the index through it: a `git add` meanwhile fails on the lock instead of being
    // lost when the index is written.
    let lock = match index {
        Index::Write { read } => Some((lock_index(&repo, path)?, read)),
        Index::Leave => None,
    };
    // Only the paths that differ are touched: the trees are walked together, skipping every
    // subtree they share, and the index is edited in place for those paths.
    let changes = tree_changes(&repo, old_tree, new_tree)?;

    remove_deleted(&workdir, &changes)?;
    let written = write_changed(&repo, &workdir, &changes, path, new_tree)?;
    if let Some(lock) = lock {
        update_index(&repo, path, (old_tree, new_tree), &changes, &written, lock)?;
    }
    Ok(())
}

/// Take `index.lock` of the worktree at `path`, refusing (exit 4) when someone holds it.
fn lock_index(repo: &gix::Repository, path: &Path) -> Result<gix::lock::File> {
    let index = repo.index_path();
    gix::lock::File::acquire_to_update_resource(
        &index,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .map_err(|e| {
        let lock = index.with_extension("lock");
        if lock.exists() {
            index_locked(path, &lock)
        } else {
            Error::internal(format!(
                "could not lock the index of {}: {e}",
                path.display()
            ))
        }
    })
}

/// The index of the worktree at `path` is locked by `lock` (exit 4).
fn index_locked(path: &Path, lock: &Path) -> Error {
    Error::conflict(format!(
        "the index of {} is locked: {} exists",
        path.display(),
        lock.display()
    ))
    .hint(format!(
        "another git process is working there; if none is, remove the stale lock with `rm {}`",
        crate::error::shell_path(lock)
    ))
}

/// What [`write_changed`] wrote: each path with the stat data, id and mode of its new entry.
type Written = Vec<(
    gix::bstr::BString,
    (
        gix::index::entry::Stat,
        gix::ObjectId,
        gix::index::entry::Mode,
    ),
)>;

/// Remove the files of the paths the move deletes.
fn remove_deleted(workdir: &Path, changes: &[PathChange]) -> Result<()> {
    // Removals first, as git does: a file that becomes a directory (or the reverse) must be
    // out of the way before the new entries are written.
    for c in changes.iter().filter(|c| c.new.is_none()) {
        let file = workdir.join(c.path.to_str_lossy().as_ref());
        match std::fs::symlink_metadata(&file) {
            Ok(md) if md.is_dir() => {}
            Ok(_) => {
                std::fs::remove_file(&file).map_err(|e| {
                    Error::internal(format!("could not remove {}: {e}", file.display()))
                })?;
                prune_empty_parents(workdir, &file);
            }
            // Gone, or a parent is now a file (a directory that became a file).
            Err(e) if is_absent(&e) => {}
            Err(e) => {
                return Err(Error::internal(format!(
                    "could not read {}: {e}",
                    file.display()
                )))
            }
        }
    }

    Ok(())
}

/// Write the files of the paths the move adds or changes.
fn write_changed(
    repo: &gix::Repository,
    workdir: &Path,
    changes: &[PathChange],
    path: &Path,
    new_tree: gix::ObjectId,
) -> Result<Written> {
    // Check out only what differs, with the attributes (eol, filters such as LFS) the new
    // tree defines: `.gitattributes` files first, then everything else, reading attributes from
    // the worktree (which then holds the new `.gitattributes`) and the index.
    let mut attrs = gix::index::State::new(repo.object_hash());
    let mut subset = gix::index::State::new(repo.object_hash());
    for c in changes {
        let Some((mode, id)) = c.new else { continue };
        let part = if is_attributes_file(c.path.as_ref()) {
            &mut attrs
        } else {
            &mut subset
        };
        part.dangerously_push_entry(
            Default::default(),
            id,
            gix::index::entry::Flags::empty(),
            mode.into(),
            c.path.as_ref(),
        );
    }
    attrs.sort_entries();
    subset.sort_entries();
    let mut written = Vec::new();
    for part in [&mut attrs, &mut subset] {
        if part.entries().is_empty() {
            continue;
        }
        let mut options = repo
            .checkout_options(
                gix::worktree::stack::state::attributes::Source::WorktreeThenIdMapping,
            )
            .context(|| "could not set up checkout".into())?;
        options.overwrite_existing = true;
        options.destination_is_initially_empty = false;
        let objects = repo
            .objects
            .clone()
            .into_arc()
            .context(|| "could not open the object database".into())?;
        let outcome = gix::worktree::state::checkout(
            part,
            workdir,
            objects,
            &gix::progress::Discard,
            &gix::progress::Discard,
            &AtomicBool::new(false),
            options,
        )
        .context(|| format!("could not check out {new_tree} in {}", path.display()))?;
        if let Some(e) = outcome.errors.first() {
            return Err(Error::internal(format!(
                "could not write {} in {}: {}",
                e.path,
                path.display(),
                e.error
            )));
        }
        written.extend(
            part.entries()
                .iter()
                .map(|e| (e.path(part).to_owned(), (e.stat, e.id, e.mode))),
        );
    }
    Ok(written)
}

/// Edit the index for the paths that moved.
fn update_index(
    repo: &gix::Repository,
    path: &Path,
    (old_tree, new_tree): (gix::ObjectId, gix::ObjectId),
    changes: &[PathChange],
    written: &Written,
    (lock, read): (gix::lock::File, Option<Box<gix::index::File>>),
) -> Result<()> {
    // The index as it is (it describes the old tree: promote refused tracked changes, and it is
    // written last), edited for the paths that moved: their entries dropped, the new ones added
    // with the stat data of the files just written. Every other entry keeps its stat data and
    // flags (assume-unchanged stays set). The cached trees are brought to the new tree where
    // they can be ([`move_cached_trees`]), else dropped: git rebuilds them.
    let mut index = if let Some(read) = read.filter(|r| is_the_file(&repo.index_path(), r)) {
        *read
    } else if repo.index_path().exists() {
        crate::store::worktree::read_index(repo)?
    } else {
        repo.index_from_tree(&old_tree)
            .context(|| format!("could not read tree {old_tree}"))?
    };
    let touched: std::collections::HashSet<&gix::bstr::BStr> =
        changes.iter().map(|c| c.path.as_ref()).collect();
    index.remove_entries(|_, p, _| touched.contains(p));
    for (p, (stat, id, mode)) in written {
        index.dangerously_push_entry(
            *stat,
            *id,
            gix::index::entry::Flags::empty(),
            *mode,
            p.as_ref(),
        );
    }
    index.sort_entries();
    if !move_cached_trees(repo, &mut index, (old_tree, new_tree), changes)? {
        index.remove_tree();
    }
    write_locked(&index, lock, path)
}

/// Whether the index file at `path` is the one `read` was decoded from: its trailing checksum,
/// which every index writer computes over the whole file, is `read`'s. An index written without
/// one (`index.skipHash`, a null checksum) is never taken for another.
fn is_the_file(path: &Path, read: &gix::index::File) -> bool {
    use std::io::{Read as _, Seek as _};
    let Some(checksum) = read.checksum().filter(|c| !c.is_null()) else {
        return false;
    };
    let len = checksum.as_slice().len();
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut trailer = vec![0u8; len];
    file.seek(std::io::SeekFrom::End(-(len as i64)))
        .and_then(|_| file.read_exact(&mut trailer))
        .is_ok_and(|()| trailer == checksum.as_slice())
}

/// Write `index` through its `lock` (then renamed into place) for the worktree at `path`.
fn write_locked(index: &gix::index::File, lock: gix::lock::File, path: &Path) -> Result<()> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::internal(format!(
            "could not write the index of {}: {e}",
            path.display()
        ))
    };
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, lock);
    index
        .write_to(&mut out, Default::default())
        .map_err(|e| failed(&e))?;
    out.into_inner()
        .map_err(|e| failed(&e.into_error()))?
        .commit()
        .map_err(|e| failed(&e.error))?;
    Ok(())
}

/// `.gitattributes` files decide how every other file is written: they go first.
fn is_attributes_file(path: &gix::bstr::BStr) -> bool {
    path == ".gitattributes" || path.ends_with(b"/.gitattributes")
}

/// Not there: missing, or a parent that is now a file.
fn is_absent(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

fn prune_empty_parents(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use gix::bstr::ByteSlice;

    use crate::store::{test_git as git, test_repo as repo, test_rev as rev};

    /// Every cached tree of the index at `path` against `tree`: its id is the subtree's there and
    /// its count the number of index entries below it. The number of cached trees checked.
    fn check_cached_trees(home: &Path, path: &Path, tree: &str) -> usize {
        let repo = crate::store::repo::open_path(path).expect("open");
        let index = repo.open_index().expect("index");
        fn walk(
            home: &Path,
            path: &Path,
            tree: &str,
            at: &str,
            node: &gix::index::extension::Tree,
            index: &gix::index::State,
        ) -> usize {
            let spec = if at.is_empty() {
                format!("{tree}^{{tree}}")
            } else {
                format!("{tree}:{at}")
            };
            assert_eq!(node.id, rev(home, path, &spec), "the id of {spec}");
            let below = index
                .entries()
                .iter()
                .filter(|e| at.is_empty() || e.path(index).starts_with_str(format!("{at}/")))
                .count();
            assert_eq!(
                node.num_entries,
                u32::try_from(below).ok(),
                "entries of {spec}"
            );
            let mut checked = 1;
            for child in &node.children {
                let name = child.name.to_str().expect("a name");
                let at = if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}/{name}")
                };
                checked += walk(home, path, tree, &at, child, index);
            }
            checked
        }
        let root = index.tree().expect("cached trees kept");
        walk(home, path, tree, "", root, &index)
    }

    #[test]
    fn a_move_keeps_the_cached_trees_valid_unless_a_directory_appears() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let write = |name: &str, text: &str| crate::store::test_write(&path, name, text);
        for name in ["a/x", "a/y", "a/deep/z", "b/z", "top"] {
            write(name, name);
        }
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "old"]);
        git(home, &path, &["tag", "old"]);
        write("a/deep/z", "changed");
        std::fs::remove_file(path.join("a/y")).expect("rm");
        write("b/w", "added");
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "same directories"]);
        git(home, &path, &["tag", "new"]);
        write("c/new", "a new directory");
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "a new directory"]);
        git(home, &path, &["tag", "newer"]);
        // `git checkout` leaves the cached trees whole.
        git(home, &path, &["checkout", "-q", "old"]);
        assert_eq!(
            check_cached_trees(home, &path, "old"),
            4,
            "root, a, a/deep, b"
        );

        let tree = |spec: &str| rev(home, &path, &format!("{spec}^{{tree}}"));
        let _ = super::move_worktree(&path, tree("old"), tree("new")).expect("moved");
        assert_eq!(check_cached_trees(home, &path, "new"), 4);
        // git trusts them: writing the index's tree writes exactly the new tree.
        let out = crate::store::test_git_command(home, &path, &["write-tree"])
            .output()
            .expect("git runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            tree("new").to_string()
        );

        let _ = super::move_worktree(&path, tree("new"), tree("newer")).expect("moved");
        let index = crate::store::repo::open_path(&path)
            .expect("open")
            .open_index()
            .expect("index");
        assert!(index.tree().is_none(), "dropped for git to rebuild");
    }

    /// The index read before a move is edited instead of being read again only while the file
    /// is still that one: written meanwhile (here by `git add`), it is read again and what was
    /// written is kept.
    #[test]
    fn the_index_read_before_a_move_is_reused_only_while_the_file_is_the_same() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let write = |name: &str, text: &str| crate::store::test_write(&path, name, text);
        write("a", "a");
        write("b", "b");
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "old"]);
        git(home, &path, &["tag", "old"]);
        write("a", "changed");
        git(home, &path, &["commit", "-q", "-am", "new"]);
        git(home, &path, &["tag", "new"]);
        git(home, &path, &["checkout", "-q", "old"]);
        let tree = |spec: &str| rev(home, &path, &format!("{spec}^{{tree}}"));
        let ls = || {
            let out = crate::store::test_git_command(home, &path, &["ls-files", "-v"])
                .output()
                .expect("git runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let read = || {
            crate::store::worktree::read_index(&crate::store::repo::open_path(&path).expect("open"))
                .expect("read")
        };

        // The same file: the read index is what is edited (an entry marked only in memory
        // stays marked).
        let mut same = read();
        let b = same.entry_index_by_path("b".into()).expect("b");
        same.entries_mut()[b].flags |= gix::index::entry::Flags::ASSUME_VALID;
        let _ = super::move_worktree_read(&path, (tree("old"), tree("new")), Some(same))
            .expect("moved");
        assert_eq!(ls(), "H a\nh b\n");

        // Written meanwhile: read again, and the entry added meanwhile is kept.
        let stale = read();
        write("c", "c");
        git(home, &path, &["add", "c"]);
        let _ = super::move_worktree_read(&path, (tree("new"), tree("old")), Some(stale))
            .expect("moved");
        assert_eq!(ls(), "H a\nh b\nH c\n");
    }
}
