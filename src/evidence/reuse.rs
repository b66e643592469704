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
//!
//! A check with declared inputs is looked up by its scoped tree instead (the tree restricted to
//! its inputs, where its records are noted too): any tree with the same inputs qualifies. When
//! the record found was made on another tree, the new record is `not_applicable` — nothing ran,
//! the inputs are those of a tree that passed — rather than a copy of the other's run.

use serde::Serialize;

use crate::error::Result;
use crate::model::evidence::{tool_id, CheckStatus, OutputRecord, Stopped};
use crate::model::{time, EvidenceRecord};
use crate::store::notes::EVIDENCE;
use crate::store::scoped::Materialise;
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
/// When several qualify, the most recent one (by `finished_at`) is chosen. A check with declared
/// inputs looks on the tree's scoped tree instead: a record made on any tree with the same
/// inputs qualifies.
///
/// With a `signer`, only a record that signer's key signed itself qualifies
/// ([`RecordSigner::signed_it`]): the new record it signs must not vouch for one it never made.
pub fn find_reusable(
    store: &Store,
    tree: gix::ObjectId,
    check: &ResolvedCheck,
    signer: Option<&RecordSigner>,
) -> Result<Option<EvidenceRecord>> {
    if let Some(inputs) = check.def.scope() {
        if store.try_object(tree)?.is_none() {
            // A tree only predicted (`land --dry-run`): nothing is known of its inputs.
            return Ok(None);
        }
        let scoped = store.scoped_tree(tree, &inputs, Materialise::HashOnly)?;
        let req = scoped_requirement(check, scoped);
        return passing_on(store, scoped, &req, |rec, _| {
            signer.is_none_or(|s| s.signed_it(rec))
        });
    }
    let req = Requirement::new(check.name.clone(), Some(check.def.digest()));
    passing_on(store, tree, &req, |rec, hex| {
        rec.tree == hex && signer.is_none_or(|s| s.signed_it(rec))
    })
}

/// Does `commit` itself have a passing, untampered record of `check` made for it (noted on the
/// commit and naming it; for a check with declared inputs, a `not_applicable` record counts
/// when the record it stands on does)?
/// With a `signer`, only a record that signer's key signed counts, as in [`find_reusable`].
pub fn passing_on_commit(
    store: &Store,
    commit: gix::ObjectId,
    check: &ResolvedCheck,
    signer: Option<&RecordSigner>,
) -> Result<bool> {
    if check.def.scope().is_some() {
        let req = Requirement::of_check(check);
        let Some(rec) = super::judge::deciding_record(store, commit, &req)? else {
            return Ok(false);
        };
        let hex = commit.to_string();
        return Ok(rec.commit == hex && signer.is_none_or(|s| s.signed_it(&rec)));
    }
    let req = Requirement::new(check.name.clone(), Some(check.def.digest()));
    Ok(passing_on(store, commit, &req, |rec, hex| {
        rec.commit == hex && signer.is_none_or(|s| s.signed_it(rec))
    })?
    .is_some())
}

/// The requirement of `check` judged on the scoped tree `scoped`.
fn scoped_requirement(check: &ResolvedCheck, scoped: gix::ObjectId) -> Requirement {
    let mut req = Requirement::of_check(check);
    if let Some(scope) = req.scope.as_mut() {
        scope.tree = Some(scoped.to_string());
    }
    req
}

/// The most recent passing, untampered record of `req`'s check noted on `object` for which
/// `names` says the record names `object` itself.
fn passing_on(
    store: &Store,
    object: gix::ObjectId,
    req: &Requirement,
    names: impl Fn(&EvidenceRecord, &str) -> bool,
) -> Result<Option<EvidenceRecord>> {
    let hex = object.to_string();
    let mut best: Option<EvidenceRecord> = None;
    for line in store.note_lines(EVIDENCE, object)? {
        let Ok(rec) = EvidenceRecord::from_line(&line) else {
            continue;
        };
        // `judge` accepts a record for either the commit or the tree; here the record must
        // name the object it is noted on itself. A `not_applicable` record is never reused:
        // the new one stands on the record that ran.
        if rec.check.name != req.name || !names(&rec, &hex) {
            continue;
        }
        if judge(&rec, req, &hex, &hex) != Verdict::Satisfied {
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

/// `reused` made anew for `commit` (unsealed): this commit, its tree and run, `reused_from`.
fn copy_for(
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
    })
}

/// A failing record for `commit` standing on `failed`, which this very process saw fail on
/// the same scoped tree (a landing that rebuilds its stack need not fail it again).
pub fn reused_failure(
    store: &Store,
    failed: &EvidenceRecord,
    commit: gix::ObjectId,
    run_id: Option<&str>,
) -> Result<EvidenceRecord> {
    Ok(copy_for(store, failed, commit, run_id)?.seal())
}

/// `stopped.command` of a `not_applicable` record: nothing ran.
pub const NOT_RUN: &str = "not_run";

/// A new record for `commit` standing on `reused`: the same check, status, output and times
/// (when the check really ran, on this very tree), this commit and run, and `reused_from` the
/// reused record's digest. When `reused` was made on another tree with the same declared inputs,
/// a `not_applicable` record instead (nothing ran for it).
pub fn reused_record(
    store: &Store,
    reused: &EvidenceRecord,
    commit: gix::ObjectId,
    run_id: Option<&str>,
) -> Result<EvidenceRecord> {
    let record = copy_for(store, reused, commit, run_id)?;
    if reused.scoped_tree.is_none() || reused.tree == record.tree {
        return Ok(record.seal());
    }
    // The check's inputs are those of another tree that passed: not applicable here. Nothing
    // ran for this record, so it says so rather than repeating the other's run.
    let now = time::now();
    Ok(EvidenceRecord {
        status: CheckStatus::NotApplicable,
        exit_code: None,
        signal: None,
        started_at: now.clone(),
        finished_at: now,
        duration_ms: 0,
        output: OutputRecord {
            bytes: 0,
            sha256: crate::model::canonical::sha256_hex(b""),
            excerpt: String::new(),
            truncated: false,
            redactions: 0,
        },
        stopped: Stopped {
            command: NOT_RUN.into(),
            tabellio: None,
        },
        undeclared_inputs: Vec::new(),
        ..record
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

/// What validating a check on a tree would do, judged before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// It runs: no passing evidence for its inputs.
    Run,
    /// Passing evidence for the same inputs stands in for it.
    Reused,
    /// The change does not touch its declared inputs (`from` and the tree have the same
    /// scoped tree), which have passing evidence: a `not_applicable` record stands in.
    NotApplicable,
}

/// How `check` stands for a change `from` → `to` (trees) landing on `tip` (a tree): not
/// applicable when the change leaves the check's declared inputs alone and the tip's have
/// passing evidence; else reused when `stacked` (the tree it lands as, when it exists) has
/// passing evidence for the check; else it runs.
pub fn standing(
    store: &Store,
    (from, to): (gix::ObjectId, gix::ObjectId),
    tip: gix::ObjectId,
    stacked: Option<gix::ObjectId>,
    check: &ResolvedCheck,
) -> Result<Standing> {
    if let Some(inputs) = check.def.scope() {
        let untouched = store.scoped_tree(from, &inputs, Materialise::HashOnly)?
            == store.scoped_tree(to, &inputs, Materialise::HashOnly)?;
        if untouched && find_reusable(store, tip, check, None)?.is_some() {
            return Ok(Standing::NotApplicable);
        }
    }
    Ok(match stacked {
        Some(tree) if find_reusable(store, tree, check, None)?.is_some() => Standing::Reused,
        _ => Standing::Run,
    })
}
