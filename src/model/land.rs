//! What `land` adds to `run.json`: the restack a landed run went through, the landing
//! attempts it refused, and the reopens that moved a refused run onto a newer tip. All are
//! optional additions to `tabellio.run/v1` (records without them are byte-identical to before).
//! Unknown fields inside them are refused, as everywhere in `run.json`.

use serde::{Deserialize, Serialize};

/// How a run's commits were put on the target's tip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestackMode {
    /// The target had not moved: the run's own commits landed.
    None,
    /// Each commit cherry-picked onto the tip.
    Replay,
    /// One commit.
    Squash,
}

impl RestackMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RestackMode::None => "none",
            RestackMode::Replay => "replay",
            RestackMode::Squash => "squash",
        }
    }
}

impl std::fmt::Display for RestackMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a landed run was put on the target's tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restack {
    pub mode: RestackMode,
    /// The run's frozen base (`base.commit`), the commit its work was made on.
    pub base_before: String,
    /// The target tip the run was stacked on: the new base of its landed commits.
    pub base_after: String,
    /// The run branch's head before landing (the validated commit).
    pub head_before: String,
    /// The run branch's head after landing (= `landed`).
    pub head_after: String,
}

/// A landing `land` refused. The first fields are those of every attempt; the rest are
/// optional and skipped when empty, so attempts recorded before them read (and hash) as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandAttempt {
    /// The target and the tip the run was to be stacked on.
    pub target: String,
    pub onto: String,
    /// `conflict`: the run's commit that did not apply; `validation_failed`: the run's
    /// restacked head, on which the failing evidence is noted.
    pub commit: String,
    /// The conflicting paths, sorted (`conflict`).
    pub paths: Vec<String>,
    pub at: String,
    /// Why the landing was refused (absent: `conflict`, the only kind recorded before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Refusal>,
    /// The run branch's head when it was refused: a refusal stands until the run moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The conflicting hunks, with the run's change merged onto the tip (conflict markers
    /// included), redacted and bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<ConflictHunk>,
    /// The failing evidence records on `commit` (`validation_failed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedCheck>,
    /// `validation_failed`: the stack without the run passed, so the failure is the run's own
    /// on this tip (`false`: nothing could show that, e.g. the tip had no evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<bool>,
    /// In a person's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LandAttempt {
    /// Why it was refused (`conflict` for attempts recorded before kinds were).
    pub fn refusal(&self) -> Refusal {
        self.result.unwrap_or(Refusal::Conflict)
    }

    /// Why, in one line for a person: `conflict in a.txt, b.txt` or
    /// `validation failed: test (isolated to this run)`.
    pub fn what(&self) -> String {
        match self.refusal() {
            Refusal::Conflict => format!("conflict in {}", self.paths.join(", ")),
            Refusal::ValidationFailed => {
                let checks: Vec<&str> = self.failed.iter().map(|f| f.check.as_str()).collect();
                format!(
                    "validation failed{}{}",
                    if checks.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", checks.join(", "))
                    },
                    match self.isolated {
                        Some(true) => " (isolated to this run)",
                        Some(false) => " (not isolated)",
                        None => "",
                    }
                )
            }
            Refusal::Refused => self.reason.clone().unwrap_or_else(|| "refused".into()),
        }
    }

    /// [`LandAttempt::what`] and the tip: `conflict in a.txt onto 1234567`.
    pub fn describe(&self) -> String {
        let onto: String = self.onto.chars().take(7).collect();
        format!("{} onto {onto}", self.what())
    }
}

/// Why `land` refused a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Its change conflicts with the tip.
    Conflict,
    /// The stack fails the required checks because of it.
    ValidationFailed,
    /// Anything else that refused it alone (evidence that does not count, no checks).
    Refused,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Conflict => "conflict",
            Refusal::ValidationFailed => "validation_failed",
            Refusal::Refused => "refused",
        }
    }
}

/// One conflicting region of a file, as the run's worktree gets it on a reopen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConflictHunk {
    pub path: String,
    /// From `<<<<<<<` to `>>>>>>>`, redacted; cut at the bound (`truncated`).
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A failing evidence record of a refused stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedCheck {
    pub check: String,
    /// The evidence record's `digest` (`git tabellio evidence <commit>` shows it).
    pub evidence: String,
}

/// One move of the run onto its target's newer tip after a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reopen {
    /// 1 for the first reopen of the run.
    pub n: u32,
    /// The base before (the previous frozen base) and after (the target's tip it moved onto).
    pub base_before: String,
    pub base_after: String,
    /// The run branch's head before and after.
    pub head_before: String,
    pub head_after: String,
    /// `replay`: the run's commits replayed cleanly; `squash`: one commit of its whole change;
    /// `conflict`: the branch is at the new base and the run's change, with conflict markers,
    /// is left uncommitted in its worktree.
    pub mode: ReopenMode,
    /// The paths holding conflict markers (`conflict`), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// How many land attempts the run had when it was reopened: the ones after it are newer
    /// refusals.
    pub after_attempts: u32,
    /// What reopened it: `reopen`, `land` (`--reopen`, or the policy's `on_refuse`), `start`
    /// (the change carried into a new run).
    pub by: String,
    pub at: String,
}

/// How a reopen moved the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReopenMode {
    /// The run's commits replayed cleanly onto the tip.
    Replay,
    /// Commit by commit they conflict, as a whole they merge: one squashed commit.
    Squash,
    /// The run's change conflicts: the branch is at the tip, the change uncommitted.
    Conflict,
}

impl ReopenMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReopenMode::Replay => "replay",
            ReopenMode::Squash => "squash",
            ReopenMode::Conflict => "conflict",
        }
    }
}

/// The repair rounds of a reopened run: each is one resumption of its agent with a repair
/// seed, followed by the checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repair {
    pub rounds: u32,
}

impl crate::model::RunRecord {
    /// The land refusal that still stands: the newest land attempt, when no reopen came after
    /// it and the run branch is where it was when refused (`head`: its current head, `None`
    /// when unknown). A refusal does not stand for a terminal run.
    pub fn standing_refusal(&self, head: Option<&str>) -> Option<&LandAttempt> {
        if self.state.is_terminal() {
            return None;
        }
        let last = self.land_attempts.last()?;
        let reopened_after = self
            .reopens
            .last()
            .is_some_and(|r| r.after_attempts as usize >= self.land_attempts.len());
        if reopened_after {
            return None;
        }
        match (&last.head, head) {
            (Some(then), Some(now)) if then != now => None,
            _ => Some(last),
        }
    }

    /// The conflicts of the newest reopen, when it is the run's latest move.
    pub fn open_conflicts(&self) -> &[String] {
        match self.reopens.last() {
            Some(r) if self.land_attempts.len() <= r.after_attempts as usize => &r.conflicts,
            _ => &[],
        }
    }
}
