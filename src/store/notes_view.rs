//! A read-only view of one notes commit, for reading the notes of many objects.
//!
//! [`Store::note_lines`] re-reads the notes ref and its root tree on every call; verifying a
//! range of a thousand commits (two lookups each: the commit and its tree) would redo that two
//! thousand times. A view opens the notes tree once and keeps the fanout subtrees it has
//! opened, so each further lookup costs a few tree reads at most. A view can also be opened at a
//! notes commit that is not (yet) the ref's value: the pre-receive hook reads the evidence a push
//! is about to store.

use gix::note::plumbing::State;

use crate::error::{Context, Error, Result};

use super::Store;

/// The notes of one notes commit; empty when there is none.
pub struct NotesView {
    state: Option<State>,
    /// What the view shows, for error messages.
    what: String,
}

impl NotesView {
    /// The notes at the current value of `notes_ref`.
    pub fn at_ref(store: &Store, notes_ref: &str) -> Result<NotesView> {
        let tip = store.ref_target(notes_ref)?;
        Self::at_commit(store, tip, notes_ref)
    }

    /// The notes of the notes commit `tip` (`None`: no notes at all).
    pub fn at_commit(store: &Store, tip: Option<gix::ObjectId>, what: &str) -> Result<NotesView> {
        let Some(tip) = tip else {
            return Ok(NotesView {
                state: None,
                what: what.to_string(),
            });
        };
        let tree = store.repo.find_commit(tip).map_err(|e| {
            Error::not_found(format!(
                "notes commit {tip} of {what} cannot be read: {e:#}"
            ))
        })?;
        let tree = tree
            .tree_id()
            .context(|| format!("could not read the tree of {what} at {tip}"))?;
        let state = State::new(tree.detach(), &store.repo)
            .context(|| format!("could not read {what} at {tip}"))?;
        Ok(NotesView {
            state: Some(state),
            what: what.to_string(),
        })
    }

    /// The non-empty lines of the note on `object`.
    pub fn lines(&mut self, store: &Store, object: gix::ObjectId) -> Result<Vec<String>> {
        let Some(state) = self.state.as_mut() else {
            return Ok(Vec::new());
        };
        let Some(blob) = state
            .get(&object, &store.repo)
            .context(|| format!("could not look up the note on {object} in {}", self.what))?
        else {
            return Ok(Vec::new());
        };
        let blob = store
            .repo
            .find_blob(blob)
            .context(|| format!("could not read the note on {object} in {}", self.what))?;
        Ok(String::from_utf8_lossy(&blob.data)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect())
    }
}
