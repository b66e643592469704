//! `validate`: evidence for any commit, outside the run lifecycle (what CI and hook users run).
//!
//! The checks run in a temporary detached worktree at exactly that commit ([`super::scratch`]),
//! with the same runner and the same record format as `finish`. Nothing is written while they
//! run. Afterwards the records are noted on the commit and on its tree in one notes commit; a
//! lost race with another writer of the notes ref is re-read and re-applied, so concurrent
//! `validate` processes lose no record. The temporary worktree is removed on success, on
//! failure and on Ctrl-C ([`super::interrupt`]); an interrupted `validate` writes nothing.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::produce::{
    resolve_checks, run_checks, CheckContext, CheckSelection, ResolvedCheck,
};
use crate::evidence::sign::RecordSigner;
use crate::model::EvidenceRecord;
use crate::runner::Stream;
use crate::store::notes::EVIDENCE;
use crate::store::publish::publish;
use crate::store::Store;

use super::interrupt;
use super::scratch::{sweep_stale, ScratchWorktree};

/// What `validate` was asked.
#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// The commit (default `HEAD`).
    pub rev: Option<String>,
    pub selection: CheckSelection,
    /// Read the check definitions from the policy at this revision instead of the commit's own
    /// (CI validating a pull request with the target branch's checks).
    pub policy_from: Option<String>,
    pub stream: Stream,
}

#[derive(Debug, Clone, Serialize)]
pub struct ValidateOutcome {
    pub commit: String,
    pub tree: String,
    pub passed: bool,
    pub evidence: Vec<EvidenceRecord>,
}

/// Run the checks on one commit and note the evidence on it and on its tree.
///
/// Returns an error after a SIGINT/SIGTERM/SIGHUP, with nothing written and the temporary
/// worktree removed; [`interrupt::received`] then names the signal.
pub fn validate(store: &Store, opts: &ValidateOptions) -> Result<ValidateOutcome> {
    let rev = opts.rev.as_deref().unwrap_or("HEAD");
    let commit = store.resolve_commit(rev)?;
    let tree = store.tree_of(commit)?;
    let policy_commit = match &opts.policy_from {
        Some(p) => store.resolve_commit(p)?,
        None => commit,
    };
    let (checks, cap) = resolve_checks(store, policy_commit, &opts.selection)?;
    let signer = RecordSigner::resolve(
        store,
        opts.selection.sign_key.as_deref(),
        opts.selection.no_sign,
        Some(policy_commit),
    )?;

    let run = DetachedRun {
        commit,
        run_id: None,
        excerpt_cap: cap,
        stream: opts.stream,
        reuse: opts.selection.reuse,
        signer: signer.as_ref(),
    };
    let (records, scratch) = match run_detached(store, &run, &checks)? {
        Detached::Done { records, scratch } => (records, scratch),
        Detached::Interrupted(sig) => {
            return Err(Error::refused(format!(
                "validation of {commit} was interrupted by signal {sig}; no evidence was written"
            ))
            .hint("run `git tabellio validate` again"))
        }
    };

    note_records(
        store,
        commit,
        &records,
        &format!("tabellio: validate {commit}"),
    )?;
    // After publishing: a worktree that cannot be removed must not cost the evidence.
    scratch.remove()?;
    Ok(ValidateOutcome {
        commit: commit.to_string(),
        tree: tree.to_string(),
        passed: records.iter().all(EvidenceRecord::passed),
        evidence: records,
    })
}

/// How checks run on one commit in a temporary detached worktree.
pub struct DetachedRun<'a> {
    pub commit: gix::ObjectId,
    pub run_id: Option<&'a str>,
    pub excerpt_cap: usize,
    pub stream: Stream,
    pub reuse: crate::evidence::reuse::Reuse,
    /// Who signs each record (`None`: unsigned).
    pub signer: Option<&'a RecordSigner>,
}

/// What [`run_detached`] gave: the records and the worktree (the caller removes it once the
/// records are safe), or the signal that stopped it (worktree removed, nothing kept).
pub enum Detached<'s> {
    Done {
        records: Vec<EvidenceRecord>,
        scratch: ScratchWorktree<'s>,
    },
    Interrupted(i32),
}

/// Run `checks` on `run.commit` in a new temporary detached worktree, one at a time, stopping
/// at the first SIGINT/SIGTERM/SIGHUP. Shared by `validate` and `land`.
pub fn run_detached<'s>(
    store: &'s Store,
    run: &DetachedRun<'_>,
    checks: &[ResolvedCheck],
) -> Result<Detached<'s>> {
    let _signals = interrupt::install()?;
    sweep_stale(store);
    let scratch = ScratchWorktree::create(store, run.commit, interrupt::flag())?;
    let ctx = CheckContext {
        store,
        worktree: scratch.path(),
        run_id: run.run_id,
        commit: run.commit,
        branch: None,
        excerpt_cap: run.excerpt_cap,
        stream: run.stream,
        reuse: run.reuse,
        signer: run.signer,
        signing_env: crate::runner::SigningEnv::Inherit,
    };
    let mut records = Vec::with_capacity(checks.len());
    for check in checks {
        if interrupt::received().is_some() {
            break;
        }
        records.extend(run_checks(&ctx, std::slice::from_ref(check))?);
    }
    if let Some(sig) = interrupt::received() {
        scratch.remove()?;
        return Ok(Detached::Interrupted(sig));
    }
    Ok(Detached::Done { records, scratch })
}

/// Note `records` on `commit` and on its tree, in one notes commit (a lost race with another
/// writer of the notes ref is re-read and re-applied).
pub fn note_records(
    store: &Store,
    commit: gix::ObjectId,
    records: &[EvidenceRecord],
    message: &str,
) -> Result<()> {
    let tree = store.tree_of(commit)?;
    let lines: Vec<String> = records.iter().map(EvidenceRecord::to_line).collect();
    publish(
        store,
        None,
        &[(EVIDENCE, vec![(commit, lines.clone()), (tree, lines)])],
        message,
    )
}
