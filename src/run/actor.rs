//! Who acts: the actor a run or an approval names, parsed from `--actor <type>:<id>`, and the
//! one canonical id of whoever runs a command (docs/signing.md#who-is-who).
//!
//! An id is canonical so that one person is one id wherever it is written: a run's actor, an
//! approver, a signer. Without `--actor` it is, in this order, the allowed-signers principal of
//! the configured signing key (when the allowed signers at the commit that judges grant it one
//! in namespace `tabellio`), else git's committer email. Ids compare without regard to ASCII
//! case ([`same_id`]), as email addresses are used.

use crate::error::{Error, Result};
use crate::model::provenance::{ActorProvenance, Provenance};
use crate::model::run::Actor;
use crate::model::RunRecord;
use crate::store::identity::Role;
use crate::store::policy::trust_at;
use crate::store::Store;
use crate::trust::{self, SigningConfig};

pub use crate::model::run::same_id;

/// The canonical id of whoever runs this command: the principal the allowed signers at
/// `judged_at` grant the configured signing key, else the committer email.
pub fn own_id(store: &Store, judged_at: Option<gix::ObjectId>) -> String {
    let email = store.signature(Role::Committer).email.to_string();
    signing_principal(store, judged_at, &email).unwrap_or(email)
}

/// The principal the configured signing key (git's `user.signingKey` with `gpg.format=ssh`)
/// signs as under the allowed signers at `at`; `None` without a key, without `trust`, or when
/// no line grants the key. Nothing here fails: an unusable key only means no principal.
fn signing_principal(store: &Store, at: Option<gix::ObjectId>, email: &str) -> Option<String> {
    let config = SigningConfig::resolve(&store.repo, None, false).ok()??;
    let key = config.public_key()?;
    let signers = trust_at(store, at?).ok()??.signers;
    let now = crate::model::time::now();
    let principal = trust::signing_principal(&signers, key.key_data(), Some(email), &now)?;
    signers
        .find_principal(key.key_data(), Some(&principal), trust::NAMESPACE, &now)
        .ok()
}

/// Whoever runs this command as the actor of records it writes for a change no one run made
/// (`validate` of a commit no run landed, `land` of a stack of several runs' changes): its
/// canonical id ([`own_id`]), its kind as the allowed signers at `judged_at` declare the
/// configured key (`tabellio.<kind>`), else `human`; the initiator is the same id.
pub fn validating_actor(store: &Store, judged_at: Option<gix::ObjectId>) -> Provenance {
    let id = own_id(store, judged_at);
    let kind = declared_kind_of_own_key(store, judged_at, &id).unwrap_or("human");
    Provenance {
        actor: ActorProvenance::from(&Actor::new(kind, id.clone())),
        initiator: Some(id),
    }
}

/// The kind the allowed signers at `at` declare the configured signing key of `principal`.
fn declared_kind_of_own_key(
    store: &Store,
    at: Option<gix::ObjectId>,
    principal: &str,
) -> Option<&'static str> {
    let config = SigningConfig::resolve(&store.repo, None, false).ok()??;
    let key = config.public_key()?;
    let signers = trust_at(store, at?).ok()??.signers;
    trust::declared_kind(&signers, principal, &trust::sshsig::fingerprint(&key))
}

/// The provenance of records about the change `runs` made together (a stack `land` or a
/// worker validates): the runs' own when they all name the same actor and initiator; else,
/// when an agent made any part of it, the first such run's (so a mix with an agent's work is
/// never attributed to a person: the validating key signs it, which proves no kind, and a
/// check or guarded path asked of agents stays asked); else the validating actor
/// ([`validating_actor`]), who vouches for the mix.
pub fn provenance_of_runs<'r>(
    store: &Store,
    runs: impl IntoIterator<Item = &'r RunRecord>,
    judged_at: Option<gix::ObjectId>,
) -> Provenance {
    let runs: Vec<Provenance> = runs.into_iter().map(Provenance::of_run).collect();
    let Some(first) = runs.first() else {
        return validating_actor(store, judged_at);
    };
    if runs.iter().all(|p| p == first) {
        return first.clone();
    }
    match runs.iter().find(|p| p.actor.kind == "agent") {
        Some(agent) => agent.clone(),
        None => validating_actor(store, judged_at),
    }
}

