//! A record's SSH signature as stored in the record, and the digest it signs. The record
//! formats (evidence, approvals) carry it; `trust` makes and judges it.

use serde::{Deserialize, Serialize};

use super::canonical;

/// A record's signature, as stored in the record (`signature: {format, principal,
/// key_fingerprint, sig}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Always `ssh`.
    pub format: String,
    /// The identity the signer claims; counts only if the allowed signers grant it to the key.
    pub principal: String,
    /// `SHA256:…` of the signing key, as `ssh-keygen -l` prints it.
    pub key_fingerprint: String,
    /// The armored `SSHSIG` (`-----BEGIN SSH SIGNATURE-----` …), as `ssh-keygen -Y sign`
    /// writes it: save it to a file to check it with `ssh-keygen -Y verify`.
    pub sig: String,
}

/// The digest a record is signed over: SHA-256 of its canonical JSON without `digest` and
/// `signature`. `record` is the record as a JSON object.
pub fn signed_digest(record: &serde_json::Value) -> Result<String, canonical::NotCanonical> {
    canonical::digest_skipping(record, &["digest", "signature"])
}
