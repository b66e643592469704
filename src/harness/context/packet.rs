//! The packet's records, as they are serialized (`tabellio.context/v1`). Their fields are
//! declared alphabetically: the packet's JSON has its keys in that order at every level.

use serde::{Deserialize, Serialize};

/// The packet of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPacket {
    pub allowed_actions: Vec<String>,
    pub attempts: Vec<AttemptSummary>,
    pub base: RefAt,
    pub branch: String,
    /// Files changed from the base to the head, by path.
    pub changes: Vec<Change>,
    pub checkpoints: Vec<CheckpointSummary>,
    pub head: Option<String>,
    /// SHA-256 of the canonical JSON of the packet without this field.
    pub integrity: String,
    /// The newest landing `land` refused: why, with the conflict hunks or the failing
    /// records' excerpts. Absent for a run never refused.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub land_refusal: Option<LandRefusalSummary>,
    pub last_failure: Option<LastFailure>,
    #[serde(rename = "loop")]
    pub loop_summary: Option<LoopSummary>,
    pub merge_base: Option<String>,
    pub merge_preview: Option<MergePreviewSummary>,
    pub missing_evidence: Vec<String>,
    /// The guarded paths among the run's changes that need a person's approval before it can
    /// be promoted: the agent cannot get past this alone. Absent when none do.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub needs_approval: Option<Vec<String>>,
    pub next_action: NextActionSummary,
    pub previous_state: Option<String>,
    /// The newest reopen: the base it moved from and to, what landed in between, the
    /// conflicts written out, the repair rounds. Absent for a run never reopened.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reopened: Option<ReopenSummary>,
    pub repository: String,
    pub run_id: String,
    pub satisfied_evidence: Vec<String>,
    pub schema: String,
    pub state: String,
    pub target: Target,
    /// Verbatim: the only part never scrubbed of local paths.
    pub task: TaskText,
}

/// A ref and the commit it named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefAt {
    pub commit: String,
    #[serde(rename = "ref")]
    pub reference: String,
}

/// The ref a promotion moves and its tip now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    #[serde(rename = "ref")]
    pub reference: String,
    pub tip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskText {
    pub sha256: String,
    pub summary: String,
    pub text: String,
}

/// One file changed since the base: `added`, `deleted`, `modified`, `type_changed`, `renamed`
/// or `copied` (the last two with the path it came from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub previous_path: Option<String>,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    pub at: String,
    pub commit: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptSummary {
    pub at: String,
    /// Its checks, and a failed `plan-hygiene` entry when the plan gate held it back.
    pub checks: Vec<CheckSummary>,
    pub commit: String,
    pub n: u32,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSummary {
    pub exit_code: Option<i32>,
    pub name: String,
    pub status: String,
}

/// The newest land attempt that refused the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandRefusalSummary {
    pub at: String,
    /// The commit that did not apply (a conflict) or carries the failing records (a culprit).
    pub commit: String,
    pub failed: Vec<FailingRecord>,
    pub hunks: Vec<crate::model::land::ConflictHunk>,
    pub isolated: Option<bool>,
    pub onto: String,
    pub paths: Vec<String>,
    pub reason: Option<String>,
    /// `conflict`, `validation_failed` or `refused`.
    pub result: String,
    pub target: String,
}

/// A failing evidence record of a refused stack, with its excerpt from the notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingRecord {
    pub check: String,
    pub evidence: String,
    /// `None` when the record is not in the notes here.
    pub excerpt: Option<String>,
    pub truncated: Option<bool>,
}

/// The newest reopen of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReopenSummary {
    pub base_after: String,
    pub base_before: String,
    /// The paths a reopen wrote conflict markers into that still hold them.
    pub conflicts: Vec<String>,
    /// What landed on the target between the two bases: `<short id> <subject>`, oldest first.
    pub landed_since: Vec<String>,
    pub mode: String,
    pub n: u32,
    /// Repair rounds spent, and allowed by the policy at the target's tip.
    pub repair_rounds: u32,
    pub repair_rounds_allowed: u32,
}

/// The most recent attempt that did not pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFailure {
    pub attempt: u32,
    pub checks: Vec<FailingCheck>,
    pub commit: String,
}

/// A failing check of an attempt with its output excerpt (from the evidence notes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCheck {
    /// `None` when no evidence record of that attempt is found.
    pub excerpt: Option<String>,
    pub exit_code: Option<i32>,
    pub name: String,
    pub status: String,
    pub truncated: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergePreviewSummary {
    pub clean: bool,
    pub conflicts: Vec<String>,
    pub onto: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextActionSummary {
    pub action: String,
    pub blocking: bool,
    pub command: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopSummary {
    pub done_reason: Option<String>,
    pub history: Vec<IterationSummary>,
    pub iteration: u32,
    pub max_loops: u32,
    pub phase: String,
    pub status: String,
    pub why_agent_stopped: Option<String>,
    pub why_harness_stopped: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationSummary {
    pub changed: Option<bool>,
    pub claimed_done: Option<bool>,
    pub failing: Option<Vec<String>>,
    pub fingerprint: Option<String>,
    pub n: u32,
    pub status: Option<String>,
    pub verdict: Option<String>,
}
