//! Canonical JSON (RFC 8785 for our value space) and the SHA-256 digests built on it.
//!
//! Digests are what makes evidence trustworthy: a record's `digest` covers every other field,
//! and a check's digest covers its definition, so both must be byte-for-byte reproducible by
//! anyone. Our records hold only strings, integers, booleans, null, arrays and objects; a float
//! is refused rather than formatted in a way another implementation might not reproduce.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A value that cannot be written canonically.
#[derive(Debug, thiserror::Error)]
#[error("a number that is not an integer cannot be made canonical: {0}")]
pub struct NotCanonical(pub String);

/// Serialize `value` canonically: object keys sorted by UTF-16 code units, no whitespace,
/// integers only, strings escaped as RFC 8785 prescribes.
pub fn to_canonical_string(value: &Value) -> Result<String, NotCanonical> {
    let mut out = String::new();
    write_value(value, &[], &mut out)?;
    Ok(out)
}

/// Write `value` canonically; when it is an object, its top-level keys in `skip` are left out
/// (the self-digesting records leave out their own `digest` and `signature`).
fn write_value(value: &Value, skip: &[&str], out: &mut String) -> Result<(), NotCanonical> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                return Err(NotCanonical(n.to_string()));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, &[], out)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> =
                map.keys().filter(|k| !skip.contains(&k.as_str())).collect();
            keys.sort_by(|a, b| utf16_order(a, b));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value(&map[key], &[], out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// RFC 8785's key order: by UTF-16 code units. For ASCII keys (all of ours) that is the byte
/// order, compared without re-encoding.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    // Copy the runs that need no escape whole; escape the rest. Every escaped character is
    // ASCII, and no byte of a multi-byte UTF-8 character is below 0x80: scanning bytes finds the
    // same characters without decoding the others.
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            b if b < 0x20 => {
                out.push_str(&s[run..i]);
                out.push_str(&format!("\\u{b:04x}"));
                run = i + 1;
                continue;
            }
            _ => continue,
        };
        out.push_str(&s[run..i]);
        out.push_str(escaped);
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// A canonical JSON object written field by field, for a record whose fields are known: the
/// same text [`to_canonical_string`] makes of the record's JSON value, without building the
/// value. The caller gives the fields in canonical key order (checked in debug builds, so every
/// test of a record's digest checks its writer's order too).
pub(crate) struct Fields<'a> {
    out: &'a mut String,
    last: Option<&'static str>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(out: &'a mut String) -> Self {
        out.push('{');
        Fields { out, last: None }
    }

    fn key(&mut self, key: &'static str) -> &mut String {
        if let Some(last) = self.last {
            debug_assert!(
                utf16_order(last, key).is_lt(),
                "canonical key order: {last} before {key}"
            );
            self.out.push(',');
        }
        self.last = Some(key);
        write_string(key, self.out);
        self.out.push(':');
        self.out
    }

    pub(crate) fn str(&mut self, key: &'static str, value: &str) -> &mut Self {
        write_string(value, self.key(key));
        self
    }

    pub(crate) fn opt_str(&mut self, key: &'static str, value: Option<&str>) -> &mut Self {
        match value {
            Some(v) => self.str(key, v),
            None => self.null(key),
        }
    }

    pub(crate) fn int(&mut self, key: &'static str, value: impl Into<i128>) -> &mut Self {
        use std::fmt::Write as _;
        let out = self.key(key);
        let _ = write!(out, "{}", value.into());
        self
    }

    pub(crate) fn opt_int(&mut self, key: &'static str, value: Option<i32>) -> &mut Self {
        match value {
            Some(v) => self.int(key, v),
            None => self.null(key),
        }
    }

    pub(crate) fn bool(&mut self, key: &'static str, value: bool) -> &mut Self {
        self.key(key).push_str(if value { "true" } else { "false" });
        self
    }

    pub(crate) fn null(&mut self, key: &'static str) -> &mut Self {
        self.key(key).push_str("null");
        self
    }

    pub(crate) fn strs(&mut self, key: &'static str, values: &[String]) -> &mut Self {
        let out = self.key(key);
        out.push('[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(v, out);
        }
        out.push(']');
        self
    }

    /// A nested object, written by `fields`.
    pub(crate) fn object(
        &mut self,
        key: &'static str,
        fields: impl FnOnce(&mut Fields),
    ) -> &mut Self {
        let out = self.key(key);
        let mut inner = Fields::new(out);
        fields(&mut inner);
        inner.end();
        self
    }

    pub(crate) fn end(&mut self) {
        self.out.push('}');
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 0xf)] as char);
    }
    s
}

