//! Never re-run a verified tree: a check whose definition (digest) already passed on a commit's
//! exact tree is not run again for that commit.
//!
//! Before a check runs on a commit, the evidence notes of the commit's tree are read and judged
//! as every other reader judges them ([`super::judge`]): only a record that is intact
//! (its digest matches), made on this very tree, with the same check digest, and `passed`
//! counts. Failing, timed-out, stale (the definition changed) and tampered records are never
//! reused, and neither is a record noted on the tree whose own `tree` field names another one.
//! The reusing commit gets a new record of its own, sealed like any other, whose `reused_from`
//! names the digest of the record it stands on; nothing is written here, the caller notes it
//! with the records of the checks that did run.

use serde::Serialize;

use crate::error::Result;
use crate::model::evidence::tool_id;
use crate::model::EvidenceRecord;
use crate::store::notes::EVIDENCE;
use crate::store::Store;

use super::judge::{judge, Verdict};
use super::requirements::Requirement;
use super::sign::{maybe_sign, RecordSigner};
use crate::model::policy::ResolvedCheck;

/// Whether passing evidence on the same tree may stand in for running a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reuse {
    /// Reuse passing, untampered evidence of the same check on the same tree.
    #[default]
    Allowed,
    /// Run every check (`--no-reuse`).
    Never,
}

impl Reuse {
    /// `--no-reuse` on the command line.
    pub fn from_flag(no_reuse: bool) -> Reuse {
        if no_reuse {
            Reuse::Never
        } else {
            Reuse::Allowed
        }
    }
}

/// The passing, untampered record of `check` (same definition digest) noted on `tree`, if any.
/// When several qualify, the most recent one (by `finished_at`) is chosen.
///
/// With a `signer`, only a record that signer's key signed itself qualifies
/// ([`RecordSigner::signed_it`]): the new record it signs must not vouch for one it never made.
pub fn find_reusable(
    store: &Store,
    tree: gix::ObjectId,
    check: &ResolvedCheck,
    signer: Option<&RecordSigner>,
) -> Result<Option<EvidenceRecord>> {
    passing_on(store, tree, check, |rec, hex| {
        rec.tree == hex && signer.is_none_or(|s| s.signed_it(rec))
    })
}

/// Does `commit` itself (its own notes, not its tree's) have a passing, untampered record of
/// `check` made for it?
/// With a `signer`, only a record that signer's key signed counts, as in [`find_reusable`].
pub fn passing_on_commit(
    store: &Store,
    commit: gix::ObjectId,
    check: &ResolvedCheck,
    signer: Option<&RecordSigner>,
) -> Result<bool> {
    Ok(passing_on(store, commit, check, |rec, hex| {
        rec.commit == hex && signer.is_none_or(|s| s.signed_it(rec))
    })?
    .is_some())
}

/// The most recent passing, untampered record of `check` noted on `object` for which `names`
/// says the record names `object` itself.
fn passing_on(
    store: &Store,
    object: gix::ObjectId,
    check: &ResolvedCheck,
    names: impl Fn(&EvidenceRecord, &str) -> bool,
) -> Result<Option<EvidenceRecord>> {
    let hex = object.to_string();
    let requirement = Requirement::new(check.name.clone(), Some(check.def.digest()));
    let mut best: Option<EvidenceRecord> = None;
    for line in store.note_lines(EVIDENCE, object)? {
        let Ok(rec) = EvidenceRecord::from_line(&line) else {
            continue;
        };
        // `judge` accepts a record for either the commit or the tree; here the record must
        // name the object it is noted on itself.
        if rec.check.name != check.name || !names(&rec, &hex) {
            continue;
        }
        if judge(&rec, &requirement, &hex, &hex) != Verdict::Satisfied {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| b.finished_at < rec.finished_at)
        {
            best = Some(rec);
        }
    }
    Ok(best)
}

/// A new record for `commit` standing on `reused`: the same check, status, output and times
/// (when the check really ran, on this very tree), this commit and run, and `reused_from` the
/// reused record's digest.
pub fn reused_record(
    store: &Store,
    reused: &EvidenceRecord,
    commit: gix::ObjectId,
    run_id: Option<&str>,
) -> Result<EvidenceRecord> {
    Ok(EvidenceRecord {
        run_id: run_id.map(str::to_string),
        repository: store.repository_id(),
        commit: commit.to_string(),
        tree: store.tree_of(commit)?.to_string(),
        tool: tool_id(),
        reused_from: Some(reused.digest.clone()),
        // The reused record's signature signs its digest, not this one's: the caller signs anew.
        signature: None,
        digest: String::new(),
        ..reused.clone()
    }
    .seal())
}

/// The record standing in for running `check` on `commit`, when `reuse` allows it and the
/// commit's tree has passing evidence for it; signed by `signer` when there is one.
pub fn try_reuse(
    store: &Store,
    reuse: Reuse,
    commit: gix::ObjectId,
    run_id: Option<&str>,
    check: &ResolvedCheck,
    signer: Option<&RecordSigner>,
) -> Result<Option<EvidenceRecord>> {
    if reuse == Reuse::Never {
        return Ok(None);
    }
    let tree = store.tree_of(commit)?;
    match find_reusable(store, tree, check, signer)? {
        Some(found) => Ok(Some(maybe_sign(
            signer,
            reused_record(store, &found, commit, run_id)?,
        )?)),
        None => Ok(None),
    }
}
