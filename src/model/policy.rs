//! `.tabellio/policy.json` (`tabellio.policy/v1`): named checks, required checks, protected refs.
//!
//! Parsing is strict: an unknown field, an unknown schema, an empty argv or a required check that
//! is not defined is an error naming the file and the field. The policy is always read from a
//! commit, never from a worktree, so what gates a commit is what is committed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::canonical;

pub const SCHEMA: &str = "tabellio.policy/v1";
pub const PATH: &str = ".tabellio/policy.json";
pub const DEFAULT_TIMEOUT_S: u64 = 600;
pub const DEFAULT_EXCERPT_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckDef {
    pub argv: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_S
}

impl CheckDef {
    /// SHA-256 of the canonical definition: evidence goes stale when argv or timeout changes.
    pub fn digest(&self) -> String {
        canonical::digest_of(&json!({"argv": self.argv, "timeout_s": self.timeout_s}))
            .expect("a check definition is canonical")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OutputPolicy {
    #[serde(default)]
    pub excerpt_bytes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PlansPolicy {
    #[serde(default)]
    pub require_hygiene: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub schema: String,
    #[serde(default, deserialize_with = "unique_keys")]
    pub checks: BTreeMap<String, CheckDef>,
    #[serde(default)]
    pub required: Vec<String>,
    #[serde(default)]
    pub protect: Vec<String>,
    #[serde(default)]
    pub output: OutputPolicy,
    #[serde(default)]
    pub plans: PlansPolicy,
    /// How `land` puts runs on the target (docs/land.md).
    #[serde(default, skip_serializing_if = "LandPolicy::is_default")]
    pub land: LandPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LandPolicy {
    /// Land every run as one commit, as `land --squash` does.
    #[serde(default)]
    pub squash: bool,
}

impl LandPolicy {
    fn is_default(&self) -> bool {
        self == &LandPolicy::default()
    }
}

/// A map whose keys must be unique (serde_json would keep the last of two).
fn unique_keys<'de, D>(de: D) -> Result<BTreeMap<String, CheckDef>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Unique;
    impl<'de> serde::de::Visitor<'de> for Unique {
        type Value = BTreeMap<String, CheckDef>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of check definitions")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                if out.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "check {name:?} is defined twice"
                    )));
                }
                let def = map.next_value::<CheckDef>()?;
                out.insert(name, def);
            }
            Ok(out)
        }
    }
    de.deserialize_map(Unique)
}

/// A policy file that cannot be used; the message names the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("{PATH}: {0}")]
pub struct PolicyError(pub String);

impl Policy {
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| PolicyError(format!("not valid JSON: {e}")))?;
        match value.get("schema") {
            None => return Err(PolicyError("no \"schema\" field".into())),
            Some(serde_json::Value::String(found)) if found != SCHEMA => {
                return Err(PolicyError(format!(
                    "unsupported schema {found:?} (this tabellio reads {SCHEMA:?}); upgrade git-tabellio"
                )))
            }
            Some(serde_json::Value::String(_)) => {}
            Some(other) => return Err(PolicyError(format!("schema: must be a string, not {other}"))),
        }
        // Parsed from the text, not from the value: a duplicate key (two definitions of one
        // check) must be an error, not "the last one wins". The path names the field at fault.
        let mut de = serde_json::Deserializer::from_str(text);
        let policy: Policy = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            let inner = inner
                .split(" at line ")
                .next()
                .unwrap_or(&inner)
                .to_string();
            if path.is_empty() || path == "." {
                PolicyError(inner)
            } else {
                PolicyError(format!("{path}: {inner}"))
            }
        })?;
        for (i, pattern) in policy.protect.iter().enumerate() {
            if !pattern.starts_with("refs/") {
                return Err(PolicyError(format!(
                    "protect[{i}]: {pattern:?} is not a full ref name and would protect nothing; write \"refs/heads/{pattern}\""
                )));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in &policy.required {
            if !seen.insert(name) {
                return Err(PolicyError(format!("required: {name:?} is listed twice")));
            }
        }
        if policy.output.excerpt_bytes == Some(0) {
            return Err(PolicyError(
                "output.excerpt_bytes: must be at least 1".into(),
            ));
        }
        for (name, def) in &policy.checks {
            if super::ids::check_run_id(name).is_err() {
                return Err(PolicyError(format!(
                    "checks.{name}: a check name may only contain A-Z a-z 0-9 . _ - and must start with a letter or digit"
                )));
            }
            if def.argv.is_empty() || def.argv[0].is_empty() {
                return Err(PolicyError(format!(
                    "checks.{name}.argv: must name a command"
                )));
            }
            if def.timeout_s == 0 {
                return Err(PolicyError(format!(
                    "checks.{name}.timeout_s: must be at least 1"
                )));
            }
        }
        for name in &policy.required {
            if !policy.checks.contains_key(name) {
                return Err(PolicyError(format!(
                    "required: check {name:?} is not defined under \"checks\""
                )));
            }
        }
        Ok(policy)
    }

    pub fn excerpt_bytes(&self) -> usize {
        self.output.excerpt_bytes.unwrap_or(DEFAULT_EXCERPT_BYTES)
    }

    /// Does `refname` match one of the `protect` patterns (`*` within one path component, a
    /// trailing `/*` or `/**` for everything below)?
    pub fn protects(&self, refname: &str) -> bool {
        self.protect.iter().any(|p| ref_pattern_matches(p, refname))
    }
}

/// Match a protect pattern: `*` matches any run of characters except `/`, `**` any run at all.
pub fn ref_pattern_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => (0..=n.len()).any(|i| go(&p[2..], &n[i..])),
            Some(b'*') => {
                let mut i = 0;
                loop {
                    if go(&p[1..], &n[i..]) {
                        return true;
                    }
                    if i == n.len() || n[i] == b'/' {
                        return false;
                    }
                    i += 1;
                }
            }
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_policy() {
        let p = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","checks":{"test":{"argv":["cargo","test"],"timeout_s":60}},
               "required":["test"],"protect":["refs/heads/main","refs/heads/release/*"],
               "output":{"excerpt_bytes":4096},"plans":{"require_hygiene":true}}"#,
        )
        .unwrap();
        assert_eq!(p.excerpt_bytes(), 4096);
        assert!(p.protects("refs/heads/main"));
        assert!(p.protects("refs/heads/release/1.0"));
        assert!(!p.protects("refs/heads/release/1.0/x"));
        assert!(!p.protects("refs/heads/mainline"));
        assert!(p.plans.require_hygiene);
    }

    #[test]
    fn strict_errors_name_the_field() {
        let cases = [
            (r#"{"schema":"tabellio.policy/v2"}"#, "tabellio.policy/v2"),
            (r#"{"schema":"tabellio.policy/v1","extra":1}"#, "extra"),
            (
                r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":[]}}}"#,
                "checks.t.argv",
            ),
            (
                r#"{"schema":"tabellio.policy/v1","required":["nope"]}"#,
                "nope",
            ),
            (
                r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"],"shell":true}}}"#,
                "shell",
            ),
        ];
        for (text, needle) in cases {
            let err = Policy::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(PATH), "{text}: {err}");
        }
    }

    #[test]
    fn check_digest_changes_with_definition() {
        let a = CheckDef {
            argv: vec!["make".into()],
            timeout_s: 60,
        };
        let b = CheckDef {
            argv: vec!["make".into()],
            timeout_s: 61,
        };
        assert_ne!(a.digest(), b.digest());
        assert_eq!(
            a.digest(),
            canonical::sha256_hex(br#"{"argv":["make"],"timeout_s":60}"#)
        );
    }
}
