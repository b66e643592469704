//! The views of a run that `list`, `log`, `export` and the report read: one ledger commit as a
//! [`LogEntry`], and a run whose ledger cannot be read as an [`UnreadableRun`] with its repairs.

use serde::Serialize;

use crate::model::RunState;
use crate::store::ledger::{self, Transition};
use crate::store::Store;

use super::unreadable::diagnose_ledger;

/// A ledger `list` could not read (a newer schema fetched from a teammate, a hand-edited
/// ledger): reported, not fatal to the listing.
#[derive(Debug, Serialize)]
pub struct UnreadableRun {
    pub run_id: String,
    pub message: String,
    /// The ledger ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The commands that repair it, as `status <run>` lists them (empty when the object
    /// itself is damaged: git has to get it back).
    pub repair: Vec<String>,
}

impl UnreadableRun {
    /// The run `id` whose ledger failed to read with `message`, with the repairs `status` lists.
    pub fn of(store: &Store, id: String, message: String) -> Self {
        let repair = match diagnose_ledger(store, &id) {
            Ok(Some(bad)) => bad.report(store).repair,
            _ => Vec::new(),
        };
        UnreadableRun {
            reference: ledger::ref_name(&id),
            run_id: id,
            message,
            repair,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LogEntry {
    pub commit: String,
    pub message: String,
    pub state: RunState,
    pub previous_state: Option<RunState>,
    pub at: String,
}

impl From<Transition> for LogEntry {
    /// One ledger commit as `log` and `export` show it.
    fn from(t: Transition) -> Self {
        LogEntry {
            commit: t.commit.to_string(),
            message: t.message,
            state: t.record.state,
            previous_state: t.record.previous_state,
            at: t.record.updated_at,
        }
    }
}
