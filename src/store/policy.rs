//! The one reader of the policy committed at a commit (`.tabellio/policy.json`).
//!
//! The policy is always read from a commit, never from the working tree: what a commit must
//! prove is decided by what is committed. Parsed policies are cached by blob id, so judging a
//! range of a thousand commits that share a few policies parses each once.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Context, Error};
use crate::model::allowed_signers::AllowedSigners;
use crate::model::policy::{self, Policy, PolicyError, RequireSigned};

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
    /// Allowed-signers files read so far, by blob id.
    signers_by_blob: HashMap<gix::ObjectId, Arc<AllowedSigners>>,
}

/// What the policy at one commit says about signatures: which checks need one, and the
/// allowed signers read from that same commit (so a commit cannot add its own signer to the
/// gate that judges it, as long as the gate is read from the target's tip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAt {
    pub require_signed: RequireSigned,
    /// Empty when the file the policy names is not in the commit: nobody is allowed then.
    pub signers: Arc<AllowedSigners>,
}

impl TrustAt {
    /// The allowed signers a record of check `name` must be signed by, if it must be signed.
    pub fn signers_for(&self, name: &str) -> Option<Arc<AllowedSigners>> {
        self.require_signed
            .covers(name)
            .then(|| Arc::clone(&self.signers))
    }
}

impl Policies {
    /// The policy committed at `commit`, `None` when it has none.
    pub fn at(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<Policy>, PolicyAtError> {
        let known = |blob: &gix::ObjectId| self.by_blob.contains_key(blob);
        let Some((blob, data)) =
            blob_at(store, commit, policy::PATH, known).map_err(PolicyAtError::Read)?
        else {
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

impl Policies {
    /// The policy's `trust` at `commit` with its allowed signers read from `commit`; `None`
    /// when there is no policy or it has no `trust`. Each signers file is parsed once.
    pub fn trust_at(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<TrustAt>, PolicyAtError> {
        let Some(trust) = self.at(store, commit)?.and_then(|p| p.trust) else {
            return Ok(None);
        };
        let path = trust.allowed_signers.as_str();
        let known = |blob: &gix::ObjectId| self.signers_by_blob.contains_key(blob);
        let signers = match blob_at(store, commit, path, known).map_err(PolicyAtError::Read)? {
            None => Arc::new(AllowedSigners::default()),
            Some((blob, data)) => match self.signers_by_blob.get(&blob) {
                Some(s) => Arc::clone(s),
                None => {
                    let parsed = AllowedSigners::parse(&String::from_utf8_lossy(&data), path)
                        .map_err(|e| PolicyAtError::Read(e.into()))?;
                    let parsed = Arc::new(parsed);
                    self.signers_by_blob.insert(blob, Arc::clone(&parsed));
                    parsed
                }
            },
        };
        Ok(Some(TrustAt {
            require_signed: trust.require_signed,
            signers,
        }))
    }
}

/// The blob at `path` in `commit` and its content; the content is left empty when `known` says
/// the blob is already parsed (cached by blob id). `None` when the path is absent.
fn blob_at(
    store: &Store,
    commit: gix::ObjectId,
    path: &str,
    known: impl Fn(&gix::ObjectId) -> bool,
) -> crate::error::Result<Option<(gix::ObjectId, Vec<u8>)>> {
    let tree = store
        .repo
        .find_commit(commit)
        .map_err(|e| Error::not_found(format!("commit {commit} not found: {e:#}")))?
        .tree()
        .context(|| format!("could not read the tree of {commit}"))?;
    let Some(entry) = tree
        .lookup_entry_by_path(path)
        .context(|| format!("could not look up {path} in {commit}"))?
    else {
        return Ok(None);
    };
    let blob = entry.object_id();
    if known(&blob) {
        return Ok(Some((blob, Vec::new())));
    }
    let object = entry
        .object()
        .context(|| format!("could not read {path} in {commit}"))?;
    Ok(Some((blob, object.data.clone())))
}

/// The `trust` of the policy committed at `commit` (uncached), `None` without one.
pub fn trust_at(store: &Store, commit: gix::ObjectId) -> Result<Option<TrustAt>, PolicyAtError> {
    Policies::default().trust_at(store, commit)
}

/// The `trust` of the policy at the tip of `target` (a full ref name): what promotion, `land`
/// and `status` judge signatures by. `None` when the ref does not exist or has no trust.
pub fn trust_at_tip(store: &Store, target: &str) -> crate::error::Result<Option<TrustAt>> {
    match store.ref_target(target)? {
        Some(tip) => Ok(trust_at(store, tip)?),
        None => Ok(None),
    }
}

/// The policy committed at `commit` (uncached), `None` when it has none.
pub fn policy_at(store: &Store, commit: gix::ObjectId) -> Result<Option<Policy>, PolicyAtError> {
    Policies::default().at(store, commit)
}
