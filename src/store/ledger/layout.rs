//! The tree of a ledger commit: `run.json`, `task.txt` and `history/` as
//! [`crate::model::run_file`] splits a run record, written and read back here. Read-only apart
//! from writing objects (never a ref): the caller's transaction makes them reachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gix::bstr::ByteSlice;
use gix::objs::tree::{Entry, EntryKind};
use gix::ObjectId;
use serde_json::Value;

use crate::error::{Context, Error, Result};
use crate::model::run_file::{self, History, HistoryKind, StoredRun};
use crate::model::{self, run, RunRecord};
use crate::store::diff::entries_of;

use super::super::Store;

/// The most history entries one command keeps in [`KnownBuckets`].
const KNOWN_BUCKETS_MAX_ENTRIES: usize = 10_000;

/// The history buckets this command has read or written, by tree id: each entry's value and
/// blob. A transition compares its entries with the buckets of the ledger commit it follows and
/// reuses what is equal (a whole bucket's tree, or one entry's blob) instead of serializing and
/// hashing it again, so that writing costs what the transition changed, not the run's age; a
/// command that makes several transitions (`loop`) finds the buckets it wrote itself. Bounded
/// by [`KNOWN_BUCKETS_MAX_ENTRIES`]: a `list` reads every ledger, a transition one.
#[derive(Debug, Default)]
pub(crate) struct KnownBuckets(Mutex<Buckets>);

#[derive(Debug, Default)]
struct Buckets {
    by_tree: HashMap<ObjectId, Arc<Vec<(Value, ObjectId)>>>,
    entries: usize,
}

impl KnownBuckets {
    fn has_room(&self, entries: usize) -> bool {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.entries + entries <= KNOWN_BUCKETS_MAX_ENTRIES
    }

    fn remember(&self, tree: ObjectId, entries: Vec<(Value, ObjectId)>) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.entries + entries.len() <= KNOWN_BUCKETS_MAX_ENTRIES {
            kept.entries += entries.len();
            kept.by_tree.insert(tree, Arc::new(entries));
        }
    }

    fn get(&self, tree: ObjectId) -> Option<Arc<Vec<(Value, ObjectId)>>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_tree.get(&tree).cloned()
    }
}

impl Store {
    /// The tree of a ledger commit holding `record`, on top of the ledger commit `previous`:
    /// objects already stored (the task text, history entries an earlier transition wrote) are
    /// not written again, so a transition adds only `run.json`, the entries it changed and the
    /// trees above them. Entries equal to those `previous` holds, as this command read them,
    /// keep their blobs (and a bucket of them its tree) without being serialized again.
    pub(super) fn write_ledger_tree(
        &self,
        record: &RunRecord,
        previous: Option<ObjectId>,
    ) -> Result<ObjectId> {
        let stored = run_file::split(record).context(|| "could not serialize run.json".into())?;
        let mut root = Vec::new();
        let mut kinds = Vec::new();
        for kind in HistoryKind::ALL {
            let entries = stored.history.of(kind);
            if entries.is_empty() {
                continue;
            }
            let before = self.previous_buckets(previous, kind);
            let mut dirs = Vec::new();
            let mut n = 0;
            while n < entries.len() {
                let (bucket, _) = run_file::entry_names(n + 1);
                let end = run_file::bucket_end(n + 1).min(entries.len());
                let read = before
                    .get(&bucket)
                    .and_then(|t| Some((*t, self.known_buckets.get(*t)?)));
                let tree = match read {
                    Some((tree, read)) if same_values(&read, &entries[n..end]) => tree,
                    read => self.write_bucket(kind, n, &entries[n..end], read.map(|(_, r)| r))?,
                };
                dirs.push(tree_entry(&bucket, tree));
                n = end;
            }
            kinds.push(tree_entry(kind.dir_name(), self.write_tree(dirs)?));
        }
        if !kinds.is_empty() {
            root.push(tree_entry(run_file::HISTORY_DIR, self.write_tree(kinds)?));
        }
        let run_json = self.write_json_blob(&stored.run_json, "run.json")?;
        root.push(blob_entry("run.json", run_json));
        let task = self.write_blob(stored.task_text.as_bytes())?;
        root.push(blob_entry(run_file::TASK_FILE, task));
        self.write_tree(root)
    }

