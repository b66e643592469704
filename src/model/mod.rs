//! The records tabellio stores, exactly as DESIGN.md 2.1 names their fields, with their schema
//! versions and digests.
//!
//! Every record carries `"schema": "tabellio.<kind>/v<N>"`. Reading checks the schema before
//! anything else: an unknown or newer schema is a [`SchemaError`] naming it, never a guess.

pub mod canonical;
pub mod checkpoint;
pub mod evidence;
pub mod ids;
pub mod land;
pub mod loop_state;
pub mod policy;
pub mod run;
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
    serde_json::from_value(value).map_err(|e| SchemaError::Invalid {
        what: what.into(),
        message: e.to_string(),
    })
}

/// Serialize a record to a `serde_json::Value` (records hold no floats or non-string keys).
pub fn to_value<T: serde::Serialize>(record: &T) -> Value {
    serde_json::to_value(record).expect("records serialize to JSON without fail")
}
