//! The tree of a ledger commit: `run.json`, `task.txt` and `history/` as
//! [`crate::model::run_file`] splits a run record, written and read back here. Read-only apart
//! from writing objects (never a ref): the caller's transaction makes them reachable.

use gix::bstr::ByteSlice;
use gix::objs::tree::{Entry, EntryKind};
use serde_json::Value;

use crate::error::{Context, Error, Result};
use crate::model::run_file::{self, History, HistoryKind, StoredRun};
use crate::model::{self, run, RunRecord};
use crate::store::diff::entries_of;

use super::super::Store;

impl Store {
    /// The tree of a ledger commit holding `record`: objects already stored (the task text,
    /// history entries an earlier transition wrote) are not written again, so a transition adds
    /// only `run.json`, the entries it changed and the trees above them.
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
                for (file, (mode, oid)) in entries_of(&self.repo, Some(bucket_id))? {
                    n += 1;
                    let file = file.to_str_lossy();
                    let path = format!("{}/{name}/{bucket}/{file}", run_file::HISTORY_DIR);
                    if run_file::entry_names(n) != (bucket.clone(), file.to_string())
                        || !mode.is_blob()
                    {
                        return Err(invalid(format!("unexpected entry {path}")));
                    }
                    let blob = self
                        .repo
                        .find_object(oid)
                        .context(|| format!("could not read {path}"))?;
                    let value: Value = serde_json::from_slice(&blob.data)
                        .map_err(|e| invalid(format!("{path} is not valid JSON: {e}")))?;
                    history.push(kind, value);
                }
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
