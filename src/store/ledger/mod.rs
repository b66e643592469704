//! Run ledgers: `refs/tabellio/runs/<run-id>` is a commit chain, one commit per state transition,
//! each commit's tree holding `run.json`. Writes are compare-and-swap on the previous ledger
//! commit (creation: the ref must not exist), so two writers can never both extend a ledger.
//!
//! Since `tabellio.run/v2` the tree splits the record (`run.json`, `task.txt`, `history/`, see
//! [`crate::model::run_file`]) so that a transition adds objects for what it changed only;
//! ledgers written as v1 (the whole record in `run.json`) are read as they are.

pub mod archive;
pub mod archive_index;
mod layout;

use gix::bstr::ByteSlice;

use crate::error::{Context, Error, Result};
use crate::model::run_file::RunHead;
use crate::model::{self, RunRecord, RunState};

use super::Store;

pub const PREFIX: &str = "refs/tabellio/runs/";

pub fn ref_name(run_id: &str) -> String {
    format!("{PREFIX}{run_id}")
}

/// A run as its ledger tip says it is.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// The ledger commit holding `record`.
    pub tip: gix::ObjectId,
    pub record: RunRecord,
}

/// The record of each ledger commit [`Store::readable_ledgers`] has read, by commit (a commit
/// never changes): a bare `land` looks at every run for its queue, then for the runs waiting on
/// other targets.
pub type Records = std::cell::RefCell<std::collections::HashMap<gix::ObjectId, RunRecord>>;

/// The most ledger records one command remembers.
const RECORDS: usize = 1 << 14;

/// What `read` finds at the ledger tip `tip` of `run_id` (`None`: the commit has no
/// `run.json`), refused when `tip` is not a ledger commit or names another run: a ledger copied
/// or edited by hand would otherwise be read, and written back, under the wrong name.
fn read_checked<T>(
    store: &Store,
    run_id: &str,
    tip: gix::ObjectId,
    read: impl FnOnce(&Store, gix::ObjectId) -> Result<Option<T>>,
    run_id_of: impl Fn(&T) -> &String,
) -> Result<T> {
    let name = ref_name(run_id);
    store.ensure_commit_ref(&name, tip, &ledger_repair(&name))?;
    let Some(read) = read(store, tip)? else {
        return Err(Error::refused(format!(
            "the ledger {name} points at commit {tip}, which holds no run.json: not a ledger commit"
        ))
        .hint(ledger_repair(&name)));
    };
    if run_id_of(&read) != run_id {
        return Err(Error::refused(format!(
            "the ledger {name} holds run {:?}, not {run_id:?} (run.json of {tip})",
            run_id_of(&read)
        ))
        .hint(format!(
            "the ledger was edited by hand; {}",
            ledger_repair(&name)
        )));
    }
    Ok(read)
}

/// One transition in a ledger's history.
#[derive(Debug, Clone)]
pub struct Transition {
    pub commit: gix::ObjectId,
    pub message: String,
    pub record: RunRecord,
}

impl Store {
    /// The run's ledger, or `None` when there is no such run.
    pub fn try_find_ledger(&self, run_id: &str) -> Result<Option<Ledger>> {
        let Some(tip) = self.ref_target(&ref_name(run_id))? else {
            return Ok(None);
        };
        let record = self.read_ledger_record(run_id, tip)?;
        Ok(Some(Ledger { tip, record }))
    }

    /// `run.json` of the ledger tip `tip` of run `run_id`, refused when it names another run: a
    /// ledger copied or edited by hand would otherwise be written back under the wrong name.
    ///
    /// A ledger ref that points at something other than a ledger commit (a blob, a tree, a commit
    /// without `run.json`) is refused (exit 3) naming the ref and how to repair it.
    pub fn read_ledger_record(&self, run_id: &str, tip: gix::ObjectId) -> Result<RunRecord> {
        read_checked(self, run_id, tip, Store::try_read_run_json, |r| &r.run_id)
    }

