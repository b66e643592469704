//! The tree of a ledger commit: `run.json`, `task.txt` and `history/` as
//! [`crate::model::run_file`] splits a run record, written and read back here. Read-only apart
//! from writing objects (never a ref): the caller's transaction makes them reachable.

use gix::bstr::ByteSlice;
use gix::objs::tree::{Entry, EntryKind};
use serde_json::Value;

use crate::error::{Context, Error, Result};
use crate::model::run_file::{self, History, HistoryKind, RunHead, StoredRun};
use crate::model::{self, run, RunRecord};
use crate::store::diff::entries_of;

use super::super::Store;

impl Store {
    /// The tree of a ledger commit holding `record`: objects already stored (the task text,
    /// history entries an earlier transition wrote) are not written again, so a transition adds
    /// only `run.json`, the entries it changed and the trees above them. Those this command read
    /// are not even looked for (see [`Store::known_object`]).
    pub(super) fn write_ledger_tree(&self, record: &RunRecord) -> Result<gix::ObjectId> {
        let stored = run_file::split(record).context(|| "could not serialize run.json".into())?;
        let mut root = Vec::new();
        let mut kinds = Vec::new();
        for kind in HistoryKind::ALL {
            let entries = stored.history.of(kind);
            if entries.is_empty() {
                continue;
            }
            let mut buckets: Vec<(String, Vec<Entry>)> = Vec::new();
            for (i, entry) in entries.iter().enumerate() {
                let (bucket, file) = run_file::entry_names(i + 1);
                let blob = self.write_json_blob(entry, &format!("{}/{file}", kind.dir_name()))?;
                if buckets.last().map(|(b, _)| b) != Some(&bucket) {
                    buckets.push((bucket.clone(), Vec::new()));
                }
                let files = &mut buckets.last_mut().expect("pushed above").1;
                files.push(blob_entry(&file, blob));
            }
            let mut dirs = Vec::new();
            for (bucket, files) in buckets {
                dirs.push(tree_entry(&bucket, self.write_tree(files)?));
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

    /// The run record of the ledger commit `commit`, `None` when its tree has no `run.json`.
    /// A v1 commit is read as it is; a v2 commit is assembled from its tree.
    pub(super) fn read_ledger_tree(&self, commit: gix::ObjectId) -> Result<Option<RunRecord>> {
        let what = format!("run.json of {commit}");
        let tree = self.commit_tree(commit)?;
        let Some(value) = self.run_json_value(&tree, commit, &what)? else {
            return Ok(None);
        };
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

    /// What a listing shows of the ledger commit `commit` ([`run_file::RunHead`]), from its
    /// `run.json` alone; `None` when its tree has no `run.json`.
    pub(super) fn read_ledger_head_tree(&self, commit: gix::ObjectId) -> Result<Option<RunHead>> {
        let what = format!("run.json of {commit}");
        let tree = self.commit_tree(commit)?;
        let Some(value) = self.run_json_value(&tree, commit, &what)? else {
            return Ok(None);
        };
        Ok(Some(run_file::head(value, &what)?))
    }

    /// `run.json` of the ledger commit `commit` (whose tree is `tree`) as JSON, not yet as a
    /// record; `None` when the tree has none.
    fn run_json_value(
        &self,
        tree: &gix::Tree<'_>,
        commit: gix::ObjectId,
        what: &str,
    ) -> Result<Option<Value>> {
        let Some(bytes) = self.tree_blob(tree, "run.json", commit)? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&bytes).map_err(|e| model::SchemaError::Invalid {
            what: what.to_string(),
            message: format!("not valid JSON: {e}"),
        })?;
        Ok(Some(value))
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
                for (file, (mode, oid)) in entries_of(&self.objects(), Some(bucket_id))? {
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
                    history.push(kind, value);
                }
                // Its entries are known through `read_blob`; the next transition writes this
                // tree again when the bucket did not change.
                self.known_object(bucket_id);
            }
        }
        Ok(history)
    }

    /// The entries of tree `id`, which must all be trees: (name, id).
    fn subtrees(
        &self,
        id: gix::ObjectId,
        invalid: &dyn Fn(String) -> Error,
    ) -> Result<Vec<(String, gix::ObjectId)>> {
        entries_of(&self.objects(), Some(id))?
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
        let data = self
            .read_blob(entry.oid().to_owned())
            .context(|| format!("could not read {name} in {commit}"))?;
        Ok(Some(data))
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

pub(super) fn blob_entry(name: &str, oid: gix::ObjectId) -> Entry {
    Entry {
        mode: EntryKind::Blob.into(),
        filename: name.into(),
        oid,
    }
}

pub(super) fn tree_entry(name: &str, oid: gix::ObjectId) -> Entry {
    Entry {
        mode: EntryKind::Tree.into(),
        filename: name.into(),
        oid,
    }
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
            snapshot: None,
        }
    }

    /// What a writer that read nothing writes for `record`.
    fn fresh_tree(path: &std::path::Path, record: &RunRecord) -> gix::ObjectId {
        let store = Store::open(path).expect("open");
        store.write_ledger_tree(record).expect("written")
    }

    /// A transition after a read knows the blobs and bucket trees it read (it does not look
    /// for them again), and its tree is exactly the one a writer that read nothing writes:
    /// after an append, and when an entry of a full bucket or of the last one changed.
    #[test]
    fn a_transition_knows_what_it_read_and_writes_what_a_fresh_writer_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = repo(dir.path(), "r");
        let mut record = sample(RunState::Active);
        record.task.text = "the task\n".into();
        record.task.sha256 = crate::model::canonical::sha256_hex(record.task.text.as_bytes());
        // Buckets 0000 (1-99) and 0001 (100-199) full, 0002 holding 200-250.
        record.checkpoints = (1..=250).map(entry).collect();
        let writer = Store::open(&path).expect("open");
        let tree = writer.write_ledger_tree(&record).expect("written");
        let tip = writer
            .write_commit("tabellio: test\n", tree, Vec::new())
            .expect("commit");

        let store = Store::open(&path).expect("open");
        let read = store
            .read_ledger_tree(tip)
            .expect("read")
            .expect("a record");
        assert_eq!(read, record);
        let root = store.commit_tree(tip).expect("tree");
        for (path, what) in [
            ("history/checkpoints/0000", "its buckets"),
            ("history/checkpoints/0002/000250.json", "its entries"),
        ] {
            let entry = root
                .lookup_entry_by_path(path)
                .expect("lookup")
                .expect("present");
            assert!(store.is_known(entry.object_id()), "the read knows {what}");
        }

        let mut appended = read.clone();
        appended.checkpoints.push(entry(251));
        let mut old_changed = appended.clone();
        old_changed.checkpoints[4].summary = "rewritten".into();
        let mut last_changed = appended.clone();
        last_changed.checkpoints[230].summary = "rewritten".into();
        for next in [appended, old_changed, last_changed] {
            let written = store.write_ledger_tree(&next).expect("written");
            assert_eq!(written, fresh_tree(&path, &next));
            let commit = store
                .write_commit("tabellio: test\n", written, vec![tip])
                .expect("commit");
            let back = Store::open(&path).expect("open");
            assert_eq!(
                back.read_ledger_tree(commit).expect("read"),
                Some(next.clone())
            );
            // What it wrote is known to the next transition of this command.
            assert!(store.is_known(written));
            let mut then = next.clone();
            then.checkpoints.push(entry(252));
            assert_eq!(
                store.write_ledger_tree(&then).expect("written"),
                fresh_tree(&path, &then)
            );
        }
    }
}
