//! Compare-and-swap ref transactions.
//!
//! [`apply`] hands all edits to one transaction of the repository's ref backend: every ref is
//! locked and its expected value checked before any is changed. With the files backend that is
//! one gix-ref file transaction (loose refs are then renamed into place one after another, so a
//! process killed in the middle of a commit can leave some edits done and others not); with
//! reftable it is one `git update-ref --stdin` transaction ([`super::update_ref`]), whose
//! commit is a single rename: all edits or none, even on a crash. On failure we look at the
//! refs again to say *why* in terms a person can act on: which ref moved and to what
//! ([`TxError::Moved`]), or which `.lock` file is in the way ([`TxError::Locked`]).

use std::path::PathBuf;

use crate::error::{Error, Result};

pub use super::cas::Cas;
use super::refs::RefFormat;
use super::update_ref::UpdateRef;
use super::Store;

/// Why a transaction did not land. Callers that retry match on it; the rest turn it into an
/// [`Error`] with `?` (or [`TxError::into_error`]), which adds the kind and a hint.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// `name` is no longer at the value we expected.
    #[error(
        "{name} changed underneath: expected {}, found {}",
        or_nothing(expected),
        or_nothing(actual)
    )]
    Moved {
        name: String,
        expected: Option<gix::ObjectId>,
        actual: Option<gix::ObjectId>,
    },
    /// A lock file is in the way (held by another writer, or left by a killed process).
    #[error("{name} is locked: {} exists", lock.display())]
    Locked { name: String, lock: PathBuf },
    #[error(transparent)]
    Other(Error),
}

fn or_nothing(id: &Option<gix::ObjectId>) -> String {
    id.map_or("nothing".into(), |i| i.to_string())
}

impl From<TxError> for Error {
    fn from(e: TxError) -> Self {
        e.into_error()
    }
}

impl TxError {
    pub fn into_error(self) -> Error {
        match self {
            moved @ TxError::Moved { .. } => Error::conflict(moved.to_string()).hint(
                "another process wrote it at the same time; look at the new state and try again",
            ),
            TxError::Locked { name, lock } => {
                let shown = std::fs::canonicalize(&lock).unwrap_or(lock);
                Error::conflict(format!("{name} is locked: {} exists", shown.display())).hint(format!(
                    "another git process may be running; if none is, the lock was left by a killed process: remove it with `rm {}`",
                    crate::error::shell_path(&shown)
                ))
            }
            TxError::Other(e) => e,
        }
    }
}

/// The first lock file in the way of writing `names` (or `packed-refs`), without taking any:
/// a read-only look for callers that must not write (status, plans).
pub fn held_lock(store: &Store, names: &[&str]) -> Option<(String, PathBuf)> {
    if store.ref_format() == RefFormat::Reftable {
        return reftable_lock(store);
    }
    let common = store.repo.common_dir();
    for name in names {
        let base = if name.starts_with("refs/") {
            common.to_path_buf()
        } else {
            store.repo.git_dir().to_path_buf()
        };
        let lock = base.join(format!("{name}.lock"));
        if lock.exists() {
            return Some((name.to_string(), lock));
        }
    }
    let packed = common.join("packed-refs.lock");
    packed.exists().then(|| ("packed-refs".to_string(), packed))
}

/// The reftable stack's lock, when it is held: it guards every ref at once.
fn reftable_lock(store: &Store) -> Option<(String, PathBuf)> {
    let lock = store
        .repo
        .common_dir()
        .join("reftable")
        .join("tables.list.lock");
    lock.exists()
        .then(|| ("the reftable stack".to_string(), lock))
}

/// Apply all `edits` in one transaction, or none of them.
pub fn apply(store: &Store, edits: &[Cas]) -> Result<(), TxError> {
    let prepared = prepare(store, edits)?;
    prepared.commit(store)
}

/// A transaction whose locks are held: nothing can move its refs until it is committed or
/// dropped (dropping rolls back and releases the locks).
pub struct Prepared<'s> {
    tx: Backend<'s>,
    edits: Vec<Cas>,
}

enum Backend<'s> {
    Files(gix::refs::file::Transaction<'s, 's>),
    Reftable(UpdateRef),
}

