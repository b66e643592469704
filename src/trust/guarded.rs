//! Guarded paths: the policy's `guarded` globs, matched the way `.gitignore` lines are.
//!
//! Syntax (gitignore(5), through gix's own glob engine): `*` and `?` do not match `/`, `**`
//! matches across directories (`tests/**`, `**/snapshots`), `[a-z]` is a class, a leading `/`
//! anchors at the repository root, a pattern without a `/` matches a name at any depth, a
//! trailing `/` matches a directory and so everything under it, `!` re-includes what an earlier
//! pattern guarded (the last matching pattern wins), `\` escapes. As in git, a file under a
//! guarded directory cannot be re-included. Matching is case-sensitive.
//!
//! When a policy has `guarded` at all, the policy file itself and the allowed-signers file are
//! always guarded, whatever the patterns say: a run must not be able to loosen its own gate or
//! add its own key without a person's approval.

use gix::bstr::{BStr, ByteSlice};
use gix::glob::{pattern::Case, wildmatch, Pattern};

use crate::model::policy::{self, Policy, PolicyError};

/// A compiled `guarded` list.
#[derive(Debug, Clone)]
pub struct GuardedPaths {
    patterns: Vec<Pattern>,
    /// Paths guarded whatever the patterns say.
    always: Vec<String>,
}

impl GuardedPaths {
    /// Compile `patterns` (as validated by [`Policy::parse`]).
    pub fn new(patterns: &[String]) -> Result<Self, PolicyError> {
        let patterns = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                gix::glob::parse(p.as_bytes())
                    .ok_or_else(|| PolicyError(format!("guarded[{i}]: {p:?} is not a pattern")))
            })
            .collect::<Result<_, _>>()?;
        Ok(GuardedPaths {
            patterns,
            always: Vec::new(),
        })
    }

    /// The guarded paths of `policy`, `None` when it has no `guarded` list (nothing is guarded).
    pub fn from_policy(policy: &Policy) -> Result<Option<Self>, PolicyError> {
        if !policy.guards_paths() {
            return Ok(None);
        }
        let mut guarded = Self::new(policy.guarded.as_deref().unwrap_or_default())?;
        guarded.always.push(policy::PATH.to_string());
        if let Some(trust) = &policy.trust {
            guarded.always.push(trust.allowed_signers.clone());
        }
        Ok(Some(guarded))
    }

    /// The `guarded_paths` of `policy`, each glob compiled alone with its rule.
    pub fn rules(policy: &Policy) -> Result<Vec<(Self, policy::GuardRule)>, PolicyError> {
        policy
            .guarded_paths
            .iter()
            .map(|(glob, rule)| Ok((Self::new(std::slice::from_ref(glob))?, rule.clone())))
            .collect()
    }

    /// Is the file at `path` (repository-relative, `/`-separated) guarded?
    pub fn is_guarded(&self, path: impl AsRef<[u8]>) -> bool {
        let path = path.as_ref().as_bstr();
        if self.always.iter().any(|p| p.as_bytes() == path.as_bytes()) {
            return true;
        }
        // A guarded directory guards everything below it, and nothing below can be
        // re-included (gitignore's rule), so the ancestors are judged first.
        for i in path.find_iter("/") {
            if self.last_match(path[..i].as_bstr(), true) == Some(true) {
                return true;
            }
        }
        self.last_match(path, false) == Some(true)
    }

    /// The guarded ones among `paths`, in their order.
    pub fn filter<'a, P: AsRef<[u8]> + ?Sized>(
        &self,
        paths: impl IntoIterator<Item = &'a P>,
    ) -> Vec<&'a P> {
        paths.into_iter().filter(|p| self.is_guarded(p)).collect()
    }

    /// `Some(true)` when the last matching pattern guards, `Some(false)` when it re-includes.
    fn last_match(&self, path: &BStr, is_dir: bool) -> Option<bool> {
        let basename = path.rfind_byte(b'/').map(|i| i + 1);
        self.patterns.iter().rev().find_map(|p| {
            p.matches_repo_relative_path(
                path,
                basename,
                Some(is_dir),
                Case::Sensitive,
                wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
            )
            .then(|| !p.is_negative())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded(patterns: &[&str]) -> GuardedPaths {
        GuardedPaths::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn gitignore_semantics() {
        let g = guarded(&[
            ".tabellio/**",
            "tests/",
            "/Cargo.lock",
            "*.snap",
            "ci/*.yml",
            "!ci/local.yml",
        ]);
        for yes in [
            ".tabellio/policy.json",
            ".tabellio/a/b",
            "tests/it/main.rs",
            "crate/tests/x.rs",
            "Cargo.lock",
            "src/x.snap",
            "ci/build.yml",
        ] {
            assert!(g.is_guarded(yes), "{yes} should be guarded");
        }
        for no in [
            "src/lib.rs",
            "crate/Cargo.lock",
            "testsuite.rs",
            "ci/local.yml",
            "ci/sub/build.yml",
            ".tabellio",
        ] {
            assert!(!g.is_guarded(no), "{no} should not be guarded");
        }
        assert_eq!(
            g.filter(["src/a.rs", "tests/a.rs", "Cargo.lock"]),
            vec!["tests/a.rs", "Cargo.lock"]
        );
    }

    #[test]
    fn nothing_under_a_guarded_directory_is_re_included() {
        let g = guarded(&["docs/", "!docs/free.md"]);
        assert!(g.is_guarded("docs/free.md"));
        let g = guarded(&["docs/*", "!docs/free.md"]);
        assert!(!g.is_guarded("docs/free.md"));
        assert!(g.is_guarded("docs/other.md"));
    }

    #[test]
    fn the_policy_and_signers_files_are_always_guarded() {
        let policy = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","guarded":["src/**","!.tabellio/policy.json"],
                "trust":{"allowed_signers":"ops/allowed_signers","require_signed":"*"}}"#,
        )
        .unwrap();
        let g = GuardedPaths::from_policy(&policy).unwrap().unwrap();
        assert!(g.is_guarded(".tabellio/policy.json"));
        assert!(g.is_guarded("ops/allowed_signers"));
        assert!(!g.is_guarded("README.md"));
        let plain = Policy::parse(r#"{"schema":"tabellio.policy/v1"}"#).unwrap();
        assert!(GuardedPaths::from_policy(&plain).unwrap().is_none());
    }
}
