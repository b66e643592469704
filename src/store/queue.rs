//! The landing queue in refs: `refs/tabellio/queue/<target>/<run-id>` points at a root commit
//! whose tree holds `entry.json` ([`crate::model::queue`]). `<target>` is the branch name
//! without `refs/heads/` (it may contain `/`; the run id, the last component, never does).
//!
//! An entry is created only (`MustNotExist`: two clones enqueueing the same run cannot both
//! win) and removed only by compare-and-swap on the commit it was read at: by the transaction
//! that lands its run, or by a later landing of the target once its run landed elsewhere or is
//! gone ([`landing_removals`]). Nothing here moves a
//! ref by itself: callers put the [`Cas`] edits into their own transaction.

use std::collections::BTreeMap;

use gix::objs::tree::{Entry as TreeEntry, EntryKind};

use crate::error::{Context, Error, Result};
use crate::model::queue::{QueueEntry, FILE, SCHEMA};
use crate::model::{self, RunState};
use crate::store::cas::Cas;
use crate::store::identity::Role;
use crate::store::remote::push::PushRef;
use crate::store::Store;

pub const PREFIX: &str = "refs/tabellio/queue/";

/// The branch name a queue ref uses for `target` (`refs/heads/main` → `main`).
pub fn target_short(target: &str) -> &str {
    target.strip_prefix("refs/heads/").unwrap_or(target)
}

/// A target as given on the command line (`main` or `refs/heads/main`) as a full ref name.
pub fn branch_ref(target: &str) -> String {
    if target.starts_with("refs/") {
        target.to_string()
    } else {
        format!("refs/heads/{target}")
    }
}

/// `refs/tabellio/queue/<target>/`
pub fn target_prefix(target: &str) -> String {
    format!("{PREFIX}{}/", target_short(target))
}

/// `refs/tabellio/queue/<target>/<run>`
pub fn ref_name(target: &str, run: &str) -> String {
    format!("{}{run}", target_prefix(target))
}

/// `refs/tabellio/remotes/<remote>/queue/`: where a fetch mirrors the remote's queue.
pub fn tracking_prefix(remote: &str) -> String {
    format!("refs/tabellio/remotes/{remote}/queue/")
}

/// One entry as read: its ref, the commit the ref points at, the record.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub commit: gix::ObjectId,
    pub record: QueueEntry,
}

/// The queue of one target (or of all), in landing order, and the refs under the queue that
/// could not be read as entries (name, why): those are shown, never landed.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    pub entries: Vec<Entry>,
    pub unreadable: Vec<(String, String)>,
}

impl Queue {
    /// The position (0-based) of `run`'s entry, if queued.
    pub fn position(&self, run: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.record.run == run)
    }

    pub fn find(&self, run: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.record.run == run)
    }
}

impl Store {
    /// Write an entry commit (objects only): a root commit whose tree holds `entry.json`.
    pub fn write_queue_entry(&self, entry: &QueueEntry) -> Result<gix::ObjectId> {
        let mut json = serde_json::to_string_pretty(&model::to_value(entry))
            .context(|| "could not serialize the queue entry".into())?;
        json.push('\n');
        let blob = self.write_blob(json.as_bytes())?;
        let tree = self.write_object(&gix::objs::Tree {
            entries: vec![TreeEntry {
                mode: EntryKind::Blob.into(),
                filename: FILE.into(),
                oid: blob,
            }],
        })?;
        let message = format!(
            "tabellio: enqueue {} on {}\n",
            entry.run,
            target_short(&entry.target)
        );
        self.write_commit(&message, tree, None)
    }