    /// What `list` shows of run `run_id` at its ledger tip `tip`, from `run.json` alone
    /// ([`model::run_file::RunHead`]), refused as [`Store::read_ledger_record`] refuses a tip
    /// that is not this run's ledger commit. The task text and the history are not read.
    pub fn read_ledger_head(&self, run_id: &str, tip: gix::ObjectId) -> Result<RunHead> {
        read_checked(self, run_id, tip, Store::read_ledger_head_tree, |h| {
            &h.run_id
        })
    }

    /// The run's ledger; a missing run is exit 5.
    pub fn find_ledger(&self, run_id: &str) -> Result<Ledger> {
        if let Some(ledger) = self.try_find_ledger(run_id)? {
            return Ok(ledger);
        }
        // Only on the way to an error: an archived run is read-only, not missing.
        if let Some(found) = self.try_find_archived(run_id)? {
            return Err(Error::refused(format!(
                "run {run_id:?} ended ({}) and is archived in {}: an archived run is read-only",
                found.entry.state, found.archive_ref
            ))
            .hint(format!(
                "`git tabellio log {run_id}`, `status {run_id}` and `export {run_id}` read it; start a new run for new work"
            )));
        }
        Err(
            Error::not_found(format!("no run {run_id:?} in this repository"))
                .hint("`git tabellio list` shows the runs there are"),
        )
    }

    /// `run.json` of one ledger commit.
    pub fn read_run_json(&self, ledger_commit: gix::ObjectId) -> Result<RunRecord> {
        self.try_read_run_json(ledger_commit)?.ok_or_else(|| {
            Error::refused(format!(
                "ledger commit {ledger_commit} has no run.json: not a ledger commit"
            ))
            .hint("a ledger was edited by hand; restore it from a clone that has it right")
        })
    }

    /// The run record of one ledger commit, `None` when the commit has no `run.json`.
    fn try_read_run_json(&self, ledger_commit: gix::ObjectId) -> Result<Option<RunRecord>> {
        self.read_ledger_tree(ledger_commit)
    }

    /// Write the objects of a new ledger commit (not the ref): the record's tree, a commit whose
    /// parent is `previous` and whose message names the transition.
    pub fn write_ledger_commit(
        &self,
        previous: Option<&Ledger>,
        record: &RunRecord,
        command: &str,
    ) -> Result<gix::ObjectId> {
        self.write_ledger_commit_keeping(previous, record, command, None)
    }

    /// [`Store::write_ledger_commit`], with `keep` as a second parent: a commit of the run's
    /// work the transition must keep reachable (the head a `rewind` left, the worktree
    /// `rewind --force` saved). The ledger's transitions stay its first-parent chain.
    pub fn write_ledger_commit_keeping(
        &self,
        previous: Option<&Ledger>,
        record: &RunRecord,
        command: &str,
        keep: Option<gix::ObjectId>,
    ) -> Result<gix::ObjectId> {
        let from = previous.map_or("(none)".to_string(), |p| p.record.state.to_string());
        let mut message = format!(
            "tabellio: {command} {}: {from} -> {}\n",
            record.run_id, record.state
        );
        let body = why_body(previous.map(|p| &p.record), record);
        if !body.is_empty() {
            message.push('\n');
            message.push_str(&body.join("\n"));
            message.push('\n');
        }
        let tree = self.write_ledger_tree(record)?;
        let parents: Vec<gix::ObjectId> = previous.map(|p| p.tip).into_iter().chain(keep).collect();
        self.write_commit(&message, tree, parents)
            .context(|| "could not write the ledger commit".into())
    }

    /// All runs: (run id, ledger tip).
    pub fn list_ledgers(&self) -> Result<Vec<(String, gix::ObjectId)>> {
        Ok(self
            .refs_under(PREFIX)?
            .into_iter()
            .map(|(name, id)| (name[PREFIX.len()..].to_string(), id))
            .collect())
    }

