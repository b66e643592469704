//! Local paths out of what travels: records are pushed (`sync`) and exported, and a compiler
//! error naming `/home/ada/src/…` would carry a machine's layout with it. The directories this
//! repository knows about are replaced by labels: the run worktree by `<worktree>`, the main
//! worktree by `<repository>`, the git directory (the common one: a linked worktree's own git
//! dir reads `<git-dir>/worktrees/<id>`) by `<git-dir>`, the worktree root by `<worktrees>`, the
//! home directory by `~`. Each is known as given, canonicalized, and as spelled through the
//! symlinks of the logical `$PWD` the command was started from. A directory is only replaced
//! where a path component ends (`/home/u` is not a prefix of `/home/user2`). Paths elsewhere (a
//! script in `/opt`) are the user's own command line and stay.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Store;

/// The local directories to replace, longest first so the most specific label wins.
pub struct LocalPaths {
    pairs: Vec<(String, &'static str)>,
}

impl LocalPaths {
    pub fn new(store: &Store, workspace: Option<&Path>) -> Self {
        let mut known: Vec<(PathBuf, &'static str)> = Vec::new();
        if let Some(w) = workspace {
            known.push((w.to_path_buf(), "<worktree>"));
        }
        if let Ok(Some(main)) = store.main_workdir() {
            known.push((main, "<repository>"));
        }
        // Only the common dir: a linked worktree's own git dir lies below it and so reads
        // `<git-dir>/worktrees/<id>`, which says more than a bare `<git-dir>`.
        known.push((store.repo.common_dir().to_path_buf(), "<git-dir>"));
        if let Ok(root) = store.worktree_root() {
            known.push((root, "<worktrees>"));
        }
        if let Some(home) = std::env::var_os("HOME") {
            known.push((PathBuf::from(home), "~"));
        }

        let mut spellings: Vec<(PathBuf, &'static str)> = Vec::new();
        for (path, label) in &known {
            spellings.push((path.clone(), label));
            if let Ok(canonical) = std::fs::canonicalize(path) {
                spellings.push((canonical, label));
            }
        }
        if let Some((physical, logical)) = logical_cwd() {
            let extra = logical_spellings(&spellings, &physical, &logical);
            spellings.extend(extra);
        }
        Self::from_pairs(
            spellings
                .into_iter()
                .map(|(p, label)| (p.display().to_string(), label))
                .collect(),
        )
    }

    /// The replacements `(directory, label)`; a trailing `/` is ignored, `/` itself is never
    /// replaced.
    fn from_pairs(pairs: Vec<(String, &'static str)>) -> Self {
        let mut pairs: Vec<(String, &'static str)> = pairs
            .into_iter()
            .map(|(p, label)| (p.trim_end_matches('/').to_string(), label))
            .filter(|(p, _)| p.len() > 1)
            .collect();
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        pairs.dedup_by(|a, b| a.0 == b.0);
        LocalPaths { pairs }
    }

    /// `text` with every known local directory replaced by its label, where the directory ends
    /// a path component. One left-to-right scan: at each place the longest directory wins, and
    /// a label is never scanned again.
    pub fn apply(&self, text: &str) -> String {
        let firsts: Vec<u8> = self.pairs.iter().map(|(p, _)| p.as_bytes()[0]).collect();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut i = 0;
        let bytes = text.as_bytes();
        while i < bytes.len() {
            // Every directory starts with an ASCII byte here or with the lead byte of a UTF-8
            // sequence, so a match can only begin on a char boundary.
            if firsts.contains(&bytes[i]) {
                let rest = &text[i..];
                let hit = self.pairs.iter().find(|(path, _)| {
                    rest.starts_with(path.as_str()) && ends_component(&rest[path.len()..])
                });
                if let Some((path, label)) = hit {
                    out.push_str(&text[copied..i]);
                    out.push_str(label);
                    i += path.len();
                    copied = i;
                    continue;
                }
            }
            i += 1;
            while i < bytes.len() && !text.is_char_boundary(i) {
                i += 1;
            }
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Apply to every string in `value`, except below a top-level or nested key named `keep`
    /// (the verbatim task is kept exactly as given).
    pub fn apply_json(&self, value: &mut Value, keep: &str) {
        match value {
            Value::String(s) => *s = self.apply(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.apply_json(i, keep)),
            Value::Object(m) => {
                for (k, item) in m.iter_mut() {
                    if k != keep {
                        self.apply_json(item, keep);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Does a directory that matched just before `rest` end a path component there? Only when what
/// follows cannot continue the component: the end, `/`, whitespace, a quote, a bracket or
/// punctuation that separates words. A `.` ends it only before the end or whitespace (the full
/// stop after a path in a sentence); otherwise it continues a name (`repo.bak`).
fn ends_component(rest: &str) -> bool {
    let mut chars = rest.chars();
    match chars.next() {
        None => true,
        Some(c) if c.is_whitespace() => true,
        Some('/' | '"' | '\'' | '`' | ':' | ',' | ';' | ')' | ']' | '}' | '>') => true,
        Some('.') => chars.next().is_none_or(char::is_whitespace),
        Some(_) => false,
    }
}

/// The process's current directory (physical) and `$PWD` when `$PWD` is another spelling of it
/// through symlinks, as a shell keeps it. `None` when `$PWD` is absent, stale or the same.
fn logical_cwd() -> Option<(PathBuf, PathBuf)> {
    let logical = PathBuf::from(std::env::var_os("PWD")?);
    if !logical.is_absolute() {
        return None;
    }
    let physical = std::fs::canonicalize(std::env::current_dir().ok()?).ok()?;
    (logical != physical && std::fs::canonicalize(&logical).ok()? == physical)
        .then_some((physical, logical))
}

/// For each known directory related to the physical current directory (below or above it), its
/// spelling through the logical one: with `$PWD=/tmp/link/repo/sub` for `/srv/repo/sub`, the
/// repository `/srv/repo` is also `/tmp/link/repo`. A spelling is only kept when it resolves to
/// the same directory.
fn logical_spellings(
    known: &[(PathBuf, &'static str)],
    physical: &Path,
    logical: &Path,
) -> Vec<(PathBuf, &'static str)> {
    let mut out = Vec::new();
    for (path, label) in known {
        let candidate = if let Ok(below) = path.strip_prefix(physical) {
            Some(logical.join(below))
        } else if let Ok(above) = physical.strip_prefix(path) {
            logical
                .ends_with(above)
                .then(|| logical.ancestors().nth(above.components().count()))
                .flatten()
                .map(Path::to_path_buf)
        } else {
            None
        };
        let Some(candidate) = candidate else {
            continue;
        };
        if candidate != *path
            && std::fs::canonicalize(&candidate).ok() == std::fs::canonicalize(path).ok()
        {
            out.push((candidate, *label));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(pairs: &[(&str, &'static str)]) -> LocalPaths {
        LocalPaths::from_pairs(pairs.iter().map(|(p, l)| (p.to_string(), *l)).collect())
    }

    #[test]
    fn replaces_only_whole_components() {
        let p = paths(&[("/tmp/x/pq", "<repository>"), ("/home/u", "~")]);
        assert_eq!(p.apply("/tmp/x/pq2 /home/user2"), "/tmp/x/pq2 /home/user2");
        assert_eq!(p.apply("/tmp/x/pq.bak"), "/tmp/x/pq.bak");
        assert_eq!(p.apply("/tmp/x/pq"), "<repository>");
        assert_eq!(
            p.apply("/tmp/x/pq/src/a.rs:3:1"),
            "<repository>/src/a.rs:3:1"
        );
        for (sep, rest) in [
            (" ", "x"),
            ("\n", "x"),
            ("\t", ""),
            ("'", ""),
            ("\"", ""),
            ("`", ""),
            (":", "12"),
            (",", " y"),
            (";", ""),
            (")", ""),
            ("]", ""),
            ("}", ""),
            (">", ""),
            (".", ""),
            (". ", "Next"),
        ] {
            assert_eq!(
                p.apply(&format!("at /home/u{sep}{rest}")),
                format!("at ~{sep}{rest}"),
                "{sep:?}"
            );
        }
        assert_eq!(
            p.apply("('/tmp/x/pq', \"/home/u\") [/home/u/.cargo]"),
            "('<repository>', \"~\") [~/.cargo]"
        );
        assert_eq!(p.apply("/home/u/a /home/ux /home/u"), "~/a /home/ux ~");
        assert_eq!(p.apply("ünïcode /home/u ✓"), "ünïcode ~ ✓");
    }

    #[test]
    fn the_most_specific_label_wins() {
        let p = paths(&[
            ("/r", "<repository>"),
            ("/r/.tabellio/worktrees/", "<worktrees>"),
            ("/r/.tabellio/worktrees/x", "<worktree>"),
            ("/r/.git", "<git-dir>"),
        ]);
        assert_eq!(p.apply("/r/.tabellio/worktrees/x/a.rs"), "<worktree>/a.rs");
        assert_eq!(
            p.apply("/r/.tabellio/worktrees/x2/a.rs"),
            "<worktrees>/x2/a.rs"
        );
        assert_eq!(p.apply("/r/.git/worktrees/x"), "<git-dir>/worktrees/x");
        assert_eq!(
            p.apply("/r/.gitignore /r/src"),
            "<repository>/.gitignore <repository>/src"
        );
        assert_eq!(p.apply("/r2/src"), "/r2/src");
    }

    #[test]
    fn the_root_and_empty_paths_are_never_replaced() {
        let p = paths(&[("/", "~"), ("", "<worktree>")]);
        assert_eq!(p.apply("/usr/bin /"), "/usr/bin /");
    }

    #[test]
    fn logical_spellings_follow_the_symlinked_cwd() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        let repo = real.join("repo");
        let sub = repo.join("sub");
        let wt = sub.join("wt");
        std::fs::create_dir_all(&wt).expect("dirs");
        std::fs::create_dir_all(real.join("elsewhere")).expect("dirs");
        let link = real.join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let known = vec![
            (repo.clone(), "<repository>"),
            (wt.clone(), "<worktree>"),
            (real.join("elsewhere"), "~"),
        ];
        let logical = link.join("repo").join("sub");
        let found = logical_spellings(&known, &sub, &logical);
        assert_eq!(
            found,
            vec![
                (link.join("repo"), "<repository>"),
                (link.join("repo").join("sub").join("wt"), "<worktree>"),
            ]
        );
        // A `$PWD` that does not end like the physical directory gives no spelling above it.
        let odd = logical_spellings(&known[..1], &sub, &link.join("repo").join("other"));
        assert!(odd.is_empty(), "{odd:?}");
    }
}
