//! Run ids: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, not ending in `.lock` or `.`, no `..`.
//!
//! The id becomes part of ref names (`refs/tabellio/runs/<id>`, `refs/heads/tabellio/<id>`) and
//! of a directory name, so the rules are stricter than git's own ref-name rules.

use std::time::{SystemTime, UNIX_EPOCH};

/// Why a run id was refused, in words for a person.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let bytes = id.as_bytes();
    if bytes.is_empty() {
        return Err("a run id cannot be empty".into());
    }
    if bytes.len() > 64 {
        return Err(format!(
            "a run id has at most 64 characters, this one has {}",
            id.chars().count()
        ));
    }
    if !bytes[0].is_ascii_alphanumeric() {
        return Err("a run id must start with a letter or a digit".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "a run id may only contain A-Z a-z 0-9 . _ -, not {:?}",
            c
        ));
    }
    if id.contains("..") {
        return Err("a run id cannot contain '..'".into());
    }
    if id.ends_with('.') || id.ends_with(".lock") {
        return Err("a run id cannot end in '.' or '.lock'".into());
    }
    Ok(())
}

/// A fresh id: `r-<UTC date>-<time>-<4 hex of the nanoseconds and pid>`, sortable by creation.
pub fn generate_run_id() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let stamp = super::time::rfc3339(SystemTime::now());
    let compact: String = stamp.chars().filter(|c| c.is_ascii_digit()).collect();
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("r{}-{:04x}", &compact[2..], salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_ids() {
        for id in ["r1", "a", "A-b_c.d", "0", &"x".repeat(64), "fix-123.v2"] {
            assert!(check_run_id(id).is_ok(), "{id}");
        }
        assert!(check_run_id(&generate_run_id()).is_ok());
    }

    #[test]
    fn refuses_bad_ids() {
        let long = "y".repeat(65);
        for id in [
            "", "..", "a..b", "a/b", "x.lock", "-rf", ".hidden", "_x", "a.", "a b", "a\nb",
            "a\u{7}", "é", "a:b", "a~1", "a^", "a?", "a*", "a[", "a\\b", "@", "a@{b", &long,
        ] {
            assert!(check_run_id(id).is_err(), "{id:?} should be refused");
        }
    }
}
