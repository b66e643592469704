//! Verification summaries: an in-toto Statement with predicate type
//! `https://slsa.dev/verification_summary/v1` saying which SLSA source levels a commit a
//! protected branch moved to earned under the policy that judged it, and on which evidence. It
//! is noted on the commit in `refs/notes/tabellio/vsa` inside a DSSE envelope, signed (when a
//! key is configured) with an SSH signature in namespace `tabellio` over DSSE's pre-auth
//! encoding, so anyone with the allowed signers can check it offline.

use base64ct::{Base64, Encoding};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::canonical;

use super::{sshsig, AllowedSigners, SigningConfig, NAMESPACE};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://slsa.dev/verification_summary/v1";
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A DSSE envelope, as stored: one canonical JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Envelope {
    pub payload_type: String,
    /// The statement's canonical JSON, base64.
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature: `keyid` the key's `SHA256:` fingerprint, `sig` an armored `SSHSIG`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// DSSE's pre-authentication encoding of `payload`: what a signature signs.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The envelope of `statement`, signed by `signer` when there is one.
pub fn seal(statement: &Value, signer: Option<&SigningConfig>) -> crate::error::Result<Envelope> {
    let body = canonical::to_canonical_string(statement)
        .map_err(|e| crate::error::Error::internal(format!("a summary with a float: {e}")))?;
    let mut envelope = Envelope {
        payload_type: PAYLOAD_TYPE.into(),
        payload: Base64::encode_string(body.as_bytes()),
        signatures: Vec::new(),
    };
    if let Some(signer) = signer {
        let sig = signer.sign_message(NAMESPACE, &pae(PAYLOAD_TYPE, body.as_bytes()))?;
        let key =
            sshsig::verify(&sig, NAMESPACE, &pae(PAYLOAD_TYPE, body.as_bytes())).map_err(|e| {
                crate::error::Error::internal(format!(
                    "ssh-keygen made a signature that does not verify: {e}"
                ))
            })?;
        envelope.signatures.push(EnvelopeSignature {
            keyid: sshsig::fingerprint(&key),
            sig,
        });
    }
    Ok(envelope)
}

impl Envelope {
    pub fn to_line(&self) -> String {
        canonical::to_canonical_string(&crate::model::to_value(self))
            .expect("an envelope holds no floats")
    }
}

/// What a noted summary is worth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VsaVerdict {
    /// `valid`; `unsigned` or `unknown-signer` (well-formed, but under `trust` no allowed
    /// signer signed it: it counts for nothing, and fails nothing); `invalid` (malformed, about
    /// another commit, or a signature that does not verify).
    pub verdict: &'static str,
    /// Why it is invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The allowed principals whose signatures verify.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<String>,
}

impl VsaVerdict {
    pub fn invalid(reason: impl Into<String>) -> VsaVerdict {
        VsaVerdict {
            verdict: "invalid",
            reason: Some(reason.into()),
            signers: Vec::new(),
            levels: Vec::new(),
        }
    }

    /// Malformed, about another commit, or badly signed: what `verify` fails on.
    pub fn is_invalid(&self) -> bool {
        self.verdict == "invalid"
    }
}

