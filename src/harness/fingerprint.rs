//! The convergence fingerprint of one iteration: SHA-256 of the canonical JSON of
//! `{schema, tree, decision, failing, signature, missing}` (schema `tabellio.fingerprint/v1`),
//! every array de-duplicated and sorted. Two iterations with the same fingerprint ended in the
//! same place: same files, same verdict, the same checks failing the same way.
//!
//! The failure signature is what makes "the same way" robust against noise: the first error
//! lines of each failing check's excerpt, with temporary paths, hex ids and numbers masked, so
//! timings, addresses, pids and temp dirs do not make two identical failures look different.

use serde_json::json;

use crate::model::canonical;

pub const SCHEMA: &str = "tabellio.fingerprint/v1";

/// Lines of each failing check's excerpt that go into the signature.
const SIGNATURE_LINES: usize = 5;

/// Words that mark a line as an error line.
const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "panic",
    "exception",
    "assert",
    "fatal",
    "traceback",
    "expected",
];

/// Path prefixes of temporary files and directories.
const TEMP_PREFIXES: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/folders/",
    "/private/tmp/",
    "/dev/shm/",
];

/// The inputs of a fingerprint.
#[derive(Debug, Clone)]
pub struct FingerprintInput<'a> {
    pub tree: &'a str,
    /// `passed`, `failed` or `skipped`.
    pub decision: &'a str,
    pub failing: Vec<String>,
    pub signature: Vec<String>,
    pub missing: Vec<String>,
}

fn sorted_unique(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The fingerprint (lower-case hex SHA-256).
pub fn fingerprint(input: &FingerprintInput<'_>) -> String {
    let value = json!({
        "schema": SCHEMA,
        "tree": input.tree,
        "decision": input.decision,
        "failing": sorted_unique(input.failing.clone()),
        "signature": sorted_unique(input.signature.clone()),
        "missing": sorted_unique(input.missing.clone()),
    });
    canonical::digest_of(&value).expect("a fingerprint holds only strings")
}

/// The normalised failure signature of failing checks given as (name, excerpt): for each,
/// its first error lines (or, without any, its last non-empty lines), masked, as
/// `<name>: <line>`; sorted and unique.
pub fn failure_signature<'a>(failing: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, excerpt) in failing {
        let lines: Vec<&str> = excerpt
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let errors: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| is_error_line(l))
            .take(SIGNATURE_LINES)
            .collect();
        let picked: Vec<&str> = if errors.is_empty() {
            let skip = lines.len().saturating_sub(SIGNATURE_LINES);
            lines[skip..].to_vec()
        } else {
            errors
        };
        for l in picked {
            out.push(format!("{name}: {}", mask(l)));
        }
    }
    sorted_unique(out)
}

fn is_error_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// Mask temporary paths (`<tmp>`), hex ids (`<hex>`) and numbers (`<n>`) in one line, and
/// collapse runs of whitespace.
pub fn mask(line: &str) -> String {
    let temp_dir = std::env::temp_dir().display().to_string();
    let mut out = String::with_capacity(line.len());
    for (i, word) in line.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&mask_word(word, &temp_dir));
    }
    out
}

