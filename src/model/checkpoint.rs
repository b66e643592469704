//! Checkpoint records (`tabellio.checkpoint/v1`), noted on the checkpointed commit.

use serde::{Deserialize, Serialize};

use super::canonical;

pub const SCHEMA: &str = "tabellio.checkpoint/v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRecord {
    pub schema: String,
    pub run_id: String,
    pub commit: String,
    pub tree: String,
    pub summary: String,
    pub at: String,
    /// The commit holding the worktree as saved, when it differed from `tree` (see
    /// [`super::run::CheckpointEntry::snapshot`]); absent otherwise, so older records keep
    /// their digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    pub digest: String,
}

impl CheckpointRecord {
    /// A record with its digest computed.
    pub fn new(
        run_id: &str,
        commit: &str,
        tree: &str,
        summary: &str,
        at: String,
        snapshot: Option<&str>,
    ) -> Self {
        let mut rec = CheckpointRecord {
            schema: SCHEMA.into(),
            run_id: run_id.into(),
            commit: commit.into(),
            tree: tree.into(),
            summary: summary.into(),
            at,
            snapshot: snapshot.map(str::to_string),
            digest: String::new(),
        };
        rec.digest = canonical::digest_without_field(&super::to_value(&rec))
            .expect("checkpoint records hold no floats");
        rec
    }

    /// The one line stored in the notes blob.
    pub fn to_line(&self) -> String {
        canonical::to_canonical_string(&super::to_value(self))
            .expect("checkpoint records hold no floats")
    }
}
