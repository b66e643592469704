//! `blame <path> [<rev>]`: each line of a file → the commit that last changed it (git's own
//! blame, through the git CLI) → the run that landed that commit (the landed map of the ledgers,
//! adopting a forge's squash or rebase by tree equality) → that run's actor and initiator.
//! Reading only.

use std::collections::HashMap;
use std::ffi::OsString;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::provenance::LandedBy;
use crate::run::landed::LandedMap;
use crate::store::{git_cli, Store};

/// One line of the file.
#[derive(Debug, Clone, Serialize)]
pub struct BlameLine {
    /// Its number in the file at `rev`, from 1.
    pub line: usize,
    /// The commit that last changed it, and its number there.
    pub commit: String,
    pub orig_line: usize,
    /// The run that landed `commit`, when one did.
    pub run: Option<LandedBy>,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BlameOutcome {
    pub path: String,
    pub rev: String,
    pub lines: Vec<BlameLine>,
    /// How many lines a run is known for.
    pub attributed: usize,
    /// git's own `--porcelain` output, with the run's `tabellio-*` lines added (see
    /// [`BlameOutcome::porcelain`]).
    #[serde(skip)]
    git_porcelain: Vec<String>,
}

/// Blame `path` at `rev` (default `HEAD`).
pub fn blame(store: &Store, path: &str, rev: Option<&str>) -> Result<BlameOutcome> {
    let rev = rev.unwrap_or("HEAD");
    let commit = store.resolve_commit(rev)?;
    if path.is_empty() || path.starts_with('-') {
        return Err(Error::usage(format!("{path:?} is not a path"))
            .hint("name a file as the repository holds it: git tabellio blame src/main.rs"));
    }
    let out = git_cli::run(
        store,
        &git_cli::argv([
            OsString::from("blame"),
            "--porcelain".into(),
            commit.to_string().into(),
            "--".into(),
            path.into(),
        ]),
    )?;
    if !out.success() {
        return Err(Error::not_found(format!(
            "git blame could not blame {path} at {rev}: {}",
            out.stderr_tail()
        ))
        .hint(format!(
            "name a file that exists at {rev}: git ls-tree -r --name-only {rev}"
        )));
    }
    let landed = LandedMap::read(store)?;
    let mut runs: HashMap<String, Option<LandedBy>> = HashMap::new();
    let mut lines = Vec::new();
    let mut porcelain = Vec::new();
    let mut header: Option<(String, usize, usize)> = None;
    for raw in out.stdout.lines() {
        if let Some(text) = raw.strip_prefix('\t') {
            let (commit, orig_line, line) = header.take().ok_or_else(|| {
                Error::internal("git blame --porcelain printed a line before its header")
            })?;
            lines.push(BlameLine {
                line,
                run: runs.get(&commit).cloned().flatten(),
                commit,
                orig_line,
                text: text.to_string(),
            });
            porcelain.push(raw.to_string());
            continue;
        }
        porcelain.push(raw.to_string());
        let mut fields = raw.split(' ');
        let first = fields.next().unwrap_or_default();
        let numbers: Vec<usize> = fields.filter_map(|f| f.parse().ok()).collect();
        let is_header = matches!(first.len(), 40 | 64)
            && first.bytes().all(|b| b.is_ascii_hexdigit())
            && numbers.len() >= 2;
        if !is_header {
            continue;
        }
        if !runs.contains_key(first) {
            let run = landed.resolve(store, store.parse_oid(first)?)?;
            // git prints a commit's details once, after its first header: ours go there too.
            porcelain.extend(tabellio_lines(run.as_ref()));
            runs.insert(first.to_string(), run);
        }
        header = Some((first.to_string(), numbers[0], numbers[1]));
    }
    let attributed = lines.iter().filter(|l| l.run.is_some()).count();
    Ok(BlameOutcome {
        path: path.to_string(),
        rev: commit.to_string(),
        lines,
        attributed,
        git_porcelain: porcelain,
    })
}

/// The `tabellio-*` lines of a commit in `--porcelain`: the run, its actor and initiator, how
/// the commit was found, or `tabellio-run -` when no run landed it.
fn tabellio_lines(run: Option<&LandedBy>) -> Vec<String> {
    let Some(run) = run else {
        return vec!["tabellio-run -".into()];
    };
    let mut out = vec![
        format!("tabellio-run {}", run.run_id),
        format!("tabellio-actor {}:{}", run.actor.kind, run.actor.id),
    ];
    out.extend(
        run.actor
            .name
            .as_ref()
            .map(|n| format!("tabellio-agent {n}")),
    );
    out.extend(
        run.actor
            .model
            .as_ref()
            .map(|m| format!("tabellio-model {m}")),
    );
    out.extend(
        run.initiator
            .as_ref()
            .map(|i| format!("tabellio-initiator {i}")),
    );
    out.push(format!("tabellio-via {}", run.via));
    out
}

impl BlameOutcome {
    /// git's `blame --porcelain` output, each commit's details followed by its `tabellio-run`,
    /// `tabellio-actor`, `tabellio-initiator` and `tabellio-via` lines: a reader of git's
    /// format skips keys it does not know.
    pub fn porcelain(&self) -> String {
        let mut s = self.git_porcelain.join("\n");
        s.push('\n');
        s
    }
}
