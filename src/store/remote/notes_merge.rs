//! Step 2 of sync: merge the remote's notes into ours, exactly as
//! `git notes merge -s cat_sort_uniq <remote>` would, written in-process.
//!
//! When neither side contains the other, the result is a merge commit whose parents are ours
//! and theirs (so `git log` of the notes ref shows where records came from) and whose tree is
//! git's three-way result: for each annotated object the remote changed since the merge base,
//! the remote's note if we did not touch it, ours if we made the same change, and otherwise the
//! sorted unique union of both notes' lines (`cat_sort_uniq`). Since tabellio only ever adds
//! lines, this is the union of every record either side has: nothing is lost. Both sides'
//! fanout layouts are read; the result keeps ours and lets gix-note adjust it as git would.
//!
//! Nothing here moves a ref: callers get the commit to put on the ref by compare-and-swap.

use std::collections::BTreeMap;

use gix::note::plumbing::State;
use serde::Serialize;

use crate::error::{Context, Result};
use crate::store::tx::Cas;
use crate::store::Store;

use super::push::PushRef;

/// What sync does with one notes ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotesAction {
    /// Ours and theirs are the same commit.
    UpToDate,
    /// Only the remote has it: our ref is created at the remote's value.
    Created,
    /// Ours is an ancestor of theirs: ours moves forward.
    FastForwarded,
    /// Both have commits the other lacks: a two-parent merge commit.
    Merged,
    /// Theirs is an ancestor of ours: ours is pushed.
    Ahead,
    /// Only we have it: ours is pushed.
    LocalOnly,
}

/// The plan for one notes ref.
#[derive(Debug, Clone, Serialize)]
pub struct NotesStep {
    #[serde(rename = "ref")]
    pub notes_ref: String,
    pub action: NotesAction,
    /// Our value before.
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub local: Option<gix::ObjectId>,
    /// The remote's value, as fetched.
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub remote: Option<gix::ObjectId>,
    /// The value both sides end at.
    #[serde(serialize_with = "super::ser_oid")]
    pub result: gix::ObjectId,
    /// How many annotated objects got a note from the remote (merge only).
    pub objects: usize,
}

impl NotesStep {
    /// The compare-and-swap that moves our ref to the result, if it moves.
    pub fn local_update(&self, message: &str) -> Option<Cas> {
        (self.local != Some(self.result))
            .then(|| Cas::update(&self.notes_ref, self.local, self.result, message))
    }

    /// The push that moves the remote's ref to the result, if it moves.
    pub fn push(&self) -> Option<PushRef> {
        (self.remote != Some(self.result)).then(|| PushRef {
            dst: self.notes_ref.clone(),
            new: self.result,
            expect: self.remote,
        })
    }
}

/// Decide what to do with `notes_ref` given our value and the remote's, writing the merge
/// commit's objects when one is needed (no ref is written).
pub fn plan(
    store: &Store,
    notes_ref: &str,
    local: Option<gix::ObjectId>,
    remote: Option<gix::ObjectId>,
    remote_name: &str,
) -> Result<Option<NotesStep>> {
    let step = |action, result, objects| NotesStep {
        notes_ref: notes_ref.to_string(),
        action,
        local,
        remote,
        result,
        objects,
    };
    Ok(Some(match (local, remote) {
        (None, None) => return Ok(None),
        (Some(l), None) => step(NotesAction::LocalOnly, l, 0),
        (None, Some(r)) => step(NotesAction::Created, r, 0),
        (Some(l), Some(r)) if l == r => step(NotesAction::UpToDate, l, 0),
        (Some(l), Some(r)) if store.is_ancestor(r, l)? => step(NotesAction::Ahead, l, 0),
        (Some(l), Some(r)) if store.is_ancestor(l, r)? => step(NotesAction::FastForwarded, r, 0),
        (Some(l), Some(r)) => {
            let message = format!(
                "tabellio sync: union of {notes_ref} from {remote_name}\n\n\
                 Notes merged with the cat_sort_uniq strategy: every record of both sides.\n"
            );
            let (commit, objects) = merge(store, l, r, &message)?;
            step(NotesAction::Merged, commit, objects)
        }
    }))
}

/// The merge commit of notes commits `ours` and `theirs` (parents in that order), and how many
/// annotated objects changed on our side.
pub fn merge(
    store: &Store,
    ours: gix::ObjectId,
    theirs: gix::ObjectId,
    message: &str,
) -> Result<(gix::ObjectId, usize)> {
    let base = store
        .repo
        .merge_base(ours, theirs)
        .context(|| format!("could not find the merge base of notes commits {ours} and {theirs}"))?
        .map(|b| b.detach());
    let base_tree = base.map(|b| store.tree_of(b)).transpose()?;
    let (ours_tree, theirs_tree) = (store.tree_of(ours)?, store.tree_of(theirs)?);
    let theirs_changes = diff(store, base_tree, Some(theirs_tree))?;
    let ours_changes = diff(store, base_tree, Some(ours_tree))?;

    let mut state = State::new(ours_tree, &store.repo)
        .context(|| format!("could not read the notes tree {ours_tree}"))?;
    let mut changed = 0;
    for (object, (base_note, their_note)) in theirs_changes {
        let our_note = ours_changes.get(&object).map_or(base_note, |(_, n)| *n);
        let merged = if our_note == base_note {
            // Only the remote changed it: take theirs as it is.
            their_note
        } else if our_note == their_note {
            continue;
        } else {
            match (our_note, their_note) {
                (None, None) => continue,
                // Deleted here, changed there: git adds theirs as it is.
                (None, Some(theirs)) => Some(theirs),
                (Some(ours), theirs) => {
                    let text = cat_sort_uniq(&blob(store, Some(ours))?, &blob(store, theirs)?);
                    Some(store.write_blob(&text)?)
                }
            }
        };
        if merged != our_note {
            state
                .edit(object, merged, &store.objects())
                .context(|| format!("could not merge the note on {object}"))?;
            changed += 1;
        }
    }
    let tree = state
        .write(&store.objects())
        .context(|| "could not write the merged notes tree".into())?;
    let commit = store
        .write_commit(message, tree, [ours, theirs])
        .context(|| "could not write the notes merge commit".into())?;
    Ok((commit, changed))
}

