//! A run's own plans: the plan files its change added, edited or moved (their blob at a commit
//! is not the one at the same path in the run's base), and those its task names
//! (`plans/<name>` or `plans_completed/<name>` anywhere in the task text, whichever folder the
//! plan is in now). Other plans of the repository (a backlog, another run's) are not its own.
//! Read from commits, never from a worktree: what is judged is what was committed.

use gix::bstr::ByteSlice as _;

use super::markdown::{tasks, Task};
use super::scan::{is_plan_name, rel_path};
use super::{Folder, ScanTreeError};

/// The start of [`open_items`]'s reason, and the name of what is missing (in a loop
/// iteration's `missing_evidence`) when the run's own plan has open items.
pub const OPEN_ITEMS: &str = "plan";

/// One plan of a run at a commit, with its task lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedPlan {
    /// `plans/x.md` or `plans_completed/x.md`.
    pub path: String,
    pub tasks: Vec<Task>,
}

impl OwnedPlan {
    /// The plan's file name: the same plan in either folder.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// The run's plans at `commit`, sorted by path: those whose content differs from `base` at the
/// same path, and those `task` names. Plan files that are not regular files are skipped (the
/// hygiene scan reports them).
pub fn run_plans(
    repo: &gix::Repository,
    base: gix::ObjectId,
    commit: gix::ObjectId,
    task: &str,
) -> Result<Vec<OwnedPlan>, ScanTreeError> {
    let base_plans = plan_blobs(repo, base)?;
    let mut out = Vec::new();
    for (folder, name, id) in plan_blobs(repo, commit)? {
        let changed = !base_plans
            .iter()
            .any(|(f, n, b)| *f == folder && *n == name && *b == id);
        let named = Folder::ALL
            .iter()
            .any(|f| task.contains(&rel_path(*f, &name)));
        if !(changed || named) {
            continue;
        }
        out.push(OwnedPlan {
            path: rel_path(folder, &name),
            tasks: tasks(&read_text(repo, id)?),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The plans at `commit` whose file name is one of `names` (in either folder), sorted by path:
/// a run's own plans at another of its commits (a restacked copy, an earlier attempt).
pub fn plans_named(
    repo: &gix::Repository,
    commit: gix::ObjectId,
    names: &[&str],
) -> Result<Vec<OwnedPlan>, ScanTreeError> {
    let mut out = Vec::new();
    for (folder, name, id) in plan_blobs(repo, commit)? {
        if names.contains(&name.as_str()) {
            out.push(OwnedPlan {
                path: rel_path(folder, &name),
                tasks: tasks(&read_text(repo, id)?),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The open items of the run's plans at `commit`, as a reason in a line (`plan: open items in
/// plans/x.md: "write the parser", …`); `None` when every item is done (or there is no plan).
pub fn open_items(
    repo: &gix::Repository,
    base: gix::ObjectId,
    commit: gix::ObjectId,
    task: &str,
) -> Result<Option<String>, ScanTreeError> {
    let mut parts = Vec::new();
    for plan in run_plans(repo, base, commit, task)? {
        let open: Vec<String> = plan
            .tasks
            .iter()
            .filter(|t| !t.done)
            .map(|t| format!("{:?}", t.text))
            .collect();
        if open.is_empty() {
            continue;
        }
        let shown = open.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        let more = match open.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        parts.push(format!("{}: {shown}{more}", plan.path));
    }
    Ok((!parts.is_empty()).then(|| format!("{}: open items in {}", OPEN_ITEMS, parts.join("; "))))
}

/// A plan's text (lossy UTF-8, as the hygiene scan reads it).
fn read_text(repo: &gix::Repository, id: gix::ObjectId) -> Result<String, ScanTreeError> {
    match repo.find_blob(id) {
        Ok(blob) => Ok(String::from_utf8_lossy(&blob.data).into_owned()),
        Err(source) => Err(ScanTreeError::FindTree { id, source }),
    }
}

/// The regular plan files of both folders at `commit`: (folder, name, blob).
fn plan_blobs(
    repo: &gix::Repository,
    commit: gix::ObjectId,
) -> Result<Vec<(Folder, String, gix::ObjectId)>, ScanTreeError> {
    let root = repo
        .find_object(commit)
        .and_then(|object| object.peel_to_tree())
        .map_err(|source| ScanTreeError::FindTree { id: commit, source })?;
    let mut out = Vec::new();
    for folder in Folder::ALL {
        let Some(entry) = root.find_entry(folder.dir_name()) else {
            continue;
        };
        if !entry.mode().is_tree() {
            continue;
        }
        let Ok(subtree) = repo.find_tree(entry.object_id()) else {
            continue;
        };
        for item in subtree.iter().flatten() {
            let Ok(name) = item.filename().to_str() else {
                continue;
            };
            if is_plan_name(name) && item.mode().is_blob() {
                out.push((folder, name.to_string(), item.object_id()));
            }
        }
    }
    Ok(out)
}
