//! A read-only view of one notes commit, for reading the notes of many objects.
//!
//! [`Store::note_lines`] re-reads the notes ref and its root tree on every call; verifying a
//! range of a thousand commits (two lookups each: the commit and its tree) would redo that two
//! thousand times. A view opens the notes tree once and keeps the fanout subtrees it has
//! opened, so each further lookup costs a few tree reads at most. A view can also be opened at a
//! notes commit that is not (yet) the ref's value: the pre-receive hook reads the evidence a push
//! is about to store.
//!
//! A view also keeps the parsed lines of each note blob asked for more than once: one tree noted
//! by many records (empty commits, reverts, many runs reaching the same tree) is looked up for
//! every commit that has it, and its note holds every one of those records. A note asked for
//! once (a commit's own, in a range of a thousand) is not kept: what it parsed to is freed when
//! its caller is done with it, so the next commit's note reuses the memory rather than growing
//! the heap.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use crate::model::EvidenceRecord;

use crate::error::{Context, Error, Result};

use super::notes_index::NotesIndex;
use super::Store;

/// The notes of one notes commit (or the union of several); empty when there is none.
pub struct NotesView {
    state: Option<NotesIndex>,
    /// What the view shows, for error messages.
    what: String,
    /// Further notes commits read together with this one (the remote-tracking copies).
    more: Vec<NotesView>,
    /// The lines of each note blob read more than once, each with the evidence record it
    /// parses to.
    parsed: HashMap<gix::ObjectId, Rc<[ParsedLine]>>,
    /// The note blobs read once, and not kept.
    read_once: HashSet<gix::ObjectId>,
}

/// One note line as stored, with the evidence record it parses to (`None`: it does not parse).
pub type ParsedLine = (String, Option<EvidenceRecord>);

impl NotesView {
    /// The notes at the current value of `notes_ref`.
    pub fn at_ref(store: &Store, notes_ref: &str) -> Result<NotesView> {
        let tip = store.ref_target(notes_ref)?;
        Self::at_commit(store, tip, notes_ref)
    }

    /// The notes of `notes_ref` together with its remote-tracking copies
    /// (`refs/notes/tabellio/remotes/<remote>/<name>`, written by `fetch` after `init`): evidence
    /// a teammate's machine or CI recorded counts before a `sync` merges it. Records are judged
    /// the same wherever they were read (digest, object, check definition).
    pub fn at_ref_and_tracking(store: &Store, notes_ref: &str) -> Result<NotesView> {
        let mut view = Self::at_ref(store, notes_ref)?;
        let name = notes_ref.rsplit('/').next().unwrap_or(notes_ref);
        for (tracking, tip) in store.refs_under("refs/notes/tabellio/remotes/")? {
            if tracking.rsplit('/').next() == Some(name) {
                view.more
                    .push(Self::at_commit(store, Some(tip), &tracking)?);
            }
        }
        Ok(view)
    }

    /// This view with the notes commits `more` (`(what, tip)`) read beside it.
    pub fn with(mut self, store: &Store, more: &[(String, gix::ObjectId)]) -> Result<NotesView> {
        for (what, tip) in more {
            self.more.push(Self::at_commit(store, Some(*tip), what)?);
        }
        Ok(self)
    }

    /// The notes of the notes commit `tip` (`None`: no notes at all).
    pub fn at_commit(store: &Store, tip: Option<gix::ObjectId>, what: &str) -> Result<NotesView> {
        let Some(tip) = tip else {
            return Ok(NotesView {
                state: None,
                what: what.to_string(),
                more: Vec::new(),
                parsed: HashMap::new(),
                read_once: HashSet::new(),
            });
        };
        store.ensure_commit_ref(what, tip, &super::notes::notes_repair(what))?;
        let tree = store.commit(tip).map_err(|e| {
            Error::not_found(format!(
                "notes commit {tip} of {what} cannot be read: {e:#}"
            ))
        })?;
        let tree = tree
            .tree_id()
            .context(|| format!("could not read the tree of {what} at {tip}"))?;
        let state = NotesIndex::new(store, tree.detach())
            .context(|| format!("could not read {what} at {tip}"))?;
        Ok(NotesView {
            state: Some(state),
            what: what.to_string(),
            more: Vec::new(),
            parsed: HashMap::new(),
            read_once: HashSet::new(),
        })
    }