fn mask_word(word: &str, temp_dir: &str) -> String {
    let mut out = String::new();
    let bytes = word.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &word[i..];
        if let Some(len) = temp_path_len(rest, temp_dir) {
            out.push_str("<tmp>");
            i += len;
            continue;
        }
        let c = bytes[i];
        if c.is_ascii_alphanumeric() {
            // A maximal alphanumeric run, judged as a whole.
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
            let run = &rest[..len];
            out.push_str(&mask_run(run));
            i += len;
            continue;
        }
        let ch = rest.chars().next().expect("rest is not empty");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The length of a temporary path at the start of `s`, up to a quote or closing bracket.
fn temp_path_len(s: &str, temp_dir: &str) -> Option<usize> {
    let temp_dir = temp_dir.trim_end_matches('/');
    let starts = TEMP_PREFIXES.iter().any(|p| s.starts_with(p))
        || (temp_dir.len() > 1 && s.starts_with(temp_dir));
    if !starts {
        return None;
    }
    Some(
        s.find(['\'', '"', '`', ')', ']', '}', '>', ',', ';'])
            .unwrap_or(s.len()),
    )
}

/// Mask one alphanumeric run: a hex id becomes `<hex>`, otherwise every digit sequence becomes
/// `<n>`. Hex ids are `0x…` addresses, runs of hex digits mixing digits and the letters a–f
/// (object ids, UUID groups, pointers), and 16+ hex digits of any kind.
fn mask_run(run: &str) -> String {
    let is_hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(rest) = run.strip_prefix("0x").or_else(|| run.strip_prefix("0X")) {
        if is_hex(rest) {
            return "<hex>".into();
        }
    }
    let has_digit = run.bytes().any(|b| b.is_ascii_digit());
    let has_letter = run.bytes().any(|b| b.is_ascii_alphabetic());
    if is_hex(run) && ((has_digit && has_letter) || run.len() >= 16) {
        return "<hex>".into();
    }
    let mut out = String::new();
    let mut in_number = false;
    for ch in run.chars() {
        if ch.is_ascii_digit() {
            if !in_number {
                out.push_str("<n>");
                in_number = true;
            }
        } else {
            in_number = false;
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking() {
        assert_eq!(
            mask("error: test foo failed after 1.25s (pid 4242)"),
            "error: test foo failed after <n>.<n>s (pid <n>)"
        );
        assert_eq!(
            mask("assertion failed at /tmp/.tmpAbC12/src/lib.rs:10:5"),
            "assertion failed at <tmp>"
        );
        assert_eq!(
            mask("object 3f2a9c1de0 not found; see 'deadbeefdeadbeef'"),
            "object <hex> not found; see '<hex>'"
        );
        assert_eq!(mask("  lots   of\tspace "), "lots of space");
        assert_eq!(mask("addr 0x7f3a2b1c0d10 and 0x10"), "addr <hex> and <hex>");
        assert_eq!(
            mask("request 3b1e5c2a-f4b1-4b7c-9d2e-0a1b2c3d4e5f failed"),
            "request <hex>-<hex>-<hex>-<hex>-<hex> failed"
        );
        assert_eq!(mask("decade facade"), "decade facade");
        assert_eq!(mask("x86_64 utf8"), "x<n>_<n> utf<n>");
    }

    #[test]
    fn signature_prefers_error_lines_and_ignores_noise() {
        let a = "running 3 tests\ntest a ... ok\nERROR: b failed in 0.31s\ndone in 812ms\n";
        let b = "running 3 tests\ntest a ... ok\nERROR: b failed in 0.77s\ndone in 95ms\n";
        assert_eq!(
            failure_signature([("test", a)]),
            failure_signature([("test", b)])
        );
        assert_eq!(
            failure_signature([("test", a)]),
            vec!["test: ERROR: b failed in <n>.<n>s".to_string()]
        );
        // Without error words the tail is used.
        assert_eq!(
            failure_signature([("lint", "one\ntwo\n")]),
            vec!["lint: one".to_string(), "lint: two".to_string()]
        );
        assert_ne!(
            failure_signature([("test", "error: x")]),
            failure_signature([("test", "error: y")])
        );
    }

    #[test]
    fn fingerprint_sorts_and_dedups() {
        let a = FingerprintInput {
            tree: "t",
            decision: "failed",
            failing: vec!["b".into(), "a".into(), "a".into()],
            signature: vec!["y".into(), "x".into()],
            missing: vec![],
        };
        let b = FingerprintInput {
            failing: vec!["a".into(), "b".into()],
            signature: vec!["x".into(), "y".into(), "x".into()],
            ..a.clone()
        };
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let c = FingerprintInput {
            tree: "u",
            ..a.clone()
        };
        assert_ne!(fingerprint(&a), fingerprint(&c));
        // Pinned: the canonical form is part of the contract.
        assert_eq!(
            fingerprint(&a),
            canonical::sha256_hex(
                br#"{"decision":"failed","failing":["a","b"],"missing":[],"schema":"tabellio.fingerprint/v1","signature":["x","y"],"tree":"t"}"#
            )
        );
    }
}