    /// Every run's ledger at the tip [`Store::list_ledgers`] lists, leaving out a ledger that
    /// cannot be read (a newer schema, a damaged ref): for a look across all runs that one
    /// unreadable ledger must not stop, and that reports it elsewhere if at all. Each record is
    /// read once a command: a second look across the runs copies what the first one read.
    pub fn readable_ledgers(&self) -> Result<impl Iterator<Item = Ledger> + '_> {
        Ok(self.list_ledgers()?.into_iter().filter_map(|(id, tip)| {
            if let Some(record) = self.ledger_records.borrow().get(&tip) {
                if record.run_id == id {
                    let record = record.clone();
                    return Some(Ledger { tip, record });
                }
            }
            let record = self.read_ledger_record(&id, tip).ok()?;
            let mut known = self.ledger_records.borrow_mut();
            if known.len() < RECORDS {
                known.insert(tip, record.clone());
            }
            Some(Ledger { tip, record })
        }))
    }

    /// The ledger's transitions, oldest first (first-parent chain).
    pub fn ledger_history(&self, run_id: &str) -> Result<Vec<Transition>> {
        let ledger = self.find_ledger(run_id)?;
        self.ledger_history_from(ledger.tip)
    }

    /// The transitions of the ledger whose tip is `tip`, oldest first (first-parent chain): an
    /// archived ledger's too.
    pub fn ledger_history_from(&self, tip: gix::ObjectId) -> Result<Vec<Transition>> {
        let mut out = Vec::new();
        let mut next = Some(tip);
        while let Some(id) = next {
            let commit = self
                .commit(id)
                .context(|| format!("could not read ledger commit {id}"))?;
            let message = commit
                .message_raw()
                .map(|m| m.to_str_lossy().trim().to_string())
                .unwrap_or_default();
            next = commit.parent_ids().next().map(|p| p.detach());
            out.push(Transition {
                commit: id,
                message,
                record: self.read_run_json(id)?,
            });
        }
        out.reverse();
        Ok(out)
    }
}

/// How to repair the ledger ref `name` that does not point at a ledger commit. Ledger refs keep
/// no reflog by default, so the way back is another clone or an earlier commit named by hand.
fn ledger_repair(name: &str) -> String {
    format!(
        "point it back at its last ledger commit (`git rev-parse '{name}@{{1}}'` if a reflog was \
         kept, or another clone): `git update-ref {name} <commit>`; or delete it with \
         `git update-ref -d {name}` and let `git tabellio sync` bring it back from a remote that has it"
    )
}

/// The body of a ledger commit message: why, for the transitions a person reads `git log` for
/// (a refused landing, a reopen, a superseded run), so stock git shows the reason too.
fn why_body(previous: Option<&RunRecord>, record: &RunRecord) -> Vec<String> {
    let mut body = Vec::new();
    let had = |f: fn(&RunRecord) -> usize| previous.map_or(0, f);
    for a in record
        .land_attempts
        .iter()
        .skip(had(|r| r.land_attempts.len()))
    {
        body.push(format!("refused: {}", a.describe()));
    }
    for r in record.reopens.iter().skip(had(|r| r.reopens.len())) {
        body.push(format!(
            "reopened onto {} (base was {}): {}{}",
            r.base_after,
            r.base_before,
            r.mode.as_str(),
            if r.conflicts.is_empty() {
                String::new()
            } else {
                format!(", conflicts in {}", r.conflicts.join(", "))
            }
        ));
    }
    if let (Some(by), true) = (
        &record.superseded_by,
        previous.is_none_or(|p| p.superseded_by.is_none()),
    ) {
        body.push(format!("superseded by {by}"));
    }
    body
}

/// A new record for the transition to `state`, with `previous_state` and `updated_at` set.
pub fn transition(current: &RunRecord, state: RunState) -> RunRecord {
    let mut next = current.clone();
    // A checkpoint keeps the state; `previous_state` names the state before the last real change.
    if state != current.state {
        next.previous_state = Some(current.state);
    }
    next.state = state;
    next.updated_at = model::time::now();
    next
}
