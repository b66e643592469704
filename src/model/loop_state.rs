//! `run.json.loop`: the state of a harness loop (`git tabellio loop`), one copy per ledger
//! commit. The field names are part of the contract (docs/loop.md).
//!
//! `phase` is the phase the loop runs next, or resumes at after a crash. The loop has stopped
//! exactly when `why_harness_stopped` is set; from then on `status`, `why_agent_stopped` and
//! `done_reason` are set too. `current` holds what the in-flight iteration learned so far, phase
//! by phase; `persist` moves it to `history`.

use serde::{Deserialize, Serialize};

/// The phases of one iteration, then `finalize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Execute,
    Collect,
    Evaluate,
    Decide,
    Persist,
    Finalize,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Execute => "execute",
            Phase::Collect => "collect",
            Phase::Evaluate => "evaluate",
            Phase::Decide => "decide",
            Phase::Persist => "persist",
            Phase::Finalize => "finalize",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The convergence verdict of `decide`.
///
/// The documented values (docs/loop.md), plus `error`: the harness itself could not go on (the agent's commit made
/// the policy unusable, so there is nothing to evaluate with). `progressing` is also the status
/// of an interrupted loop: it had not reached a stop verdict, and `--resume` goes on with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopStatus {
    Progressing,
    Terminal,
    ExecutorFailure,
    RepeatedState,
    NoProgress,
    MaxLoopsReached,
    /// A repair loop of a reopened run used its last repair round without passing checks.
    RepairExhausted,
    /// The harness could not evaluate the iteration (`why_harness_stopped: error`).
    Error,
}

impl LoopStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopStatus::Progressing => "progressing",
            LoopStatus::Terminal => "terminal",
            LoopStatus::ExecutorFailure => "executor-failure",
            LoopStatus::RepeatedState => "repeated-state",
            LoopStatus::NoProgress => "no-progress",
            LoopStatus::MaxLoopsReached => "max-loops-reached",
            LoopStatus::RepairExhausted => "repair-exhausted",
            LoopStatus::Error => "error",
        }
    }

    /// Why the harness stops on this status; `None` for `progressing`.
    pub fn harness_stop(self) -> Option<HarnessStop> {
        match self {
            LoopStatus::Progressing => None,
            LoopStatus::Terminal => Some(HarnessStop::Validated),
            LoopStatus::ExecutorFailure => Some(HarnessStop::ExecutorFailure),
            LoopStatus::RepeatedState => Some(HarnessStop::RepeatedState),
            LoopStatus::NoProgress => Some(HarnessStop::NoProgress),
            LoopStatus::MaxLoopsReached => Some(HarnessStop::MaxLoops),
            LoopStatus::RepairExhausted => Some(HarnessStop::RepairExhausted),
            LoopStatus::Error => Some(HarnessStop::Error),
        }
    }
}

impl std::fmt::Display for LoopStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the agent command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStop {
    /// Exited with code 0.
    Exited,
    /// Exited with another code.
    Nonzero,
    /// Killed by a signal: one it did not get from us, or the SIGTERM the loop sent it on an
    /// interrupt (the loop discards that run; `--resume` runs the agent again).
    Signaled,
    /// Stopped by us at `--agent-timeout`.
    TimedOut,
    /// Could not be started: not found, or not executable (the output says which).
    NotFound,
}

impl AgentStop {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStop::Exited => "exited",
            AgentStop::Nonzero => "nonzero",
            AgentStop::Signaled => "signaled",
            AgentStop::TimedOut => "timed_out",
            AgentStop::NotFound => "not_found",
        }
    }
}

/// Why the harness stopped the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessStop {
    Validated,
    RepeatedState,
    NoProgress,
    MaxLoops,
    /// The repair rounds of a reopened run (`land.repair_rounds`) are used up.
    RepairExhausted,
    ExecutorFailure,
    /// A signal (SIGINT, SIGTERM, SIGHUP) asked the loop to stop; `--resume` continues it.
    Interrupted,
    /// Something outside the agent's control failed for good (e.g. the policy names no checks).
    Error,
}

impl HarnessStop {
    pub fn as_str(self) -> &'static str {
        match self {
            HarnessStop::Validated => "validated",
            HarnessStop::RepeatedState => "repeated_state",
            HarnessStop::NoProgress => "no_progress",
            HarnessStop::MaxLoops => "max_loops",
            HarnessStop::RepairExhausted => "repair_exhausted",
            HarnessStop::ExecutorFailure => "executor_failure",
            HarnessStop::Interrupted => "interrupted",
            HarnessStop::Error => "error",
        }
    }
}

/// Whether the run is done, and on whose word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoneReason {
    /// The checks passed (a `DONE` claim or not).
    Validated,
    /// The agent printed `DONE` but the checks did not pass.
    ClaimedNotValidated,
    /// No claim, and not validated.
    #[serde(rename = "none")]
    NoClaim,
}

impl DoneReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DoneReason::Validated => "validated",
            DoneReason::ClaimedNotValidated => "claimed_not_validated",
            DoneReason::NoClaim => "none",
        }
    }
}

/// The agent command of a loop. `argv` is redacted like a check's argv (it is stored and
/// shared); `argv_sha256` pins the exact argv so `--resume` can tell a different agent apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub argv: Vec<String>,
    pub argv_sha256: String,
    /// True when `argv` lost a secret to redaction: `--resume` then needs the argv again.
    pub redacted: bool,
    pub timeout_s: u64,
}

/// The bounded output record of one agent run: the very record a check's evidence holds (same
/// truncation, redaction and JSON fields), so the two cannot drift apart.
pub type AgentOutput = super::evidence::OutputRecord;

