//! Publishing notes (and the ledger transition they belong to) in one transaction.
//!
//! Notes refs are shared by every run: a lost race on one is not a conflict, the additions are
//! re-applied on the new tip. The ledger ref is never retried: it moved means someone else
//! advanced the run.

use crate::error::Result;

use super::backoff;
use super::notes::PreparedNotes;
use super::tx::{self, Cas, TxError};
use super::Store;

/// How many times a lost race on a shared notes ref is re-read and re-applied.
const NOTES_RETRIES: u32 = 12;

/// Lines to add to the notes of one notes ref: (annotated object, lines).
pub type NotesAdditions = (&'static str, Vec<(gix::ObjectId, Vec<String>)>);

/// Publish a ledger transition together with notes additions in one transaction.
///
/// The ledger is compare-and-swap on `ledger.tip`: if it moved, that is a conflict (exit 4).
/// A notes ref that moved is re-read and the additions re-applied, with backoff, up to
/// `NOTES_RETRIES` times: records are never dropped.
pub fn publish(
    store: &Store,
    ledger_cas: Option<Cas>,
    notes: &[NotesAdditions],
    notes_message: &str,
) -> Result<()> {
    publish_with(store, ledger_cas.as_slice(), notes, notes_message)
}

/// [`publish`], with several compare-and-swap edits beside the notes (the ledger and the run
/// branch of a `rewind`), applied after the notes in the order given. None of them is retried.
pub fn publish_with(
    store: &Store,
    edits_after: &[Cas],
    notes: &[NotesAdditions],
    notes_message: &str,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        // Notes first, the ledger last: gix commits loose refs one after the other, so a
        // process killed in between leaves at most a note the ledger does not mention yet
        // (harmless, and re-done idempotently), never a ledger entry whose note is missing.
        let mut edits: Vec<Cas> = Vec::new();
        for (notes_ref, additions) in notes {
            let prepared: PreparedNotes =
                store.prepare_notes(notes_ref, additions, notes_message)?;
            if prepared.changed {
                edits.push(Cas::update(
                    prepared.notes_ref,
                    prepared.previous,
                    prepared.commit,
                    notes_message,
                ));
            }
        }
        edits.extend(edits_after.iter().cloned());
        if edits.is_empty() {
            return Ok(());
        }
        match tx::apply(store, &edits) {
            Ok(()) => return Ok(()),
            Err(TxError::Moved { name, .. } | TxError::Locked { name, .. })
                if name.starts_with("refs/notes/") && attempt < NOTES_RETRIES =>
            {
                attempt += 1;
                backoff::LOCAL_REFS.sleep(attempt);
            }
            Err(e) => return Err(e.into_error()),
        }
    }
}
