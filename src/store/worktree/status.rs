//! What a worktree looks like right now: its branch, head, tracked changes (staged or not) and
//! untracked files, as `git status --porcelain` lists them.
//!
//! gix's `status()` compares HEAD's tree with the index, the index with the files and walks for
//! untracked files in four threads, and splits the file check over two more once the index
//! has a handful of entries (`strace -f` counts seven threads for one `status` of a run with
//! nine files). Starting them costs more than the work in a small worktree (each
//! thread is a stack, a malloc arena and their page faults). So a worktree whose index has
//! fewer than [`IN_THREAD_BELOW`] entries (git's own bound for its parallel index preload) is
//! compared here, in the calling thread, by the same three gix steps with the same
//! configuration: [`gix::Repository::tree_index_status`] (renames as `status.renames` says),
//! gix-status's `index_as_worktree` (the file check, with the attributes, filters, stat and
//! file-system options gix's status takes) and [`gix::Repository::dirwalk`] (the untracked
//! files). An index with submodules or a sparse index keeps gix's own status, which handles
//! them.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, ByteSlice};
use gix::status::plumbing::index_as_worktree::{traits::FastEq, EntryStatus};

use crate::error::{Context, Result};

use super::super::{refs, Store};
use super::{damaged_index, shadow_head, WorkspaceState};

/// Indexes with fewer entries are compared in the calling thread (git preloads the index in
/// threads from 1,000 entries on: 500 per thread, at least two).
const IN_THREAD_BELOW: usize = 1_000;

/// Branch, head, tracked changes and untracked files of `repo`, the worktree at `path`; its
/// `HEAD` read through `store` when given (once per ref snapshot).
pub(super) fn status_of(
    store: Option<&Store>,
    path: &Path,
    repo: gix::Repository,
) -> Result<WorkspaceState> {
    Ok(status_with_index(store, path, repo, UntrackedScan::Listed)?.0)
}

/// Whether a status walks the worktree for untracked files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UntrackedScan {
    /// Listed, as `git status` lists them.
    Listed,
    /// Not looked for: the state's `untracked` is empty (`git status -uno`). For a caller that
    /// asks the paths it cares about itself, without reading every directory.
    Skipped,
}

/// [`status_of`], with the index it compared: `repo`'s shared copy, which gix's status also
/// uses for the attributes and the submodules, so it is read once.
pub(super) fn status_with_index(
    store: Option<&Store>,
    path: &Path,
    mut repo: gix::Repository,
    untracked: UntrackedScan,
) -> Result<(WorkspaceState, gix::worktree::Index)> {
    unverified_index_checksum(&mut repo)?;
    relative_workdir(&mut repo);
    let index = repo
        .index_or_empty()
        .context(|| format!("could not read the index {}", repo.index_path().display()))
        .map_err(|e| damaged_index(e, &repo.index_path()))?;
    let here = match store {
        Some(store) => store.head_of(&repo)?,
        None => refs::head(&repo)?,
    };
    let _shadow = shadow_head(&mut repo, &here)?;
    let refs::Head { branch, id: head } = here;
    let mut changes = Changes::default();
    let failed = || format!("could not compute the status of {}", path.display());
    if fits_in_thread(&index) {
        in_this_thread(&repo, &index, head, untracked, &mut changes).context(failed)?;
    } else {
        in_threads(&repo, &index, head, untracked, &mut changes).context(failed)?;
    }
    let Changes {
        mut changed,
        mut untracked,
    } = changes;
    changed.sort();
    changed.dedup();
    untracked.sort();
    untracked.dedup();
    let state = WorkspaceState {
        path: path.to_path_buf(),
        branch,
        head,
        changed,
        untracked,
    };
    Ok((state, index))
}

/// `repo` reading its index as git's status does: without verifying the index's trailing
/// checksum (as [`super::read_index`]). On a 20,000-file index that SHA-1 is a tenth of the
/// status. Only this handle's reads change: every index we write still carries its checksum.
fn unverified_index_checksum(repo: &mut gix::Repository) -> Result<()> {
    let failed = |e: gix::Error| crate::error::Error::internal(format!("index.skipHash: {e}"));
    let mut config = repo.config_snapshot_mut();
    config
        .set_value(&gix::config::tree::Index::SKIP_HASH, "true")
        .map_err(failed)?;
    config.commit().map_err(failed)?;
    Ok(())
}

