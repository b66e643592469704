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
use crate::evidence::produce::{resolve_checks, run_checks, CheckContext, CheckSelection};
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

    let _signals = interrupt::install()?;
    sweep_stale(store);
    let scratch = ScratchWorktree::create(store, commit, interrupt::flag())?;
    let ctx = CheckContext {
        store,
        worktree: scratch.path(),
        run_id: None,
        commit,
        branch: None,
        excerpt_cap: cap,
        stream: opts.stream,
    };
    let mut records = Vec::with_capacity(checks.len());
    for check in &checks {
        if interrupt::received().is_some() {
            break;
        }
        records.extend(run_checks(&ctx, std::slice::from_ref(check))?);
    }
    if let Some(sig) = interrupt::received() {
        scratch.remove()?;
        return Err(Error::refused(format!(
            "validation of {commit} was interrupted by signal {sig}; no evidence was written"
        ))
        .hint("run `git tabellio validate` again"));
    }

    let lines: Vec<String> = records.iter().map(EvidenceRecord::to_line).collect();
    let message = format!("tabellio: validate {commit}");
    publish(
        store,
        None,
        &[(EVIDENCE, vec![(commit, lines.clone()), (tree, lines)])],
        &message,
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
