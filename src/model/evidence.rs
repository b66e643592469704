//! Evidence records (`tabellio.evidence/v1`): the outcome of one check on one commit, noted on
//! the commit **and** on its tree so a reworded commit with the same tree keeps its evidence.
//!
//! `digest` is the SHA-256 of the record's canonical JSON without `digest` and `signature`; a
//! record whose digest does not match its content has been edited and is never trusted. The
//! optional `signature` signs that digest (see [`super::signature`]).

use serde::{Deserialize, Serialize};

use super::canonical;

pub const SCHEMA: &str = "tabellio.evidence/v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRef {
    pub name: String,
    pub argv: Vec<String>,
    pub digest: String,
}

/// What is stored of a command's output: every byte counted and hashed, a bounded, redacted
/// excerpt. Also the agent's output in a loop record (`loop_state::AgentOutput`). Strict like
/// every evidence field: an unknown field is an edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRecord {
    pub bytes: u64,
    pub sha256: String,
    pub excerpt: String,
    pub truncated: bool,
    pub redactions: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stopped {
    /// How the command ended: `exited`, `signaled`, `timed_out`, `not_found`, `spawn_failed`.
    pub command: String,
    /// Why tabellio failed the attempt on its own account (`workspace_mutated`), if it did.
    pub tabellio: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRecord {
    pub schema: String,
    pub run_id: Option<String>,
    pub repository: String,
    pub commit: String,
    pub tree: String,
    pub check: CheckRef,
    /// `passed`, `failed`, `timed_out` or `error`.
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    pub output: OutputRecord,
    pub stopped: Stopped,
    pub tool: String,
    /// The digest of the passing record on the same tree this one stands on, when the check was
    /// not run again (docs/storage.md). Absent in records of checks that ran, so their bytes
    /// and digests are what they always were.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reused_from: Option<String>,
    /// The SSH signature over `digest` (docs/verify.md), added after sealing. Absent in
    /// unsigned records, so their bytes and digests are what they always were.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signature: Option<super::signature::Signature>,
    pub digest: String,
}

/// The tool string written into records.
pub fn tool_id() -> String {
    format!("git-tabellio/{}", env!("CARGO_PKG_VERSION"))
}

impl EvidenceRecord {
    /// The digest this record's content calls for: without `digest` and `signature`, so a
    /// signature can be added after sealing and covers exactly this.
    pub fn compute_digest(&self) -> String {
        super::signature::signed_digest(&super::to_value(self))
            .expect("evidence records hold no floats")
    }

    /// Set `digest` from the content.
    pub fn seal(mut self) -> Self {
        self.digest = self.compute_digest();
        self
    }

    pub fn digest_is_valid(&self) -> bool {
        self.digest == self.compute_digest()
    }

    pub fn passed(&self) -> bool {
        self.status == "passed"
    }

    /// The one line stored in the notes blob.
    pub fn to_line(&self) -> String {
        canonical::to_canonical_string(&super::to_value(self))
            .expect("evidence records hold no floats")
    }

    /// Parse one notes line, checking its schema (the digest is checked by the caller, who
    /// decides what a tampered record means).
    pub fn from_line(line: &str) -> Result<Self, super::SchemaError> {
        super::parse_record(line, SCHEMA, "evidence record")
    }
}

/// The digest that stands for a set of evidence records: SHA-256 of the canonical JSON array of
/// their digests, sorted.
pub fn set_digest<'a>(digests: impl IntoIterator<Item = &'a str>) -> String {
    let mut all: Vec<&str> = digests.into_iter().collect();
    all.sort_unstable();
    all.dedup();
    let value = serde_json::Value::Array(all.into_iter().map(|d| d.into()).collect());
    canonical::digest_of(&value).expect("an array of strings is canonical")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sealed record of a passing `test` check, for tests.
    pub(crate) fn sample() -> EvidenceRecord {
        EvidenceRecord {
            schema: SCHEMA.into(),
            run_id: Some("r1".into()),
            repository: "local/demo".into(),
            commit: "a".repeat(40),
            tree: "b".repeat(40),
            check: CheckRef {
                name: "test".into(),
                argv: vec!["true".into()],
                digest: "c".repeat(64),
            },
            status: "passed".into(),
            exit_code: Some(0),
            signal: None,
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:01Z".into(),
            duration_ms: 1000,
            output: OutputRecord {
                bytes: 0,
                sha256: canonical::sha256_hex(b""),
                excerpt: String::new(),
                truncated: false,
                redactions: 0,
            },
            stopped: Stopped {
                command: "exited".into(),
                tabellio: None,
            },
            tool: "git-tabellio/0.1.0".into(),
            reused_from: None,
            signature: None,
            digest: String::new(),
        }
        .seal()
    }

    #[test]
    fn roundtrip_and_tamper_detection() {
        let rec = sample();
        assert!(rec.digest_is_valid());
        let line = rec.to_line();
        assert!(!line.contains('\n'));
        let back = EvidenceRecord::from_line(&line).unwrap();
        assert_eq!(back, rec);
        let mut forged = back.clone();
        forged.status = "failed".into();
        assert!(!forged.digest_is_valid());
    }

    #[test]
    fn golden_record_digest() {
        // Pinned: a change in field names or canonical form changes every stored digest.
        assert_eq!(
            sample().digest,
            canonical::sha256_hex(
                br#"{"check":{"argv":["true"],"digest":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","name":"test"},"commit":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","duration_ms":1000,"exit_code":0,"finished_at":"2026-01-01T00:00:01Z","output":{"bytes":0,"excerpt":"","redactions":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","truncated":false},"repository":"local/demo","run_id":"r1","schema":"tabellio.evidence/v1","signal":null,"started_at":"2026-01-01T00:00:00Z","status":"passed","stopped":{"command":"exited","tabellio":null},"tool":"git-tabellio/0.1.0","tree":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}"#
            )
        );
    }

    #[test]
    fn unknown_schema_is_named() {
        let line = sample()
            .to_line()
            .replace("tabellio.evidence/v1", "tabellio.evidence/v9");
        let err = EvidenceRecord::from_line(&line).unwrap_err().to_string();
        assert!(err.contains("tabellio.evidence/v9"), "{err}");
    }
}
