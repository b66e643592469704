//! Evidence records (`tabellio.evidence/v1`): the outcome of one check on one commit, noted on
//! the commit **and** on its tree so a reworded commit with the same tree keeps its evidence.
//!
//! `digest` is the SHA-256 of the record's canonical JSON without `digest` and `signature`; a
//! record whose digest does not match its content has been edited and is never trusted. The
//! optional `signature` signs that digest (see [`super::signature`]).

use serde::{Deserialize, Serialize};

use super::canonical;

pub const SCHEMA: &str = "tabellio.evidence/v1";

/// The verdict of one execution of a check, as evidence and the ledger record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Passed,
    Failed,
    TimedOut,
    Error,
    /// The check's declared inputs are exactly those of a tree with passing evidence (named by
    /// `reused_from`): nothing ran, and nothing needed to.
    NotApplicable,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Passed => "passed",
            CheckStatus::Failed => "failed",
            CheckStatus::TimedOut => "timed_out",
            CheckStatus::Error => "error",
            CheckStatus::NotApplicable => "not_applicable",
        }
    }
}

impl std::fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRef {
    pub name: String,
    pub argv: Vec<String>,
    pub digest: String,
    /// The check's declared inputs (globs), when it has them. Absent for a check of the whole
    /// tree, so older records keep their digests.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub inputs: Option<Vec<String>>,
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

/// What a check's machine-readable test report said (JUnit XML or TAP): how many tests ran and
/// failed, and the ids of the failing ones (redacted, at most [`MAX_FAILING_TESTS`] kept, each
/// at most [`MAX_TEST_ID_BYTES`] bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestReport {
    /// `junit` or `tap`.
    pub format: String,
    pub total: u64,
    pub failed: u64,
    /// The failing test ids, sorted and unique; fewer than `failed` when the list was cut.
    pub failing: Vec<String>,
}

/// At most this many failing test ids are kept in a record.
pub const MAX_FAILING_TESTS: usize = 200;
/// A failing test id is cut to at most this many bytes.
pub const MAX_TEST_ID_BYTES: usize = 256;

