//! Committing everything in a run worktree, in-process: what `git add -A && git commit` does,
//! built from gix parts (status, the to-git filter pipeline, blob writes, the tree editor, a
//! compare-and-swap on the branch, an index written for the new tree).
//!
//! Failure model. Objects are written first (unreachable until a ref names them); then the run
//! branch moves by compare-and-swap from the head we started from; then the worktree's index is
//! rewritten for the new tree. A crash after the branch moved but before the index was written
//! leaves a worktree whose files equal the new head while its index still describes the old
//! one: collecting again builds the same tree, commits nothing, and writes the index. So
//! collecting is idempotent, which is what a resumed loop relies on.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::EntryKind;

use crate::error::{Context, Error, Result};
use crate::lifecycle::checkpoint::record_checkpoint;
use crate::model::loop_state::{Collected, CommittedBy, Phase};
use crate::store::ledger::Ledger;
use crate::store::{worktree, Store};

use super::{commit, in_flight, next_phase, Driver};
use crate::model::ids::short;
use crate::store::tx::{self, Cas};

/// A commit made of the worktree's changes.
#[derive(Debug, Clone, Copy)]
pub struct Committed {
    pub commit: gix::ObjectId,
    pub tree: gix::ObjectId,
}

/// Every path where the worktree or the index may differ from `HEAD`: staged and unstaged
/// changes to tracked files and untracked, not ignored files, without rename detection (a
/// rename is its two paths).
fn candidate_paths(repo: &gix::Repository, path: &Path) -> Result<BTreeSet<String>> {
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
        out.insert(location.trim_end_matches('/').to_string());
    }
    Ok(out)
}

/// What a worktree path holds now.
enum OnDisk {
    Gone,
    Blob(EntryKind, Vec<u8>),
    Gitlink(gix::ObjectId),
}

/// Commit every change in the worktree at `path` on top of `head` (its `HEAD`, on `branch`)
/// with `message`. Returns `None` when the worktree's content equals `head`'s tree — the index
/// is brought in line with `head` all the same.
pub fn commit_all(
    store: &Store,
    path: &Path,
    branch: &str,
    head: gix::ObjectId,
    message: &str,
) -> Result<Option<Committed>> {
    let repo = crate::store::repo::open_path(path)?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| Error::internal(format!("{} has no worktree", path.display())))?
        .to_path_buf();
    let candidates = candidate_paths(&repo, path)?;
    let head_tree = store.tree_of(head)?;
    if candidates.is_empty() {
        return Ok(None);
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
    for rel in &candidates {
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

    let committed = if tree == head_tree {
        None
    } else {
        // The configured identity, with tabellio's fallback.
        let commit = store
            .write_commit(message, tree, [head])
            .context(|| "could not write the commit".into())?;
        tx::apply(store, &[Cas::update(branch, Some(head), commit, message)])
            .map_err(|e| e.into_error())?;
        Some(Committed { commit, tree })
    };
    write_index(&repo, &workdir, tree, &candidates)?;
    Ok(committed)
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

/// Rewrite the worktree's index for `tree`: fresh stat data for the paths we read, the old
/// index's for entries that did not change, so `git status` is clean and fast afterwards.
fn write_index(
    repo: &gix::Repository,
    workdir: &Path,
    tree: gix::ObjectId,
    touched: &BTreeSet<String>,
) -> Result<()> {
    let current = repo
        .index_or_empty()
        .context(|| "could not read the worktree's index".into())?;
    let old: HashMap<BString, (gix::ObjectId, gix::index::entry::Stat)> = current
        .entries()
        .iter()
        .map(|e| (e.path(&current).to_owned(), (e.id, e.stat)))
        .collect();
    let mut index = repo
        .index_from_tree(&tree)
        .context(|| format!("could not read tree {tree}"))?;
    let (entries, backing) = index.entries_mut_and_pathbacking();
    for e in entries.iter_mut() {
        let p = e.path_in(backing);
        let rel = p.to_str_lossy();
        if touched.contains(rel.as_ref()) {
            if let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&workdir.join(&*rel)) {
                if let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) {
                    e.stat = stat;
                }
            }
        } else if let Some((id, stat)) = old.get(p) {
            if *id == e.id {
                e.stat = *stat;
            }
        }
    }
    index
        .write(Default::default())
        .context(|| "could not write the worktree's index".into())?;
    Ok(())
}

