//! Run ids: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, not ending in `.lock` or `.`, no `..`.
//!
//! The id becomes part of ref names (`refs/tabellio/runs/<id>`, `refs/heads/tabellio/<id>`) and
//! of a directory name, so the rules are stricter than git's own ref-name rules.
//!
//! Branch names given by the user (`start --branch`) follow git's own branch-name rules
//! (`git check-ref-format --branch`): the ref-name rules for `refs/heads/<name>`, plus not `HEAD`
//! and not starting with `-`.

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

/// Why git would refuse `name` (the part after `refs/heads/`) as a branch name, in words for a
/// person; what `git check-ref-format --branch` accepts is accepted.
pub fn check_branch_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a branch name cannot be empty".into());
    }
    if name == "HEAD" {
        // `refs/heads/HEAD` makes git warn about an ambiguous `HEAD` on every use of it.
        return Err("a branch cannot be called HEAD".into());
    }
    if name.starts_with('-') {
        // It would be read as an option by every git command that names it.
        return Err("a branch name cannot start with '-'".into());
    }
    if let Some(c) = name.chars().find(|c| {
        c.is_ascii_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\')
    }) {
        return Err(format!(
            "a branch name cannot contain {c:?} (nor spaces, control characters, ~ ^ : ? * [ \\)"
        ));
    }
    if name.contains("..") {
        return Err("a branch name cannot contain '..'".into());
    }
    if name.contains("@{") || name == "@" {
        return Err("a branch name cannot contain '@{' or be '@'".into());
    }
    if name.ends_with('.') {
        return Err("a branch name cannot end in '.'".into());
    }
    for component in name.split('/') {
        if component.is_empty() {
            return Err("a branch name cannot start or end with '/' or contain '//'".into());
        }
        if component.starts_with('.') {
            return Err("no part of a branch name may start with '.'".into());
        }
        if component.ends_with(".lock") {
            return Err("no part of a branch name may end in '.lock'".into());
        }
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

/// An object id shortened for people (12 hex digits), everywhere the tool prints one, except
/// in the pictures of `log`, which shorten as `git log --oneline` does.
pub fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
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
    fn branch_names_follow_gits_branch_rules() {
        for name in [
            "main",
            "feature/x",
            "a-b_c.d",
            "tabellio/r1",
            "x@y",
            "héllo",
            "a.b/c-d",
        ] {
            assert!(check_branch_name(name).is_ok(), "{name}");
        }
        for name in [
            "",
            "HEAD",
            "-x",
            "--force",
            "a..b",
            "a/.b",
            ".a",
            "a.lock",
            "a/b.lock/c",
            "a/",
            "/a",
            "a//b",
            "a.",
            "@",
            "a@{1}",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "a\u{7f}",
            "a\tb",
        ] {
            assert!(
                check_branch_name(name).is_err(),
                "{name:?} should be refused"
            );
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Whether gix, as a ref store, accepts `name` as a full ref name.
        fn gix_accepts(name: &str) -> bool {
            gix::validate::reference::name(name.as_bytes().into()).is_ok()
        }

        /// Names made of the pieces git's rules are about, so that every rule is hit often.
        fn branchish() -> impl Strategy<Value = String> {
            let pieces = vec![
                "a", "b", "a", "b", ".", "..", "/", "-", "@", "@{", "{", "}", "~", "^", ":", "?",
                "*", "[", "\\", " ", "\t", "\u{7f}", "HEAD", ".lock", "é",
            ];
            prop::collection::vec(prop::sample::select(pieces), 0..5).prop_map(|p| p.concat())
        }

        // Cheap and pure: many more cases, so that every rule is hit.
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// An accepted branch name is a ref name gix accepts under `refs/heads/`, never
            /// `HEAD`, never an option.
            #[test]
            fn accepted_branch_names_are_valid_refs(name in branchish()) {
                if check_branch_name(&name).is_ok() {
                    let full = format!("refs/heads/{name}");
                    prop_assert!(gix_accepts(&full), "{:?}", full);
                    prop_assert!(name != "HEAD" && !name.starts_with('-'));
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Whatever string: an accepted run id is a valid ledger ref, run branch and
            /// directory name.
            #[test]
            fn accepted_run_ids_make_valid_refs_and_names(id in "\\PC{0,70}") {
                if check_run_id(&id).is_ok() {
                    prop_assert!(id.len() <= 64 && id.is_ascii());
                    prop_assert!(!id.contains('/') && id != "." && id != "..");
                    let ledger = format!("refs/tabellio/runs/{id}");
                    let branch = format!("tabellio/{id}");
                    prop_assert!(gix_accepts(&ledger), "{:?}", ledger);
                    prop_assert!(check_branch_name(&branch).is_ok(), "{:?}", branch);
                }
            }

            /// Run ids built from the allowed alphabet are accepted unless they hit a named rule.
            #[test]
            fn run_ids_from_the_alphabet(id in "[A-Za-z0-9][A-Za-z0-9._-]{0,63}") {
                let named_rule = id.contains("..") || id.ends_with('.') || id.ends_with(".lock");
                prop_assert_eq!(check_run_id(&id).is_ok(), !named_rule);
            }

            /// Slash-separated plain words are branch names.
            #[test]
            fn plain_words_are_branch_names(parts in prop::collection::vec("[a-z0-9][a-z0-9_-]{0,8}", 1..4)) {
                let name = parts.join("/");
                prop_assert!(check_branch_name(&name).is_ok(), "{:?}", name);
            }
        }
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