/// `repo`'s worktree named relative to the current directory when it lies inside it (`.` when
/// it is the current directory), as git names every file it looks at relative to the top of its
/// worktree: the kernel resolves each file's path component by component, and the comparison
/// looks at every tracked file.
fn relative_workdir(repo: &mut gix::Repository) {
    let Some(workdir) = repo.workdir() else {
        return;
    };
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let (Ok(workdir), Ok(cwd)) = (std::fs::canonicalize(workdir), std::fs::canonicalize(cwd))
    else {
        return;
    };
    if let Ok(inside) = workdir.strip_prefix(&cwd) {
        let relative = if inside.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            inside.to_path_buf()
        };
        let _ = repo.set_workdir(relative);
    }
}

/// What the comparison found.
#[derive(Default, Debug, PartialEq)]
struct Changes {
    changed: Vec<String>,
    untracked: Vec<String>,
}

impl Changes {
    fn changed(&mut self, location: &BStr) {
        self.changed.push(location.to_str_lossy().into_owned());
    }
}

/// Whether [`in_this_thread`] compares `index` as gix's status would.
fn fits_in_thread(index: &gix::index::State) -> bool {
    index.entries().len() < IN_THREAD_BELOW
        && !index.is_sparse()
        && !index
            .entries()
            .iter()
            .any(|e| e.mode == gix::index::entry::Mode::COMMIT)
}

/// gix's comparison of the index with the files and its walk for untracked files, in its
/// threads, beside HEAD's tree against the index in a thread of its own ([`staged`]) when the
/// index's cached trees leave anything to compare.
fn in_threads(
    repo: &gix::Repository,
    index: &gix::worktree::Index,
    head: Option<gix::ObjectId>,
    untracked: UntrackedScan,
    changes: &mut Changes,
) -> gix::Result<()> {
    let interrupt = AtomicBool::new(false);
    let tree = head_tree(repo, head)?;
    let mut options = gix::status::index_worktree::Options {
        sorting: None,
        dirwalk_options: None,
        rewrites: None,
        thread_limit: None,
    };
    if untracked == UntrackedScan::Listed {
        options.dirwalk_options = Some(
            repo.dirwalk_options()?
                .emit_untracked(gix::dir::walk::EmissionMode::Matching),
        );
    }
    let submodules = gix::status::index_worktree::BuiltinSubmoduleStatus::new(
        repo.clone().into_sync(),
        gix::status::Submodule::AsConfigured { check_dirty: false },
    )?;
    let mut staged_changes = Changes::default();
    std::thread::scope(|scope| -> gix::Result<()> {
        let staged_thread = (!holds_tree(index, tree)).then(|| {
            let repo = repo.clone();
            let out = &mut staged_changes;
            scope.spawn(move || -> gix::Result<()> {
                let mut pathspec = every_path(&repo, index)?;
                staged(&repo, index, tree, &mut pathspec, out)
            })
        });
        repo.index_worktree_status(
            index,
            None::<&str>,
            &mut IndexWorktree(changes),
            FastEq,
            submodules,
            &mut gix::progress::Discard,
            &interrupt,
            options,
        )?;
        match staged_thread.map(|t| t.join()) {
            Some(Ok(staged)) => staged,
            Some(Err(_)) => Err(gix::Error::from_error(std::io::Error::other(
                "the comparison of HEAD with the index panicked",
            ))),
            None => Ok(()),
        }
    })?;
    changes.changed.extend(staged_changes.changed);
    Ok(())
}

/// The empty pathspec, matching every path, with the attributes gix's status reads.
fn every_path<'repo>(
    repo: &'repo gix::Repository,
    index: &gix::index::State,
) -> gix::Result<gix::Pathspec<'repo>> {
    use gix::worktree::stack::state::attributes::Source;
    repo.pathspec(
        false,
        None::<&str>,
        true,
        index,
        Source::WorktreeThenIdMapping,
    )
}

/// HEAD's tree (the empty tree on an unborn branch).
fn head_tree(repo: &gix::Repository, head: Option<gix::ObjectId>) -> gix::Result<gix::ObjectId> {
    Ok(match head {
        Some(commit) => repo.find_commit(commit)?.tree_id()?.detach(),
        None => gix::ObjectId::empty_tree(repo.object_hash()),
    })
}

