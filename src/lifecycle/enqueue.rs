//! `enqueue <run>... [--priority] [--target <branch>] [--remote <name>]`: put completed runs in
//! their target's landing queue, `refs/tabellio/queue/<target>/<run-id>`.
//!
//! Every named run is checked before anything is written (completed, its branch at the
//! validated commit, its evidence intact under the target tip's policy, as `land` checks it);
//! one that fails refuses the whole command. The new entries are created in one transaction,
//! each `MustNotExist`: a run already queued (by this clone or another) keeps its entry and is
//! reported `already_queued`. With `--remote`, the entries are then pushed in one atomic push,
//! each leased on not existing there.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::queue::{QueueEntry, SCHEMA};
use crate::model::time;
use crate::run::promotion::check_validated;
use crate::run::{valid_run_id, Env};
use crate::store::queue::{branch_ref, ref_name, target_short};
use crate::store::remote::fetch;
use crate::store::remote::push::{self, PushRef, PushResult};
use crate::store::tx::{self, Cas, TxError};

/// What `enqueue` was asked.
#[derive(Debug, Clone, Default)]
pub struct EnqueueOptions {
    pub runs: Vec<String>,
    pub priority: bool,
    /// When given, every run must target it.
    pub target: Option<String>,
    /// Publish the entries on this remote too.
    pub remote: Option<String>,
}

/// What became of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Enqueued {
    /// A new entry was written.
    Queued,
    /// An entry for the run was there already; it keeps its place.
    AlreadyQueued,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnqueuedRun {
    pub run: String,
    pub target: String,
    pub result: Enqueued,
    #[serde(rename = "ref")]
    pub name: String,
    pub entry: QueueEntry,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnqueueOutcome {
    pub runs: Vec<EnqueuedRun>,
    /// The remote the entries were pushed to.
    pub remote: Option<String>,
}

pub fn enqueue(env: &Env, opts: &EnqueueOptions) -> Result<EnqueueOutcome> {
    let store = &env.store;
    if opts.runs.is_empty() {
        return Err(Error::usage("name at least one run to enqueue")
            .hint("`git tabellio list --state completed` shows the runs that may land"));
    }
    if let Some(remote) = &opts.remote {
        fetch::check_remote(store, remote)?;
    }
    let target = opts.target.as_deref().map(branch_ref);
    // Every run is judged before anything is written.
    let now = time::rfc3339_millis(std::time::SystemTime::now());
    let by = store.enqueuer();
    let mut planned: Vec<(String, QueueEntry)> = Vec::new();
    for id in &opts.runs {
        valid_run_id(id)?;
        if planned.iter().any(|(_, e)| &e.run == id) {
            continue;
        }
        let ledger = store.find_ledger(id)?;
        let rec = &ledger.record;
        if let Some(t) = &target {
            if &rec.base.reference != t {
                return Err(Error::refused(format!(
                    "run {id} targets {}, not {t}",
                    rec.base.reference
                ))
                .hint("enqueue it for its own target (leave out --target), or leave it out"));
            }
        }
        let (run_target, head) = check_validated(store, rec).map_err(Error::from)?;
        planned.push((
            ref_name(&run_target, id),
            QueueEntry {
                schema: SCHEMA.into(),
                run: id.clone(),
                head: head.to_string(),
                target: run_target,
                priority: opts.priority,
                enqueued_by: by.clone(),
                enqueued_at: now.clone(),
                seq: planned.len() as u32,
            },
        ));
    }
    let mut out = EnqueueOutcome {
        runs: Vec::new(),
        remote: opts.remote.clone(),
    };
    let mut created: Vec<(String, gix::ObjectId)> = Vec::new();
    // A lost race is another enqueuer creating one of these refs meanwhile: read again, and the
    // runs it queued keep its entries.
    for round in 0..3 {
        out.runs.clear();
        created.clear();
        let mut edits = Vec::new();
        for (name, entry) in &planned {
            let result = match store.ref_target_now(name)? {
                Some(existing) => {
                    let entry = store.read_queue_entry(name, existing)?;
                    out.runs.push(ran(name, entry, Enqueued::AlreadyQueued));
                    continue;
                }
                None => Enqueued::Queued,
            };
            let commit = store.write_queue_entry(entry)?;
            edits.push(Cas::update(
                name,
                None,
                commit,
                format!("tabellio: enqueue {}", entry.run),
            ));
            created.push((name.clone(), commit));
            out.runs.push(ran(name, entry.clone(), result));
        }
        match tx::apply(store, &edits) {
            Ok(()) => break,
            Err(TxError::Moved { .. } | TxError::Locked { .. }) if round < 2 => continue,
            Err(e) => return Err(e.into_error()),
        }
    }
    if let Some(remote) = &opts.remote {
        publish(store, remote, &out)?;
    }
    Ok(out)
}

fn ran(name: &str, entry: QueueEntry, result: Enqueued) -> EnqueuedRun {
    EnqueuedRun {
        run: entry.run.clone(),
        target: target_short(&entry.target).to_string(),
        result,
        name: name.to_string(),
        entry,
    }
}

/// Push the entries (new or already queued here) the remote does not have, each created only.
fn publish(store: &crate::store::Store, remote: &str, out: &EnqueueOutcome) -> Result<()> {
    let names: Vec<&str> = out.runs.iter().map(|r| r.name.as_str()).collect();
    let there = fetch::ls_remote(store, remote, &names)?;
    let mut pushes = Vec::new();
    for r in &out.runs {
        if there.contains_key(&r.name) {
            continue;
        }
        if let Some(id) = store.ref_target_now(&r.name)? {
            pushes.push(PushRef {
                dst: r.name.clone(),
                new: id,
                expect: None,
            });
        }
    }
    match push::push(store, remote, &pushes)? {
        PushResult::Pushed(_) => Ok(()),
        PushResult::LostRace(_) => Err(Error::conflict(format!(
            "another clone enqueued one of these runs on {remote} at the same time"
        ))
        .hint(format!(
            "`git tabellio sync {remote}` brings its entry here; the run is queued either way"
        ))),
        PushResult::Declined { messages, .. } => Err(Error::refused(format!(
            "{remote} declined the queue entries: {}",
            messages.join("; ")
        ))
        .hint("the entries are queued here; see what the remote's hook said")),
    }
}