    /// The tree of one history bucket: `entries` of `kind` from position `first + 1` on, each
    /// keeping its blob where it equals the entry at its place in `read`, the bucket as this
    /// command read it from the previous ledger commit.
    fn write_bucket(
        &self,
        kind: HistoryKind,
        first: usize,
        entries: &[Value],
        read: Option<Arc<Vec<(Value, ObjectId)>>>,
    ) -> Result<ObjectId> {
        let mut files = Vec::new();
        let mut known = self.known_buckets.has_room(entries.len()).then(Vec::new);
        for (j, entry) in entries.iter().enumerate() {
            let (_, file) = run_file::entry_names(first + j + 1);
            let blob = match read.as_deref().and_then(|r| r.get(j)) {
                Some((value, blob)) if value == entry => *blob,
                _ => self.write_json_blob(entry, &format!("{}/{file}", kind.dir_name()))?,
            };
            files.push(blob_entry(&file, blob));
            if let Some(known) = known.as_mut() {
                known.push((entry.clone(), blob));
            }
        }
        let tree = self.write_tree(files)?;
        if let Some(known) = known {
            self.known_buckets.remember(tree, known);
        }
        Ok(tree)
    }

    /// The run record of the ledger commit `commit`, `None` when its tree has no `run.json`.
    /// A v1 commit is read as it is; a v2 commit is assembled from its tree.
    pub(super) fn read_ledger_tree(&self, commit: gix::ObjectId) -> Result<Option<RunRecord>> {
        let what = format!("run.json of {commit}");
        let tree = self.commit_tree(commit)?;
        let Some(bytes) = self.tree_blob(&tree, "run.json", commit)? else {
            return Ok(None);
        };
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|e| model::SchemaError::Invalid {
                what: what.clone(),
                message: format!("not valid JSON: {e}"),
            })?;
        if value.get("schema").and_then(Value::as_str) != Some(run_file::STORED_SCHEMA) {
            // v1 (the whole record), or a schema the parse names as unsupported.
            return Ok(Some(model::parse_value(value, run::SCHEMA, &what)?));
        }
        let invalid = |message: String| {
            Error::from(model::SchemaError::Invalid {
                what: what.clone(),
                message,
            })
        };
        let task = self
            .tree_blob(&tree, run_file::TASK_FILE, commit)?
            .ok_or_else(|| invalid(format!("no {} beside it", run_file::TASK_FILE)))?;
        let task_text = String::from_utf8(task)
            .map_err(|_| invalid(format!("{} is not UTF-8", run_file::TASK_FILE)))?;
        let history = match self.tree_subtree(&tree, run_file::HISTORY_DIR, &invalid)? {
            Some(dir) => self.read_history(dir, &invalid)?,
            None => History::default(),
        };
        let stored = StoredRun {
            run_json: value,
            task_text,
            history,
        };
        Ok(Some(run_file::assemble(stored, &what)?))
    }

    /// Every entry under `history/`, in order; a name out of sequence or an unknown directory
    /// is refused (the counts in `run.json` catch a lost tail).
    fn read_history(
        &self,
        dir: gix::ObjectId,
        invalid: &dyn Fn(String) -> Error,
    ) -> Result<History> {
        let mut history = History::default();
        for (name, id) in self.subtrees(dir, invalid)? {
            let kind = HistoryKind::ALL
                .into_iter()
                .find(|k| k.dir_name() == name)
                .ok_or_else(|| {
                    invalid(format!("unknown entry {}/{name}", run_file::HISTORY_DIR))
                })?;
            let mut n = 0;
            for (bucket, bucket_id) in self.subtrees(id, invalid)? {
                let files = entries_of(&self.repo, Some(bucket_id))?;
                let mut read = self.known_buckets.has_room(files.len()).then(Vec::new);
                for (file, (mode, oid)) in files {
                    n += 1;
                    let file = file.to_str_lossy();
                    let path = format!("{}/{name}/{bucket}/{file}", run_file::HISTORY_DIR);
                    if run_file::entry_names(n) != (bucket.clone(), file.to_string())
                        || !mode.is_blob()
                    {
                        return Err(invalid(format!("unexpected entry {path}")));
                    }
                    let blob = self
                        .read_blob(oid)
                        .context(|| format!("could not read {path}"))?;
                    let value: Value = serde_json::from_slice(&blob)
                        .map_err(|e| invalid(format!("{path} is not valid JSON: {e}")))?;
                    if let Some(read) = read.as_mut() {
                        read.push((value.clone(), oid));
                    }
                    history.push(kind, value);
                }
                if let Some(read) = read {
                    self.known_buckets.remember(bucket_id, read);
                }
            }
        }
        Ok(history)
    }

    /// The bucket trees of `kind` in the ledger commit `previous`, by bucket name; empty when
    /// there is none or it cannot be read (then everything is written as if new).
    fn previous_buckets(
        &self,
        previous: Option<ObjectId>,
        kind: HistoryKind,
    ) -> HashMap<String, ObjectId> {
        let dir = previous.and_then(|commit| {
            let tree = self.commit_tree(commit).ok()?;
            let path = format!("{}/{}", run_file::HISTORY_DIR, kind.dir_name());
            let entry = tree.lookup_entry_by_path(path).ok()??;
            entry.mode().is_tree().then(|| entry.object_id())
        });
        dir.and_then(|dir| entries_of(&self.repo, Some(dir)).ok())
            .into_iter()
            .flatten()
            .filter(|(_, (mode, _))| mode.is_tree())
            .map(|(name, (_, oid))| (name.to_str_lossy().into_owned(), oid))
            .collect()
    }

    /// The entries of tree `id`, which must all be trees: (name, id).
    fn subtrees(
        &self,
        id: gix::ObjectId,
        invalid: &dyn Fn(String) -> Error,
    ) -> Result<Vec<(String, gix::ObjectId)>> {
        entries_of(&self.repo, Some(id))?
            .into_iter()
            .map(|(name, (mode, oid))| {
                if mode.is_tree() {
                    Ok((name.to_str_lossy().into_owned(), oid))
                } else {
                    Err(invalid(format!("unexpected file {name} in history")))
                }
            })
            .collect()
    }

    /// The subtree `name` of `tree`, `None` when absent; a file there is refused.
    fn tree_subtree(
        &self,
        tree: &gix::Tree<'_>,
        name: &str,
        invalid: &dyn Fn(String) -> Error,
    ) -> Result<Option<gix::ObjectId>> {
        match tree.find_entry(name) {
            None => Ok(None),
            Some(e) if e.mode().is_tree() => Ok(Some(e.object_id())),
            Some(_) => Err(invalid(format!("{name} is not a directory"))),
        }
    }

    /// The blob `name` directly in `tree` of `commit`, `None` when absent.
    fn tree_blob(
        &self,
        tree: &gix::Tree<'_>,
        name: &str,
        commit: gix::ObjectId,
    ) -> Result<Option<Vec<u8>>> {
        let Some(entry) = tree.find_entry(name) else {
            return Ok(None);
        };
        let object = entry
            .object()
            .context(|| format!("could not read {name} in {commit}"))?;
        Ok(Some(object.data.clone()))
    }

    fn write_json_blob(&self, value: &Value, what: &str) -> Result<gix::ObjectId> {
        let mut json = serde_json::to_string_pretty(value)
            .context(|| format!("could not serialize {what}"))?;
        json.push('\n');
        self.write_blob(json.as_bytes())
    }

    /// Write a tree of `entries`, given in git's order.
    fn write_tree(&self, entries: Vec<Entry>) -> Result<gix::ObjectId> {
        self.write_object(&gix::objs::Tree { entries })
    }
}

