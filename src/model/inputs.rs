//! A check's declared inputs: the `inputs` globs of a policy check, matched against paths of a
//! tree the way git matches a pathspec with the `glob` magic (`git ls-files ':(glob)a/**'`).
//!
//! Syntax: `*` and `?` do not match `/`; `**/` matches any number of directories, `/**` at the
//! end everything below; `[a-z]` is a class; `\` escapes. A pattern is anchored at the
//! repository root (no leading `/`). A pattern without wildcards names a file or a whole
//! directory (`Cargo.lock`, `vendor`), as a pathspec does. A leading `!` (or `:!`,
//! `:(exclude)`) excludes what the other patterns include. Matching is case-sensitive.

use gix::bstr::{BStr, ByteSlice};
use gix::glob::wildmatch;

/// One compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    glob: String,
    exclude: bool,
    /// The part before the first wildcard: a directory outside it holds no match.
    literal: String,
    /// No wildcard at all: a file, or a directory and everything below it.
    plain: bool,
}

/// A check's compiled `inputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    patterns: Vec<Pattern>,
}

const WILDCARDS: &[char] = &['*', '?', '[', '\\'];

impl Inputs {
    /// Compile `patterns`; the error says which one and why.
    pub fn new(patterns: &[String]) -> Result<Inputs, String> {
        if patterns.is_empty() {
            return Err(": is empty; list at least one glob, e.g. [\"src/**\", \"Cargo.lock\"], or leave the field out".into());
        }
        let mut out = Vec::with_capacity(patterns.len());
        for (i, raw) in patterns.iter().enumerate() {
            let (exclude, body) = if let Some(rest) = raw.strip_prefix(":(exclude)") {
                (true, rest)
            } else if let Some(rest) = raw.strip_prefix(":!") {
                (true, rest)
            } else if let Some(rest) = raw.strip_prefix('!') {
                (true, rest)
            } else {
                (false, raw.as_str())
            };
            let body = body.strip_prefix("./").unwrap_or(body);
            let why = if body.is_empty() || body.trim() != body {
                Some("is empty or has surrounding spaces")
            } else if body.starts_with('/') || body.starts_with(':') {
                Some("is not a path relative to the repository root (no leading '/', no other pathspec magic)")
            } else if body.split('/').any(|c| c == ".." || c == ".") {
                Some("has a '.' or '..' component")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(format!(
                    "[{i}]: {raw:?} {why}; write a glob such as \"src/**\" or a path such as \"Cargo.lock\""
                ));
            }
            let body = body.trim_end_matches('/');
            let literal_end = body.find(WILDCARDS).unwrap_or(body.len());
            out.push(Pattern {
                glob: body.to_string(),
                exclude,
                literal: body[..literal_end].to_string(),
                plain: literal_end == body.len(),
            });
        }
        if out.iter().all(|p| p.exclude) {
            return Err(": has only exclusions; name what the check reads first".into());
        }
        Ok(Inputs { patterns: out })
    }

    /// Is the file at `path` (repository-relative, `/`-separated) an input?
    pub fn matches(&self, path: &BStr) -> bool {
        let hit = |p: &Pattern| -> bool {
            if p.plain {
                let g = p.glob.as_bytes();
                return path == g || (path.starts_with(g) && path.get(g.len()) == Some(&b'/'));
            }
            wildmatch(
                p.glob.as_bytes().as_bstr(),
                path,
                wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
            )
        };
        let included = self.patterns.iter().any(|p| !p.exclude && hit(p));
        included && !self.patterns.iter().any(|p| p.exclude && hit(p))
    }

    /// May the directory `dir` (no trailing `/`) hold an input? A cheap, conservative test
    /// that lets a scoped tree skip whole directories: every path a pattern matches starts
    /// with the pattern's part before its first wildcard.
    pub fn may_contain(&self, dir: &BStr) -> bool {
        let mut below = dir.as_bytes().to_vec();
        below.push(b'/');
        self.patterns.iter().any(|p| {
            let lit = p.literal.as_bytes();
            !p.exclude && (below.starts_with(lit) || lit.starts_with(&below))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(p: &[&str]) -> Inputs {
        Inputs::new(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("valid")
    }

    #[test]
    fn pathspec_glob_rules() {
        let i = inputs(&["a/**", "Cargo.lock", "vendor", "src/*.rs", "!a/skip/**"]);
        for yes in ["a/x", "a/b/c", "Cargo.lock", "vendor/x/y", "src/lib.rs"] {
            assert!(i.matches(yes.into()), "{yes}");
        }
        for no in [
            "b/x",
            "ab/x",
            "Cargo.lockx",
            "src/x/lib.rs",
            "a/skip/x",
            "x/Cargo.lock",
        ] {
            assert!(!i.matches(no.into()), "{no}");
        }
        assert!(i.may_contain("a".into()));
        assert!(i.may_contain("a/b".into()));
        assert!(i.may_contain("src".into()));
        assert!(!i.may_contain("b".into()));
        assert!(!i.may_contain("docs".into()));
        let anywhere = inputs(&["**/*.toml"]);
        assert!(anywhere.matches("x/y/Cargo.toml".into()));
        assert!(anywhere.matches("Cargo.toml".into()));
        assert!(anywhere.may_contain("x/y".into()));
    }

    #[test]
    fn bad_patterns_are_named() {
        for bad in [&[][..], &["/abs"], &["a/../b"], &[" a"], &["!a/**"], &[""]] {
            let v: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(Inputs::new(&v).is_err(), "{bad:?}");
        }
    }
}
