//! The push of a sync in bounded chunks: the refs go in order (notes first), as few atomic,
//! leased pushes as keep each under a byte budget of new objects (`tabellio.syncPushBytes`,
//! [`DEFAULT_PUSH_BYTES`] unless set). After each chunk lands, the tracking refs move to what
//! it pushed, so a sync stopped between chunks (killed, a connection lost) leaves an earlier
//! state of the same sync: the next one pushes only what is left.
//!
//! What a ref adds is estimated in-process, never by asking git to pack it: the commits from
//! its new value back along first parents to the remote's (at most [`WALK_LIMIT`]), and the
//! blobs each of them changed. A ref that alone is over the budget goes alone.

use std::collections::HashSet;

use crate::error::Result;
use crate::store::diff::tree_changes_from;
use crate::store::Store;

use super::push::{self, PushRef, PushResult};
use super::record_pushed_in_tracking;

/// 64 MiB of new objects a push, unless `tabellio.syncPushBytes` says otherwise.
pub const DEFAULT_PUSH_BYTES: u64 = 64 << 20;

/// How many commits of one ref the estimate walks.
const WALK_LIMIT: usize = 1000;

/// The budget: `tabellio.syncPushBytes` (git's integer syntax, `16m`), else the default; at
/// least one byte.
pub fn push_budget(store: &Store) -> u64 {
    store
        .repo
        .config_snapshot()
        .integer("tabellio.syncPushBytes")
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(DEFAULT_PUSH_BYTES)
        .max(1)
}

/// The chunks of `refs` under `budget`, in order.
pub fn chunks(store: &Store, refs: &[PushRef], budget: u64) -> Vec<Vec<PushRef>> {
    let mut out: Vec<Vec<PushRef>> = Vec::new();
    let mut size = 0u64;
    let mut seen = HashSet::new();
    for r in refs {
        let cost = added_bytes(store, r, &mut seen);
        match out.last_mut() {
            Some(chunk) if size.saturating_add(cost) <= budget => {
                chunk.push(r.clone());
                size += cost;
            }
            _ => {
                out.push(vec![r.clone()]);
                size = cost;
            }
        }
    }
    out
}

/// Push `refs` chunk by chunk; the result of the last push made, and how many were made.
pub fn push_in_chunks(store: &Store, remote: &str, refs: &[PushRef]) -> Result<(PushResult, u32)> {
    let mut done = Vec::new();
    let mut pushes = 0;
    for chunk in chunks(store, refs, push_budget(store)) {
        pushes += 1;
        match push::push(store, remote, &chunk)? {
            PushResult::Pushed(lines) => {
                record_pushed_in_tracking(store, remote, &chunk);
                done.extend(lines);
            }
            PushResult::LostRace(lines) => {
                done.extend(lines);
                return Ok((PushResult::LostRace(done), pushes));
            }
            PushResult::Declined { refs, messages } => {
                done.extend(refs);
                let result = PushResult::Declined {
                    refs: done,
                    messages,
                };
                return Ok((result, pushes));
            }
        }
    }
    Ok((PushResult::Pushed(done), pushes))
}

/// The bytes of the objects `r` adds on the remote, estimated: each commit from its new value
/// back along first parents to the remote's value, and the blobs it changed against its first
/// parent. Objects counted for an earlier ref (`seen`) count once.
fn added_bytes(store: &Store, r: &PushRef, seen: &mut HashSet<gix::ObjectId>) -> u64 {
    if r.is_deletion() {
        return 0;
    }
    let objects = store.objects();
    let size = |id: gix::ObjectId| store.repo.find_header(id).map_or(0, |h| h.size());
    let mut total = 0;
    let mut next = Some(r.new);
    for _ in 0..WALK_LIMIT {
        let Some(id) = next.take() else { break };
        if Some(id) == r.expect || !seen.insert(id) {
            break;
        }
        total += size(id);
        let Ok(commit) = store.commit(id) else { break };
        let Ok(tree) = commit.tree_id().map(|t| t.detach()) else {
            break;
        };
        let parent = commit.parent_ids().next().map(|p| p.detach());
        let old_tree = parent.and_then(|p| store.tree_of(p).ok());
        for change in tree_changes_from(&objects, old_tree, tree).unwrap_or_default() {
            if let Some((mode, blob)) = change.new {
                if mode.is_blob() && seen.insert(blob) {
                    total += size(blob);
                }
            }
        }
        next = parent;
    }
    total
}
