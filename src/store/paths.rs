//! Local paths out of what travels: records are pushed (`sync`) and exported, and a compiler
//! error naming `/home/ada/src/…` would carry a machine's layout with it. The directories this
//! repository knows about are replaced by labels: the run worktree by `<worktree>`, the main
//! worktree by `<repository>`, the git directory by `<git-dir>`, the worktree root by
//! `<worktrees>`, the home directory by `~`. Paths elsewhere (a script in `/opt`) are the user's
//! own command line and stay.

use std::path::Path;

use serde_json::Value;

use super::Store;

/// The local directories to replace, longest first so the most specific label wins.
pub struct LocalPaths {
    pairs: Vec<(String, &'static str)>,
}

impl LocalPaths {
    pub fn new(store: &Store, workspace: Option<&Path>) -> Self {
        let mut pairs: Vec<(String, &'static str)> = Vec::new();
        let mut add = |p: &Path, label: &'static str| {
            for candidate in [Some(p.to_path_buf()), std::fs::canonicalize(p).ok()]
                .into_iter()
                .flatten()
            {
                let s = candidate
                    .display()
                    .to_string()
                    .trim_end_matches('/')
                    .to_string();
                if s.len() > 1 {
                    pairs.push((s, label));
                }
            }
        };
        if let Some(w) = workspace {
            add(w, "<worktree>");
        }
        if let Ok(Some(main)) = store.main_workdir() {
            add(&main, "<repository>");
        }
        add(store.repo.common_dir(), "<git-dir>");
        add(store.repo.git_dir(), "<git-dir>");
        if let Ok(root) = store.worktree_root() {
            add(&root, "<worktrees>");
        }
        if let Some(home) = std::env::var_os("HOME") {
            add(Path::new(&home), "~");
        }
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        pairs.dedup();
        LocalPaths { pairs }
    }

    /// `text` with every known local directory replaced by its label.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (path, label) in &self.pairs {
            if out.contains(path.as_str()) {
                out = out.replace(path.as_str(), label);
            }
        }
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
