//! The archive of finished runs: `refs/tabellio/archive/<YYYY-MM>`, one commit chain per month
//! in which the archived runs ended.
//!
//! Each archive commit's first parent is the month's previous archive commit; its other parents
//! are the ledger tips it archives (at most [`RUNS_PER_COMMIT`] a commit), so every archived
//! ledger's whole chain stays reachable: `git fsck`, `git gc` and a fetch see it as they see any
//! history. Its tree maps every run of the month to its entry (`tabellio.archived-run/v1`):
//!
//! ```text
//! runs/<xx>/<run-id>.json     xx: the first two hex digits of the SHA-256 of the run id
//! ```
//!
//! so adding a run rewrites one bucket of a few dozen entries, not a tree of every run.
//! Only objects are written here; the caller's transaction moves the archive ref, by
//! compare-and-swap, together with the ledger and branch deletions it belongs to.

use std::collections::BTreeMap;

use gix::bstr::ByteSlice;
use gix::objs::tree::Entry;

use crate::error::{Context, Error, Result};
use crate::model::archive::{self, ArchivedRun};
use crate::model::canonical::sha256_hex;

use super::super::diff::entries_of;
use super::super::Store;
use super::layout::{blob_entry, tree_entry};
use super::Ledger;

pub const PREFIX: &str = "refs/tabellio/archive/";

/// The most ledgers one archive commit archives (its parents beyond the first).
pub const RUNS_PER_COMMIT: usize = 100;

const RUNS_DIR: &str = "runs";

/// `refs/tabellio/archive/<month>`.
pub fn ref_name(month: &str) -> String {
    format!("{PREFIX}{month}")
}

/// The bucket and file name of a run's entry.
fn entry_names(run_id: &str) -> (String, String) {
    (
        sha256_hex(run_id.as_bytes())[..2].to_string(),
        format!("{run_id}.json"),
    )
}

/// `runs/<xx>/<run-id>.json`: where a run's entry is in an archive commit.
pub fn entry_path(run_id: &str) -> String {
    let (bucket, file) = entry_names(run_id);
    format!("{RUNS_DIR}/{bucket}/{file}")
}

/// An archived run and where it was found.
#[derive(Debug, Clone)]
pub struct Archived {
    /// The archive ref holding it.
    pub archive_ref: String,
    pub entry: ArchivedRun,
}

impl Archived {
    /// The ledger tip the entry names.
    pub fn ledger_tip(&self) -> Result<gix::ObjectId> {
        gix::ObjectId::from_hex(self.entry.ledger.as_bytes()).map_err(|e| {
            Error::refused(format!(
                "the entry of run {} in {} names the ledger {:?}, which is not an object id",
                self.entry.run_id, self.archive_ref, self.entry.ledger
            ))
            .caused_by(e)
        })
    }
}

impl Store {
    /// The archive refs under `prefix` (ours: [`PREFIX`]; a remote's tracking ones), newest
    /// month first.
    pub fn archive_refs_under(&self, prefix: &str) -> Result<Vec<(String, gix::ObjectId)>> {
        let mut refs = self.refs_under(prefix)?;
        refs.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(refs)
    }

    /// Our archive months: month → archive commit.
    pub fn archive_months(&self) -> Result<BTreeMap<String, gix::ObjectId>> {
        Ok(self
            .refs_under(PREFIX)?
            .into_iter()
            .map(|(name, tip)| (name[PREFIX.len()..].to_string(), tip))
            .collect())
    }

    /// The run `run_id` in our archive, `None` when it is not archived.
    pub fn try_find_archived(&self, run_id: &str) -> Result<Option<Archived>> {
        self.try_find_archived_under(PREFIX, run_id)
    }

    /// The run `run_id` in the archive refs under `prefix` (newest month first).
    pub fn try_find_archived_under(&self, prefix: &str, run_id: &str) -> Result<Option<Archived>> {
        Ok(self
            .find_archived_among_under(prefix, &[run_id])?
            .remove(run_id))
    }

