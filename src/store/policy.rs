//! The one reader of the policy committed at a commit (`.tabellio/policy.json`).
//!
//! The policy is always read from a commit, never from the working tree: what a commit must
//! prove is decided by what is committed. Parsed policies are cached by blob id, so judging a
//! range of a thousand commits that share a few policies parses each once.

use std::collections::HashMap;

use crate::error::{Context, Error};
use crate::model::policy::{self, Policy, PolicyError};

use super::Store;

/// Why the policy at a commit could not be had.
#[derive(Debug)]
pub enum PolicyAtError {
    /// The commit, its tree or the policy blob could not be read.
    Read(Error),
    /// The policy is committed but cannot be used (not JSON, unknown schema, a bad field).
    Invalid {
        commit: gix::ObjectId,
        error: PolicyError,
    },
}

impl PolicyAtError {
    /// As `verify` and the hooks report it: naming the commit whose policy is at fault.
    pub fn naming_commit(self) -> Error {
        match self {
            PolicyAtError::Read(e) => e,
            PolicyAtError::Invalid { commit, error } => {
                Error::usage(format!("the policy at {commit} is invalid: {error}"))
                    .hint("fix .tabellio/policy.json and commit it")
            }
        }
    }
}

impl From<PolicyAtError> for Error {
    fn from(e: PolicyAtError) -> Self {
        match e {
            PolicyAtError::Read(e) => e,
            PolicyAtError::Invalid { error, .. } => error.into(),
        }
    }
}

/// Policies read so far, by blob id.
#[derive(Default)]
pub struct Policies {
    by_blob: HashMap<gix::ObjectId, Policy>,
}

impl Policies {
    /// The policy committed at `commit`, `None` when it has none.
    pub fn at(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<Policy>, PolicyAtError> {
        let read = |store: &Store| -> crate::error::Result<Option<(gix::ObjectId, Vec<u8>)>> {
            let tree = store
                .repo
                .find_commit(commit)
                .map_err(|e| Error::not_found(format!("commit {commit} not found: {e:#}")))?
                .tree()
                .context(|| format!("could not read the tree of {commit}"))?;
            let Some(entry) = tree
                .lookup_entry_by_path(policy::PATH)
                .context(|| format!("could not look up {} in {commit}", policy::PATH))?
            else {
                return Ok(None);
            };
            let blob = entry.object_id();
            if self.by_blob.contains_key(&blob) {
                return Ok(Some((blob, Vec::new())));
            }
            let object = entry
                .object()
                .context(|| format!("could not read {} in {commit}", policy::PATH))?;
            Ok(Some((blob, object.data.clone())))
        };
        let Some((blob, data)) = read(store).map_err(PolicyAtError::Read)? else {
            return Ok(None);
        };
        if let Some(p) = self.by_blob.get(&blob) {
            return Ok(Some(p.clone()));
        }
        let parsed = Policy::parse(&String::from_utf8_lossy(&data))
            .map_err(|error| PolicyAtError::Invalid { commit, error })?;
        self.by_blob.insert(blob, parsed.clone());
        Ok(Some(parsed))
    }
}

/// The policy committed at `commit` (uncached), `None` when it has none.
pub fn policy_at(store: &Store, commit: gix::ObjectId) -> Result<Option<Policy>, PolicyAtError> {
    Policies::default().at(store, commit)
}
