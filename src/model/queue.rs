//! The queue entry record (`tabellio.queue/v1`): what `enqueue` writes as `entry.json` in the
//! tree of the commit `refs/tabellio/queue/<target>/<run-id>` points at. An entry is written
//! once and never changed; it is removed when its run lands (or is gone).

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "tabellio.queue/v1";

/// The file in an entry commit's tree that holds the record.
pub const FILE: &str = "entry.json";

/// One queued run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueEntry {
    pub schema: String,
    /// The run id.
    pub run: String,
    /// The run's validated head when it was enqueued.
    pub head: String,
    /// The branch it lands on (`refs/heads/…`).
    pub target: String,
    /// Enqueued with `--priority`: ahead of every entry without it.
    pub priority: bool,
    /// Who enqueued it: `Name <email>` as git resolves the committer identity.
    pub enqueued_by: String,
    /// When (RFC 3339 UTC, with milliseconds).
    pub enqueued_at: String,
    /// The entry's place among those one `enqueue` command wrote at the same second (0, 1, …),
    /// so runs named together keep their order.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl QueueEntry {
    /// The order of the queue: priority entries first, then by enqueue time, then by `seq`,
    /// then by run id.
    pub fn sort_key(&self) -> (bool, &str, u32, &str) {
        (!self.priority, &self.enqueued_at, self.seq, &self.run)
    }
}
