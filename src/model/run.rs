//! The run record (`tabellio.run/v1`): the state of one run, one per ledger commit. Commands
//! read, print and export it whole; ledger commits store it split (`crate::model::run_file`).
//!
//! Unknown fields are refused, as in every record: a field this version does not know would be
//! dropped when the next transition rewrites the record. A writer that adds fields bumps the
//! schema, which older readers report as unsupported.

use serde::{Deserialize, Serialize};

use super::evidence::CheckStatus;

pub const SCHEMA: &str = "tabellio.run/v1";

/// The run states (docs/lifecycle.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Active,
    Completed,
    ValidationFailed,
    Promoted,
    Abandoned,
    Looping,
    Blocked,
    /// Moved onto the target's new tip after `land` refused it, waiting for its repair.
    Reopened,
    /// Retired in favour of another run (`superseded_by` names it).
    Superseded,
}

impl RunState {
    pub const ALL: [RunState; 9] = [
        RunState::Active,
        RunState::Completed,
        RunState::ValidationFailed,
        RunState::Promoted,
        RunState::Abandoned,
        RunState::Looping,
        RunState::Blocked,
        RunState::Reopened,
        RunState::Superseded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Active => "active",
            RunState::Completed => "completed",
            RunState::ValidationFailed => "validation_failed",
            RunState::Promoted => "promoted",
            RunState::Abandoned => "abandoned",
            RunState::Looping => "looping",
            RunState::Blocked => "blocked",
            RunState::Reopened => "reopened",
            RunState::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// `promoted`, `abandoned` and `superseded` end a run; nothing moves it again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Promoted | RunState::Abandoned | RunState::Superseded
        )
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub summary: String,
    pub text: String,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: String,
    /// The canonical id (docs/signing.md#who-is-who).
    pub id: String,
    /// An agent's name (`claude-code`), model and harness version, and the SHA-256 of its
    /// session link (never the link): absent unless given, so older records are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_digest: Option<String>,
}

/// Do two canonical actor ids name the same actor? Ids compare without regard to ASCII case or
/// surrounding space, as email addresses are used.
pub fn same_id(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

impl Actor {
    /// An actor with only a kind and an id.
    pub fn new(kind: impl Into<String>, id: impl Into<String>) -> Actor {
        Actor {
            kind: kind.into(),
            id: id.into(),
            name: None,
            model: None,
            harness_version: None,
            session_digest: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    #[serde(rename = "ref")]
    pub reference: String,
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointEntry {
    pub commit: String,
    pub tree: String,
    pub summary: String,
    pub at: String,
    /// A commit whose tree is the worktree as it was saved (tracked and untracked files, not
    /// ignored ones), when that differed from `tree`: `rewind --force` saves uncommitted work
    /// this way; its parent is `commit`. Absent for a checkpoint of a clean worktree, whose
    /// snapshot is `tree` itself (docs/lifecycle.md, rewind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

impl CheckpointEntry {
    /// The record noted on the checkpointed commit for run `run_id`.
    pub fn note(&self, run_id: &str) -> super::CheckpointRecord {
        super::CheckpointRecord::new(
            run_id,
            &self.commit,
            &self.tree,
            &self.summary,
            self.at.clone(),
            self.snapshot.as_deref(),
        )
    }
}

/// The last `rewind` of a run: which checkpoint its worktree and branch went back to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rewind {
    /// The checkpoint's number in `checkpoints` (1-based, as `log` shows it).
    pub checkpoint: usize,
    /// Its commit: the run branch's head after the rewind.
    pub commit: String,
    /// The run branch's head before the rewind.
    pub from: String,
    /// The checkpoint `--force` saved the uncommitted work in first, by number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<usize>,
    pub at: String,
}

/// How a promotion or landing moved the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionMode {
    /// Only the ref: the target is checked out nowhere.
    Ref,
    /// The target is checked out in a worktree, whose index and files moved with it.
    Worktree,
    /// On a remote, by one atomic push.
    Remote,
}

impl PromotionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PromotionMode::Ref => "ref",
            PromotionMode::Worktree => "worktree",
            PromotionMode::Remote => "remote",
        }
    }
}

