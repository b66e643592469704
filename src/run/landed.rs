//! The landed map: which run put each commit on a branch, read from the ledgers
//! (`refs/tabellio/runs/*`, archived ones included when present). A promoted run names the
//! commit it landed as (`landed`, written by `land` through restacks and squashes), its
//! promotion's new tip and its validated commit; a commit none of them names resolves by its
//! tree, so a forge's squash or rebase that kept the tree is adopted. A completed run (merged
//! by a forge, so its ledger never learned it landed) names its validated commit and tree.
//! Reading only.

use std::collections::HashMap;

use crate::error::Result;
use crate::model::provenance::{ActorProvenance, LandedBy};
use crate::model::{RunRecord, RunState};
use crate::store::Store;

/// Every promoted run's landed commits and their trees.
#[derive(Debug, Default)]
pub struct LandedMap {
    /// Each with the rank of how its run named it ([`insert`]).
    by_commit: HashMap<gix::ObjectId, (u8, LandedBy)>,
    by_tree: HashMap<gix::ObjectId, (u8, LandedBy)>,
}

impl LandedMap {
    /// Read every ledger once. An unreadable ledger names nothing.
    pub fn read(store: &Store) -> Result<LandedMap> {
        let mut map = LandedMap::default();
        let mut ledgers = store.list_ledgers()?;
        // The same commit named by two runs resolves to the same one every time.
        ledgers.sort();
        for (run_id, tip) in ledgers {
            let Ok(record) = store.read_ledger_record(&run_id, tip) else {
                continue;
            };
            if matches!(record.state, RunState::Promoted | RunState::Completed) {
                map.add(store, &record);
            }
        }
        Ok(map)
    }

    fn add(&mut self, store: &Store, run: &RunRecord) {
        let named = [
            (run.landed.as_deref(), "landed"),
            (run.promotion.as_ref().map(|p| p.new.as_str()), "promoted"),
            (
                run.validated.as_ref().map(|v| v.commit.as_str()),
                "validated",
            ),
        ];
        for (hex, via) in named {
            let Some(commit) = hex.and_then(|h| gix::ObjectId::from_hex(h.as_bytes()).ok()) else {
                continue;
            };
            let by = LandedBy {
                run_id: run.run_id.clone(),
                actor: ActorProvenance::from(&run.actor),
                initiator: run.initiator.clone(),
                via,
            };
            if let Ok(tree) = store.tree_of(commit) {
                insert(
                    &mut self.by_tree,
                    tree,
                    LandedBy {
                        via: "tree",
                        ..by.clone()
                    },
                    via,
                );
            }
            insert(&mut self.by_commit, commit, by, via);
        }
    }

    /// The run that landed `commit`: by the commit itself, else by its tree. A commit several
    /// runs name is the one whose record says it landed as exactly that commit (`landed`):
    /// a batch's top is every batched run's promotion's new tip.
    pub fn resolve(&self, store: &Store, commit: gix::ObjectId) -> Result<Option<LandedBy>> {
        if let Some((_, by)) = self.by_commit.get(&commit) {
            return Ok(Some(by.clone()));
        }
        Ok(self
            .by_tree
            .get(&store.tree_of(commit)?)
            .map(|(_, by)| by.clone()))
    }
}

/// Put `by` at `key` unless a run named it more exactly already: `landed` before `promoted`
/// before `validated`; between equals, the first (the ledgers are read in run id order).
fn insert(
    map: &mut HashMap<gix::ObjectId, (u8, LandedBy)>,
    key: gix::ObjectId,
    by: LandedBy,
    how: &'static str,
) {
    let rank = match how {
        "landed" => 0,
        "promoted" => 1,
        _ => 2,
    };
    if map.get(&key).is_none_or(|(old, _)| rank < *old) {
        map.insert(key, (rank, by));
    }
}