    /// The record of the entry commit `commit` that `name` points at; refused (exit 3) when it
    /// is not an entry or names another run or target than its ref says.
    pub fn read_queue_entry(&self, name: &str, commit: gix::ObjectId) -> Result<QueueEntry> {
        let bytes = self.read_file_at(commit, FILE)?.ok_or_else(|| {
            Error::refused(format!(
                "the queue ref {name} points at {commit}, which holds no {FILE}: not a queue entry"
            ))
            .hint(format!(
                "delete it (`git update-ref -d {name}`) and enqueue the run again"
            ))
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let entry: QueueEntry = model::parse_record(&text, SCHEMA, &format!("{FILE} of {name}"))?;
        if ref_name(&entry.target, &entry.run) != name {
            return Err(Error::refused(format!(
                "the queue ref {name} holds the entry of run {} on {}: it was copied or edited by hand",
                entry.run, entry.target
            ))
            .hint(format!("delete it (`git update-ref -d {name}`) and enqueue the run again")));
        }
        Ok(entry)
    }

    /// The queue of `target` (`None`: every target), in landing order.
    pub fn read_queue(&self, target: Option<&str>) -> Result<Queue> {
        let prefix = target.map_or_else(|| PREFIX.to_string(), target_prefix);
        let mut queue = Queue::default();
        for (name, commit) in self.refs_under(&prefix)? {
            match self.read_queue_entry(&name, commit) {
                // `refs/tabellio/queue/a/x` must not be read as an entry of target `a/b`'s
                // neighbour: only entries of exactly this target count.
                Ok(record) if target.is_none_or(|t| record.target == t) => {
                    queue.entries.push(Entry {
                        name,
                        commit,
                        record,
                    })
                }
                Ok(_) => {}
                Err(e) => queue.unreadable.push((name, e.message.clone())),
            }
        }
        queue
            .entries
            .sort_by(|a, b| a.record.sort_key().cmp(&b.record.sort_key()));
        Ok(queue)
    }

    /// Who enqueues: the committer identity as git resolves it.
    pub fn enqueuer(&self) -> String {
        let sig = self.signature(Role::Committer);
        format!("{} <{}>", sig.name, sig.email)
    }
}

/// The removal of `entry`, compare-and-swap on the commit it was read at.
pub fn removal(entry: &Entry, message: &str) -> Cas {
    Cas::delete(&entry.name, entry.commit, message)
}

/// Why an entry is no longer waiting, if it is not: its run landed or is gone.
pub fn finished(store: &Store, entry: &Entry) -> Result<Option<&'static str>> {
    Ok(match store.try_find_ledger(&entry.record.run) {
        Ok(None) => Some("gone"),
        Ok(Some(l)) if l.record.state == RunState::Promoted => Some("landed"),
        Ok(Some(l)) if l.record.state == RunState::Abandoned => Some("abandoned"),
        Ok(Some(_)) => None,
        // An unreadable ledger is not ours to judge here: the entry stays.
        Err(_) => None,
    })
}

/// The queue's part of a sync round with `remote`, from our entries and the tracking ones the
/// fetch just wrote: an entry only the remote has is created here; one only we have is pushed
/// (created there only if absent) unless its run is landed, in which case the remote removed it
/// when it landed and we remove ours; when both have the same run with different entries (two
/// clones enqueued it at once) the remote's wins, since it was there first.
///
/// `remote_runs` are the remote's ledgers as fetched (run id → tip).
pub fn plan_sync(
    store: &Store,
    remote: &str,
    remote_runs: &BTreeMap<String, gix::ObjectId>,
    message: &str,
) -> Result<(Vec<Cas>, Vec<PushRef>)> {
    let tracking_prefix = tracking_prefix(remote);
    let theirs: BTreeMap<String, gix::ObjectId> = store
        .refs_under(&tracking_prefix)?
        .into_iter()
        .map(|(name, id)| (format!("{PREFIX}{}", &name[tracking_prefix.len()..]), id))
        .collect();
    let ours: BTreeMap<String, gix::ObjectId> = store.refs_under(PREFIX)?.into_iter().collect();
    let (mut local, mut pushes) = (Vec::new(), Vec::new());
    for (name, id) in &theirs {
        match ours.get(name) {
            None => local.push(Cas::update(name, None, *id, message)),
            Some(mine) if mine != id => local.push(Cas::update(name, Some(*mine), *id, message)),
            Some(_) => {}
        }
    }
    for (name, id) in &ours {
        if theirs.contains_key(name) {
            continue;
        }
        let entry = Entry {
            name: name.clone(),
            commit: *id,
            record: match store.read_queue_entry(name, *id) {
                Ok(r) => r,
                // Not an entry: not ours to share.
                Err(_) => continue,
            },
        };
        let landed = finished(store, &entry)?.is_some()
            || remote_runs.get(&entry.record.run).is_some_and(|tip| {
                store
                    .read_run_json(*tip)
                    .is_ok_and(|r| r.state == RunState::Promoted)
            });
        if landed {
            local.push(removal(&entry, message));
        } else {
            pushes.push(PushRef {
                dst: name.clone(),
                new: *id,
                expect: None,
            });
        }
    }
    Ok((local, pushes))
}

/// The queue edits of a landing transaction on `target`: the entries of the runs it lands, and
/// of runs that landed or are gone since, each compare-and-swap on the entry read.
/// An entry created after this read stays until the next landing sweeps it.
pub fn landing_removals<'r>(
    store: &Store,
    target: &str,
    landing: impl IntoIterator<Item = &'r str>,
    message: &str,
) -> Result<Vec<Cas>> {
    let queue = store.read_queue(Some(target))?;
    let landing: Vec<&str> = landing.into_iter().collect();
    let mut out = Vec::new();
    for entry in &queue.entries {
        if landing.contains(&entry.record.run.as_str()) || finished(store, entry)?.is_some() {
            out.push(removal(entry, message));
        }
    }
    Ok(out)
}

/// The queue edits of a landing on `remote`'s `target`: deletions of the remote's entries of
/// the landed runs (as fetched into the tracking refs, leased on those values) for the atomic
/// push, and the removals of our own entries of them for after it.
pub fn remote_landing_removals<'r>(
    store: &Store,
    remote: &str,
    target: &str,
    landing: impl IntoIterator<Item = &'r str>,
    message: &str,
) -> Result<(Vec<PushRef>, Vec<Cas>)> {
    let (mut pushes, mut local) = (Vec::new(), Vec::new());
    let ours = store.read_queue(Some(target))?;
    for run in landing {
        let name = ref_name(target, run);
        let tracking = format!("{}{}", tracking_prefix(remote), &name[PREFIX.len()..]);
        if let Some(theirs) = store.ref_target(&tracking)? {
            pushes.push(PushRef::deletion(&name, theirs));
        }
        if let Some(entry) = ours.find(run) {
            local.push(removal(entry, message));
        }
    }
    Ok((pushes, local))
}