    /// Which of `run_ids` the archive refs under `prefix` hold, each as its newest month has
    /// it. Ours are looked up in the archive index ([`super::archive_index`]) when it covers
    /// every month, one path lookup a run whatever the archive holds; else (and in a remote's
    /// tracking refs) month by month, each bucket tree read once for all the runs in it.
    pub fn find_archived_among_under(
        &self,
        prefix: &str,
        run_ids: &[&str],
    ) -> Result<BTreeMap<String, Archived>> {
        let mut out = BTreeMap::new();
        let months = self.archive_refs_under(prefix)?;
        if months.is_empty() || run_ids.is_empty() {
            return Ok(out);
        }
        let mut left: Vec<&str> = Vec::new();
        let index = match prefix == PREFIX {
            true => self.archive_index_covering(&months)?,
            false => None,
        };
        for &id in run_ids {
            match index.as_ref().map(|i| self.find_in_archive_index(i, id)) {
                Some(Ok(Some(found))) => out.extend(found.map(|f| (id.to_string(), f))),
                Some(Err(e)) => return Err(e),
                Some(Ok(None)) | None => left.push(id),
            }
        }
        for (name, tip) in months {
            if left.is_empty() {
                break;
            }
            let buckets = self.archive_buckets(&name, tip)?;
            let mut files_of: BTreeMap<String, BTreeMap<String, gix::ObjectId>> = BTreeMap::new();
            let mut still = Vec::new();
            for id in left {
                let (bucket, file) = entry_names(id);
                let Some(&tree) = buckets.get(&bucket) else {
                    still.push(id);
                    continue;
                };
                let files = match files_of.entry(bucket) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(self.bucket_files(Some(tree))?)
                    }
                };
                let Some(&blob) = files.get(&file) else {
                    still.push(id);
                    continue;
                };
                let path = entry_path(id);
                let entry = self.read_archive_entry(&name, &path, blob)?;
                if entry.run_id != id {
                    return Err(Error::refused(format!(
                        "{name}:{path} holds run {:?}, not {id:?}",
                        entry.run_id
                    ))
                    .hint(
                        "the archive was edited by hand; restore it from a clone that has it right",
                    ));
                }
                out.insert(
                    id.to_string(),
                    Archived {
                        archive_ref: name.clone(),
                        entry,
                    },
                );
            }
            left = still;
        }
        Ok(out)
    }

    /// The ledger of archived run `run_id`: its tip as the archive names it, read and checked
    /// like a live one (the record must name the run).
    pub fn try_find_archived_ledger(&self, run_id: &str) -> Result<Option<(Ledger, Archived)>> {
        let Some(found) = self.try_find_archived(run_id)? else {
            return Ok(None);
        };
        let tip = found.ledger_tip()?;
        let record = self.read_run_json(tip)?;
        if record.run_id != run_id {
            return Err(Error::refused(format!(
                "the archived ledger {tip} of run {run_id:?} ({}) holds run {:?}",
                found.archive_ref, record.run_id
            ))
            .hint("the archive was edited by hand; restore it from a clone that has it right"));
        }
        Ok(Some((Ledger { tip, record }, found)))
    }

    /// Every run in the archive refs under `prefix`: one entry per run (the newest month's when
    /// two months name one run).
    pub fn archived_runs_under(&self, prefix: &str) -> Result<Vec<Archived>> {
        let mut out: BTreeMap<String, Archived> = BTreeMap::new();
        for (name, tip) in self.archive_refs_under(prefix)? {
            let tree = self.archive_tree(&name, tip)?;
            for (path, blob) in self.archive_entries(tree)? {
                let entry = self.read_archive_entry(&name, &path, blob)?;
                out.entry(entry.run_id.clone()).or_insert(Archived {
                    archive_ref: name.clone(),
                    entry,
                });
            }
        }
        Ok(out.into_values().collect())
    }

    /// Every run in our archive.
    pub fn archived_runs(&self) -> Result<Vec<Archived>> {
        self.archived_runs_under(PREFIX)
    }

    /// The tree of the archive commit `tip` of `name`, refused when `name` is not at a commit.
    fn archive_tree(&self, name: &str, tip: gix::ObjectId) -> Result<gix::ObjectId> {
        self.ensure_commit_ref(name, tip, &archive_repair(name))?;
        self.tree_of(tip)
    }

    /// `(runs/<xx>/<file>, blob)` of every entry of an archive tree.
    fn archive_entries(&self, tree: gix::ObjectId) -> Result<Vec<(String, gix::ObjectId)>> {
        let objects = self.objects();
        let Some((_, runs)) = self.entry_at(tree, RUNS_DIR)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (bucket, (mode, id)) in entries_of(&objects, Some(runs))? {
            if !mode.is_tree() {
                continue;
            }
            for (file, (mode, blob)) in entries_of(&objects, Some(id))? {
                if mode.is_blob() {
                    out.push((format!("{RUNS_DIR}/{bucket}/{}", file.to_str_lossy()), blob));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn read_archive_entry(
        &self,
        name: &str,
        path: &str,
        blob: gix::ObjectId,
    ) -> Result<ArchivedRun> {
        let data = self
            .read_blob(blob)
            .context(|| format!("could not read {name}:{path}"))?;
        let text = String::from_utf8_lossy(&data);
        Ok(crate::model::parse_record(
            &text,
            archive::SCHEMA,
            &format!("{name}:{path}"),
        )?)
    }

    /// Write the archive commits that add `runs` (entry, ledger tip) on top of the month's
    /// archive commit `tip` (`None`: the month's first), [`RUNS_PER_COMMIT`] runs a commit;
    /// the last commit's id. Objects only: the caller moves the ref.
    pub fn write_archive(
        &self,
        month: &str,
        tip: Option<gix::ObjectId>,
        runs: &[(ArchivedRun, gix::ObjectId)],
    ) -> Result<gix::ObjectId> {
        let name = ref_name(month);
        let mut buckets = match tip {
            Some(tip) => self.archive_buckets(&name, tip)?,
            None => BTreeMap::new(),
        };
        let mut parent = tip;
        for chunk in runs.chunks(RUNS_PER_COMMIT) {
            let mut touched: BTreeMap<String, BTreeMap<String, gix::ObjectId>> = BTreeMap::new();
            let mut message = format!(
                "tabellio: gc: archive {} run{} that ended in {month}\n\n",
                chunk.len(),
                if chunk.len() == 1 { "" } else { "s" }
            );
            for (entry, ledger) in chunk {
                let (bucket, file) = entry_names(&entry.run_id);
                let files = match touched.entry(bucket.clone()) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(self.bucket_files(buckets.get(&bucket).copied())?)
                    }
                };
                let mut json = serde_json::to_string_pretty(entry)
                    .context(|| "could not serialize an archive entry".into())?;
                json.push('\n');
                files.insert(file, self.write_blob(json.as_bytes())?);
                message.push_str(&format!("{} {} {ledger}\n", entry.run_id, entry.state));
            }
            for (bucket, files) in touched {
                buckets.insert(bucket, self.write_bucket(&files)?);
            }
            let tree = self.write_runs_tree(&buckets)?;
            let mut parents: Vec<gix::ObjectId> = parent.into_iter().collect();
            for (_, ledger) in chunk {
                if !parents.contains(ledger) {
                    parents.push(*ledger);
                }
            }
            parent = Some(self.write_commit(&message, tree, parents)?);
        }
        parent.ok_or_else(|| Error::internal("no runs to archive"))
    }

    /// Merge two archive commits of one month (ours and a remote's) into a commit whose parents
    /// are both and whose tree holds every run of either: a run both hold keeps the entry whose
    /// ledger contains the other's, else ours.
    pub fn merge_archives(
        &self,
        month: &str,
        ours: gix::ObjectId,
        theirs: gix::ObjectId,
        message: &str,
    ) -> Result<gix::ObjectId> {
        let name = ref_name(month);
        let mut buckets = self.archive_buckets(&name, ours)?;
        let other = self.archive_buckets(&name, theirs)?;
        for (bucket, their_tree) in other {
            let our_tree = buckets.get(&bucket).copied();
            if our_tree == Some(their_tree) {
                continue;
            }
            let mut files = self.bucket_files(our_tree)?;
            for (file, their_blob) in self.bucket_files(Some(their_tree))? {
                let Some(&our_blob) = files.get(&file) else {
                    files.insert(file, their_blob);
                    continue;
                };
                if our_blob == their_blob {
                    continue;
                }
                let path = format!("{RUNS_DIR}/{bucket}/{file}");
                let (a, b) = (
                    self.read_archive_entry(&name, &path, our_blob)?,
                    self.read_archive_entry(&name, &path, their_blob)?,
                );
                let (a_tip, b_tip) = (
                    gix::ObjectId::from_hex(a.ledger.as_bytes()).ok(),
                    gix::ObjectId::from_hex(b.ledger.as_bytes()).ok(),
                );
                if let (Some(a_tip), Some(b_tip)) = (a_tip, b_tip) {
                    if a_tip != b_tip && self.is_ancestor(a_tip, b_tip)? {
                        files.insert(file, their_blob);
                    }
                }
            }
            buckets.insert(bucket, self.write_bucket(&files)?);
        }
        let tree = self.write_runs_tree(&buckets)?;
        self.write_commit(message, tree, [ours, theirs])
    }

    /// bucket → tree of the archive commit `tip` of `name`.
    pub(super) fn archive_buckets(
        &self,
        name: &str,
        tip: gix::ObjectId,
    ) -> Result<BTreeMap<String, gix::ObjectId>> {
        self.buckets_of(self.archive_tree(name, tip)?)
    }

    /// bucket → tree of the `runs/` directory of an archive tree.
    fn buckets_of(&self, tree: gix::ObjectId) -> Result<BTreeMap<String, gix::ObjectId>> {
        let Some((_, runs)) = self.entry_at(tree, RUNS_DIR)? else {
            return Ok(BTreeMap::new());
        };
        Ok(entries_of(&self.objects(), Some(runs))?
            .into_iter()
            .filter(|(_, (mode, _))| mode.is_tree())
            .map(|(name, (_, id))| (name.to_str_lossy().into_owned(), id))
            .collect())
    }

    /// file → blob of one bucket tree (`None`: a new bucket).
    pub(super) fn bucket_files(
        &self,
        tree: Option<gix::ObjectId>,
    ) -> Result<BTreeMap<String, gix::ObjectId>> {
        Ok(entries_of(&self.objects(), tree)?
            .into_iter()
            .filter(|(_, (mode, _))| mode.is_blob())
            .map(|(name, (_, id))| (name.to_str_lossy().into_owned(), id))
            .collect())
    }

    /// The tree of one bucket: file → entry blob (sorted by name: git's order for files).
    fn write_bucket(&self, files: &BTreeMap<String, gix::ObjectId>) -> Result<gix::ObjectId> {
        let entries = files
            .iter()
            .map(|(file, blob)| blob_entry(file, *blob))
            .collect();
        self.write_object(&gix::objs::Tree { entries })
    }

    /// The root tree `runs/<bucket>/…` of `buckets` (sorted by name: git's order, as every name
    /// at one level is of one kind).
    fn write_runs_tree(&self, buckets: &BTreeMap<String, gix::ObjectId>) -> Result<gix::ObjectId> {
        let entries: Vec<Entry> = buckets
            .iter()
            .map(|(bucket, id)| tree_entry(bucket, *id))
            .collect();
        let runs = self.write_object(&gix::objs::Tree { entries })?;
        self.write_object(&gix::objs::Tree {
            entries: vec![tree_entry(RUNS_DIR, runs)],
        })
    }
}

/// How to repair an archive ref that does not point at a commit.
fn archive_repair(name: &str) -> String {
    format!(
        "point it back at its last archive commit (`git rev-parse '{name}@{{1}}'` if a reflog was \
         kept, or another clone): `git update-ref {name} <commit>`"
    )
}