fn blob(store: &Store, id: Option<gix::ObjectId>) -> Result<Vec<u8>> {
    let Some(id) = id else {
        return Ok(Vec::new());
    };
    Ok(store
        .repo
        .find_blob(id)
        .context(|| format!("could not read the note blob {id}"))?
        .data
        .clone())
}

/// git's `combine_notes_cat_sort_uniq`: the lines of both notes, empty ones dropped, sorted
/// bytewise, duplicates removed, each ending in a newline.
pub fn cat_sort_uniq(ours: &[u8], theirs: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = ours
        .split(|b| *b == b'\n')
        .chain(theirs.split(|b| *b == b'\n'))
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let mut out = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// Annotated object → (note in `a`, note in `b`), for every object whose note differs between
/// the notes trees `a` and `b` (`None`: the empty tree). Identical subtrees at the same place
/// are skipped without reading them, so two notes trees that share most of their history cost
/// little; differing fanouts are compared object by object.
pub type NotesDiff = BTreeMap<gix::ObjectId, (Option<gix::ObjectId>, Option<gix::ObjectId>)>;

pub fn diff(
    store: &Store,
    a: Option<gix::ObjectId>,
    b: Option<gix::ObjectId>,
) -> Result<NotesDiff> {
    let mut out = BTreeMap::new();
    walk(store, "", a, b, &mut out)?;
    Ok(out)
}

/// The notes and fanout directories of one notes (sub)tree at hex `prefix`.
#[derive(Default)]
struct Level {
    notes: BTreeMap<gix::ObjectId, gix::ObjectId>,
    dirs: BTreeMap<String, gix::ObjectId>,
}

fn read_level(store: &Store, prefix: &str, tree: Option<gix::ObjectId>) -> Result<Level> {
    let mut level = Level::default();
    let Some(tree) = tree else {
        return Ok(level);
    };
    let hex_len = store.object_hash().len_in_hex();
    let object = store
        .repo
        .find_tree(tree)
        .context(|| format!("could not read the notes tree {tree}"))?;
    let decoded = object
        .decode()
        .context(|| format!("could not decode the notes tree {tree}"))?;
    for entry in decoded.entries {
        let name = String::from_utf8_lossy(entry.filename);
        let is_hex = name.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_hex {
            // Not part of git's notes layout: git ignores it when merging, so do we.
            continue;
        }
        if entry.mode.is_blob() && prefix.len() + name.len() == hex_len {
            if let Ok(id) = gix::ObjectId::from_hex(format!("{prefix}{name}").as_bytes()) {
                level.notes.insert(id, entry.oid.to_owned());
            }
        } else if entry.mode.is_tree() && name.len() == 2 && prefix.len() + 2 < hex_len {
            level.dirs.insert(name.into_owned(), entry.oid.to_owned());
        }
    }
    Ok(level)
}

/// Every note below a fanout directory, flattened.
fn flatten(
    store: &Store,
    prefix: &str,
    tree: gix::ObjectId,
    into: &mut BTreeMap<gix::ObjectId, gix::ObjectId>,
) -> Result<()> {
    let level = read_level(store, prefix, Some(tree))?;
    into.extend(level.notes);
    for (name, sub) in level.dirs {
        flatten(store, &format!("{prefix}{name}"), sub, into)?;
    }
    Ok(())
}

fn walk(
    store: &Store,
    prefix: &str,
    a: Option<gix::ObjectId>,
    b: Option<gix::ObjectId>,
    out: &mut NotesDiff,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let (mut la, mut lb) = (read_level(store, prefix, a)?, read_level(store, prefix, b)?);
    let names: std::collections::BTreeSet<String> =
        la.dirs.keys().chain(lb.dirs.keys()).cloned().collect();
    for name in names {
        let sub = format!("{prefix}{name}");
        match (la.dirs.get(&name).copied(), lb.dirs.get(&name).copied()) {
            (Some(x), Some(y)) => walk(store, &sub, Some(x), Some(y), out)?,
            // One side fans out where the other is flat: compare object by object.
            (Some(x), None) => flatten(store, &sub, x, &mut la.notes)?,
            (None, Some(y)) => flatten(store, &sub, y, &mut lb.notes)?,
            (None, None) => {}
        }
    }
    let objects: std::collections::BTreeSet<gix::ObjectId> =
        la.notes.keys().chain(lb.notes.keys()).copied().collect();
    for object in objects {
        let (x, y) = (
            la.notes.get(&object).copied(),
            lb.notes.get(&object).copied(),
        );
        if x != y {
            out.insert(object, (x, y));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cat_sort_uniq;

    #[test]
    fn cat_sort_uniq_like_git() {
        assert_eq!(cat_sort_uniq(b"b\na\n", b"c\na\n\n"), b"a\nb\nc\n");
        assert_eq!(cat_sort_uniq(b"x", b""), b"x\n");
        assert_eq!(cat_sort_uniq(b"", b""), b"");
    }
}