    /// Whether the view has no notes commit at all (nothing is noted on anything).
    pub fn is_empty(&self) -> bool {
        self.state.is_none() && self.more.iter().all(NotesView::is_empty)
    }

    /// The non-empty lines of the note on `object` (in every notes commit of the view), each
    /// once, sorted, with the evidence record each parses to.
    /// The lines noted on `object`, as written (for notes refs whose records are not evidence).
    pub fn lines(&mut self, store: &Store, object: gix::ObjectId) -> Result<Vec<String>> {
        Ok(self
            .records(store, object)?
            .into_iter()
            .map(|(line, _)| line)
            .collect())
    }

    pub fn records(&mut self, store: &Store, object: gix::ObjectId) -> Result<Vec<ParsedLine>> {
        Ok(self.shared(store, object)?.to_vec())
    }

    /// [`Self::records`], shared rather than copied: with no tracking copies beside it, the
    /// lines as parsed once per note blob (verifying a thousand commits copies none of them).
    pub fn shared(&mut self, store: &Store, object: gix::ObjectId) -> Result<Rc<[ParsedLine]>> {
        let own = self.own_records(store, object)?;
        if self.more.is_empty() {
            return Ok(own);
        }
        let mut lines: Vec<ParsedLine> = own.to_vec();
        for more in &mut self.more {
            lines.extend(more.own_records(store, object)?.iter().cloned());
        }
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        lines.dedup_by(|a, b| a.0 == b.0);
        Ok(lines.into())
    }

    /// The note on `object` in this notes commit: sorted unique lines, kept from the second ask
    /// for the same blob on.
    fn own_records(&mut self, store: &Store, object: gix::ObjectId) -> Result<Rc<[ParsedLine]>> {
        let Some(state) = self.state.as_mut() else {
            return Ok(Rc::from([]));
        };
        let Some(blob) = state
            .get(store, object)
            .context(|| format!("could not look up the note on {object} in {}", self.what))?
        else {
            return Ok(Rc::from([]));
        };
        if let Some(parsed) = self.parsed.get(&blob) {
            return Ok(parsed.clone());
        }
        let data = store
            .read_blob(blob)
            .context(|| format!("could not read the note on {object} in {}", self.what))?;
        let text = super::notes::note_text(&data);
        let mut lines: Vec<&str> = text.lines().collect();
        lines.retain(|l| !l.trim().is_empty());
        lines.sort_unstable();
        lines.dedup();
        let parsed: Rc<[ParsedLine]> = lines
            .into_iter()
            .map(|l| (l.to_string(), EvidenceRecord::from_line(l).ok()))
            .collect();
        if !self.read_once.insert(blob) {
            self.parsed.insert(blob, parsed.clone());
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::store::test_git as git;
    use crate::store::test_repo as repo;
    use crate::store::Store;

    use super::NotesView;

    /// A note asked for once is not kept (its lines are freed with the caller's copy); from the
    /// second ask on, every ask shares one parse. Both read what git noted.
    #[test]
    fn a_note_is_kept_from_its_second_ask() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        git(
            home,
            &path,
            &["notes", "--ref=t", "add", "-m", "b\n\na", "HEAD"],
        );
        let store = Store::open(&path).expect("open");
        let head = store.resolve_commit("HEAD").expect("HEAD");
        let mut view = NotesView::at_ref(&store, "refs/notes/t").expect("view");
        let lines = |v: &Rc<[super::ParsedLine]>| -> Vec<String> {
            v.iter().map(|(line, _)| line.clone()).collect()
        };
        let first = view.shared(&store, head).expect("first");
        assert_eq!(lines(&first), ["a", "b"]);
        assert_eq!(
            Rc::strong_count(&first),
            1,
            "the first ask's lines are not kept"
        );
        let second = view.shared(&store, head).expect("second");
        let third = view.shared(&store, head).expect("third");
        assert!(
            Rc::ptr_eq(&second, &third),
            "from the second ask on, one parse"
        );
        assert_eq!(lines(&third), ["a", "b"]);
    }
}
