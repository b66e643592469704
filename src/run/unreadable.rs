//! Refs of ours that cannot be read: a ledger or a notes ref set by hand (or by a broken tool)
//! to a blob, a tree, a tag, a missing object or a commit of the wrong kind.
//!
//! Every command that needs such a ref refuses (exit 3) naming it; `status` instead reports it,
//! with the exact commands that put it right, because status is where a person learns what to
//! do next. Nothing here writes.

use serde::Serialize;

use crate::error::{ErrorKind, Result};
use crate::store::{ledger, notes, Store};

/// The notes refs `status` depends on (evidence, checkpoints, approvals).
pub const NOTES_REFS: [&str; 3] = [notes::EVIDENCE, notes::CHECKPOINTS, notes::APPROVALS];

/// One ref that cannot be read, as `status` reports it (`unreadable_refs` in `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct UnreadableRef {
    #[serde(rename = "ref")]
    pub name: String,
    /// The object id it points at.
    pub target: String,
    /// What that is: `blob`, `tree`, `tag`, `commit` (one that is not what the ref needs) or
    /// `missing` (not in this repository).
    pub object: String,
    /// Why it cannot be read: the refusal every other command gives.
    pub message: String,
    /// The commands that put it right, the one to try first first. Each is exact: a
    /// `git update-ref` names the value it expects to replace, so it cannot undo a later repair.
    pub repair: Vec<String>,
}

/// A ledger ref of a run that does not read as that run's ledger.
#[derive(Debug, Clone)]
pub struct UnreadableLedger {
    pub run_id: String,
    pub tip: gix::ObjectId,
    /// The refusal of the commands that read the run.
    pub error_message: String,
    /// What the ref points at (as [`UnreadableRef::object`]).
    pub object: String,
    pub damage: LedgerDamage,
}

/// How far a ledger ref is from a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerDamage {
    /// Not a ledger commit at all (a blob, a tree, a tag, a missing object, a commit without
    /// `run.json`): nothing in it says what the run was, and `abandon` may replace it.
    NotALedger,
    /// A ledger commit whose `run.json` cannot be used (a newer schema, an unknown field,
    /// another run's id): someone's record, which no command writes over.
    UnusableRecord,
}

/// The ledger ref of `id` when it exists and cannot be read (a blob, a tree, an unrelated
/// commit, a record this version cannot use); `None` for a readable, missing or invalid one.
pub fn unreadable_ledger(store: &Store, id: &str) -> Result<Option<UnreadableLedger>> {
    if super::valid_run_id(id).is_err() {
        return Ok(None);
    }
    diagnose_ledger(store, id)
}

/// What `id` (a valid run id) has for a ledger when it exists and is refused when read; `None`
/// when it reads, or there is no such run. A damaged object is the reader's own error.
pub fn diagnose_ledger(store: &Store, id: &str) -> Result<Option<UnreadableLedger>> {
    let name = ledger::ref_name(id);
    let Some(tip) = store.ref_target(&name)? else {
        return Ok(None);
    };
    let Err(e) = store.read_ledger_record(id, tip) else {
        return Ok(None);
    };
    // A damaged object (it does not inflate) is not a ref set to the wrong thing: git has to
    // get the object back, and the reader's own error says which.
    if e.kind != ErrorKind::Refused {
        return Err(e);
    }
    let object = object_kind(store, tip);
    let damage = if object != "commit" || matches!(store.read_file_at(tip, "run.json"), Ok(None)) {
        LedgerDamage::NotALedger
    } else {
        LedgerDamage::UnusableRecord
    };
    Ok(Some(UnreadableLedger {
        run_id: id.to_string(),
        tip,
        error_message: e.message,
        object,
        damage,
    }))
}

impl UnreadableLedger {
    /// The ledger as `status` reports it, with the repairs in the order to try them.
    pub fn report(&self, store: &Store) -> UnreadableRef {
        let name = ledger::ref_name(&self.run_id);
        let id = &self.run_id;
        let mut repair = Vec::new();
        if let Some(good) = last_good(store, &name, self.tip, |c| {
            store.read_ledger_record(id, c).is_ok()
        }) {
            repair.push(format!("git update-ref {name} {good} {}", self.tip));
        }
        if self.damage == LedgerDamage::NotALedger {
            repair.push(format!("git tabellio abandon {id}"));
        }
        repair.push(format!("git tabellio cleanup {id} --force"));
        repair.push(format!("git update-ref -d {name} {}", self.tip));
        UnreadableRef {
            name,
            target: self.tip.to_string(),
            object: self.object.clone(),
            message: self.error_message.clone(),
            repair,
        }
    }
}

/// The notes refs that exist and do not point at a commit.
pub fn notes_refs(store: &Store) -> Result<Vec<UnreadableRef>> {
    let mut out = Vec::new();
    for name in NOTES_REFS {
        let Some(tip) = store.ref_target(name)? else {
            continue;
        };
        let Err(e) = store.ensure_commit_ref(name, tip, "") else {
            continue;
        };
        let mut repair = Vec::new();
        if let Some(good) = last_good(store, name, tip, |c| object_kind(store, c) == "commit") {
            repair.push(format!("git update-ref {name} {good} {tip}"));
        }
        // Deleting loses this clone's notes on that ref; sync brings back what a remote has.
        repair.push(format!("git update-ref -d {name} {tip}"));
        out.push(UnreadableRef {
            name: name.to_string(),
            target: tip.to_string(),
            object: object_kind(store, tip),
            message: e.message,
            repair,
        });
    }
    Ok(out)
}

/// `blob`, `tree`, `commit`, `tag`, or `missing` when the object is not in the repository.
fn object_kind(store: &Store, id: gix::ObjectId) -> String {
    match store.repo.find_header(id) {
        Ok(h) => h.kind().to_string(),
        Err(_) if store.repo.has_object(id) => "unreadable object".into(),
        Err(_) => "missing".into(),
    }
}

/// The newest value the reflog of `name` had before `bad` that `is_good` accepts: git keeps a
/// reflog of `refs/notes/*`, and of ledger refs under `core.logAllRefUpdates=always`. `None`
/// when there is no reflog or nothing in it is good.
fn last_good(
    store: &Store,
    name: &str,
    bad: gix::ObjectId,
    is_good: impl Fn(gix::ObjectId) -> bool,
) -> Option<gix::ObjectId> {
    // A reflog is a person's history and may be long: look at its recent end only.
    store.find_in_reflog(name, 64, |id| id != bad && is_good(id))
}