impl std::fmt::Display for PromotionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict of an attempt: every check passed, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Passed,
    Failed,
}

impl AttemptStatus {
    pub fn of(passed: bool) -> Self {
        if passed {
            AttemptStatus::Passed
        } else {
            AttemptStatus::Failed
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Passed => "passed",
            AttemptStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for AttemptStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptCheck {
    pub name: String,
    pub digest: String,
    pub status: CheckStatus,
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    pub n: u32,
    pub commit: String,
    pub tree: String,
    pub checks: Vec<AttemptCheck>,
    pub status: AttemptStatus,
    /// SHA-256 of the canonical JSON array of this attempt's evidence record digests, sorted.
    pub evidence_digest: String,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validated {
    pub commit: String,
    pub tree: String,
    pub evidence_digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promotion {
    pub target: String,
    pub old: String,
    pub new: String,
    pub mode: PromotionMode,
    pub remote: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub schema: String,
    pub run_id: String,
    pub state: RunState,
    pub previous_state: Option<RunState>,
    pub task: Task,
    pub actor: Actor,
    pub repository: String,
    pub base: Base,
    pub branch: String,
    pub checkpoints: Vec<CheckpointEntry>,
    pub attempts: Vec<Attempt>,
    pub validated: Option<Validated>,
    pub promotion: Option<Promotion>,
    #[serde(rename = "loop")]
    pub loop_state: Option<super::loop_state::LoopState>,
    /// Why the run was abandoned or blocked, in a person's words (documented in docs/storage.md).
    #[serde(default)]
    pub reason: Option<String>,
    /// `land`: the commit the run landed as (its replayed head), the restack that made it and
    /// the attempts refused by conflicts. Absent until `land` writes them, so records of runs
    /// never landed are byte-identical to before (docs/land.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restack: Option<super::land::Restack>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub land_attempts: Vec<super::land::LandAttempt>,
    /// `rewind`: the last time the run went back to a checkpoint. Absent until a rewind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound: Option<Rewind>,
    /// The completion record written when the run lands (`promote`, `land`): its plan's
    /// items, done or open, and the evidence that backs each done one. Absent when the run has
    /// no plan, and in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<super::completion::Completion>,
    /// The canonical id of the person who started (or enqueued) the run; absent in records of
    /// older tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<String>,
    /// `reopen` (or `land --reopen`): each move of the run onto a new tip after a refusal,
    /// oldest first; the previous bases are kept here (docs/storage.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reopens: Vec<super::land::Reopen>,
    /// The repair rounds an agent's loop spent on the run since it was first reopened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<super::land::Repair>,
    /// `superseded`: the run that carries on this one's change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The refused run whose change this run carried onto its base (`start --task-from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl RunRecord {
    /// The checks of the most recent attempt, with the names the run was finished with.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A run `r1` in `state` from `main` at `1…1`, with no attempts; a completed one names
    /// `2…2` as its validated commit. For tests.
    pub(crate) fn sample(state: RunState) -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "schema": SCHEMA, "run_id": "r1", "state": state.as_str(),
            "previous_state": null,
            "task": {"summary": "t", "text": "t", "sha256": "0".repeat(64)},
            "actor": {"type": "human", "id": "me"}, "repository": "repo",
            "base": {"ref": "refs/heads/main", "commit": "1".repeat(40)},
            "branch": "refs/heads/tabellio/r1", "checkpoints": [], "attempts": [],
            "validated": (state == RunState::Completed).then(|| serde_json::json!({
                "commit": "2".repeat(40), "tree": "3".repeat(40), "evidence_digest": "4".repeat(64)
            })),
            "promotion": null, "loop": null, "reason": null,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        }))
        .expect("a valid run record")
    }
}