/// SHA-256 of the canonical form of `value`.
pub fn digest_of(value: &Value) -> Result<String, NotCanonical> {
    digest_skipping(value, &[])
}

/// SHA-256 of the canonical form of `value` with its top-level fields named in `skip` left out
/// (nothing is copied to leave them out).
pub fn digest_skipping(value: &Value, skip: &[&str]) -> Result<String, NotCanonical> {
    let mut out = String::new();
    write_value(value, skip, &mut out)?;
    Ok(sha256_hex(out.as_bytes()))
}

/// SHA-256 of the canonical form of `value` with its top-level `digest` field left out:
/// the rule every self-digesting record follows.
pub fn digest_without_field(value: &Value) -> Result<String, NotCanonical> {
    digest_skipping(value, &["digest"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn golden_canonical_forms() {
        let v = json!({"b": [1, "x", null, true], "a": {"z": -3, "é": "\u{1}\n"}, "A": ""});
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            r#"{"A":"","a":{"z":-3,"é":"\u0001\n"},"b":[1,"x",null,true]}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_not_utf8() {
        // U+10000 is D800 DC00 in UTF-16 and sorts before U+FFFF there, but after it in UTF-8.
        let v = json!({"\u{ffff}": 1, "\u{10000}": 2});
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            "{\"\u{10000}\":2,\"\u{ffff}\":1}"
        );
    }

    #[test]
    fn golden_digests() {
        assert_eq!(
            digest_of(&json!({})).unwrap(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            digest_of(&json!({"argv": ["cargo", "test"], "timeout_s": 600})).unwrap(),
            sha256_hex(br#"{"argv":["cargo","test"],"timeout_s":600}"#)
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn digest_field_is_excluded() {
        let with = json!({"a": 1, "digest": "whatever"});
        let without = json!({"a": 1});
        assert_eq!(
            digest_without_field(&with).unwrap(),
            digest_of(&without).unwrap()
        );
    }

    #[test]
    fn floats_are_refused() {
        assert!(to_canonical_string(&json!({"x": 1.5})).is_err());
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::*;

        /// Any value of our value space: no floats, strings of any characters (controls,
        /// quotes, backslashes, astral planes), nested arrays and objects.
        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<String>().prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::vec((any::<String>(), inner), 0..6)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn canonical_text_parses_back_to_the_same_value(v in value()) {
                let text = to_canonical_string(&v).expect("no floats");
                let back: Value = serde_json::from_str(&text).expect("canonical text is JSON");
                prop_assert_eq!(&back, &v);
                // A fixed point: canonicalizing the parsed text changes nothing.
                prop_assert_eq!(to_canonical_string(&back).expect("no floats"), text);
            }

            #[test]
            fn digests_do_not_depend_on_formatting_or_key_order(v in value()) {
                let digest = digest_of(&v).expect("no floats");
                let pretty = serde_json::to_string_pretty(&v).expect("serializable");
                let reparsed: Value = serde_json::from_str(&pretty).expect("JSON");
                prop_assert_eq!(digest_of(&reparsed).expect("no floats"), digest.clone());
                if let Value::Object(map) = &v {
                    let reversed: serde_json::Map<String, Value> =
                        map.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
                    prop_assert_eq!(digest_of(&Value::Object(reversed)).expect("no floats"), digest);
                }
            }

            #[test]
            fn canonical_text_has_no_raw_control_characters(v in value()) {
                let text = to_canonical_string(&v).expect("no floats");
                prop_assert!(!text.chars().any(|c| (c as u32) < 0x20), "{}", text);
            }
        }
    }
}
