//! `abandon`, `cleanup`, `list`, `log` and `evidence`.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::read::{lines_on, records_for, Notes};
use crate::model::run_file::RunHead;
use crate::model::{evidence, EvidenceRecord, RunRecord, RunState, SchemaError};
use crate::store::ledger::{self};
use crate::store::repo::CommitOrTree;
use crate::store::tx::{self, Cas};
use crate::store::worktree;

use crate::run::views::{log_entries, LogEntry, UnreadableRun};
use crate::run::{resolve_run, run_workspace, Env};

#[derive(Debug, Serialize)]
pub struct CleanupOutcome {
    /// `None` when the ledger could not be read (`cleanup --force` of a corrupt ledger).
    pub run: Option<RunRecord>,
    pub removed_worktree: Option<PathBuf>,
    pub deleted_branch: Option<String>,
    /// The command that deletes the unreadable ledger ref, which cleanup leaves alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger_left: Option<String>,
}

/// `cleanup --force` of a run whose ledger cannot be read: the run's worktree at its usual
/// place (when it is this repository's, with the run's default branch) and that branch go;
/// the ledger ref stays, for a person to look at, and the outcome says how to delete it.
fn cleanup_unreadable(env: &Env, id: &str) -> Result<CleanupOutcome> {
    let store = &env.store;
    let branch = format!("refs/heads/tabellio/{id}");
    let path = store.worktree_root()?.join(id);
    let mut removed = None;
    if std::fs::symlink_metadata(&path).is_ok() {
        crate::run::workspace::refuse_root_link(store)?;
        if env.cwd.starts_with(&path) {
            return Err(
                Error::refused("cannot remove the worktree the command runs in")
                    .hint(crate::run::workspace::run_it_elsewhere(store, id, true)),
            );
        }
        if worktree::broken_reason(&path).is_some() {
            store.forget_broken_worktree(&path)?;
        } else {
            let ws = store.inspect_own(&path)?;
            if ws.branch.as_deref() != Some(branch.as_str()) {
                return Err(Error::refused(format!(
                    "{} has {} checked out, not the run branch {branch}: it is not the run's worktree",
                    path.display(),
                    ws.branch.as_deref().unwrap_or("a detached HEAD")
                ))
                .hint("move it away if it is yours, then cleanup again"));
            }
            store.remove_worktree(&path, true)?;
        }
        removed = Some(path);
    }
    for stale in store.worktrees_of_branch(&branch)? {
        store.prune_missing_worktree(&stale)?;
    }
    let tip = store.ref_target(&branch)?;
    if let Some(tip) = tip {
        tx::apply(
            store,
            &[Cas::delete(&branch, tip, format!("tabellio: cleanup {id}"))],
        )
        .map_err(|e| e.into_error())?;
    }
    Ok(CleanupOutcome {
        run: None,
        removed_worktree: removed,
        deleted_branch: tip.map(|_| branch),
        ledger_left: Some(format!("git update-ref -d {}", ledger::ref_name(id))),
    })
}

/// Remove the worktree and run branch of a promoted or abandoned run. The ledger stays: the run's
/// history is kept.
/// What `cleanup` is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct CleanupOptions<'a> {
    pub run: &'a str,
    /// Remove a worktree with changes in it too (and a run whose ledger cannot be read).
    pub force: bool,
}