impl TestReport {
    /// Were all failing ids kept (the list is the whole set)?
    pub fn complete(&self) -> bool {
        self.failing.len() as u64 == self.failed
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRecord {
    pub schema: String,
    /// Which execution of this check (same tree, same check digest) this record is: 1 for the
    /// first, counted from the records already noted on the tree. Absent in records made before
    /// attempts were counted, so their digests are what they always were; a reused record keeps
    /// the attempt of the execution it stands on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub attempt: Option<u32>,
    pub run_id: Option<String>,
    pub repository: String,
    pub commit: String,
    pub tree: String,
    pub check: CheckRef,
    pub status: CheckStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    pub output: OutputRecord,
    pub stopped: Stopped,
    /// The failing tests the check's declared report names (`report` in the policy), when it
    /// declares one. Absent otherwise, so older records keep their digests.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tests: Option<TestReport>,
    pub tool: String,
    /// The digest of the passing record on the same tree this one stands on, when the check was
    /// not run again (docs/storage.md). Absent in records of checks that ran, so their bytes
    /// and digests are what they always were.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reused_from: Option<String>,
    /// Who made the change the record judges: the run's actor (docs/storage.md). Absent in
    /// records without a run and of older tools, so their digests are unchanged.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub actor: Option<super::provenance::ActorProvenance>,
    /// The canonical id of the person who started the run; absent when not known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub initiator: Option<String>,
    /// For a check with declared inputs: the id of the tree restricted to them (the git tree
    /// object of only the matching entries), the tree the check ran on. The record is noted on
    /// that id too, so every tree with the same inputs finds it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scoped_tree: Option<String>,
    /// Paths outside the declared inputs that the failing check's output names and the full
    /// tree has (best effort): the inputs it should declare.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub undeclared_inputs: Vec<String>,
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
        let mut text = String::with_capacity(1024);
        self.write_signed_fields(&mut text);
        canonical::sha256_hex(text.as_bytes())
    }

    /// The canonical JSON that `digest` covers, written from the fields: the text that
    /// `signature::signed_digest` makes of this record's JSON value, without building the
    /// value (a `verify` of a range recomputes a digest for every record it reads). Every
    /// field is named here, so a new field cannot be left out of the digest unnoticed.
    fn write_signed_fields(&self, out: &mut String) {
        let EvidenceRecord {
            schema,
            attempt,
            run_id,
            repository,
            commit,
            tree,
            check,
            status,
            exit_code,
            signal,
            started_at,
            finished_at,
            duration_ms,
            output,
            stopped,
            tests,
            tool,
            reused_from,
            actor,
            initiator,
            scoped_tree,
            undeclared_inputs,
            signature: _,
            digest: _,
        } = self;
        let mut fields = canonical::Fields::new(out);
        if let Some(actor) = actor {
            fields.object("actor", |f| actor.write(f));
        }
        if let Some(n) = attempt {
            fields.int("attempt", *n);
        }
        fields
            .object("check", |f| {
                f.strs("argv", &check.argv).str("digest", &check.digest);
                if let Some(inputs) = &check.inputs {
                    f.strs("inputs", inputs);
                }
                f.str("name", &check.name);
            })
            .str("commit", commit)
            .int("duration_ms", *duration_ms)
            .opt_int("exit_code", *exit_code)
            .str("finished_at", finished_at);
        if let Some(initiator) = initiator {
            fields.str("initiator", initiator);
        }
        fields
            .object("output", |f| {
                f.int("bytes", output.bytes)
                    .str("excerpt", &output.excerpt)
                    .int("redactions", output.redactions)
                    .str("sha256", &output.sha256)
                    .bool("truncated", output.truncated);
            })
            .str("repository", repository);
        if let Some(from) = reused_from {
            fields.str("reused_from", from);
        }
        fields
            .opt_str("run_id", run_id.as_deref())
            .str("schema", schema);
        if let Some(scoped) = scoped_tree {
            fields.str("scoped_tree", scoped);
        }
        fields
            .opt_int("signal", *signal)
            .str("started_at", started_at)
            .str("status", status.as_str())
            .object("stopped", |f| {
                f.str("command", &stopped.command)
                    .opt_str("tabellio", stopped.tabellio.as_deref());
            });
        if let Some(t) = tests {
            fields.object("tests", |f| {
                f.int("failed", t.failed)
                    .strs("failing", &t.failing)
                    .str("format", &t.format)
                    .int("total", t.total);
            });
        }
        fields.str("tool", tool).str("tree", tree);
        if !undeclared_inputs.is_empty() {
            fields.strs("undeclared_inputs", undeclared_inputs);
        }
        fields.end();
    }

    /// Set `digest` from the content.
    pub fn seal(mut self) -> Self {
        self.digest = self.compute_digest();
        self
    }

    pub fn digest_is_valid(&self) -> bool {
        self.digest == self.compute_digest()
    }

    /// Passed, or not applicable (standing on a passing record; the judge checks that one).
    pub fn passed(&self) -> bool {
        matches!(
            self.status,
            CheckStatus::Passed | CheckStatus::NotApplicable
        )
    }

    /// The one line stored in the notes blob.
    pub fn to_line(&self) -> String {
        canonical::to_canonical_string(&super::to_value(self))
            .expect("evidence records hold no floats")
    }

    /// Parse one notes line, checking its schema (the digest is checked by the caller, who
    /// decides what a tampered record means).
    pub fn from_line(line: &str) -> Result<Self, super::SchemaError> {
        // A line that is an object of this schema, without repeated keys, reads straight into
        // the struct, as it would through a JSON value (a `verify` of a range parses every
        // record it reads). Any other line takes the way through the value, which names what
        // is wrong with it, and keeps the last of repeated keys as it always has. Only an
        // object: serde would also fill the struct from an array of its fields in order,
        // which the way through the value refuses (it has no `schema`).
        if !line.trim_start().starts_with('{') {
            return Self::from_line_by_value(line);
        }
        match serde_json::from_str::<Self>(line) {
            Ok(rec) if rec.schema == SCHEMA => Ok(rec),
            _ => Self::from_line_by_value(line),
        }
    }

    fn from_line_by_value(line: &str) -> Result<Self, super::SchemaError> {
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
            attempt: None,
            run_id: Some("r1".into()),
            repository: "local/demo".into(),
            commit: "a".repeat(40),
            tree: "b".repeat(40),
            check: CheckRef {
                name: "test".into(),
                argv: vec!["true".into()],
                digest: "c".repeat(64),
                inputs: None,
            },
            status: CheckStatus::Passed,
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
            tests: None,
            tool: "git-tabellio/0.1.0".into(),
            reused_from: None,
            actor: None,
            initiator: None,
            scoped_tree: None,
            undeclared_inputs: Vec::new(),
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
        forged.status = CheckStatus::Failed;
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

    /// The digest as the record's JSON value gives it: the definition the field writer
    /// must match.
    fn digest_by_value(rec: &EvidenceRecord) -> String {
        super::super::signature::signed_digest(&super::super::to_value(rec)).unwrap()
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn text() -> impl Strategy<Value = String> {
            prop_oneof![any::<String>(), "[ -~]{0,12}", Just(String::new())]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Every field, absent, null or any value (controls, quotes, astral planes,
            /// extreme integers), is in the digest exactly as the JSON value puts it there.
            #[test]
            fn the_field_writer_digests_what_the_json_value_does(
                texts in prop::collection::vec(text(), 12),
                argv in prop::collection::vec(text(), 0..4),
                ints in any::<(Option<i32>, Option<i32>, u64, u64, u64, bool)>(),
                options in any::<(bool, bool, bool, bool)>(),
                provenance in any::<(bool, bool, bool)>(),
                scoped in any::<(bool, bool, bool)>(),
                extra in any::<(Option<u32>, bool, u64, u64)>(),
            ) {
                let (exit_code, signal, duration_ms, bytes, redactions, truncated) = ints;
                let (run_id, tabellio, reused, signed) = options;
                let t = |i: usize| texts[i].clone();
                let mut rec = sample();
                rec.schema = t(0);
                rec.run_id = run_id.then(|| t(1));
                rec.repository = t(2);
                rec.commit = t(3);
                rec.tree = t(4);
                let (inputs, scoped_tree, undeclared) = scoped;
                rec.check = CheckRef {
                    name: t(5), argv: argv.clone(), digest: t(6), inputs: inputs.then(|| argv.clone()),
                };
                rec.scoped_tree = scoped_tree.then(|| t(8));
                rec.undeclared_inputs = if undeclared { vec![t(9), t(10)] } else { Vec::new() };
                rec.status = [
                    CheckStatus::Passed,
                    CheckStatus::Failed,
                    CheckStatus::TimedOut,
                    CheckStatus::Error,
                    CheckStatus::NotApplicable,
                ][texts[7].len() % 5];
                rec.exit_code = exit_code;
                rec.signal = signal;
                rec.started_at = t(8);
                rec.finished_at = t(9);
                rec.duration_ms = duration_ms;
                rec.output = OutputRecord { bytes, sha256: t(10), excerpt: t(11), truncated, redactions };
                rec.stopped = Stopped { command: t(0), tabellio: tabellio.then(|| t(1)) };
                rec.tool = t(2);
                rec.reused_from = reused.then(|| t(3));
                let (with_actor, details, initiator) = provenance;
                rec.actor = with_actor.then(|| crate::model::provenance::ActorProvenance {
                    kind: t(5),
                    id: t(6),
                    name: details.then(|| t(7)),
                    model: details.then(|| t(8)),
                    harness_version: details.then(|| t(9)),
                    session_digest: details.then(|| t(10)),
                });
                rec.initiator = initiator.then(|| t(11));
                let (attempt, with_tests, total, failed) = extra;
                rec.attempt = attempt;
                rec.tests = with_tests.then(|| TestReport {
                    format: t(8), total, failed, failing: vec![t(9), t(10)],
                });
                rec.signature = signed.then(|| crate::model::signature::Signature {
                    format: "ssh".into(), principal: t(4), key_fingerprint: t(5), sig: t(6),
                });
                rec.digest = t(7);
                prop_assert_eq!(rec.compute_digest(), digest_by_value(&rec));
            }

            /// An edited line reads the same straight into the record as through a JSON
            /// value: the same record, or both refused.
            #[test]
            fn an_edited_line_reads_as_it_does_through_a_value(
                at in any::<prop::sample::Index>(),
                byte in 0x20u8..0x7f,
                reused in any::<bool>(),
            ) {
                let mut rec = sample();
                if reused {
                    rec.reused_from = Some("d".repeat(64));
                }
                let mut bytes = rec.seal().to_line().into_bytes();
                let i = at.index(bytes.len());
                bytes[i] = byte;
                let edited = String::from_utf8(bytes).expect("ASCII stays UTF-8");
                let direct = EvidenceRecord::from_line(&edited).ok();
                let by_value = EvidenceRecord::from_line_by_value(&edited).ok();
                prop_assert_eq!(direct, by_value, "{}", edited);
            }
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        let line = sample().to_line();
        let repeated = line.replacen("{", "{\"status\":\"failed\",", 1);
        let rec = EvidenceRecord::from_line(&repeated).unwrap();
        assert_eq!(rec, sample());
    }

    #[test]
    fn a_record_written_as_an_array_of_its_fields_is_refused() {
        let value = super::super::to_value(&sample());
        let fields: Vec<serde_json::Value> = [
            "schema",
            "attempt",
            "run_id",
            "repository",
            "commit",
            "tree",
            "check",
            "status",
            "exit_code",
            "signal",
            "started_at",
            "finished_at",
            "duration_ms",
            "output",
            "stopped",
            "tests",
            "tool",
            "reused_from",
            "actor",
            "initiator",
            "scoped_tree",
            "undeclared_inputs",
            "signature",
            "digest",
        ]
        .iter()
        .map(|k| match (*k, value.get(*k)) {
            (_, Some(v)) => v.clone(),
            ("undeclared_inputs", None) => serde_json::json!([]),
            (_, None) => serde_json::Value::Null,
        })
        .collect();
        let line = serde_json::to_string(&fields).unwrap();
        // serde alone would take it.
        assert_eq!(
            serde_json::from_str::<EvidenceRecord>(&line).unwrap(),
            sample()
        );
        assert!(matches!(
            EvidenceRecord::from_line(&line),
            Err(crate::model::SchemaError::Missing { .. })
        ));
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
