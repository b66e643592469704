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
use std::path::Path;

use gix::bstr::{BString, ByteSlice};

use crate::error::{Context, Error, Result};
use crate::lifecycle::checkpoint::record_checkpoint;
use crate::model::loop_state::{Collected, CommittedBy, Phase};
use crate::runner::is_secret_path;
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

/// What [`commit_all`] did: the commit it made, if any, and the untracked secret-named paths
/// it left out (they stay in the worktree, never in a commit).
#[derive(Debug, Clone)]
pub struct Collection {
    pub committed: Option<Committed>,
    pub left_out: Vec<String>,
}

/// Commit every change in the worktree at `path` on top of `head` (its `HEAD`, on `branch`)
/// with `message`, except untracked files with secret names (`.env`, `id_ed25519`, `*.pem`,
/// `api_token.txt`, …), which stay in the worktree and are returned in
/// [`Collection::left_out`]. No commit when the rest equals `head`'s tree — the index is
/// brought in line with `head` all the same.
pub fn commit_all(
    store: &Store,
    path: &Path,
    branch: &str,
    head: gix::ObjectId,
    message: &str,
) -> Result<Collection> {
    let repo = crate::store::repo::open_path(path)?;
    let workdir = crate::store::repo::workdir_of(&repo, path)?;
    let head_tree = store.tree_of(head)?;
    // The loop commits everything the agent left, as `git add -A` would, but a credential the
    // agent wrote next to its work (an untracked `.env`, a key file) never enters a commit.
    let snap = worktree::snapshot::snapshot(&repo, path, head_tree, &is_secret_path)?;
    let left_out = snap.left_out;
    if snap.touched.is_empty() {
        return Ok(Collection {
            committed: None,
            left_out,
        });
    }
    let (tree, candidates) = (snap.tree, snap.touched);
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
    Ok(Collection {
        committed,
        left_out,
    })
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
                let (head, committed_by) = match ours.committed {
                    Some(c) => (c.commit, CommittedBy::Tabellio),
                    None if head == start_head => (head, CommittedBy::Nobody),
                    // Ours from a collect that was killed before its ledger commit, or the
                    // agent's own.
                    None if is_iteration_commit(store, head, n)? => (head, CommittedBy::Tabellio),
                    None => (head, CommittedBy::Agent),
                };
                // A credential is never committed, and a check must not run beside a file the
                // commit does not have: the rest is kept, and the person decides where it goes.
                let failure = (!ours.left_out.is_empty()).then(|| {
                    format!(
                        "the agent left untracked files with secret names, which are never committed: {} (remove them, or ignore them in .gitignore or .git/info/exclude, then loop again)",
                        ours.left_out.join(", ")
                    )
                });
                Collected {
                    head: head.to_string(),
                    tree: store.tree_of(head)?.to_string(),
                    changed: head != start_head,
                    committed_by,
                    checkpoint: None,
                    failure,
                }
            }
        };
        let head = store.parse_oid(&collected.head)?;
        self.say(n, Phase::Collect, describe(&collected));
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

/// What collect says it did.
fn describe(collected: &Collected) -> String {
    let head = short(&collected.head);
    match (&collected.failure, collected.committed_by) {
        (Some(why), CommittedBy::Tabellio) => {
            format!("committed the agent's changes as {head}, but {why}")
        }
        (Some(why), _) => format!("cannot collect: {why}"),
        (None, CommittedBy::Nobody) => "the agent changed nothing".into(),
        (None, CommittedBy::Tabellio) => format!("committed the agent's changes as {head}"),
        (None, CommittedBy::Agent) => format!("the agent committed {head}"),
    }
}
