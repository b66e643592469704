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
    /// The policy blob found at each commit asked about (`None`: no policy there), so asking
    /// again (the policy, then its `trust`, then the guarded paths of the same commit) reads
    /// neither the commit nor its tree again.
    blob_at_commit: HashMap<gix::ObjectId, Option<gix::ObjectId>>,
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
        Ok(self.at_ref(store, commit)?.cloned())
    }

    /// [`Policies::at`], borrowed rather than copied.
    pub fn at_ref(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<&Policy>, PolicyAtError> {
        Ok(self
            .blob(store, commit)?
            .and_then(|blob| self.by_blob.get(&blob)))
    }

    /// The id of the policy blob committed at `commit` (`None` when it has none), read and
    /// parsed once: commits with the same blob have the same policy.
    pub fn blob(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<gix::ObjectId>, PolicyAtError> {
        if let Some(found) = self.blob_at_commit.get(&commit) {
            return Ok(*found);
        }
        let known = |blob: &gix::ObjectId| self.by_blob.contains_key(blob);
        let Some((blob, data)) =
            blob_at(store, commit, policy::PATH, known).map_err(PolicyAtError::Read)?
        else {
            self.blob_at_commit.insert(commit, None);
            return Ok(None);
        };
        if let std::collections::hash_map::Entry::Vacant(new) = self.by_blob.entry(blob) {
            // Only a policy that parsed is remembered: an invalid one is reported at every ask.
            let parsed = Policy::parse(&String::from_utf8_lossy(&data))
                .map_err(|error| PolicyAtError::Invalid { commit, error })?;
            new.insert(parsed);
        }
        self.blob_at_commit.insert(commit, Some(blob));
        Ok(Some(blob))
    }
}

impl Policies {
    /// Whether the policy committed at `commit` names guarded paths (`false` without a policy),
    /// without copying a policy already read.
    pub fn guards_at(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<bool, PolicyAtError> {
        Ok(self
            .at_ref(store, commit)?
            .is_some_and(|p| p.guards_paths()))
    }

    /// The policy's `trust` at `commit` with its allowed signers read from `commit`; `None`
    /// when there is no policy or it has no `trust`. Each signers file is parsed once.
    pub fn trust_at(
        &mut self,
        store: &Store,
        commit: gix::ObjectId,
    ) -> Result<Option<TrustAt>, PolicyAtError> {
        let Some(trust) = self.at_ref(store, commit)?.and_then(|p| p.trust.clone()) else {
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
    let tree = store.tree_of(commit)?;
    let Some((_, blob)) = store
        .entry_at(tree, path)
        .context(|| format!("could not look up {path} in {commit}"))?
    else {
        return Ok(None);
    };
    if known(&blob) {
        return Ok(Some((blob, Vec::new())));
    }
    let mut object = store
        .object(blob)
        .context(|| format!("could not read {path} in {commit}"))?;
    Ok(Some((blob, std::mem::take(&mut object.data))))
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

/// Does the policy at the tip of `target` ask for squashed landings (`"land": {"squash":
/// true}`)?
pub fn squash_at(store: &Store, target: &str) -> crate::error::Result<bool> {
    let Some(tip) = store.ref_target(target)? else {
        return Ok(false);
    };
    Ok(policy_at(store, tip)?.is_some_and(|p| p.land.squash))
}

/// The `land` section of the policy at `target`'s tip (the default when it has none).
pub fn land_at(
    store: &Store,
    target: &str,
) -> crate::error::Result<crate::model::policy::LandPolicy> {
    let Some(tip) = store.ref_target(target)? else {
        return Ok(Default::default());
    };
    Ok(policy_at(store, tip)?.map(|p| p.land).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::{Policies, PolicyAtError};
    use crate::store::test_git as git;
    use crate::store::Store;

    /// A commit on `repo` holding `policy` (or removing it, `None`); its id.
    fn commit_policy(
        home: &std::path::Path,
        repo: &std::path::Path,
        policy: Option<&str>,
    ) -> gix::ObjectId {
        let file = repo.join(".tabellio/policy.json");
        match policy {
            Some(text) => {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, text).unwrap();
            }
            None => {
                let _ = std::fs::remove_file(&file);
            }
        }
        git(home, repo, &["add", "-A"]);
        git(
            home,
            repo,
            &["commit", "-q", "--allow-empty", "-m", "policy"],
        );
        crate::store::test_rev(home, repo, "HEAD")
    }

    #[test]
    fn the_policy_found_at_a_commit_is_remembered_but_an_invalid_one_is_reported_every_time() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        git(home, home, &["init", "-q", "-b", "main", "r"]);
        let repo = home.join("r");
        let none = commit_policy(home, &repo, None);
        let valid = commit_policy(
            home,
            &repo,
            Some(
                r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["true"]}},"required":["t"]}"#,
            ),
        );
        let invalid = commit_policy(
            home,
            &repo,
            Some(r#"{"schema":"tabellio.policy/v1","required":["nope"]}"#),
        );
        let store = Store::open(&repo).expect("open");
        let mut policies = Policies::default();
        for _ in 0..2 {
            assert!(policies.at(&store, none).expect("no policy").is_none());
            let found = policies.at(&store, valid).expect("a policy").expect("some");
            assert_eq!(found.required, vec!["t".to_string()]);
            assert!(matches!(
                policies.at(&store, invalid),
                Err(PolicyAtError::Invalid { commit, .. }) if commit == invalid
            ));
        }
    }
}
