//! Who attested what: SSH-signed records, the allowed signers that make a signature count, and
//! the guarded paths a run cannot change without a person's approval.
//!
//! # Trust model
//!
//! A signature proves which key signed a record, not that the check really ran: whoever holds
//! an allowed key can sign anything. Evidence is therefore exactly as trustworthy as the keys in
//! the policy's `allowed_signers` file and the people and machines that hold them. The strong
//! setup is a CI key the agent never holds, plus people's keys for approvals. An agent running
//! as a user whose allowed key is reachable (a key file it can read, an `SSH_AUTH_SOCK` it
//! inherits) can sign, so that key is only as safe as the agent's sandbox. `valid-before`
//! bounds the `finished_at` a record may carry, not the moment it was signed: the holder of an
//! expired key can still sign a backdated record, so revoking a key means removing its line.
//!
//! # What is signed
//!
//! The message is the record's canonical `digest` string and nothing else: the 64 lowercase hex
//! characters of the SHA-256 of the record's canonical JSON (RFC 8785 for our value space)
//! without its `digest` and `signature` fields, as ASCII bytes, without a trailing newline. It
//! is signed as `SSHSIG` in namespace `tabellio` ([`NAMESPACE`]), so neither a git commit
//! signature (namespace `git`) nor a file signature can be passed off as one. Because the
//! digest covers commit, tree, check definition, status and times, a signature copied onto
//! another record does not verify there.
//!
//! The stored [`Signature`] carries the armored signature (which embeds the public key) and two
//! fields the signature does not cover: `key_fingerprint`, which must equal the embedded key's,
//! and `principal`, which the allowed-signers file must grant that key. Judging never takes
//! either on trust: see [`judge_signature`].

pub mod approval;
pub mod carry;
pub mod guarded;
pub mod sshsig;
pub mod vsa;

pub use crate::model::allowed_signers::{self, AllowedSigners, AllowedSignersError, SignerRefusal};
pub use crate::model::signature::{signed_digest, Signature};
pub use guarded::GuardedPaths;
pub use sshsig::{sign, SignError, SigningConfig, SigningKey, VerifyError};

/// The `SSHSIG` namespace every tabellio signature is made in.
pub const NAMESPACE: &str = "tabellio";

/// The only signature format: SSH signatures.
pub const FORMAT_SSH: &str = "ssh";

/// The principal to claim when signing with `key` at `at`: `fallback` (usually `user.email`)
/// when the allowed signers grant it to the key in namespace `tabellio`, else the first plain
/// principal (no wildcard, not negated) of the first line that allows the key, else `fallback`
/// as it is (the signature will then be judged `unknown-signer`, which is the truth).
pub fn signing_principal(
    signers: &AllowedSigners,
    key: &ssh_key::public::KeyData,
    fallback: Option<&str>,
    at: &str,
) -> Option<String> {
    if let Some(fallback) = fallback {
        if signers
            .find_principal(key, Some(fallback), NAMESPACE, at)
            .is_ok()
        {
            return Some(fallback.to_string());
        }
    }
    signers
        .find_principal(key, None, NAMESPACE, at)
        .ok()
        .and_then(|list| {
            list.split(',')
                .find(|p| !p.is_empty() && !p.starts_with('!') && !p.contains(['*', '?']))
                .map(str::to_string)
        })
        .or_else(|| fallback.map(str::to_string))
}

/// The kind of signer (`agent`, `human`, `ci`) the allowed signers declare for the key with
/// `fingerprint` under `principal` (docs/signing.md#who-is-who); `None` when no line holding it
/// declares one.
pub fn declared_kind(
    signers: &AllowedSigners,
    principal: &str,
    fingerprint: &str,
) -> Option<&'static str> {
    signers
        .entries()
        .iter()
        .filter(|e| {
            !e.cert_authority && allowed_signers::pattern_list_matches(principal, &e.principals)
        })
        .filter(|e| sshsig::fingerprint(&e.key) == fingerprint)
        .find_map(|e| e.kind())
}

/// Why a record signed by `principal` (key `fingerprint`) cannot carry `actor`, `None` when it
/// can: an agent's key vouches only for its own work, so it signs only records whose actor is
/// that agent, by its principal. A person's or a CI worker's key may sign any actor's records.
pub fn refuse_attribution(
    signers: &AllowedSigners,
    principal: &str,
    fingerprint: &str,
    actor: Option<&crate::model::provenance::ActorProvenance>,
) -> Option<String> {
    let actor = actor?;
    match declared_kind(signers, principal, fingerprint) {
        Some("agent") if actor.kind != "agent" => Some(format!(
            "{principal} is an agent's key (tabellio.agent) but the record says its actor is a {} ({})",
            actor.kind, actor.id
        )),
        Some("agent") if !crate::model::run::same_id(&actor.id, principal) => Some(format!(
            "{principal} is an agent's key (tabellio.agent) but the record names another agent, {}",
            actor.id
        )),
        _ => None,
    }
}

