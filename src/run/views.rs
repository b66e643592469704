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
    /// The number of the checkpoint this transition recorded (1-based: what `rewind` takes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<usize>,
    /// The checkpoint this transition rewound the run to, by number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewound_to: Option<usize>,
}

/// A ledger's transitions (oldest first) as `log` and `export` show them, each with the
/// checkpoint it recorded or rewound to.
pub fn log_entries(history: Vec<Transition>) -> Vec<LogEntry> {
    let mut checkpoints = 0;
    let mut rewound = None;
    history
        .into_iter()
        .map(|t| {
            let count = t.record.checkpoints.len();
            let checkpoint = (count > checkpoints).then_some(count);
            checkpoints = count;
            let rewind = t.record.rewound.clone();
            let rewound_to = (rewind.is_some() && rewind != rewound)
                .then(|| rewind.as_ref().map(|r| r.checkpoint))
                .flatten();
            rewound = rewind;
            LogEntry {
                commit: t.commit.to_string(),
                message: t.message,
                state: t.record.state,
                previous_state: t.record.previous_state,
                at: t.record.updated_at,
                checkpoint,
                rewound_to,
            }
        })
        .collect()
}
