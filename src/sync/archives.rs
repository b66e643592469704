//! Sync of the archive (`refs/tabellio/archive/<month>`): each month's archive chain is
//! reconciled with the remote's like a notes ref: created, fast-forwarded, pushed, or, when
//! both sides archived runs of the same month, merged into a commit whose parents are both
//! (so every archived ledger stays reachable on both sides) and whose tree holds every run of
//! either ([`Store::merge_archives`]). Nothing is dropped: the merge only ever adds.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::Result;
use crate::store::ledger::archive;
use crate::store::tx::Cas;
use crate::store::Store;

use super::push::PushRef;

/// What sync does with one month's archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchiveAction {
    UpToDate,
    /// Only the remote has the month: ours is created at its value.
    Created,
    /// Ours is an ancestor of the remote's: ours moves forward.
    FastForwarded,
    /// The remote's is an ancestor of ours (or it has none): ours is pushed.
    Ahead,
    /// Both archived runs: merged here, then pushed.
    Merged,
}

/// The plan for one month.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveStep {
    pub month: String,
    pub action: ArchiveAction,
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub local: Option<gix::ObjectId>,
    #[serde(serialize_with = "super::ser_opt_oid")]
    pub remote: Option<gix::ObjectId>,
    /// Our new value, when ours moves (created, fast-forwarded, merged).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ser_opt_oid"
    )]
    pub new: Option<gix::ObjectId>,
}

impl ArchiveStep {
    /// The compare-and-swap on our archive ref, if it moves.
    pub fn local_update(&self, message: &str) -> Option<Cas> {
        let new = self.new?;
        Some(Cas::update(
            archive::ref_name(&self.month),
            self.local,
            new,
            message,
        ))
    }

    /// The push of our archive ref, if the remote's moves.
    pub fn push(&self) -> Option<PushRef> {
        let new = match self.action {
            ArchiveAction::Ahead => self.local?,
            ArchiveAction::Merged => self.new?,
            _ => return None,
        };
        Some(PushRef {
            dst: archive::ref_name(&self.month),
            new,
            expect: self.remote,
        })
    }
}

/// Plan every month in ours ∪ the remote's (month → archive commit); a merge commit is written
/// (an object only) for a month both sides moved.
pub fn plan(
    store: &Store,
    remote_name: &str,
    local: &BTreeMap<String, gix::ObjectId>,
    remote: &BTreeMap<String, gix::ObjectId>,
) -> Result<Vec<ArchiveStep>> {
    let months: BTreeSet<&String> = local.keys().chain(remote.keys()).collect();
    let mut out = Vec::new();
    for month in months {
        let (l, r) = (local.get(month).copied(), remote.get(month).copied());
        let mut step = ArchiveStep {
            month: month.clone(),
            action: ArchiveAction::UpToDate,
            local: l,
            remote: r,
            new: None,
        };
        match (l, r) {
            (None, None) => continue,
            (Some(_), None) => step.action = ArchiveAction::Ahead,
            (None, Some(r)) => {
                step.action = ArchiveAction::Created;
                step.new = Some(r);
            }
            (Some(l), Some(r)) if l == r => {}
            (Some(l), Some(r)) if store.is_ancestor(r, l)? => step.action = ArchiveAction::Ahead,
            (Some(l), Some(r)) if store.is_ancestor(l, r)? => {
                step.action = ArchiveAction::FastForwarded;
                step.new = Some(r);
            }
            (Some(l), Some(r)) => {
                step.action = ArchiveAction::Merged;
                let message =
                    format!("tabellio: sync: merge the archive of {month} from {remote_name}\n");
                step.new = Some(store.merge_archives(month, l, r, &message)?);
            }
        }
        out.push(step);
    }
    Ok(out)
}
