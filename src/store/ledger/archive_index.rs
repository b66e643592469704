//! The index of our archive: `refs/tabellio/archive-index`, a commit (without parents) whose
//! tree finds any archived run by its id in one path lookup, whatever the number of archive
//! months and runs:
//!
//! ```text
//! months                        "<YYYY-MM> <archive commit>\n" for every month it covers
//! runs/<xx>/<yy>/<run-id>.json  the run's entry: the same blob as in its newest month
//! ```
//!
//! `xx` and `yy` are the first four hex digits of the SHA-256 of the run id (`xx` is the
//! month trees' bucket), so archiving a run rewrites two small trees and the root, not a tree
//! of every run. The index is derived from the archive months and written in the same
//! compare-and-swap transaction as the month refs it covers (`gc`, `sync`). A reader trusts it
//! only when `months` names exactly the month refs there are; otherwise (a transaction cut
//! half-way with the files backend, an archive written by an older version) the reader walks
//! the months as before and the next `gc` or `sync` brings the index up to date. It is never
//! pushed: each repository derives its own.

use std::collections::BTreeMap;

use gix::bstr::ByteSlice;

use crate::error::Result;
use crate::model::canonical::sha256_hex;
use crate::store::tx::Cas;

use super::super::diff::entries_of;
use super::super::Store;
use super::archive::{self, Archived};
use super::layout::{blob_entry, tree_entry};

pub const INDEX_REF: &str = "refs/tabellio/archive-index";

const MONTHS_FILE: &str = "months";
const RUNS_DIR: &str = "runs";

/// `(xx, yy, <run-id>.json)`: where a run's entry is in the index.
fn index_names(run_id: &str) -> (String, String, String) {
    let hash = sha256_hex(run_id.as_bytes());
    (
        hash[..2].to_string(),
        hash[2..4].to_string(),
        format!("{run_id}.json"),
    )
}

/// `runs/<xx>/<yy>/<run-id>.json`.
pub fn index_path(run_id: &str) -> String {
    let (xx, yy, file) = index_names(run_id);
    format!("{RUNS_DIR}/{xx}/{yy}/{file}")
}

/// The index as read: its tree and the month tips it covers.
pub(super) struct Index {
    tree: gix::ObjectId,
    months: BTreeMap<String, gix::ObjectId>,
}

impl Store {
    /// The index ref's value and, when it reads as an index, what it holds. An unreadable
    /// index is no index: it is only ever derived, and the next write replaces it.
    fn read_archive_index(&self) -> Result<(Option<gix::ObjectId>, Option<Index>)> {
        let Some(tip) = self.ref_target(INDEX_REF)? else {
            return Ok((None, None));
        };
        let read = || -> Result<Option<Index>> {
            if self.ensure_commit_ref(INDEX_REF, tip, "").is_err() {
                return Ok(None);
            }
            let tree = self.tree_of(tip)?;
            let Some((mode, blob)) = self.entry_at(tree, MONTHS_FILE)? else {
                return Ok(None);
            };
            if !mode.is_blob() {
                return Ok(None);
            }
            let mut months = BTreeMap::new();
            for line in String::from_utf8_lossy(&self.read_blob(blob)?).lines() {
                let Some((month, hex)) = line.split_once(' ') else {
                    return Ok(None);
                };
                let Ok(id) = gix::ObjectId::from_hex(hex.as_bytes()) else {
                    return Ok(None);
                };
                months.insert(month.to_string(), id);
            }
            Ok(Some(Index { tree, months }))
        };
        Ok((Some(tip), read().unwrap_or(None)))
    }

    /// The index, when it covers exactly our month refs `months` (newest first); `None` when it
    /// is missing, unreadable or behind them (walk the months then).
    pub(super) fn archive_index_covering(
        &self,
        months: &[(String, gix::ObjectId)],
    ) -> Result<Option<Index>> {
        let (_, Some(index)) = self.read_archive_index()? else {
            return Ok(None);
        };
        let covers = months.len() == index.months.len()
            && months
                .iter()
                .all(|(name, tip)| index.months.get(&name[archive::PREFIX.len()..]) == Some(tip));
        Ok(covers.then_some(index))
    }

    /// Run `run_id` in `index`: archived (`Some(Some)`), archived nowhere (`Some(None)`), or an
    /// entry not as `gc` writes it (`None`: the months decide).
    pub(super) fn find_in_archive_index(
        &self,
        index: &Index,
        run_id: &str,
    ) -> Result<Option<Option<Archived>>> {
        let path = index_path(run_id);
        let Some((mode, blob)) = self.entry_at(index.tree, &path)? else {
            return Ok(Some(None));
        };
        if !mode.is_blob() {
            return Ok(None);
        }
        let entry = self.read_archive_entry(INDEX_REF, &path, blob)?;
        let month = crate::model::time::month_of(&entry.updated_at).map(str::to_string);
        Ok(match month {
            Some(month) if entry.run_id == run_id && index.months.contains_key(&month) => {
                Some(Some(Archived {
                    archive_ref: archive::ref_name(&month),
                    entry,
                }))
            }
            _ => None,
        })
    }