/// `--actor <type>:<id>`, or without it a human with `default_id` (usually [`own_id`]).
pub fn parse_actor(spec: Option<&str>, default_id: impl FnOnce() -> String) -> Result<Actor> {
    let Some(spec) = spec else {
        return Ok(Actor::new("human", default_id()));
    };
    let (kind, id) = spec.split_once(':').ok_or_else(|| {
        Error::usage(format!("--actor {spec:?} is not <type>:<id>"))
            .hint("for example --actor agent:claude or --actor human:ada@example.com")
    })?;
    if !matches!(kind, "human" | "agent" | "ci" | "system") {
        return Err(Error::usage(format!(
            "--actor type {kind:?} is not one of human, agent, ci, system"
        )));
    }
    if id.trim().is_empty() || id.chars().any(char::is_control) {
        return Err(Error::usage(
            "--actor needs a non-empty id without control characters",
        ));
    }
    Ok(Actor::new(kind, id.trim().to_string()))
}

/// What an agent's harness says about the agent (`start --agent-name --model --harness-version
/// --session`): stored on the run's actor; the session link only as its SHA-256.
#[derive(Debug, Clone, Default)]
pub struct AgentDetails {
    pub name: Option<String>,
    pub model: Option<String>,
    pub harness_version: Option<String>,
    /// A link to the agent's session (a transcript URL): never stored, only its digest.
    pub session: Option<String>,
}

impl AgentDetails {
    /// `actor` with these details; each must be a non-empty line.
    pub fn apply(&self, mut actor: Actor) -> Result<Actor> {
        let field = |flag: &str, v: &Option<String>| -> Result<Option<String>> {
            match v.as_deref().map(str::trim) {
                None => Ok(None),
                Some(t) if t.is_empty() || t.chars().any(char::is_control) => Err(Error::usage(
                    format!("--{flag} needs a non-empty value on one line"),
                )),
                Some(t) => Ok(Some(t.to_string())),
            }
        };
        actor.name = field("agent-name", &self.name)?;
        actor.model = field("model", &self.model)?;
        actor.harness_version = field("harness-version", &self.harness_version)?;
        actor.session_digest = field("session", &self.session)?
            .map(|link| crate::model::canonical::sha256_hex(link.as_bytes()));
        Ok(actor)
    }
}

/// `--initiator <id>`, or without it `default_id` (usually [`own_id`]).
pub fn parse_initiator(spec: Option<&str>, default_id: impl FnOnce() -> String) -> Result<String> {
    match spec.map(str::trim) {
        None => Ok(default_id()),
        Some(id) if id.is_empty() || id.chars().any(char::is_control) => Err(Error::usage(
            "--initiator needs a non-empty id without control characters",
        )
        .hint("the person who asked for the run, as they sign: --initiator ada@example.com")),
        Some(id) => Ok(id.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors() {
        let none = || unreachable!("an explicit actor needs no default");
        assert_eq!(
            parse_actor(Some("agent:claude"), none).unwrap().kind,
            "agent"
        );
        assert_eq!(
            parse_actor(None, || "ada@example.com".into()).unwrap().id,
            "ada@example.com"
        );
        assert!(parse_actor(Some("robot:x"), none).is_err());
        assert!(parse_actor(Some("agent"), none).is_err());
        assert!(parse_actor(Some("agent:"), none).is_err());
        assert!(parse_actor(Some("agent: "), none).is_err());
        assert!(same_id("Ada@Example.com", " ada@example.com"));
        assert!(!same_id("ada", "ada@example.com"));
    }
}
