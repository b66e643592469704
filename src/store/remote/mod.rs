//! The network side of git storage: fetching a remote's runs and notes into tracking refs,
//! merging notes with the remote's, and atomic pushes with leases. Everything here goes through
//! the one git-CLI spawner ([`super::git_cli`]) for the transport and through gix for every
//! local read and write; `sync`, remote promotion, `land --remote` and the hooks build on it.

pub mod failure;
pub mod fetch;
pub mod notes_merge;
pub mod promisor;
pub mod push;

use serde::Serializer;

use crate::error::Result;
use crate::store::tx::{self, Cas};
use crate::store::Store;

use fetch::Tracking;
use notes_merge::NotesStep;
use push::PushRef;

/// Every notes ref, ours and the remote's, merged as far as it can be without moving a ref.
pub fn plan_notes(store: &Store, tracking: &Tracking, remote: &str) -> Result<Vec<NotesStep>> {
    let local = fetch::local_notes(store)?;
    let names: std::collections::BTreeSet<&String> =
        local.keys().chain(tracking.notes.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        let (l, r) = (local.get(name).copied(), tracking.notes.get(name).copied());
        out.extend(notes_merge::plan(store, name, l, r, remote)?);
    }
    Ok(out)
}

/// Fetch `remote` (its ledgers, notes and queue, plus `extra` refspecs) and merge its notes
/// into ours (compare-and-swap; a local writer that moved them meanwhile wins, and the next
/// call merges again). The steps say what a push of ours would carry.
pub fn fetch_and_merge_notes(
    store: &Store,
    remote: &str,
    extra: &[String],
    message: &str,
) -> Result<Vec<NotesStep>> {
    fetch::fetch_with(store, remote, extra)?;
    merge_fetched_notes(store, remote, message)
}

/// Fetch `remote`'s notes alone (plus `extra` refspecs), none of its ledgers or queue, and
/// merge them into ours as [`fetch_and_merge_notes`] does: for a reader of evidence whose
/// fetches must not grow with the number of runs (a worker polling for candidates).
pub fn fetch_notes_and_merge(
    store: &Store,
    remote: &str,
    extra: &[String],
    message: &str,
) -> Result<Vec<NotesStep>> {
    let mut refspecs = fetch::notes_refspecs(remote);
    refspecs.extend(extra.iter().cloned());
    fetch::fetch_exactly(store, remote, &refspecs)?;
    merge_fetched_notes(store, remote, message)
}

/// Merge the remote's notes as last fetched into ours; the steps a push of ours would carry.
fn merge_fetched_notes(store: &Store, remote: &str, message: &str) -> Result<Vec<NotesStep>> {
    let tracking = Tracking::read(store, remote)?;
    let notes = plan_notes(store, &tracking, remote)?;
    let edits: Vec<Cas> = notes
        .iter()
        .filter_map(|s| s.local_update(message))
        .collect();
    if !edits.is_empty() {
        let _ = tx::apply(store, &edits);
    }
    Ok(notes)
}

/// After a successful push, move the tracking refs of what we pushed to what the remote now
/// holds, as `git push` does for configured refspecs (when `init` configured them, git already
/// did and this finds nothing to do). Best effort: a tracking ref is only a cache of the remote,
/// and the next fetch corrects it.
pub fn record_pushed_in_tracking(store: &Store, remote: &str, pushes: &[PushRef]) {
    let message = format!("tabellio: pushed to {remote}");
    let edits: Vec<Cas> = pushes
        .iter()
        .filter_map(|p| {
            let tracking = if let Some(run) = p.dst.strip_prefix(crate::store::ledger::PREFIX) {
                format!("{}{run}", fetch::tracking_runs_prefix(remote))
            } else if let Some(month) = p.dst.strip_prefix(crate::store::ledger::archive::PREFIX) {
                format!("{}{month}", fetch::tracking_archive_prefix(remote))
            } else if let Some(name) = p.dst.strip_prefix(fetch::NOTES_PREFIX) {
                format!("{}{name}", fetch::tracking_notes_prefix(remote))
            } else {
                return None;
            };
            match store.ref_target(&tracking) {
                Ok(current) if current == p.expect => {
                    Some(Cas::update(tracking, p.expect, p.new, &message))
                }
                _ => None,
            }
        })
        .collect();
    if !edits.is_empty() {
        let _ = tx::apply(store, &edits);
    }
}

pub fn ser_oid<S: Serializer>(id: &gix::ObjectId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

pub fn ser_opt_oid<S: Serializer>(id: &Option<gix::ObjectId>, s: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => s.collect_str(id),
        None => s.serialize_none(),
    }
}
