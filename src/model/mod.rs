//! The records tabellio stores, exactly as docs/storage.md names their fields, with their schema
//! versions and digests.
//!
//! Every record carries `"schema": "tabellio.<kind>/v<N>"`. Reading checks the schema before
//! anything else: an unknown or newer schema is a [`SchemaError`] naming it, never a guess.

pub mod allowed_signers;
pub mod archive;
pub mod candidate;
pub mod canonical;
pub mod checkpoint;
pub mod completion;
pub mod evidence;
pub mod ids;
pub mod inputs;
pub mod land;
pub mod loop_state;
pub mod policy;
#[cfg(test)]
mod properties;
pub mod provenance;
pub mod queue;
pub mod run;
pub mod run_file;
pub mod signature;
pub mod time;

pub use checkpoint::CheckpointRecord;
pub use evidence::{CheckRef, EvidenceRecord, OutputRecord, Stopped};
pub use policy::{CheckDef, Policy};
pub use run::{RunRecord, RunState};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A record that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("{what}: unsupported schema {found:?} (this tabellio reads {expected:?}); upgrade git-tabellio")]
    Unsupported {
        what: String,
        found: String,
        expected: &'static str,
    },
    #[error("{what}: no \"schema\" field")]
    Missing { what: String },
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

/// Parse `text` as a record of `expected` schema; `what` names the source in errors.
pub fn parse_record<T: DeserializeOwned>(
    text: &str,
    expected: &'static str,
    what: &str,
) -> Result<T, SchemaError> {
    let value: Value = serde_json::from_str(text).map_err(|e| SchemaError::Invalid {
        what: what.into(),
        message: format!("not valid JSON: {e}"),
    })?;
    parse_value(value, expected, what)
}

/// Like [`parse_record`] for an already parsed value.
pub fn parse_value<T: DeserializeOwned>(
    value: Value,
    expected: &'static str,
    what: &str,
) -> Result<T, SchemaError> {
    parse_value_stored_as(value, expected, expected, what)
}

/// Like [`parse_value`] for a value converted from the record stored as `stored` (a layout of
/// `expected` on disk, such as `tabellio.run/v2` for the run record): an unknown field is
/// reported against the schema the stored record names.
pub fn parse_value_stored_as<T: DeserializeOwned>(
    value: Value,
    expected: &'static str,
    stored: &str,
    what: &str,
) -> Result<T, SchemaError> {
    match value.get("schema").and_then(Value::as_str) {
        None => {
            return Err(SchemaError::Missing { what: what.into() });
        }
        Some(found) if found != expected => {
            return Err(SchemaError::Unsupported {
                what: what.into(),
                found: found.into(),
                expected,
            })
        }
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(|e| {
        let message = e.to_string();
        let message = match unknown_field(&message) {
            Some(field) => newer_field(stored, field),
            None => message,
        };
        SchemaError::Invalid {
            what: what.into(),
            message,
        }
    })
}

/// The field serde's `deny_unknown_fields` names in `message`, if that is the error.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// What a field this version does not define means: the record was written by a newer
/// version (a writer adds fields to a schema only as optional additions, which older readers
/// refuse; docs/storage.md, "Compatibility").
pub fn newer_field(schema: &str, field: &str) -> String {
    format!(
        "unknown field `{field}` in a {schema} record: git-tabellio {} does not know it, so the record was written by a newer version",
        env!("CARGO_PKG_VERSION")
    )
}

/// Serialize a record to a `serde_json::Value` (records hold no floats or non-string keys).
pub fn to_value<T: serde::Serialize>(record: &T) -> Value {
    serde_json::to_value(record).expect("records serialize to JSON without fail")
}

#[cfg(test)]
mod tests {
    mod properties {
        use proptest::prelude::*;

        use super::super::evidence::SCHEMA;
        use super::super::{EvidenceRecord, SchemaError};

        /// A passing record as `validate` writes it, before sealing.
        const RECORD: &str = r#"{"check":{"argv":["true"],"digest":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","name":"test"},"commit":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","digest":"","duration_ms":1000,"exit_code":0,"finished_at":"2026-01-01T00:00:01Z","output":{"bytes":0,"excerpt":"","redactions":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","truncated":false},"repository":"local/demo","run_id":"r1","schema":"tabellio.evidence/v1","signal":null,"started_at":"2026-01-01T00:00:00Z","status":"passed","stopped":{"command":"exited","tabellio":null},"tool":"git-tabellio/0.1.0","tree":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}"#;

        /// [`RECORD`] with the given output, argv and exit code, sealed.
        fn record(
            excerpt: String,
            argv: Vec<String>,
            exit_code: Option<i32>,
            bytes: u64,
        ) -> EvidenceRecord {
            let mut rec = EvidenceRecord::from_line(RECORD).expect("the sample parses");
            rec.output.excerpt = excerpt;
            rec.output.bytes = bytes;
            rec.check.argv = argv;
            rec.exit_code = exit_code;
            rec.seal()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// A notes line is one line whatever the record holds (newlines in the output are
            /// escaped), and it reads back as the same, intact record.
            #[test]
            fn evidence_lines_round_trip(
                excerpt in any::<String>(),
                argv in prop::collection::vec(any::<String>(), 1..4),
                exit_code in any::<Option<i32>>(),
                bytes in any::<u64>(),
            ) {
                let rec = record(excerpt, argv, exit_code, bytes);
                let line = rec.to_line();
                prop_assert!(!line.contains('\n') && !line.contains('\r'));
                let back = EvidenceRecord::from_line(&line).expect("our own line parses");
                prop_assert!(back.digest_is_valid());
                prop_assert_eq!(back.to_line(), line);
            }

            /// Any text is either a record or an error naming what is wrong; never a panic, and
            /// never a record with a schema other than the one asked for.
            #[test]
            fn any_line_parses_or_is_refused(line in "\\PC{0,80}") {
                match EvidenceRecord::from_line(&line) {
                    Ok(rec) => prop_assert_eq!(rec.schema, SCHEMA),
                    Err(SchemaError::Invalid { .. } | SchemaError::Missing { .. }) => {}
                    Err(SchemaError::Unsupported { found, .. }) => prop_assert_ne!(found, SCHEMA),
                }
            }

            /// Changing any one byte of a line's JSON text never yields an intact record with
            /// other content: it fails to parse, or its digest no longer matches, or (a change
            /// outside every value, such as whitespace) it reads as the same record.
            #[test]
            fn an_edited_line_is_never_an_intact_different_record(
                excerpt in "[ -~]{0,20}",
                at in any::<prop::sample::Index>(),
                byte in 0x20u8..0x7f,
            ) {
                let rec = record(excerpt, vec!["true".into()], Some(0), 3);
                let line = rec.to_line();
                let mut bytes = line.clone().into_bytes();
                let i = at.index(bytes.len());
                bytes[i] = byte;
                let edited = String::from_utf8(bytes).expect("ASCII stays UTF-8");
                if let Ok(back) = EvidenceRecord::from_line(&edited) {
                    prop_assert!(!back.digest_is_valid() || back.to_line() == line, "{}", edited);
                }
            }
        }
    }
}
