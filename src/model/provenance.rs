//! Provenance: who or what made a change, as evidence records carry it (`actor`, `initiator`,
//! docs/storage.md). Every field but `kind` and `id` is optional and left out when empty, so
//! records written without provenance keep their bytes and digests.

use serde::{Deserialize, Serialize};

use super::canonical::Fields;
use super::run::Actor;

/// The actor of the run a record belongs to: `kind` (`agent`, `human`, `ci`, `system`), its
/// canonical `id` (the signer's allowed-signers principal when the actor signs), and for an
/// agent its `name`, `model` and `harness_version`, and `session_digest`: the SHA-256 of the
/// agent's session link, never the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorProvenance {
    pub kind: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_digest: Option<String>,
}

impl ActorProvenance {
    /// The canonical JSON fields, in key order.
    pub(crate) fn write(&self, f: &mut Fields) {
        let ActorProvenance {
            kind,
            id,
            name,
            model,
            harness_version,
            session_digest,
        } = self;
        if let Some(v) = harness_version {
            f.str("harness_version", v);
        }
        f.str("id", id).str("kind", kind);
        if let Some(v) = model {
            f.str("model", v);
        }
        if let Some(v) = name {
            f.str("name", v);
        }
        if let Some(v) = session_digest {
            f.str("session_digest", v);
        }
    }
}

impl From<&Actor> for ActorProvenance {
    fn from(a: &Actor) -> Self {
        ActorProvenance {
            kind: a.kind.clone(),
            id: a.id.clone(),
            name: a.name.clone(),
            model: a.model.clone(),
            harness_version: a.harness_version.clone(),
            session_digest: a.session_digest.clone(),
        }
    }
}

/// What evidence records of a run carry about who made its change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub actor: ActorProvenance,
    pub initiator: Option<String>,
}

impl Provenance {
    /// The provenance a run's record names.
    pub fn of_run(run: &super::RunRecord) -> Provenance {
        Provenance {
            actor: ActorProvenance::from(&run.actor),
            initiator: run.initiator.clone(),
        }
    }

    /// Does `rec` carry exactly this provenance?
    pub fn is_on(&self, rec: &super::EvidenceRecord) -> bool {
        rec.actor.as_ref() == Some(&self.actor) && rec.initiator == self.initiator
    }
}

/// The run that put a commit on a branch, as the ledgers record it (`verify
/// --require-provenance`, `blame`): its id, actor and initiator, and how the commit was found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LandedBy {
    pub run_id: String,
    pub actor: ActorProvenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiator: Option<String>,
    /// `landed` (a commit the run put on the target: `land`'s landed line or `promote`'s),
    /// `promoted` (a promotion's new tip), `validated` (a commit of the run's own branch up to
    /// the validated one), or `tree` (another commit with the same tree: a forge's squash or
    /// rebase).
    pub via: &'static str,
}

/// `verify --require-provenance` on one commit: the run that landed it, or none.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProvenanceVerdict {
    /// `resolved` or `unresolved`.
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<LandedBy>,
}