/// Judge the summary `line` noted on `commit`: a DSSE envelope of an in-toto Statement whose
/// subject is `commit`, of predicate type VSA v1 with the fields the schema requires and a
/// `PASSED` result; every signature must verify over the pre-auth encoding, by the key its
/// `keyid` names; with `signers` (the policy has `trust`) it is `valid` when one is by a key
/// they grant in namespace `tabellio` at `timeVerified`.
pub fn judge(line: &str, commit: &str, signers: Option<&AllowedSigners>) -> VsaVerdict {
    let envelope: Envelope = match serde_json::from_str(line) {
        Ok(e) => e,
        Err(e) => return VsaVerdict::invalid(format!("not a DSSE envelope: {e}")),
    };
    if envelope.payload_type != PAYLOAD_TYPE {
        return VsaVerdict::invalid(format!("payloadType {:?}", envelope.payload_type));
    }
    let Ok(body) = Base64::decode_vec(&envelope.payload) else {
        return VsaVerdict::invalid("the payload is not base64");
    };
    let statement: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return VsaVerdict::invalid(format!("the payload is not JSON: {e}")),
    };
    if let Err(why) = check_shape(&statement, commit) {
        return VsaVerdict::invalid(why);
    }
    let message = pae(&envelope.payload_type, &body);
    let at = statement["predicate"]["timeVerified"]
        .as_str()
        .unwrap_or_default();
    let mut principals = Vec::new();
    for s in &envelope.signatures {
        let key = match sshsig::verify(&s.sig, NAMESPACE, &message) {
            Ok(key) => key,
            Err(e) => return VsaVerdict::invalid(format!("bad signature by {}: {e}", s.keyid)),
        };
        if sshsig::fingerprint(&key) != s.keyid {
            return VsaVerdict::invalid(format!(
                "a signature names key {} but was made by another",
                s.keyid
            ));
        }
        if let Some(signers) = signers {
            if let Ok(p) = signers.find_principal(key.key_data(), None, NAMESPACE, at) {
                principals.push(p);
            }
        }
    }
    // Under `trust` a summary nobody allowed signed is a claim, shown for what it is; it
    // contradicts nothing, so it is not a failure (a forged one is `invalid` above).
    let verdict = match (
        signers,
        principals.is_empty(),
        envelope.signatures.is_empty(),
    ) {
        (Some(_), true, true) => "unsigned",
        (Some(_), true, false) => "unknown-signer",
        _ => "valid",
    };
    VsaVerdict {
        verdict,
        reason: None,
        signers: principals,
        levels: statement["predicate"]["verifiedLevels"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Why the summary `line` claims more than is true, `None` when every claim holds: `earned`
/// is the levels the evidence earns now under the policy the summary names (`None`: it does
/// not pass it), `records` the digests of the evidence records noted on the commit and its
/// tree. A level must be one `earned` gives; an input attestation one of `records`.
pub fn overclaims(line: &str, earned: Option<&[&str]>, records: &[String]) -> Option<String> {
    let statement = statement_of(line)?;
    let Some(earned) = earned else {
        return Some(
            "it says PASSED, but the evidence here does not pass the policy it names".into(),
        );
    };
    let claimed = statement["predicate"]["verifiedLevels"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(extra) = claimed
        .iter()
        .filter_map(Value::as_str)
        .find(|l| !earned.contains(l))
    {
        return Some(format!(
            "it claims {extra}, which the evidence here does not earn under the policy it names"
        ));
    }
    let inputs = statement["predicate"]["inputAttestations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for input in inputs {
        let digest = input["digest"]["sha256"].as_str().unwrap_or_default();
        if !records.iter().any(|r| r == digest) {
            return Some(format!(
                "it rests on evidence {digest:?}, which is not noted on the commit or its tree"
            ));
        }
    }
    None
}

/// What a summary says it was judged by: the target (`resourceUri`'s ref) and the policy's
/// commit (`policy.digest.gitCommit`).
pub fn judged_by(line: &str) -> Option<(String, String)> {
    let statement = statement_of(line)?;
    let resource = statement["predicate"]["resourceUri"].as_str()?;
    let (_, target) = resource.rsplit_once('@')?;
    let policy = statement["predicate"]["policy"]["digest"]["gitCommit"].as_str()?;
    Some((target.to_string(), policy.to_string()))
}

/// The Statement inside the envelope `line`, if it is one.
fn statement_of(line: &str) -> Option<Value> {
    let envelope: Envelope = serde_json::from_str(line).ok()?;
    let body = Base64::decode_vec(&envelope.payload).ok()?;
    serde_json::from_slice(&body).ok()
}

/// The Statement and VSA v1 fields: `_type`, `subject[].digest.gitCommit` naming `commit`,
/// `predicateType`, and `predicate.{verifier.id, timeVerified, resourceUri, policy.uri,
/// verificationResult: PASSED, verifiedLevels[]}`.
pub fn check_shape(statement: &Value, commit: &str) -> Result<(), String> {
    let str_at = |v: &Value, path: &str| -> Result<String, String> {
        v.pointer(path)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{path} is missing or not a string"))
    };
    if str_at(statement, "/_type")? != STATEMENT_TYPE {
        return Err("_type is not an in-toto Statement v1".into());
    }
    if str_at(statement, "/predicateType")? != PREDICATE_TYPE {
        return Err("predicateType is not verification_summary/v1".into());
    }
    let subjects = statement["subject"]
        .as_array()
        .ok_or("subject is not a list")?;
    if !subjects.iter().any(|s| s["digest"]["gitCommit"] == commit) {
        return Err(format!("its subject is not {commit}"));
    }
    for path in [
        "/predicate/verifier/id",
        "/predicate/timeVerified",
        "/predicate/resourceUri",
        "/predicate/policy/uri",
    ] {
        str_at(statement, path)?;
    }
    if str_at(statement, "/predicate/verificationResult")? != "PASSED" {
        return Err("verificationResult is not PASSED".into());
    }
    let levels = statement["predicate"]["verifiedLevels"]
        .as_array()
        .ok_or("predicate.verifiedLevels is not a list")?;
    if levels.is_empty() || !levels.iter().all(Value::is_string) {
        return Err("predicate.verifiedLevels must name at least one level".into());
    }
    Ok(())
}
