//! Local paths out of what travels: records are pushed (`sync`) and exported, and a compiler
//! error naming `/home/ada/src/…` would carry a machine's layout with it. The directories this
//! repository knows about are replaced by labels: the run worktree by `<worktree>`, the main
//! worktree by `<repository>`, the git directory (the common one: a linked worktree's own git
//! dir reads `<git-dir>/worktrees/<id>`) by `<git-dir>`, the worktree root by `<worktrees>`, the
//! home directory by `~`. Beyond the repository's own, [`LocalPaths::new`] also replaces the
//! temporary directories (`$TMPDIR`, `/tmp`, `/var/tmp`) by `<tmp>` and every absolute path
//! that is the value of an environment variable (`CARGO_TARGET_DIR=/srv/t` → `<env:CARGO_TARGET_DIR>`),
//! but for the system's own directories (`/usr`, `/bin`, `/etc`, …), which say nothing about a
//! machine, and the shell's `PWD`, `OLDPWD` and `_`, which only say where a command was typed.
//! Each is known as given, canonicalized, and as spelled through the symlinks of the logical
//! `$PWD` the command was started from. A directory is only replaced where a path component
//! ends (`/home/u` is not a prefix of `/home/user2`); where two labels name the same directory,
//! the repository's own label wins over `<tmp>`, and `<tmp>` over an environment variable's.
//! Paths elsewhere (a script in `/opt`) are the user's own command line and stay.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Store;

/// The temporary directories every machine has, beside `$TMPDIR`.
const TEMP_ROOTS: [&str; 2] = ["/tmp", "/var/tmp"];

/// Top-level directories of the system itself: a path below them names the same thing on
/// every machine, so an environment variable pointing there is not replaced.
const SYSTEM_ROOTS: [&str; 11] = [
    "bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "usr",
];

/// Environment variables whose paths say where a command was typed, not how a machine is laid
/// out; the directories they name are labelled by what they are (`<worktree>`, …) instead.
const ENV_NOT_REPLACED: [&str; 3] = ["PWD", "OLDPWD", "_"];

/// The local directories to replace, longest first so the most specific label wins.
pub struct LocalPaths {
    pairs: Vec<(String, String)>,
}

impl LocalPaths {
    /// Every local directory: the repository's own, home, the temporary directories and the
    /// environment's paths. For everything that is stored, exported or handed to an agent.
    pub fn new(store: &Store, workspace: Option<&Path>) -> Self {
        let mut known = Self::repository_dirs(store, workspace);
        for tmp in temp_roots() {
            known.push((tmp, "<tmp>".to_string()));
        }
        known.extend(env_paths(std::env::vars_os()));
        Self::from_known(known)
    }

    /// Only the repository's own directories and home: for the agent command a loop stores to
    /// run again on `--resume`, which must stay runnable as given unless it names the
    /// repository (a script in `/tmp` is the user's own command line; it is still scrubbed
    /// wherever the record is exported or handed on).
    pub fn repository_only(store: &Store, workspace: Option<&Path>) -> Self {
        Self::from_known(Self::repository_dirs(store, workspace))
    }

    fn repository_dirs(store: &Store, workspace: Option<&Path>) -> Vec<(PathBuf, String)> {
        let mut known: Vec<(PathBuf, String)> = Vec::new();
        if let Some(w) = workspace {
            known.push((w.to_path_buf(), "<worktree>".into()));
        }
        if let Ok(Some(main)) = store.main_workdir() {
            known.push((main, "<repository>".into()));
        }
        // Only the common dir: a linked worktree's own git dir lies below it and so reads
        // `<git-dir>/worktrees/<id>`, which says more than a bare `<git-dir>`.
        known.push((store.repo.common_dir().to_path_buf(), "<git-dir>".into()));
        if let Ok(root) = store.worktree_root() {
            known.push((root, "<worktrees>".into()));
        }
        if let Some(home) = std::env::var_os("HOME") {
            known.push((PathBuf::from(home), "~".into()));
        }
        known
    }