/// What `execute` saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRun {
    pub stopped: AgentStop,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    /// The last non-empty line of stdout was exactly `DONE`, outside any code fence.
    pub claimed_done: bool,
    pub output: AgentOutput,
}

/// Who made the iteration's commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommittedBy {
    /// The harness committed the agent's uncommitted changes (`tabellio: iteration N`).
    Tabellio,
    /// The agent committed by itself.
    Agent,
    /// Nothing changed.
    Nobody,
}

/// What `collect` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collected {
    pub head: String,
    pub tree: String,
    /// The iteration changed the run branch (its head moved).
    pub changed: bool,
    pub committed_by: CommittedBy,
    /// The checkpointed commit, when the head moved.
    pub checkpoint: Option<String>,
    /// Why the workspace could not be collected (an executor failure), e.g. a switched branch.
    pub failure: Option<String>,
}

/// One check's verdict in an iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationCheck {
    pub name: String,
    pub status: crate::model::evidence::CheckStatus,
    pub exit_code: Option<i32>,
}

/// What `evaluate` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluated {
    /// `passed`, `failed`, or `skipped` (executor failure, or no commit beyond the base).
    pub verdict: String,
    /// The attempt recorded in `run.json.attempts`, when checks ran.
    pub attempt: Option<u32>,
    pub checks: Vec<IterationCheck>,
    /// Required checks without satisfied evidence on the head after evaluation.
    pub missing_evidence: Vec<String>,
    /// The normalised failure signature that went into the fingerprint.
    pub failure_signature: Vec<String>,
    /// Why evaluation was skipped.
    pub skipped: Option<String>,
    /// The plan-hygiene gate's reason (`plan-hygiene: …`, naming the plans at fault) when it
    /// kept this iteration from completing; the agent's next context shows it.
    #[serde(default)]
    pub plan_gate: Option<String>,
}

/// One iteration: filled phase by phase while in flight (`LoopState::current`), complete in
/// `history`. `why_harness_stopped` is `null` on iterations after which the loop went on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopIteration {
    pub n: u32,
    /// The run branch head when the iteration began.
    pub start_head: String,
    pub agent: Option<AgentRun>,
    pub collect: Option<Collected>,
    pub evaluate: Option<Evaluated>,
    pub fingerprint: Option<String>,
    pub status: Option<LoopStatus>,
    pub why_agent_stopped: Option<AgentStop>,
    pub why_harness_stopped: Option<HarnessStop>,
    pub done_reason: Option<DoneReason>,
}

impl LoopIteration {
    pub fn new(n: u32, start_head: String) -> Self {
        LoopIteration {
            n,
            start_head,
            agent: None,
            collect: None,
            evaluate: None,
            fingerprint: None,
            status: None,
            why_agent_stopped: None,
            why_harness_stopped: None,
            done_reason: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopState {
    /// The iteration in flight (1-based), or the last one once stopped.
    pub iteration: u32,
    pub phase: Phase,
    pub max_loops: u32,
    pub no_progress_limit: u32,
    /// The last `decide` verdict (`progressing` until the first one, and while interrupted).
    pub status: LoopStatus,
    pub why_agent_stopped: Option<AgentStop>,
    pub why_harness_stopped: Option<HarnessStop>,
    pub done_reason: Option<DoneReason>,
    pub agent: AgentSpec,
    /// `task.sha256` when the loop began: the task is pinned for the loop's whole life.
    pub task_sha256: String,
    /// `--check` names (empty: the policy's required checks).
    pub checks: Vec<String>,
    /// `--promote`: promote when validated.
    pub promote: bool,
    /// A repair loop of a reopened run: each iteration is one repair round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repair: bool,
    pub started_at: String,
    pub stopped_at: Option<String>,
    /// How many times `--resume` picked the loop up again.
    pub resumes: u32,
    pub current: Option<LoopIteration>,
    pub history: Vec<LoopIteration>,
}

impl LoopState {
    /// True once the harness has stopped the loop (for good or, when interrupted, until
    /// `--resume`).
    pub fn is_stopped(&self) -> bool {
        self.why_harness_stopped.is_some()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A loop stopped at its first iteration by `stop` (the agent exited, claiming nothing),
    /// with placeholder digests and times. For tests.
    pub(crate) fn stopped(stop: HarnessStop) -> LoopState {
        LoopState {
            iteration: 1,
            phase: Phase::Finalize,
            max_loops: 5,
            no_progress_limit: 2,
            status: LoopStatus::Error,
            why_agent_stopped: Some(AgentStop::Exited),
            why_harness_stopped: Some(stop),
            done_reason: Some(DoneReason::NoClaim),
            agent: AgentSpec {
                argv: vec!["agent".into()],
                argv_sha256: "0".repeat(64),
                redacted: false,
                timeout_s: 60,
            },
            task_sha256: "0".repeat(64),
            checks: Vec::new(),
            promote: false,
            repair: false,
            started_at: "2026-01-01T00:00:00Z".into(),
            stopped_at: None,
            resumes: 0,
            current: None,
            history: Vec::new(),
        }
    }

    #[test]
    fn agent_output_is_written_like_evidence_output() {
        let output = AgentOutput {
            bytes: 3,
            sha256: "a".repeat(64),
            excerpt: "ok\n".into(),
            truncated: false,
            redactions: 0,
        };
        let json = serde_json::to_string(&output).expect("serialize");
        assert_eq!(
            json,
            format!(
                r#"{{"bytes":3,"sha256":"{}","excerpt":"ok\n","truncated":false,"redactions":0}}"#,
                "a".repeat(64)
            )
        );
        let back: AgentOutput = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, output);
    }
}