    /// The compare-and-swap that brings the index up to date with the month refs `months`
    /// (month → archive commit) as a transaction is about to leave them; `None` when it is up
    /// to date. Only the objects are written here. Months whose tip moved are compared with
    /// the tip the index covered, bucket by bucket, so archiving a hundred runs reads and
    /// writes a few hundred small trees whatever the archive holds.
    pub fn archive_index_update(
        &self,
        months: &BTreeMap<String, gix::ObjectId>,
        message: &str,
    ) -> Result<Option<Cas>> {
        let (old, index) = self.read_archive_index()?;
        let (mut covered, root) = match index {
            // A month the index covers and the refs no longer have (removed by hand): rebuild.
            Some(i) if i.months.keys().all(|m| months.contains_key(m)) => (i.months, Some(i.tree)),
            _ => (BTreeMap::new(), None),
        };
        if old.is_some() && root.is_some() && &covered == months {
            return Ok(None);
        }
        if months.is_empty() && old.is_none() {
            return Ok(None);
        }
        // run id → (entry blob, month), oldest month first so that the newest month wins.
        let mut changed: BTreeMap<String, (gix::ObjectId, String)> = BTreeMap::new();
        for (month, tip) in months {
            let before = covered.get(month).copied();
            if before == Some(*tip) {
                continue;
            }
            let name = archive::ref_name(month);
            let new_buckets = self.archive_buckets(&name, *tip)?;
            let old_buckets = match before {
                Some(b) => self.archive_buckets(&name, b).unwrap_or_default(),
                None => BTreeMap::new(),
            };
            for (bucket, tree) in new_buckets {
                let was = old_buckets.get(&bucket).copied();
                if was == Some(tree) {
                    continue;
                }
                let old_files = self.bucket_files(was)?;
                for (file, blob) in self.bucket_files(Some(tree))? {
                    if old_files.get(&file) == Some(&blob) {
                        continue;
                    }
                    if let Some(run_id) = file.strip_suffix(".json") {
                        changed.insert(run_id.to_string(), (blob, month.clone()));
                    }
                }
            }
            covered.insert(month.clone(), *tip);
        }
        // xx → yy → file → blob, read only where something changes.
        let objects = self.objects();
        let runs = match root {
            Some(tree) => self.entry_at(tree, RUNS_DIR)?.map(|(_, id)| id),
            None => None,
        };
        let mut top: BTreeMap<String, gix::ObjectId> = tree_names(entries_of(&objects, runs)?);
        let mut by_xx: BTreeMap<String, BTreeMap<String, Vec<Change>>> = BTreeMap::new();
        for (run_id, (blob, month)) in changed {
            let (xx, yy, file) = index_names(&run_id);
            by_xx
                .entry(xx)
                .or_default()
                .entry(yy)
                .or_default()
                .push((file, blob, month));
        }
        for (xx, by_yy) in by_xx {
            let mut mid = tree_names(entries_of(&objects, top.get(&xx).copied())?);
            for (yy, files) in by_yy {
                let mut leaf: BTreeMap<String, gix::ObjectId> =
                    entries_of(&objects, mid.get(&yy).copied())?
                        .into_iter()
                        .filter(|(_, (mode, _))| mode.is_blob())
                        .map(|(n, (_, id))| (n.to_str_lossy().into_owned(), id))
                        .collect();
                for (file, blob, month) in files {
                    if let Some(&held) = leaf.get(&file) {
                        if held != blob && self.indexed_month_is_newer(held, &month) {
                            continue;
                        }
                    }
                    leaf.insert(file, blob);
                }
                let entries = leaf.iter().map(|(f, b)| blob_entry(f, *b)).collect();
                mid.insert(yy, self.write_object(&gix::objs::Tree { entries })?);
            }
            let entries = mid.iter().map(|(n, t)| tree_entry(n, *t)).collect();
            top.insert(xx, self.write_object(&gix::objs::Tree { entries })?);
        }
        let entries = top.iter().map(|(n, t)| tree_entry(n, *t)).collect();
        let runs = self.write_object(&gix::objs::Tree { entries })?;
        let listing: String = covered.iter().map(|(m, t)| format!("{m} {t}\n")).collect();
        let tree = self.write_object(&gix::objs::Tree {
            entries: vec![
                blob_entry(MONTHS_FILE, self.write_blob(listing.as_bytes())?),
                tree_entry(RUNS_DIR, runs),
            ],
        })?;
        let commit = self.write_commit(
            &format!("tabellio: archive index of {} months\n", covered.len()),
            tree,
            [],
        )?;
        Ok(Some(Cas::update(INDEX_REF, old, commit, message)))
    }

    /// Whether the entry `held` in the index names a later month than `month` (it stays).
    fn indexed_month_is_newer(&self, held: gix::ObjectId, month: &str) -> bool {
        let Ok(entry) = self.read_archive_entry(INDEX_REF, "", held) else {
            return false;
        };
        crate::model::time::month_of(&entry.updated_at).is_some_and(|m| m > month)
    }
}

/// One entry to put in the index: file name, entry blob, the month it comes from.
type Change = (String, gix::ObjectId, String);

/// name → id of the subtrees among `entries`.
fn tree_names(
    entries: BTreeMap<gix::bstr::BString, crate::store::diff::TreeEntry>,
) -> BTreeMap<String, gix::ObjectId> {
    entries
        .into_iter()
        .filter(|(_, (mode, _))| mode.is_tree())
        .map(|(n, (_, id))| (n.to_str_lossy().into_owned(), id))
        .collect()
}