pub fn cleanup(env: &Env, opts: &CleanupOptions<'_>) -> Result<CleanupOutcome> {
    let CleanupOptions { run, force } = *opts;
    let store = &env.store;
    let ledger = match resolve_run(env, Some(run)) {
        Ok(ledger) => ledger,
        Err(e) => match crate::run::unreadable::unreadable_ledger(&env.store, run)? {
            Some(_) if force => return cleanup_unreadable(env, run),
            Some(_) => {
                let hint = e.hint.clone().unwrap_or_default();
                return Err(e.hint(format!(
                    "{hint}; or `git tabellio cleanup {run} --force` removes its worktree and branch, leaving the ledger ref"
                )));
            }
            None => return Err(e),
        },
    };
    let rec = &ledger.record;
    if !rec.state.is_terminal() {
        return Err(Error::refused(format!(
            "run {} is {}; cleanup only removes promoted or abandoned runs",
            rec.run_id, rec.state
        ))
        .hint(format!(
            "abandon it first: `git tabellio abandon {}`",
            rec.run_id
        )));
    }
    let workspace = run_workspace(store, &ledger)?;
    if let Some(path) = &workspace {
        // Never delete through a link that took the root's place: what is behind it may be
        // anyone's directory, outside the repository.
        if path.starts_with(store.worktree_root()?) {
            crate::run::workspace::refuse_root_link(store)?;
        }
        if env.cwd.starts_with(path) {
            return Err(
                Error::refused("cannot remove the worktree the command runs in").hint(
                    crate::run::workspace::run_it_elsewhere(store, &rec.run_id, force),
                ),
            );
        }
        if worktree::broken_reason(path).is_some() {
            if !force {
                return Err(Error::refused(format!(
                    "the run worktree {} is unusable (an interrupted start?)",
                    path.display()
                ))
                .hint("pass --force to remove it"));
            }
        } else if !force && !worktree::inspect(path)?.is_clean() {
            return Err(Error::refused(format!(
                "the run worktree {} has uncommitted changes",
                path.display()
            ))
            .hint("commit or remove them, or pass --force to discard them"));
        }
    }
    let branch_tip = store.ref_target(&rec.branch)?;
    if let Some(tip) = branch_tip {
        // Branch tips of abandoned runs are work that `git gc` would lose once the branch goes.
        if rec.state == RunState::Abandoned && !force {
            let merged = match rec.base.reference.as_str() {
                // An abandoned ledger rebuilt from an unreadable one names no base: its branch
                // is judged against every other branch.
                "" => on_another_branch(store, &rec.branch, tip)?,
                reference => match store.ref_target(reference)? {
                    Some(b) => store.is_ancestor(tip, b)?,
                    None => false,
                },
            };
            if !merged {
                return Err(Error::refused(format!("the branch {} of abandoned run {} has commits that are on no other branch", rec.branch, rec.run_id))
                    .hint("keep them on another branch first, or pass --force to delete them with the branch"));
            }
        }
    }
    if let Some(path) = &workspace {
        if worktree::broken_reason(path).is_some() {
            store.forget_broken_worktree(path)?;
        } else {
            store.remove_worktree(path, force)?;
        }
    }
    // A worktree deleted by hand leaves its registration behind, holding the branch.
    for stale in store.worktrees_of_branch(&rec.branch)? {
        store.prune_missing_worktree(&stale)?;
    }
    if let Some(tip) = branch_tip {
        tx::apply(
            store,
            &[Cas::delete(
                &rec.branch,
                tip,
                format!("tabellio: cleanup {}", rec.run_id),
            )],
        )
        .map_err(|e| e.into_error())?;
    }
    Ok(CleanupOutcome {
        run: Some(rec.clone()),
        removed_worktree: workspace,
        deleted_branch: branch_tip.map(|_| rec.branch.clone()),
        ledger_left: None,
    })
}