/// What a record's signature is worth under an allowed-signers file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureVerdict {
    /// Verifies, by a key the allowed signers grant `principal` in namespace `tabellio` at the
    /// record's `finished_at`.
    Trusted {
        principal: String,
        fingerprint: String,
    },
    /// The record has no signature.
    Unsigned,
    /// The signature does not verify over this record's digest (edited record, copied
    /// signature, wrong namespace, unsupported key type, or a fingerprint that is not the
    /// signing key's).
    BadSignature { reason: String },
    /// The signature verifies, but the key is not allowed: not in the file, not for the claimed
    /// principal, or not for namespace `tabellio`.
    UnknownSigner {
        fingerprint: String,
        reason: SignerRefusal,
    },
    /// The signature verifies, but the record's `finished_at` is outside the key's
    /// `valid-after`/`valid-before` window.
    SignerExpired {
        fingerprint: String,
        reason: SignerRefusal,
    },
}

impl SignatureVerdict {
    /// The verdict's stable name: `trusted`, `unsigned`, `bad-signature`, `unknown-signer` or
    /// `signer-expired`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SignatureVerdict::Trusted { .. } => "trusted",
            SignatureVerdict::Unsigned => "unsigned",
            SignatureVerdict::BadSignature { .. } => "bad-signature",
            SignatureVerdict::UnknownSigner { .. } => "unknown-signer",
            SignatureVerdict::SignerExpired { .. } => "signer-expired",
        }
    }

    /// Why the allowed signers refused the key (`unknown-signer`, `signer-expired`).
    pub fn refusal(&self) -> Option<&SignerRefusal> {
        match self {
            SignatureVerdict::UnknownSigner { reason, .. }
            | SignatureVerdict::SignerExpired { reason, .. } => Some(reason),
            _ => None,
        }
    }

    pub fn is_trusted(&self) -> bool {
        matches!(self, SignatureVerdict::Trusted { .. })
    }

    /// One line for a person: what is wrong, naming the key.
    pub fn describe(&self) -> String {
        match self {
            SignatureVerdict::Trusted {
                principal,
                fingerprint,
            } => format!("signed by {principal} ({fingerprint})"),
            SignatureVerdict::Unsigned => "not signed".into(),
            SignatureVerdict::BadSignature { reason } => format!("bad signature: {reason}"),
            SignatureVerdict::UnknownSigner {
                fingerprint,
                reason,
            }
            | SignatureVerdict::SignerExpired {
                fingerprint,
                reason,
            } => format!("signed by {fingerprint}, but {reason}"),
        }
    }
}

/// Judge a record's signature.
///
/// `digest` must be the digest recomputed from the record's content ([`signed_digest`]), never
/// the stored field taken on its word; `finished_at` is the record's, the time the signer must
/// have been allowed at.
///
/// A `principal` field the allowed signers do not grant to the signing key is `unknown-signer`,
/// not `bad-signature`: the cryptography holds (this key did sign this digest), but the identity
/// claimed is not one the file vouches for, exactly as `ssh-keygen -Y verify -I <principal>`
/// refuses it. A `key_fingerprint` that is not the embedded key's is `bad-signature`: the record
/// contradicts its own signature.
pub fn judge_signature(
    sig: Option<&Signature>,
    digest: &str,
    finished_at: &str,
    signers: &AllowedSigners,
) -> SignatureVerdict {
    let Some(sig) = sig else {
        return SignatureVerdict::Unsigned;
    };
    if sig.format != FORMAT_SSH {
        return SignatureVerdict::BadSignature {
            reason: format!("format {:?} is not supported (only \"ssh\")", sig.format),
        };
    }
    let key = match sshsig::verify(&sig.sig, NAMESPACE, digest.as_bytes()) {
        Ok(key) => key,
        Err(e) => {
            return SignatureVerdict::BadSignature {
                reason: e.to_string(),
            }
        }
    };
    let fingerprint = sshsig::fingerprint(&key);
    if fingerprint != sig.key_fingerprint {
        return SignatureVerdict::BadSignature {
            reason: format!(
                "the record names key {} but was signed by {fingerprint}",
                sig.key_fingerprint
            ),
        };
    }
    match signers.find_principal(key.key_data(), Some(&sig.principal), NAMESPACE, finished_at) {
        Ok(principal) => SignatureVerdict::Trusted {
            principal,
            fingerprint,
        },
        Err(reason @ (SignerRefusal::Expired { .. } | SignerRefusal::NotYetValid { .. })) => {
            SignatureVerdict::SignerExpired {
                fingerprint,
                reason,
            }
        }
        Err(SignerRefusal::BadTime { value }) => SignatureVerdict::BadSignature {
            reason: format!("finished_at {value:?} is not an RFC 3339 UTC time"),
        },
        Err(reason) => SignatureVerdict::UnknownSigner {
            fingerprint,
            reason,
        },
    }
}

#[cfg(test)]
mod tests;