    /// Each directory as given, canonicalized and through the logical `$PWD`.
    fn from_known(known: Vec<(PathBuf, String)>) -> Self {
        let mut spellings: Vec<(PathBuf, String)> = Vec::new();
        for (path, label) in &known {
            spellings.push((path.clone(), label.clone()));
            if let Ok(canonical) = std::fs::canonicalize(path) {
                spellings.push((canonical, label.clone()));
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
    /// replaced, nor a relative spelling (it says nothing about a machine, and the directory
    /// is known absolute too, canonicalized). Of two labels for one directory the earlier in
    /// `pairs` wins.
    fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(p, label)| (p.trim_end_matches('/').to_string(), label))
            .filter(|(p, _)| p.len() > 1 && Path::new(p).is_absolute())
            .collect();
        // Stable: equal directories keep their order, so the dedup keeps the first label.
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        pairs.dedup_by(|a, b| a.0 == b.0);
        LocalPaths { pairs }
    }

    /// `text` scrubbed as [`LocalPaths::new`] for the worktree `workspace` gives scrubs it. The
    /// directories are looked for only when `text` can name one ([`LocalPaths::may_name_one`]):
    /// a short text such as a commit subject mostly cannot, and looking means finding the
    /// worktree and canonicalizing every directory.
    pub fn scrub(
        store: &Store,
        workspace: impl FnOnce() -> crate::error::Result<Option<PathBuf>>,
        text: String,
    ) -> crate::error::Result<String> {
        if !Self::may_name_one(&text) {
            return Ok(text);
        }
        Ok(Self::new(store, workspace()?.as_deref()).apply(&text))
    }

    /// Can `text` name a local directory? Every directory replaced is absolute, so a text
    /// without a path separator names none.
    fn may_name_one(text: &str) -> bool {
        text.contains(std::path::is_separator)
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

/// `$TMPDIR` (or the platform's temporary directory) and the usual temporary roots.
fn temp_roots() -> Vec<PathBuf> {
    let mut roots = vec![std::env::temp_dir()];
    roots.extend(TEMP_ROOTS.iter().map(PathBuf::from));
    roots
}

/// The environment variables whose value is one absolute path outside the system's own
/// directories, as `(path, "<env:NAME>")`, sorted by name. A list (`PATH`, with `:`) is not one
/// path; its entries are mostly system directories, or below home.
fn env_paths(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = vars
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            let value = value.into_string().ok()?;
            if ENV_NOT_REPLACED.contains(&name.as_str())
                || !value.starts_with('/')
                || value.contains([':', '\n'])
            {
                return None;
            }
            let first = Path::new(&value).components().nth(1)?;
            let first = first.as_os_str().to_str()?;
            if SYSTEM_ROOTS.contains(&first) {
                return None;
            }
            Some((PathBuf::from(value), format!("<env:{name}>")))
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
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
    known: &[(PathBuf, String)],
    physical: &Path,
    logical: &Path,
) -> Vec<(PathBuf, String)> {
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
            out.push((candidate, label.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(pairs: &[(&str, &'static str)]) -> LocalPaths {
        LocalPaths::from_pairs(
            pairs
                .iter()
                .map(|(p, l)| (p.to_string(), l.to_string()))
                .collect(),
        )
    }

    /// Only absolute directories are replaced, so a text without a path separator, which
    /// `may_name_one` lets through untouched, is what `apply` would have left it.
    #[test]
    fn a_text_without_a_separator_names_no_directory() {
        let p = paths(&[
            (".git", "<git-dir>"),
            ("repo", "<repository>"),
            ("/tmp/x/pq", "<repository>"),
            ("/home/u", "~"),
        ]);
        for text in [
            "fix .git handling",
            "repo",
            "tmp x pq home u ~",
            "",
            "C:repo",
        ] {
            assert!(!LocalPaths::may_name_one(text), "{text}");
            assert_eq!(p.apply(text), text);
        }
        for text in ["see /tmp/x/pq", "/home/u/.cargo", "a/b"] {
            assert!(LocalPaths::may_name_one(text), "{text}");
        }
        assert_eq!(
            p.apply("see /tmp/x/pq and ./repo"),
            "see <repository> and ./repo"
        );
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
            (repo.clone(), "<repository>".to_string()),
            (wt.clone(), "<worktree>".to_string()),
            (real.join("elsewhere"), "~".to_string()),
        ];
        let logical = link.join("repo").join("sub");
        let found = logical_spellings(&known, &sub, &logical);
        assert_eq!(
            found,
            vec![
                (link.join("repo"), "<repository>".to_string()),
                (
                    link.join("repo").join("sub").join("wt"),
                    "<worktree>".to_string()
                ),
            ]
        );
        // A `$PWD` that does not end like the physical directory gives no spelling above it.
        let odd = logical_spellings(&known[..1], &sub, &link.join("repo").join("other"));
        assert!(odd.is_empty(), "{odd:?}");
    }

    #[test]
    fn environment_paths_but_the_system_and_the_shell_are_labelled_by_name() {
        let vars = [
            ("CARGO_TARGET_DIR", "/srv/build/target"),
            ("SHELL", "/bin/bash"),
            ("EDITOR", "/usr/bin/vi"),
            ("PATH", "/srv/tools/bin:/usr/bin"),
            ("PWD", "/srv/build"),
            ("OLDPWD", "/srv"),
            ("_", "/srv/tools/bin/x"),
            ("LANG", "C.UTF-8"),
            ("A_DIR", "/opt/a"),
            ("ROOT", "/"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let found = env_paths(vars.into_iter());
        assert_eq!(
            found,
            vec![
                (PathBuf::from("/opt/a"), "<env:A_DIR>".to_string()),
                (
                    PathBuf::from("/srv/build/target"),
                    "<env:CARGO_TARGET_DIR>".to_string()
                ),
            ]
        );
    }

    #[test]
    fn of_two_labels_for_one_directory_the_first_wins() {
        let p = paths(&[
            ("/tmp/r", "<repository>"),
            ("/tmp", "<tmp>"),
            ("/tmp/r", "<env:R>"),
            ("/tmp/r/target", "<env:CARGO_TARGET_DIR>"),
        ]);
        assert_eq!(
            p.apply("/tmp/r/src /tmp/r/target/debug /tmp/x.txt"),
            "<repository>/src <env:CARGO_TARGET_DIR>/debug <tmp>/x.txt"
        );
    }
}
