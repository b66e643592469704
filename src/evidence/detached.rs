//! Checks run on one commit in a temporary detached worktree (`validate`, `land`): the
//! worktree is made at exactly that commit, the checks run one at a time and stop at the first
//! SIGINT/SIGTERM/SIGHUP ([`super::interrupt`]), and the worktree is removed on an interrupt.
//! When every check to run declares its inputs, the commit is not checked out at all: each
//! check runs in a worktree of its inputs alone ([`super::produce`]), and a full checkout would
//! only delay it (in a large repository, most of the time before the check starts).
//! Nothing is written while they run; [`note_records`] notes the records afterwards.

use crate::error::Result;
use crate::evidence::produce::{run_checks, CheckContext, ResolvedCheck};
use crate::evidence::sign::RecordSigner;
use crate::model::EvidenceRecord;
use crate::runner::Stream;
use crate::store::notes::EVIDENCE;
use crate::store::publish::publish;
use crate::store::scratch::{remove_left, scratch_root, sweep_stale, ScratchWorktree};
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

/// What [`run_detached`] gave: the records and the worktree, when one was made (the caller
/// removes it once the records are safe), or the signal that stopped it (worktree removed,
/// nothing kept).
pub enum Detached<'s> {
    Done {
        records: Vec<EvidenceRecord>,
        scratch: Scratch<'s>,
    },
    Interrupted(i32),
}

/// The worktrees [`run_detached`] made: the full checkout, if it made one, and those of the
/// checks with declared inputs. The caller removes them once the records are safe (`land`:
/// once the stack landed, so removing them never delays a landing); dropped, they are removed
/// as well as can be.
pub struct Scratch<'s> {
    store: &'s Store,
    full: Option<ScratchWorktree<'s>>,
    scoped: Vec<std::path::PathBuf>,
}

impl Scratch<'_> {
    /// Remove every worktree, reporting the first failure.
    pub fn remove(mut self) -> Result<()> {
        let full = self.full.take().map_or(Ok(()), ScratchWorktree::remove);
        let mut scoped = Ok(());
        for path in std::mem::take(&mut self.scoped) {
            let removed = remove_left(self.store, &path);
            if scoped.is_ok() {
                scoped = removed;
            }
        }
        full.and(scoped)
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        for path in std::mem::take(&mut self.scoped) {
            let _ = remove_left(self.store, &path);
        }
    }
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
    let scoped_only = checks.iter().all(|c| c.def.scope().is_some());
    let scratch = match scoped_only {
        true => None,
        false => Some(ScratchWorktree::create(
            store,
            run.commit,
            interrupt::flag(),
        )?),
    };
    // Scoped checks run in worktrees of their own under the scratch root, left for the caller.
    let root = scratch_root(store);
    let left = std::cell::RefCell::new(Vec::new());
    let ctx = CheckContext {
        store,
        worktree: scratch.as_ref().map_or(root.as_path(), |s| s.path()),
        run_id: run.run_id,
        commit: run.commit,
        branch: None,
        excerpt_cap: run.excerpt_cap,
        stream: run.stream,
        reuse: run.reuse,
        signer: run.signer,
        signing_env: crate::runner::SigningEnv::Inherit,
        provenance: run.provenance,
        left: Some(&left),
    };
    let mut records = Vec::with_capacity(checks.len());
    for check in checks {
        if interrupt::received().is_some() {
            break;
        }
        let ran = run_checks(&ctx, std::slice::from_ref(check));
        match ran {
            Ok(ran) => records.extend(ran),
            Err(e) => {
                // Removed (as well as can be) on the way out.
                drop(Scratch {
                    store,
                    full: scratch,
                    scoped: left.take(),
                });
                return Err(e);
            }
        }
    }
    let scratch = Scratch {
        store,
        full: scratch,
        scoped: left.take(),
    };
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
