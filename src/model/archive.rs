//! The entry of an archived run (`tabellio.archived-run/v1`): what an archive commit's tree
//! says about one run whose ledger `gc` folded into `refs/tabellio/archive/<month>`.
//!
//! The ledger itself is kept whole (its tip is a parent of the archive commit); the entry names
//! that tip and copies what `list` and `verify` need, so neither reads every archived ledger.
//! Unknown fields are refused, as in every record.

use serde::{Deserialize, Serialize};

use super::run::{RunRecord, RunState};

pub const SCHEMA: &str = "tabellio.archived-run/v1";

/// One archived run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedRun {
    pub schema: String,
    pub run_id: String,
    /// The ledger tip (hex): the run's whole history, a parent of the archive commit.
    pub ledger: String,
    pub state: RunState,
    pub branch: String,
    /// The run branch's commit when it was deleted (hex), `None` when it was gone already.
    pub head: Option<String>,
    pub base: String,
    pub summary: String,
    pub created_at: String,
    /// When the run ended (the ledger tip's `updated_at`).
    pub updated_at: String,
    pub archived_at: String,
    /// The promotion's `old` and `new` commits (hex), when the run was promoted: `verify`
    /// reads a landing from them without the ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<ArchivedPromotion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedPromotion {
    pub target: String,
    pub old: String,
    pub new: String,
}

impl ArchivedRun {
    /// The entry of `record`, whose ledger tip is `ledger`, archived at `now`.
    pub fn of(record: &RunRecord, ledger: &str, head: Option<String>, now: &str) -> ArchivedRun {
        ArchivedRun {
            schema: SCHEMA.into(),
            run_id: record.run_id.clone(),
            ledger: ledger.into(),
            state: record.state,
            branch: record.branch.clone(),
            head,
            base: record.base.reference.clone(),
            summary: record.task.summary.clone(),
            created_at: record.created_at.clone(),
            updated_at: record.updated_at.clone(),
            archived_at: now.into(),
            promotion: record.promotion.as_ref().map(|p| ArchivedPromotion {
                target: p.target.clone(),
                old: p.old.clone(),
                new: p.new.clone(),
            }),
            landed: record.landed.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run::tests::sample;

    #[test]
    fn an_entry_reads_back_and_unknown_fields_are_refused() {
        let entry = ArchivedRun::of(
            &sample(RunState::Abandoned),
            &"a".repeat(40),
            None,
            "2026-02-01T00:00:00Z",
        );
        let text = serde_json::to_string(&entry).expect("serializes");
        let back: ArchivedRun = crate::model::parse_record(&text, SCHEMA, "entry").expect("reads");
        assert_eq!(back, entry);
        let mut value: serde_json::Value = serde_json::from_str(&text).expect("json");
        value["extra"] = 1.into();
        let err = crate::model::parse_record::<ArchivedRun>(&value.to_string(), SCHEMA, "entry");
        assert!(err.is_err(), "an unknown field is refused");
    }
}
