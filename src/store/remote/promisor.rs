//! Partial clones (`git clone --filter=blob:none`: the tree of every commit, the content of only
//! what was checked out). The promisor remote left the other blobs out — also those of notes
//! fetched later, since a fetch keeps the clone's filter — and git fetches each one the moment a
//! git command needs it. gix does not, and tabellio reads through gix: so what judging a commit
//! will read is fetched first, in one `git fetch` from the promisor remote, the way git's own
//! lazy fetch asks for missing objects. Nothing but objects is written (no ref, no `FETCH_HEAD`).

use std::collections::BTreeSet;

use crate::error::{Context, Error, Result};
use crate::store::git_cli as git;
use crate::store::Store;

use super::failure::{self, Op};
use super::fetch::NOTES_REMOTES;

/// The remote a partial clone fetches missing objects from: the one with
/// `remote.<name>.promisor` set (what `git clone --filter` configures), else the one
/// `extensions.partialClone` names (older gits); `None` in a repository that is not a partial
/// clone.
pub fn promisor_remote(store: &Store) -> Option<String> {
    let snapshot = store.repo.config_snapshot();
    let promisor = super::fetch::remote_names(store).into_iter().find(|name| {
        snapshot
            .boolean(format!("remote.{name}.promisor").as_str())
            .unwrap_or(false)
    });
    promisor.or_else(|| {
        store
            .config_string("extensions.partialClone")
            .filter(|r| !r.is_empty())
    })
}

/// In a partial clone, fetch the blobs that judging `commits` reads and this clone lacks: the
/// notes on each commit and on its tree in each of `notes_refs` (and the remote-tracking copies
/// of them), and the files directly under `.tabellio/` (the policy, the allowed signers) of each
/// commit and of each of `policies_at` (the commits whose policies judge them). Elsewhere,
/// nothing.
pub fn fetch_for_judging(
    store: &Store,
    notes_refs: &[&str],
    commits: &[gix::ObjectId],
    policies_at: &[gix::ObjectId],
) -> Result<()> {
    let Some(remote) = promisor_remote(store) else {
        return Ok(());
    };
    let objects = store.objects();
    let mut views = Vec::new();
    for tip in notes_tips(store, notes_refs)? {
        let tree = store.tree_of(tip)?;
        views.push(
            gix::note::plumbing::State::new(tree, &objects)
                .context(|| format!("could not read the notes tree {tree}"))?,
        );
    }
    let mut missing = BTreeSet::new();
    for &commit in commits {
        let tree = store.tree_of(commit)?;
        for object in [commit, tree] {
            for view in &mut views {
                let note = view
                    .get(&object, &objects)
                    .context(|| format!("could not look up the note on {object}"))?;
                missing.extend(note.filter(|b| !store.repo.has_object(b)));
            }
        }
    }
    for &commit in commits.iter().chain(policies_at) {
        let tree = store.tree_of(commit)?;
        missing.extend(
            tabellio_files(store, tree)?
                .into_iter()
                .filter(|b| !store.repo.has_object(b)),
        );
    }
    fetch_objects(store, &remote, &missing)
}

/// The notes commits of `notes_refs` and of their remote-tracking copies.
fn notes_tips(store: &Store, notes_refs: &[&str]) -> Result<Vec<gix::ObjectId>> {
    let mut tips = Vec::new();
    for notes_ref in notes_refs {
        tips.extend(store.ref_target(notes_ref)?);
    }
    let names: Vec<&str> = notes_refs
        .iter()
        .filter_map(|r| r.rsplit('/').next())
        .collect();
    for (tracking, tip) in store.refs_under(NOTES_REMOTES)? {
        if tracking
            .rsplit('/')
            .next()
            .is_some_and(|n| names.contains(&n))
        {
            tips.push(tip);
        }
    }
    Ok(tips)
}

/// The blobs directly under `.tabellio/` in `tree`.
fn tabellio_files(store: &Store, tree: gix::ObjectId) -> Result<Vec<gix::ObjectId>> {
    let root = store
        .repo
        .find_tree(tree)
        .context(|| format!("could not read the tree {tree}"))?;
    let Some(entry) = root
        .lookup_entry_by_path(".tabellio")
        .context(|| format!("could not read .tabellio in the tree {tree}"))?
    else {
        return Ok(Vec::new());
    };
    if !entry.mode().is_tree() {
        return Ok(Vec::new());
    }
    let dir = store
        .repo
        .find_tree(entry.object_id())
        .context(|| format!("could not read .tabellio in the tree {tree}"))?;
    let mut out = Vec::new();
    for e in dir.iter() {
        let e = e.context(|| format!("could not read .tabellio in the tree {tree}"))?;
        if e.mode().is_blob() {
            out.push(e.oid().to_owned());
        }
    }
    Ok(out)
}

/// Fetch `ids` from `remote` as git's lazy fetch of a partial clone does: by id, negotiating
/// nothing, keeping the clone's filter, writing no ref and no `FETCH_HEAD`.
pub fn fetch_objects(store: &Store, remote: &str, ids: &BTreeSet<gix::ObjectId>) -> Result<()> {
    // Each id is 41 bytes of arguments: a few thousand per git keeps far below any limit.
    let ids: Vec<&gix::ObjectId> = ids.iter().collect();
    for chunk in ids.chunks(2000) {
        let mut args = git::argv([
            "-c",
            "fetch.negotiationAlgorithm=noop",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--filter=blob:none",
            remote,
        ]);
        args.extend(chunk.iter().map(|id| id.to_string().into()));
        let out = git::run(store, &args)?;
        if !out.success() {
            let said = out.stderr_tail();
            if let Some(err) = failure::error(remote, Op::Fetch, &out.stderr, &said) {
                return Err(err);
            }
            return Err(Error::internal(format!(
                "this partial clone could not fetch {} object(s) it needs from its promisor remote {remote}: {said}",
                chunk.len()
            ))
            .hint(format!(
                "check that `git fetch {remote}` works (URL, network, credentials), then run the same command again"
            )));
        }
    }
    Ok(())
}
