//! Who the policy trusts and whose approval a guarded change needs: `trust` (allowed signers
//! and the checks that must be signed), `approval`, and the rules of `guarded_paths`.

use serde::{Deserialize, Serialize};

/// `"trust": {"allowed_signers": "<path in the repository>", "require_signed": [names] | "*"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustPolicy {
    /// The allowed-signers file (ssh-keygen's format), read from the same commit as the policy.
    pub allowed_signers: String,
    /// Which checks count only when signed by an allowed signer; `"*"` (the default) is every
    /// check.
    #[serde(default)]
    pub require_signed: RequireSigned,
}

/// `require_signed`: every check (`"*"`) or the named ones.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RequireSigned {
    #[default]
    All,
    Checks(Vec<String>),
}

impl RequireSigned {
    /// Does evidence of check `name` need a trusted signature to count?
    pub fn covers(&self, name: &str) -> bool {
        match self {
            RequireSigned::All => true,
            RequireSigned::Checks(names) => names.iter().any(|n| n == name),
        }
    }
}

impl Serialize for RequireSigned {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequireSigned::All => s.serialize_str("*"),
            RequireSigned::Checks(names) => names.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequireSigned {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Star(String),
            Names(Vec<String>),
        }
        match Raw::deserialize(de).map_err(|_| {
            serde::de::Error::custom("must be \"*\" (every check) or a list of check names")
        })? {
            Raw::Star(s) if s == "*" => Ok(RequireSigned::All),
            Raw::Star(s) => Err(serde::de::Error::custom(format!(
                "{s:?} is neither \"*\" nor a list; write [{s:?}] for one check"
            ))),
            Raw::Names(names) => Ok(RequireSigned::Checks(names)),
        }
    }
}

/// `"approval": {"distinct_from_actor": bool}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// The approver may not be the run's own actor.
    #[serde(default)]
    pub distinct_from_actor: bool,
}

/// One glob of `guarded_paths`: `{"approvals": 1, "when": {"actor.kind": "agent"},
/// "approver_not": ["actor", "initiator"]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardRule {
    /// How many approvals a change needs: 1 (the only number supported).
    #[serde(default = "one_approval")]
    pub approvals: u32,
    /// The change is guarded only when this holds of its actor; always when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<GuardWhen>,
    /// Who may not approve the change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approver_not: Vec<ApproverRole>,
}

fn one_approval() -> u32 {
    1
}

/// `"when": {"actor.kind": "agent"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardWhen {
    #[serde(rename = "actor.kind")]
    pub actor_kind: ActorKind,
}

impl GuardWhen {
    /// Does the condition hold of a change whose actor is proven of `kind`? Always when the
    /// kind is not proven (`None`): an unproven actor never relaxes a gate.
    pub fn holds(&self, kind: Option<&str>) -> bool {
        kind.is_none_or(|k| k == self.actor_kind.as_str())
    }
}

/// An actor's kind, as the run record's `actor.type` and evidence's `actor.kind` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Agent,
    Human,
    Ci,
    System,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Agent => "agent",
            ActorKind::Human => "human",
            ActorKind::Ci => "ci",
            ActorKind::System => "system",
        }
    }
}

/// Whom an approval of a guarded change may not come from: the run's `actor` or its
/// `initiator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApproverRole {
    Actor,
    Initiator,
}

impl ApproverRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ApproverRole::Actor => "actor",
            ApproverRole::Initiator => "initiator",
        }
    }
}
