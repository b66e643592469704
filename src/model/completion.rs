//! The completion record a run's ledger gets when it lands (`promote`, `land`): which items of
//! the run's plan are done, which are open, and the evidence that backs each done one. An
//! optional addition to `tabellio.run/v1` (`completion`), absent for a run without a plan.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// The commit the run landed as (its validated commit, or its restacked copy).
    pub commit: String,
    /// The run's plans at that commit (`plans/…` or `plans_completed/…`), sorted.
    pub plans: Vec<String>,
    /// Every task line of those plans, in file order.
    pub items: Vec<CompletionItem>,
    /// How many items are done, how many open.
    pub done: usize,
    pub open: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionItem {
    /// The plan holding the item, at the landed commit.
    pub plan: String,
    /// The item's text after its checkbox.
    pub task: String,
    pub done: bool,
    /// For a done item: the first validated commit of the run where it was done, and the
    /// evidence records that validated that commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backed_by: Option<Backing>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backing {
    pub commit: String,
    /// One per required check: its name and the digest of the record that satisfied it.
    pub evidence: Vec<BackingRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackingRecord {
    pub check: String,
    pub record: String,
}