fn blob_entry(name: &str, oid: gix::ObjectId) -> Entry {
    Entry {
        mode: EntryKind::Blob.into(),
        filename: name.into(),
        oid,
    }
}

fn tree_entry(name: &str, oid: gix::ObjectId) -> Entry {
    Entry {
        mode: EntryKind::Tree.into(),
        filename: name.into(),
        oid,
    }
}

/// Are the values read from a bucket exactly `entries`, in order?
fn same_values(read: &[(Value, ObjectId)], entries: &[Value]) -> bool {
    read.len() == entries.len() && read.iter().zip(entries).all(|((r, _), e)| r == e)
}

#[cfg(test)]
mod tests {
    use crate::model::run::tests::sample;
    use crate::model::run::CheckpointEntry;
    use crate::model::{RunRecord, RunState};
    use crate::store::test_repo as repo;
    use crate::store::Store;

    fn entry(i: usize) -> CheckpointEntry {
        CheckpointEntry {
            commit: format!("{i:040}"),
            tree: "5".repeat(40),
            summary: format!("step {i}"),
            at: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// What a writer that read nothing writes for `record`.
    fn fresh_tree(path: &std::path::Path, record: &RunRecord) -> gix::ObjectId {
        let store = Store::open(path).expect("open");
        store.write_ledger_tree(record, None).expect("written")
    }

    /// A transition after a read keeps the blobs and bucket trees of the entries it did not
    /// change, and its tree is exactly the one a writer that read nothing writes: after an
    /// append, and when an entry of a full bucket or of the last one changed.
    #[test]
    fn a_transition_reuses_what_did_not_change_and_writes_what_a_fresh_writer_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = repo(dir.path(), "r");
        let mut record = sample(RunState::Active);
        record.task.text = "the task\n".into();
        record.task.sha256 = crate::model::canonical::sha256_hex(record.task.text.as_bytes());
        // Buckets 0000 (1-99) and 0001 (100-199) full, 0002 holding 200-250.
        record.checkpoints = (1..=250).map(entry).collect();
        let writer = Store::open(&path).expect("open");
        let tree = writer.write_ledger_tree(&record, None).expect("written");
        let tip = writer
            .write_commit("tabellio: test\n", tree, Vec::new())
            .expect("commit");

        let store = Store::open(&path).expect("open");
        let read = store
            .read_ledger_tree(tip)
            .expect("read")
            .expect("a record");
        assert_eq!(read, record);
        let buckets = store.previous_buckets(Some(tip), super::HistoryKind::Checkpoints);
        assert_eq!(buckets.len(), 3, "{buckets:?}");
        for bucket in buckets.values() {
            assert!(
                store.known_buckets.get(*bucket).is_some(),
                "the read kept it"
            );
        }

        let mut appended = read.clone();
        appended.checkpoints.push(entry(251));
        let mut old_changed = appended.clone();
        old_changed.checkpoints[4].summary = "rewritten".into();
        let mut last_changed = appended.clone();
        last_changed.checkpoints[230].summary = "rewritten".into();
        for next in [appended, old_changed, last_changed] {
            let written = store.write_ledger_tree(&next, Some(tip)).expect("written");
            assert_eq!(written, fresh_tree(&path, &next));
            let commit = store
                .write_commit("tabellio: test\n", written, vec![tip])
                .expect("commit");
            let back = Store::open(&path).expect("open");
            assert_eq!(
                back.read_ledger_tree(commit).expect("read"),
                Some(next.clone())
            );
            // The next transition in this command finds the bucket it just wrote.
            let written = store.previous_buckets(Some(commit), super::HistoryKind::Checkpoints);
            assert!(store.known_buckets.get(written["0002"]).is_some());
            let mut then = next.clone();
            then.checkpoints.push(entry(252));
            assert_eq!(
                store
                    .write_ledger_tree(&then, Some(commit))
                    .expect("written"),
                fresh_tree(&path, &then)
            );
        }
    }
}
