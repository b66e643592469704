//! `validate`: evidence for any commit, outside the run lifecycle (what CI and hook users run).
//!
//! The checks run in a temporary detached worktree at exactly that commit ([`crate::store::scratch`]),
//! with the same runner and the same record format as `finish`. Nothing is written while they
//! run. Afterwards the records are noted on the commit and on its tree in one notes commit; a
//! lost race with another writer of the notes ref is re-read and re-applied, so concurrent
//! `validate` processes lose no record. The temporary worktree is removed on success, on
//! failure and on Ctrl-C ([`crate::evidence::interrupt`]); an interrupted `validate` writes nothing.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::produce::{drop_not_asked, resolve_checks, CheckSelection};
use crate::evidence::sign::{refuse_uncountable, JudgedAt, RecordSigner};
use crate::model::EvidenceRecord;
use crate::runner::Stream;
use crate::store::Store;

use crate::evidence::detached::{note_records, run_detached, Detached, DetachedRun};

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
    // Records that could not count under the policy that judges them are refused before any
    // check runs.
    let label = opts.policy_from.as_deref().unwrap_or(rev);
    let again = match &opts.policy_from {
        Some(p) => format!("git tabellio validate {rev} --policy-from {p}"),
        None => format!("git tabellio validate {rev}"),
    };
    refuse_uncountable(
        store,
        signer.as_ref(),
        Some(JudgedAt {
            commit: policy_commit,
            label,
            again: &again,
            run: None,
        }),
        checks.iter().map(|c| c.name.as_str()),
        opts.selection.no_sign,
    )?;

    // No run is named: the records name whoever validates as the actor who vouches for the
    // change (docs/verify.md). A required check with `when` runs unless they prove it is not
    // asked.
    let provenance = crate::run::actor::validating_actor(store, Some(policy_commit));
    crate::evidence::sign::refuse_misattributed(
        store,
        signer.as_ref(),
        Some(policy_commit),
        &provenance.actor,
    )?;
    let kind = crate::evidence::sign::kind_proven_by(
        store,
        signer.as_ref(),
        (Some(policy_commit), commit),
        &provenance.actor,
    )?;
    let (checks, _) = drop_not_asked(checks, &opts.selection, kind.as_deref());
    let run = DetachedRun {
        commit,
        run_id: None,
        excerpt_cap: cap,
        stream: opts.stream,
        reuse: opts.selection.reuse,
        signer: signer.as_ref(),
        provenance: Some(&provenance),
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
