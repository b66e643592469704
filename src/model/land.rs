//! What `land` adds to `run.json`: the restack a landed run went through, and the landing
//! attempts a conflict refused. Both are optional additions to `tabellio.run/v1` (records
//! without them are byte-identical to before). Unknown fields inside them are refused, as
//! everywhere in `run.json`.

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

/// A landing that a conflict refused; the run stayed `completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandAttempt {
    /// The target and the tip the run was to be stacked on.
    pub target: String,
    pub onto: String,
    /// The run's commit that did not apply.
    pub commit: String,
    /// The conflicting paths, sorted.
    pub paths: Vec<String>,
    pub at: String,
}
