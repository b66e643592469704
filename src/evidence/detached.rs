//! Checks run on one commit in a temporary detached worktree (`validate`, `land`): the
//! worktree is made at exactly that commit, the checks run one at a time and stop at the first
//! SIGINT/SIGTERM/SIGHUP ([`super::interrupt`]), and the worktree is removed on an interrupt.
//! Nothing is written while they run; [`note_records`] notes the records afterwards.

use crate::error::Result;
use crate::evidence::produce::{run_checks, CheckContext, ResolvedCheck};
use crate::evidence::sign::RecordSigner;
use crate::model::EvidenceRecord;
use crate::runner::Stream;
use crate::store::notes::EVIDENCE;
use crate::store::publish::publish;
use crate::store::scratch::{sweep_stale, ScratchWorktree};
use crate::store::Store;

use super::interrupt;

/// How checks run on one commit in a temporary detached worktree.
pub struct DetachedRun<'a> {
    pub commit: gix::ObjectId,
    pub run_id: Option<&'a str>,
    pub excerpt_cap: usize,
    pub stream: Stream,
    pub reuse: crate::evidence::reuse::Reuse,
    /// Who signs each record (`None`: unsigned).
    pub signer: Option<&'a RecordSigner>,
    /// Who made the change, when the commit is a run's.
    pub provenance: Option<&'a crate::model::provenance::Provenance>,
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
    let _signals = interrupt::install_unless_active()?;
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
        provenance: run.provenance,
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

/// Note `records` on `commit` and on its tree (and each scoped record on its scoped tree), in
/// one notes commit (a lost race with another
/// writer of the notes ref is re-read and re-applied).
pub fn note_records(
    store: &Store,
    commit: gix::ObjectId,
    records: &[EvidenceRecord],
    message: &str,
) -> Result<()> {
    let tree = store.tree_of(commit)?;
    let targets = super::scope::note_targets(commit, tree, records)?;
    publish(store, None, &[(EVIDENCE, targets)], message)
}