/// Lock every ref and check every expected value, without changing anything yet.
pub fn prepare<'s>(store: &'s Store, edits: &[Cas]) -> Result<Prepared<'s>, TxError> {
    // What a snapshot read is not what the checks below, or their diagnosis, may see.
    store.forget_refs();
    let ref_edits = edits
        .iter()
        .map(Cas::to_edit)
        .collect::<Result<Vec<_>>>()
        .map_err(TxError::Other)?;
    if store.ref_format() == RefFormat::Reftable {
        // Names are checked above, so git refuses only on the refs' values or the lock.
        drop(ref_edits);
        return match UpdateRef::prepare(store, edits).map_err(TxError::Other)? {
            Ok(tx) => Ok(Prepared {
                tx: Backend::Reftable(tx),
                edits: edits.to_vec(),
            }),
            Err(refused) => Err(diagnose(store, edits, &refused.stderr)),
        };
    }
    let (file_lock, packed_lock) = lock_modes();
    match store
        .repo
        .refs
        .transaction()
        .prepare(ref_edits, file_lock, packed_lock)
    {
        Ok(tx) => Ok(Prepared {
            tx: Backend::Files(tx),
            edits: edits.to_vec(),
        }),
        Err(e) => Err(diagnose(store, edits, &format!("{e:#}"))),
    }
}

impl Prepared<'_> {
    pub fn commit(self, store: &Store) -> Result<(), TxError> {
        store.forget_refs();
        let edits = self.edits;
        match self.tx {
            Backend::Files(tx) => {
                // Our own signature, not gix's: see `identity` for why.
                let committer = store.signature(super::identity::Role::Committer);
                let mut time = gix::date::parse::TimeBuf::default();
                match tx.commit(Some(committer.to_ref(&mut time))) {
                    Ok(_) => Ok(()),
                    Err(e) => Err(diagnose(store, &edits, &format!("{e:#}"))),
                }
            }
            Backend::Reftable(tx) => match tx.commit().map_err(TxError::Other)? {
                Ok(()) => Ok(()),
                Err(refused) => Err(diagnose(store, &edits, &refused.stderr)),
            },
        }
    }
}

fn lock_modes() -> (gix::lock::acquire::Fail, gix::lock::acquire::Fail) {
    // Git's own default for ref locks is 100ms of retrying; do the same so two tabellio processes
    // racing on a notes ref mostly wait instead of failing.
    let wait =
        gix::lock::acquire::Fail::AfterDurationWithBackoff(std::time::Duration::from_millis(100));
    (
        wait,
        gix::lock::acquire::Fail::AfterDurationWithBackoff(std::time::Duration::from_millis(1000)),
    )
}

/// Why the transaction of `edits` failed (`err`: the backend's own words).
fn diagnose(store: &Store, edits: &[Cas], err: &str) -> TxError {
    for edit in edits {
        let actual = match store.ref_target(&edit.name) {
            Ok(a) => a,
            Err(e) => return TxError::Other(e),
        };
        // gix takes a create whose ref already holds the new value as done; git (reftable)
        // refuses it, and then the ref exists: a create that lost.
        let same_as_created = edit.expected.is_none()
            && store.ref_format() != RefFormat::Reftable
            && actual == edit.new;
        if actual != edit.expected && !same_as_created {
            return TxError::Moved {
                name: edit.name.clone(),
                expected: edit.expected,
                actual,
            };
        }
    }
    if store.ref_format() == RefFormat::Reftable {
        let lock = store
            .repo
            .common_dir()
            .join("reftable")
            .join("tables.list.lock");
        // The lock may be gone by now (its holder committed or aborted): git's words say it
        // was in the way, which is a conflict with another writer all the same.
        if lock.exists() || err.contains("cannot lock references") {
            return TxError::Locked {
                name: "the reftable stack".into(),
                lock,
            };
        }
    }
    let refs_dir = store.repo.common_dir();
    for edit in edits {
        let base = if edit.name.starts_with("refs/") {
            refs_dir.to_path_buf()
        } else {
            store.repo.git_dir().to_path_buf()
        };
        let lock = base.join(format!("{}.lock", edit.name));
        if lock.exists() {
            return TxError::Locked {
                name: edit.name.clone(),
                lock,
            };
        }
    }
    let packed = refs_dir.join("packed-refs.lock");
    if packed.exists() {
        return TxError::Locked {
            name: "packed-refs".into(),
            lock: packed,
        };
    }
    TxError::Other(Error::internal(format!(
        "the ref transaction failed: {}",
        err.trim()
    )))
}

#[cfg(test)]
mod tests {
    use super::TxError;
    use crate::error::{Error, ErrorKind};

    #[test]
    fn a_moved_ref_is_a_conflict_with_the_same_words() {
        let id = gix::ObjectId::null(gix::hash::Kind::Sha1);
        let moved = TxError::Moved {
            name: "refs/heads/main".into(),
            expected: None,
            actual: Some(id),
        };
        let text = moved.to_string();
        assert_eq!(
            text,
            format!("refs/heads/main changed underneath: expected nothing, found {id}")
        );
        let err = Error::from(moved);
        assert_eq!(err.kind, ErrorKind::Conflict);
        assert_eq!(err.message, text);
        assert!(err.hint.is_some());
    }

    #[test]
    fn other_passes_the_error_through() {
        let err: Error = TxError::Other(Error::usage("bad ref name")).into();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (ErrorKind::Usage, "bad ref name")
        );
    }
}
