//! The one reader of evidence records: the lines noted on a commit and on its tree.
//!
//! Evidence is noted twice, on the validated commit and on its tree, so a record survives a
//! rebase or cherry-pick that keeps the tree. Every line is returned, readable or not: a line
//! that does not parse is still judged (an edited record is tampered, not absent).

use crate::error::Result;
use crate::model::EvidenceRecord;
use crate::store::notes::EVIDENCE;
use crate::store::notes_view::NotesView;
use crate::store::Store;

/// One evidence line as stored, with the record it parses to (`None`: it does not parse).
pub type Line = crate::store::notes_view::ParsedLine;

/// Which notes the lines are read from.
pub enum Notes<'v> {
    /// The current value of the local `refs/notes/tabellio/evidence`.
    Local,
    /// An already opened view (a notes commit, or the ref with its remote-tracking copies).
    View(&'v mut NotesView),
}

/// All evidence lines on `commit` (when given) and on `tree`, each once, sorted.
pub fn lines_on(
    store: &Store,
    mut notes: Notes<'_>,
    commit: Option<gix::ObjectId>,
    tree: gix::ObjectId,
) -> Result<Vec<Line>> {
    let view = match &mut notes {
        Notes::Local => None,
        Notes::View(view) => Some(view),
    };
    if let Some(view) = view {
        // Parsed once per note blob by the view.
        let mut lines = match commit {
            Some(commit) => view.records(store, commit)?,
            None => Vec::new(),
        };
        lines.extend(view.records(store, tree)?);
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        lines.dedup_by(|a, b| a.0 == b.0);
        return Ok(lines);
    }
    let mut lines = match commit {
        Some(commit) => store.note_lines(EVIDENCE, commit)?,
        None => Vec::new(),
    };
    lines.extend(store.note_lines(EVIDENCE, tree)?);
    lines.sort();
    lines.dedup();
    Ok(lines
        .into_iter()
        .map(|l| {
            let rec = EvidenceRecord::from_line(&l).ok();
            (l, rec)
        })
        .collect())
}

/// All evidence lines on `commit` and on its tree in the local notes.
pub fn records_for(store: &Store, commit: gix::ObjectId, tree: gix::ObjectId) -> Result<Vec<Line>> {
    lines_on(store, Notes::Local, Some(commit), tree)
}