/// Whether `tip` of `branch` is reachable from another local branch.
fn on_another_branch(
    store: &crate::store::Store,
    branch: &str,
    tip: gix::ObjectId,
) -> Result<bool> {
    for (name, other) in store.refs_under("refs/heads/")? {
        if name != branch && store.is_ancestor(tip, other)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[derive(Debug, Serialize)]
pub struct ListEntry {
    #[serde(flatten)]
    pub run: RunHead,
    /// The archive ref holding the run, when `gc` archived it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<String>,
}

/// `list --state archived`: every archived run, whatever state it ended in.
pub const ARCHIVED: &str = "archived";

#[derive(Debug, Serialize)]
pub struct ListOutcome {
    pub runs: Vec<ListEntry>,
    pub unreadable: Vec<UnreadableRun>,
}

/// The runs: the live ones, and with `--state` the archived ones in that state too (every
/// archived one for `--state archived`), each saying where it is archived. Without `--state`
/// the archive is not read: it may hold a hundred thousand runs.
pub fn list(env: &Env, state: Option<&str>) -> Result<ListOutcome> {
    let archived_only = state == Some(ARCHIVED);
    let filter = match state {
        None => None,
        Some(ARCHIVED) => None,
        Some(s) => Some(RunState::parse(s).ok_or_else(|| {
            Error::usage(format!("unknown state {s:?}")).hint(format!(
                "states: {}, or {ARCHIVED} for every archived run",
                RunState::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?),
    };
    let mut out = ListOutcome {
        runs: Vec::new(),
        unreadable: Vec::new(),
    };
    let live = if archived_only {
        Vec::new()
    } else {
        env.store.list_ledgers()?
    };
    for (id, tip) in live {
        // One unreadable ledger must not hide every other run. `run.json` alone: the task
        // text and the history, which a listing does not show, are checked where they are read.
        let rec = match env.store.read_ledger_head(&id, tip) {
            Ok(rec) => rec,
            Err(e) => {
                out.unreadable
                    .push(UnreadableRun::of(&env.store, id, e.message));
                continue;
            }
        };
        if filter.is_some_and(|f| f != rec.state) {
            continue;
        }
        out.runs.push(ListEntry {
            run: rec,
            archived: None,
        });
    }
    if state.is_some() {
        let live: std::collections::HashSet<String> =
            out.runs.iter().map(|r| r.run.run_id.clone()).collect();
        for found in env.store.archived_runs()? {
            let e = found.entry;
            // A run synced back to life is listed as the live run it is.
            if live.contains(&e.run_id) || filter.is_some_and(|f| f != e.state) {
                continue;
            }
            out.runs.push(ListEntry {
                run: RunHead {
                    run_id: e.run_id,
                    state: e.state,
                    branch: e.branch,
                    base: e.base,
                    summary: e.summary,
                    updated_at: e.updated_at,
                    landed: e.landed,
                },
                archived: Some(found.archive_ref),
            });
        }
        out.runs.sort_by(|a, b| a.run.run_id.cmp(&b.run.run_id));
    }
    Ok(out)
}

pub fn log(env: &Env, run: &str) -> Result<(RunRecord, Vec<LogEntry>)> {
    let found = crate::run::find_readable(&env.store, run)?;
    let history = env.store.ledger_history_from(found.ledger.tip)?;
    let run = history
        .last()
        .map(|t| t.record.clone())
        .ok_or_else(|| Error::not_found(format!("no run {run:?}")))?;
    Ok((run, log_entries(history)))
}

/// Every check execution on the trees of `run`'s attempts (each tree once, oldest attempt
/// first), each with its attempt number: what `log` lists beside the ledger, so a pass never
/// hides the failures before it.
pub fn executions(env: &Env, run: &RunRecord) -> Result<Vec<crate::evidence::history::Execution>> {
    let store = &env.store;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for a in &run.attempts {
        if !seen.insert(a.tree.clone()) {
            continue;
        }
        let Ok(commit) = store.parse_oid(&a.commit) else {
            continue;
        };
        // A commit gc'd away leaves its attempt in the ledger and nothing to read here.
        if store.tree_of(commit).is_err() {
            continue;
        }
        out.extend(crate::evidence::history::executions_on(store, commit)?);
    }
    Ok(out)
}

#[derive(Debug, Serialize)]
pub struct EvidenceEntry {
    /// Whether the record's digest matches its content.
    pub valid: bool,
    /// The line as stored, when it could not be read as a record.
    pub raw: Option<String>,
    /// Why the line could not be read (`unknown schema "…"`, `not JSON`, …).
    pub problem: Option<String>,
    pub record: Option<EvidenceRecord>,
}

#[derive(Debug, Serialize)]
pub struct EvidenceOutcome {
    /// The commit asked about; `None` when a tree was named.
    pub commit: Option<String>,
    pub tree: String,
    pub records: Vec<EvidenceEntry>,
}

/// The evidence records on a commit and on its tree, or on a tree alone.
pub fn evidence(env: &Env, rev: &str) -> Result<EvidenceOutcome> {
    let store = &env.store;
    let (commit, tree, lines) = match store.resolve_commit_or_tree(rev)? {
        CommitOrTree::Commit(commit) => {
            let tree = store.tree_of(commit)?;
            (Some(commit), tree, records_for(store, commit, tree)?)
        }
        CommitOrTree::Tree(tree) => (None, tree, lines_on(store, Notes::Local, None, tree)?),
    };
    let records = lines
        .into_iter()
        .map(|(line, rec)| match rec {
            Some(r) => EvidenceEntry {
                valid: r.digest_is_valid(),
                raw: None,
                problem: None,
                record: Some(r),
            },
            None => EvidenceEntry {
                valid: false,
                problem: Some(unreadable_because(&line)),
                raw: Some(line),
                record: None,
            },
        })
        .collect();
    Ok(EvidenceOutcome {
        commit: commit.map(|c| c.to_string()),
        tree: tree.to_string(),
        records,
    })
}

/// What was found on a line that is not a readable evidence record: the schema it names when
/// it has one (an unknown schema is named, never guessed at).
fn unreadable_because(line: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
        return "not JSON".into();
    };
    match value.get("schema") {
        Some(serde_json::Value::String(s)) if s == evidence::SCHEMA => {
            match EvidenceRecord::from_line(line) {
                Err(SchemaError::Invalid { message, .. }) => {
                    format!("malformed {} record: {message}", evidence::SCHEMA)
                }
                _ => format!("malformed {} record", evidence::SCHEMA),
            }
        }
        Some(serde_json::Value::String(s)) => format!("unknown schema {s:?}"),
        Some(other) => format!("unknown schema {other}"),
        None => "JSON without a \"schema\" field".into(),
    }
}