/// Whether the index's cached trees (its `TREE` extension) say it holds exactly `tree`: the root
/// entry is valid (git invalidates it, and every entry above a path, when the path changes in the
/// index), covers every entry and names `tree`, and no entry is a conflict or an intent to add.
/// Then HEAD's tree and the index have nothing to compare and no tree is read: git's own status
/// and commit trust the cached trees the same way.
fn holds_tree(index: &gix::index::State, tree: gix::ObjectId) -> bool {
    let Some(root) = index.tree() else {
        return false;
    };
    root.id == tree
        && root
            .num_entries
            .is_some_and(|n| usize::try_from(n).is_ok_and(|n| n == index.entries().len()))
        && index.entries().iter().all(|e| {
            e.stage_raw() == 0 && !e.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD)
        })
}

/// HEAD's `tree` against the index: the staged changes, renames as `status.renames` says.
/// Nothing is read when the index holds exactly `tree` ([`holds_tree`]).
fn staged<'repo>(
    repo: &'repo gix::Repository,
    index: &gix::index::State,
    tree: gix::ObjectId,
    pathspec: &mut gix::Pathspec<'repo>,
    changes: &mut Changes,
) -> gix::Result<()> {
    if holds_tree(index, tree) {
        return Ok(());
    }
    repo.tree_index_status(
        &tree,
        index,
        Some(pathspec),
        gix::status::tree_index::TrackRenames::AsConfigured,
        |change, _, _| {
            changes.changed(change.location());
            Ok(std::ops::ControlFlow::Continue(()))
        },
    )?;
    Ok(())
}

/// What gix's comparison of the index with the files finds: a tracked file whose content or
/// mode differs (judged as [`TrackedChanges`] judges it), or an untracked file.
struct IndexWorktree<'a>(&'a mut Changes);

impl<'index> gix::status::plumbing::index_as_worktree_with_renames::VisitEntry<'index>
    for IndexWorktree<'_>
{
    type ContentChange = ();
    type SubmoduleStatus = gix::submodule::Status;

    fn visit_entry(
        &mut self,
        entry: gix::status::plumbing::index_as_worktree_with_renames::Entry<
            'index,
            Self::ContentChange,
            Self::SubmoduleStatus,
        >,
    ) {
        use gix::status::plumbing::index_as_worktree_with_renames::Entry;
        match entry {
            Entry::Modification {
                rela_path, status, ..
            } => {
                if !matches!(status, EntryStatus::NeedsUpdate(_)) {
                    self.0.changed(rela_path);
                }
            }
            Entry::DirectoryContents { entry, .. } => {
                if matches!(entry.status, gix::dir::entry::Status::Untracked) {
                    self.0
                        .untracked
                        .push(entry.rela_path.to_str_lossy().into_owned());
                }
            }
            Entry::Rewrite { dirwalk_entry, .. } => {
                self.0.changed(dirwalk_entry.rela_path.as_ref())
            }
        }
    }
}

/// The three steps of gix's status, one after the other in this thread (see the module
/// documentation). `head` is HEAD's commit, `None` when unborn.
fn in_this_thread(
    repo: &gix::Repository,
    index: &gix::index::State,
    head: Option<gix::ObjectId>,
    untracked: UntrackedScan,
    changes: &mut Changes,
) -> gix::Result<()> {
    use gix::worktree::stack::state::attributes::Source;
    let interrupt = AtomicBool::new(false);
    let workdir = repo
        .workdir()
        .ok_or_else(|| gix::Error::from_error(std::io::Error::other("no worktree")))?;

    // HEAD's tree against the index (staged changes).
    let tree = head_tree(repo, head)?;
    let mut pathspec = every_path(repo, index)?;
    staged(repo, index, tree, &mut pathspec, changes)?;

    // The index against the files (unstaged changes).
    let attributes = repo
        .attributes_only(index, Source::WorktreeThenIdMapping)?
        .detach();
    let (filter, attributes) = gix::filter::Pipeline::new(repo, attributes)?.into_parts();
    let fscache = repo
        .config_snapshot()
        .boolean("core.fscache")
        .unwrap_or(false);
    gix::status::plumbing::index_as_worktree(
        index,
        workdir,
        &mut TrackedChanges(changes),
        FastEq,
        NoSubmodules,
        repo.objects
            .clone()
            .into_arc()
            .map_err(gix::Error::from_error)?,
        &mut gix::progress::Discard,
        gix::status::plumbing::index_as_worktree::Context {
            pathspec: pathspec.into_parts().0,
            stack: attributes,
            filter,
            should_interrupt: &interrupt,
        },
        gix::status::plumbing::index_as_worktree::Options {
            fs: repo.filesystem_options()?,
            thread_limit: Some(1),
            stat: repo.stat_options()?,
            fscache,
        },
    )?;

    if untracked == UntrackedScan::Skipped {
        return Ok(());
    }
    // Untracked files.
    let options = repo
        .dirwalk_options()?
        .emit_untracked(gix::dir::walk::EmissionMode::Matching);
    repo.dirwalk(
        index,
        None::<&str>,
        &interrupt,
        options,
        &mut Untracked(&mut changes.untracked),
    )?;
    Ok(())
}

