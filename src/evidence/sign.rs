//! Signing evidence records: the one place a sealed record gets its `signature`.
//!
//! A record is sealed first (its `digest` covers everything but `digest` and `signature`), then
//! signed over that digest. A signing failure is an error before anything is written: a user
//! who asked for signing never gets an unsigned record instead.

use std::path::Path;

use crate::error::Result;
use crate::model::{time, EvidenceRecord};
use crate::store::policy::trust_at;
use crate::store::Store;
use crate::trust::{self, sshsig, AllowedSigners, SignError, SigningConfig, SigningKey};

/// Who signs the records a command writes, and as whom.
#[derive(Debug, Clone)]
pub struct RecordSigner {
    config: SigningConfig,
    principal: String,
    /// `SHA256:…` of the signing key, when it is known without signing.
    fingerprint: Option<String>,
}

impl RecordSigner {
    /// `--sign-key <file>`, `--no-sign`, or git's `gpg.format=ssh` + `user.signingKey`;
    /// `None`: no signing. The principal claimed is the one the allowed signers at
    /// `principal_from` grant the key (`user.email` when it is one of them), else `user.email`.
    /// A key that cannot be used (missing file, literal without ssh-agent) is an error now, before
    /// any check runs.
    pub fn resolve(
        store: &Store,
        key_file: Option<&Path>,
        no_sign: bool,
        principal_from: Option<gix::ObjectId>,
    ) -> Result<Option<RecordSigner>> {
        let Some(config) = SigningConfig::resolve(&store.repo, key_file, no_sign)? else {
            return Ok(None);
        };
        match &config.key {
            SigningKey::File(path) if !path.exists() => {
                return Err(SignError::MissingKeyFile(path.clone()).into())
            }
            SigningKey::Agent(literal) if config.agent_socket.is_none() => {
                return Err(SignError::NoAgent {
                    key: literal.clone(),
                }
                .into())
            }
            _ => {}
        }
        let email = store
            .repo
            .config_snapshot()
            .string("user.email")
            .map(|e| e.to_string());
        let public = config.public_key();
        let signers = match principal_from {
            Some(at) => trust_at(store, at)?.map(|t| t.signers),
            None => None,
        };
        let now = time::rfc3339(std::time::SystemTime::now());
        let principal = match (&public, &signers) {
            (Some(key), Some(signers)) => {
                let chosen =
                    trust::signing_principal(signers, key.key_data(), email.as_deref(), &now);
                // `signing_principal` falls back to `email` when no line allows the key now.
                let allowed_now = chosen.as_deref().is_some_and(|p| {
                    signers
                        .find_principal(key.key_data(), Some(p), trust::NAMESPACE, &now)
                        .is_ok()
                });
                if allowed_now {
                    chosen
                } else {
                    listed_principal(signers, key.key_data()).or(email)
                }
            }
            _ => email,
        }
        .unwrap_or_else(|| "tabellio".into());
        Ok(Some(RecordSigner {
            fingerprint: public.as_ref().map(sshsig::fingerprint),
            config,
            principal,
        }))
    }

    /// `rec` (sealed) with its signature. The digest is recomputed, never taken on its word.
    pub fn sign(&self, mut rec: EvidenceRecord) -> Result<EvidenceRecord> {
        rec.signature = None;
        let rec = rec.seal();
        let signature = self.config.sign_digest(&rec.digest, &self.principal)?;
        Ok(EvidenceRecord {
            signature: Some(signature),
            ..rec
        })
    }

    /// Does `rec` carry a signature by this very key over its own digest? A signer vouches for
    /// reusing only what it signed itself: reusing anything else would launder a record it never
    /// judged into one it signs.
    pub fn signed_it(&self, rec: &EvidenceRecord) -> bool {
        let (Some(ours), Some(sig)) = (&self.fingerprint, &rec.signature) else {
            return false;
        };
        rec.digest_is_valid()
            && &sig.key_fingerprint == ours
            && sshsig::verify(&sig.sig, trust::NAMESPACE, rec.digest.as_bytes())
                .is_ok_and(|key| &sshsig::fingerprint(&key) == ours)
    }
}

/// The first plain principal of a line holding `key`, whatever its validity window: a key
/// outside its window still signs as who it is, and the judge says `signer-expired`.
fn listed_principal(signers: &AllowedSigners, key: &ssh_key::public::KeyData) -> Option<String> {
    signers
        .entries()
        .iter()
        .filter(|e| !e.cert_authority && e.key.key_data() == key)
        .flat_map(|e| e.principals.split(','))
        .find(|p| !p.is_empty() && !p.starts_with('!') && !p.contains(['*', '?']))
        .map(str::to_string)
}

/// `rec`, signed when there is a signer.
pub fn maybe_sign(signer: Option<&RecordSigner>, rec: EvidenceRecord) -> Result<EvidenceRecord> {
    match signer {
        Some(s) => s.sign(rec),
        None => Ok(rec),
    }
}
