//! The landed map: which run put each commit on a branch, read from the ledgers
//! (`refs/tabellio/runs/*`). A promoted run names the commits it put on the target (from the tip
//! it was stacked on to the commit it landed as, which `land` records through restacks and
//! squashes; for `promote`, from its base to the promotion's new tip), that new tip, and the
//! commits of its own branch up to the validated one; a commit none of them names resolves by
//! its tree, so a forge's squash or rebase that kept the tree is adopted. A completed run (merged
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
        let oid = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).ok();
        let base = oid(&run.base.commit);
        let validated = run.validated.as_ref().and_then(|v| oid(&v.commit));
        let promoted = run.promotion.as_ref().and_then(|p| oid(&p.new));
        // The commits the run put on the target: from the tip it was stacked on to the commit
        // it landed as (`land`), or from its base to the promotion's new tip (`promote`).
        let landed_line = match (&run.restack, &run.landed) {
            (Some(r), _) => (oid(&r.base_after), oid(&r.head_after)),
            (None, Some(landed)) => (base, oid(landed)),
            (None, None) => (base, promoted),
        };
        let lines = [
            (landed_line, "landed"),
            ((None, promoted), "promoted"),
            ((base, validated), "validated"),
        ];
        for ((from, to), via) in lines {
            let Some(to) = to else { continue };
            if via == "landed" && run.state != RunState::Promoted {
                continue;
            }
            let commits = match from {
                Some(from) => crate::store::ancestry::first_parent_chain(store, from, to)
                    .unwrap_or_else(|_| vec![to]),
                None => vec![to],
            };
            for commit in commits {
                let by = LandedBy {
                    run_id: run.run_id.clone(),
                    actor: ActorProvenance::from(&run.actor),
                    initiator: run.initiator.clone(),
                    via,
                };
                if let Ok(tree) = store.tree_of(commit) {
                    let by_tree = LandedBy {
                        via: "tree",
                        ..by.clone()
                    };
                    insert(&mut self.by_tree, tree, by_tree, via);
                }
                insert(&mut self.by_commit, commit, by, via);
            }
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