/// Tracked files whose content or mode differs from the index. A file whose stat changed but
/// not its content (`NeedsUpdate`) is not a change, as in gix's status.
struct TrackedChanges<'a>(&'a mut Changes);

impl<'index> gix::status::plumbing::index_as_worktree::VisitEntry<'index> for TrackedChanges<'_> {
    type ContentChange = ();
    type SubmoduleStatus = ();

    fn visit_entry(
        &mut self,
        _entries: &'index [gix::index::Entry],
        _entry: &'index gix::index::Entry,
        _entry_index: usize,
        rela_path: &'index BStr,
        status: EntryStatus<(), ()>,
    ) {
        if !matches!(status, EntryStatus::NeedsUpdate(_)) {
            self.0.changed(rela_path);
        }
    }
}

/// The index has no submodules when [`in_this_thread`] runs ([`fits_in_thread`]).
#[derive(Clone)]
struct NoSubmodules;

impl gix::status::plumbing::index_as_worktree::traits::SubmoduleStatus for NoSubmodules {
    type Output = ();

    fn status(
        &mut self,
        _entry: &gix::index::Entry,
        _rela_path: &BStr,
    ) -> gix::Result<Option<Self::Output>> {
        Ok(None)
    }
}

/// Untracked, not ignored files, as gix's status lists them (never an untrackable entry such
/// as a socket).
struct Untracked<'a>(&'a mut Vec<String>);

