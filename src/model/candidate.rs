//! The records of distributed landing: a candidate stack (`tabellio.candidate/v1`, in the
//! message of the commit `refs/tabellio/candidates/<target>/<id>` points at, whose tree is the
//! stacked tree itself) and a worker's claim on one (`tabellio.claim/v1`, `claim.json` in the
//! tree of the commit `refs/tabellio/claims/<id>` points at).

use serde::{Deserialize, Serialize};

pub const CANDIDATE_SCHEMA: &str = "tabellio.candidate/v1";
pub const CLAIM_SCHEMA: &str = "tabellio.claim/v1";

/// The file in a claim commit's tree that holds the claim.
pub const CLAIM_FILE: &str = "claim.json";

/// One run of a candidate stack, in stacking order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateRun {
    pub run: String,
    /// The run's validated head that was stacked.
    pub head: String,
}

/// A check a candidate must pass: its name and the digest of its definition. Workers take the
/// definition from the policy at `tip` (or at the candidate itself, for a run that changed the
/// policy), never from this record, and only when the digest matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateCheck {
    pub name: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateRecord {
    pub schema: String,
    /// The branch it would land on (`refs/heads/…`).
    pub target: String,
    /// The target tip the runs are stacked on.
    pub tip: String,
    pub runs: Vec<CandidateRun>,
    pub checks: Vec<CandidateCheck>,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRecord {
    pub schema: String,
    /// The candidate id (the last component of its ref) and the candidate commit claimed.
    pub candidate: String,
    pub commit: String,
    /// Who holds it (`worker --id`).
    pub worker: String,
    pub claimed_at: String,
    /// After this instant (RFC 3339 UTC) another worker may take the claim over.
    pub lease_expires_at: String,
}