impl Driver<'_> {
    pub(super) fn collect(&mut self, ledger: Ledger) -> Result<Ledger> {
        let store = &self.env.store;
        let rec = &ledger.record;
        let (state, cur) = in_flight(&ledger)?;
        let n = cur.n;
        let start_head = store.parse_oid(&cur.start_head)?;
        let path = self.workspace(&ledger)?;
        let failure = |head: Option<gix::ObjectId>, why: String| -> Result<Collected> {
            let head = head.unwrap_or(start_head);
            Ok(Collected {
                head: head.to_string(),
                tree: store.tree_of(head)?.to_string(),
                changed: false,
                committed_by: CommittedBy::Nobody,
                checkpoint: None,
                failure: Some(why),
            })
        };
        let ws = worktree::inspect(&path)?;
        let collected = if ws.branch.as_deref() != Some(rec.branch.as_str()) {
            failure(
                None,
                format!(
                    "the agent left the worktree on {} instead of the run branch {}",
                    ws.branch.as_deref().unwrap_or("a detached HEAD"),
                    rec.branch
                ),
            )?
        } else {
            let head = ws
                .head
                .ok_or_else(|| Error::refused("the run worktree has no HEAD commit"))?;
            let base = store.parse_oid(&rec.base.commit)?;
            if !crate::run::workspace::descends_from_base(store, rec, head)? {
                failure(
                    Some(head),
                    format!("the agent rewrote the run branch: {head} does not descend from the base {base}"),
                )?
            } else {
                let message = format!(
                    "tabellio: iteration {n}\n\nTabellio-Run: {}\nTabellio-Actor: {}:{}\n",
                    rec.run_id, rec.actor.kind, rec.actor.id
                );
                let ours = commit_all(store, &path, &rec.branch, head, &message)?;
                let (head, committed_by) = match ours {
                    Some(c) => (c.commit, CommittedBy::Tabellio),
                    None if head == start_head => (head, CommittedBy::Nobody),
                    // Ours from a collect that was killed before its ledger commit, or the
                    // agent's own.
                    None if is_iteration_commit(store, head, n)? => (head, CommittedBy::Tabellio),
                    None => (head, CommittedBy::Agent),
                };
                Collected {
                    head: head.to_string(),
                    tree: store.tree_of(head)?.to_string(),
                    changed: head != start_head,
                    committed_by,
                    checkpoint: None,
                    failure: None,
                }
            }
        };
        let head = store.parse_oid(&collected.head)?;
        self.say(
            n,
            Phase::Collect,
            match (&collected.failure, collected.committed_by) {
                (Some(why), _) => format!("cannot collect: {why}"),
                (None, CommittedBy::Nobody) => "the agent changed nothing".into(),
                (None, CommittedBy::Tabellio) => {
                    format!(
                        "committed the agent's changes as {}",
                        short(&collected.head)
                    )
                }
                (None, CommittedBy::Agent) => {
                    format!("the agent committed {}", short(&collected.head))
                }
            },
        );
        let already = rec.checkpoints.iter().any(|c| c.commit == collected.head);
        if collected.changed && !already {
            let summary = match collected.committed_by {
                CommittedBy::Agent => {
                    format!("loop iteration {n}: {}", store.commit_subject(head))
                }
                _ => format!("loop iteration {n}"),
            };
            let command = format!("loop {}/{}", state.iteration, Phase::Evaluate);
            let (_, ledger) =
                record_checkpoint(store, &ledger, head, Some(&summary), &command, |next| {
                    if let Some(l) = next.loop_state.as_mut() {
                        l.phase = Phase::Evaluate;
                        if let Some(cur) = l.current.as_mut() {
                            let mut c = collected;
                            c.checkpoint = Some(head.to_string());
                            cur.collect = Some(c);
                        }
                    }
                })?;
            return Ok(ledger);
        }
        let (next, command) = next_phase(rec, Phase::Evaluate, |l| {
            if let Some(cur) = l.current.as_mut() {
                cur.collect = Some(collected);
            }
        });
        commit(store, &ledger, next, &command)
    }
}

/// Is `commit` the harness's own commit of iteration `n` (from a collect killed before it
/// recorded it)?
fn is_iteration_commit(store: &Store, commit: gix::ObjectId, n: u32) -> Result<bool> {
    Ok(store.commit_subject(commit) == format!("tabellio: iteration {n}"))
}