impl gix::dir::walk::Delegate for Untracked<'_> {
    fn emit(
        &mut self,
        entry: gix::dir::EntryRef<'_>,
        _collapsed_directory_status: Option<gix::dir::entry::Status>,
    ) -> gix::dir::walk::Action {
        if entry.status == gix::dir::entry::Status::Untracked
            && entry.disk_kind != Some(gix::dir::entry::Kind::Untrackable)
        {
            self.0.push(entry.rela_path.to_str_lossy().into_owned());
        }
        std::ops::ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{in_this_thread, in_threads, Changes, UntrackedScan};
    use crate::store::test_git as git;
    use crate::store::test_git_command;
    use crate::store::test_repo as repo;
    use crate::store::Store;

    /// Both ways of comparing, sorted as [`super::status_with_index`] sorts them. Each way
    /// also runs without the untracked walk, which must find the same tracked changes and no
    /// untracked file.
    fn both(path: &Path) -> (Changes, Changes) {
        let store = Store::open(path).expect("open");
        let repo = &store.repo;
        let index = repo.index_or_empty().expect("index");
        let head = super::refs::head(repo).expect("head").id;
        let compare = |scan| {
            let (mut here, mut threads) = (Changes::default(), Changes::default());
            in_this_thread(repo, &index, head, scan, &mut here).expect("in this thread");
            in_threads(repo, &index, head, scan, &mut threads).expect("in threads");
            for c in [&mut here, &mut threads] {
                c.changed.sort();
                c.changed.dedup();
                c.untracked.sort();
                c.untracked.dedup();
            }
            (here, threads)
        };
        let (here, threads) = compare(UntrackedScan::Listed);
        assert_eq!(here, git_status(path), "as git sees it");
        let (tracked_here, tracked_threads) = compare(UntrackedScan::Skipped);
        for (tracked, listed) in [(&tracked_here, &here), (&tracked_threads, &threads)] {
            assert_eq!(tracked.changed, listed.changed, "the same tracked changes");
            assert!(tracked.untracked.is_empty(), "no walk: {tracked:?}");
        }
        (here, threads)
    }

    /// `git status --porcelain -uall`, as [`Changes`]: a rename by its new path.
    fn git_status(path: &Path) -> Changes {
        let home = path.parent().expect("home");
        let out = test_git_command(home, path, &["status", "--porcelain", "-uall"])
            .output()
            .expect("git runs");
        let mut git = Changes::default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let (code, name) = line.split_at(3);
            let name = name.rsplit(" -> ").next().expect("a path").to_string();
            match code {
                "?? " => git.untracked.push(name),
                _ => git.changed.push(name),
            }
        }
        git.changed.sort();
        git.untracked.sort();
        git
    }

    /// The index's cached trees stand in for HEAD's tree only when they name it: after `git
    /// reset --soft` they still name the tree of the commit left, whose files are then staged.
    #[test]
    fn cached_trees_stand_in_for_head_only_when_they_name_its_tree() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        std::fs::write(path.join("a"), "a\n").expect("write");
        git(home, &path, &["add", "a"]);
        git(home, &path, &["commit", "-q", "-m", "a"]);
        std::fs::write(path.join("b"), "b\n").expect("write");
        git(home, &path, &["add", "b"]);
        git(home, &path, &["commit", "-q", "-m", "b"]);
        let index = Store::open(&path)
            .expect("open")
            .repo
            .open_index()
            .expect("index");
        let root = index.tree().expect("git commit writes the cached trees");
        let count = u32::try_from(index.entries().len()).expect("a small index");
        assert_eq!(root.num_entries, Some(count), "valid, covering every entry");
        assert_eq!(both(&path).0, Changes::default(), "clean");
        git(home, &path, &["reset", "-q", "--soft", "HEAD~1"]);
        let (here, threads) = both(&path);
        assert_eq!(here, threads);
        assert_eq!(here.changed, ["b"], "staged by the reset");
    }

    #[test]
    fn the_in_thread_status_finds_what_gix_s_status_finds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let write = |name: &str, text: &str| crate::store::test_write(&path, name, text);
        for name in ["a", "b", "c", "d", "e", "x.sh", "dir/f", "crlf.txt"] {
            write(name, &format!("{name}\n"));
        }
        write(".gitignore", "*.log\nbuild/\n");
        write(".gitattributes", "*.txt text eol=crlf\n");
        // Quiet git's "LF will be replaced by CRLF" warnings about the `eol=crlf` files.
        git(home, &path, &["config", "core.safecrlf", "false"]);
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "files"]);
        assert_eq!(both(&path).0, Changes::default(), "a clean worktree");

        write("a", "changed\n"); // unstaged change
        write("b", "staged\n");
        git(home, &path, &["add", "b"]); // staged change
        std::fs::remove_file(path.join("c")).expect("rm"); // deleted, not staged
        git(home, &path, &["rm", "-q", "d"]); // staged deletion
        git(home, &path, &["mv", "e", "e2"]); // staged rename
        let x = path.join("x.sh");
        let mut mode = std::fs::metadata(&x).expect("x").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
        std::fs::set_permissions(&x, mode).expect("chmod"); // mode change
        let dir_f = path.join("dir/f");
        let text = std::fs::read(&dir_f).expect("f");
        std::fs::write(&dir_f, text).expect("rewrite"); // stat changed, content the same
        write("new.txt", "new\n"); // untracked
        write("deep/er/n", "n\n"); // untracked in new directories
        write("skip.log", "log\n"); // ignored
        write("build/out", "o\n"); // ignored directory
        write("intent", "i\n");
        git(home, &path, &["add", "-N", "intent"]); // intent to add
        std::os::unix::fs::symlink("a", path.join("link")).expect("symlink"); // untracked link

        let (here, threads) = both(&path);
        assert_eq!(here, threads);
        assert_eq!(
            here.changed,
            ["a", "b", "c", "d", "e2", "intent", "x.sh"],
            "{here:?}"
        );
        assert_eq!(here.untracked, ["deep/er/n", "link", "new.txt"]);

        // A conflict (unmerged entries), and an unborn branch.
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "more"]);
        git(home, &path, &["switch", "-q", "-c", "side"]);
        write("a", "side\n");
        git(home, &path, &["commit", "-q", "-am", "side"]);
        git(home, &path, &["switch", "-q", "main"]);
        write("a", "main\n");
        git(home, &path, &["commit", "-q", "-am", "main"]);
        let merge = test_git_command(home, &path, &["merge", "-q", "side"])
            .output()
            .expect("git runs");
        assert!(
            String::from_utf8_lossy(&merge.stdout).contains("CONFLICT"),
            "the merge conflicts: {merge:?}"
        );
        let (here, threads) = both(&path);
        assert_eq!(here, threads);
        assert_eq!(here.changed, ["a"]);
        git(home, &path, &["merge", "--abort"]);
        git(home, &path, &["switch", "-q", "--orphan", "unborn"]);
        write("a", "staged on an unborn branch\n");
        git(home, &path, &["add", "a"]);
        let (here, threads) = both(&path);
        assert_eq!(here, threads);
        assert_eq!(here.changed, ["a"]);
    }
}
