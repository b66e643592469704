//! What a scan found: each plan's class, the totals, the progress bar, the JSON shape and the
//! per-path errors.

use std::fmt;
use std::io;

use super::{Folder, TaskCount, BAR_CELLS};

/// The state of one plan file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanClass {
    /// In `plans/` with at least one open task.
    Active,
    /// In `plans_completed/` with no open task.
    Completed,
    /// Finished but in `plans/`, or with an open task in `plans_completed/`.
    Misplaced,
    /// No task line at all: neither done nor movable.
    NoChecklist,
}

impl PlanClass {
    /// Classify a plan in `folder` with `tasks`.
    pub fn of(folder: Folder, tasks: TaskCount) -> PlanClass {
        match (folder, tasks.open, tasks.done) {
            (_, 0, 0) => PlanClass::NoChecklist,
            (Folder::Plans, 0, _) => PlanClass::Misplaced,
            (Folder::Plans, _, _) => PlanClass::Active,
            (Folder::Completed, 0, _) => PlanClass::Completed,
            (Folder::Completed, _, _) => PlanClass::Misplaced,
        }
    }

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanClass::Active => "active",
            PlanClass::Completed => "completed",
            PlanClass::Misplaced => "misplaced",
            PlanClass::NoChecklist => "no_checklist",
        }
    }
}

impl fmt::Display for PlanClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One classified plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlanFile {
    /// Relative to the worktree root, `/`-separated: `plans/a.md`.
    pub path: String,
    /// Its class.
    pub class: PlanClass,
    /// Open tasks.
    pub open: usize,
    /// Done tasks.
    pub done: usize,
}

/// What a path turned out to be when a plan file or plan folder was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A regular file.
    File,
    /// A directory (or tree).
    Directory,
    /// A symbolic link.
    Symlink,
    /// A submodule (gitlink) in a tree.
    Submodule,
    /// A fifo, socket or device.
    Special,
}

impl fmt::Display for PathKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathKind::File => "file",
            PathKind::Directory => "directory",
            PathKind::Symlink => "symbolic link",
            PathKind::Submodule => "submodule",
            PathKind::Special => "special file",
        })
    }
}

impl PathKind {
    pub(super) fn of_file_type(file_type: std::fs::FileType) -> PathKind {
        if file_type.is_symlink() {
            PathKind::Symlink
        } else if file_type.is_dir() {
            PathKind::Directory
        } else if file_type.is_file() {
            PathKind::File
        } else {
            PathKind::Special
        }
    }

    pub(super) fn of_tree_mode(mode: gix::object::tree::EntryMode) -> PathKind {
        if mode.is_tree() {
            PathKind::Directory
        } else if mode.is_link() {
            PathKind::Symlink
        } else if mode.is_commit() {
            PathKind::Submodule
        } else {
            PathKind::File
        }
    }
}

/// A problem with one path; the other paths are still handled.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// An IO error reading a plan file or a plan folder.
    #[error("cannot read {path}")]
    Read {
        /// The file or folder.
        path: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A plan-named entry that is not a regular file.
    #[error("{path} is a {found}, not a regular file, so it is not read as a plan")]
    NotAFile {
        /// The entry.
        path: String,
        /// What it is.
        found: PathKind,
    },
    /// `plans` or `plans_completed` exists but is not a directory.
    #[error("{path} is a {found}, not a directory, so it holds no plans")]
    NotADirectory {
        /// The folder.
        path: String,
        /// What it is.
        found: PathKind,
    },
    /// A plan-named file whose name is not UTF-8 (shown lossily).
    #[error("the name of {path} is not valid UTF-8")]
    NameNotUtf8 {
        /// The lossy path.
        path: String,
    },
    /// A tree or blob could not be read from the object database.
    #[error("cannot read {path} from the object database")]
    Object {
        /// The file or folder.
        path: String,
        /// The cause.
        #[source]
        source: gix::Error,
    },
    /// The plan has conflicting entries in the index; `git mv` refuses those too.
    #[error("{path} is conflicted in the index; resolve the conflict before it can be moved")]
    Conflicted {
        /// The plan.
        path: String,
    },
    /// The folder a plan should move to exists but is not a directory.
    #[error("cannot move {plan}: {path} is a {found}, not a directory")]
    TargetNotADirectory {
        /// The folder.
        path: String,
        /// The plan that was to move.
        plan: String,
        /// What the folder's path is.
        found: PathKind,
    },
    /// The target folder could not be created.
    #[error("cannot create {path} to move {plan} into it")]
    CreateDir {
        /// The folder.
        path: String,
        /// The plan that was to move.
        plan: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Renaming the file failed; it is still at `from`.
    #[error("cannot move {from} to {to}")]
    Move {
        /// The plan.
        from: String,
        /// The intended new path.
        to: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The move was undone because the index could not be written.
    #[error("moved {to} back to {from} because the index could not be written: {reason}")]
    IndexNotWritten {
        /// The plan, where it is again.
        from: String,
        /// Where it had been moved.
        to: String,
        /// Why the index write failed.
        reason: String,
    },
    /// After a failed index write the move could not be undone: git sees `from` deleted and `to`
    /// untracked.
    #[error("the index could not be written and {to} could not be moved back to {from}")]
    Restore {
        /// The plan's path in the index.
        from: String,
        /// Where the file now is.
        to: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl PlanError {
    /// The plan or folder this error is about.
    pub fn path(&self) -> &str {
        match self {
            PlanError::Read { path, .. }
            | PlanError::NotAFile { path, .. }
            | PlanError::NotADirectory { path, .. }
            | PlanError::NameNotUtf8 { path }
            | PlanError::Object { path, .. }
            | PlanError::Conflicted { path }
            | PlanError::TargetNotADirectory { plan: path, .. }
            | PlanError::CreateDir { plan: path, .. }
            | PlanError::Move { from: path, .. }
            | PlanError::IndexNotWritten { from: path, .. }
            | PlanError::Restore { from: path, .. } => path,
        }
    }

    /// This error and its causes, joined with `": "`.
    pub fn message(&self) -> String {
        crate::error::one_line(self)
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "path": self.path(), "message": self.message() })
    }
}

/// Totals over a [`PlanReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PlanCounts {
    /// Active + completed + misplaced plans (no-checklist files are not plans to finish).
    pub plans_total: usize,
    /// Completed plans.
    pub plans_completed: usize,
    /// Task lines in the counted plans.
    pub tasks_total: usize,
    /// Done task lines in the counted plans.
    pub tasks_done: usize,
    /// Active plans.
    pub active: usize,
    /// Misplaced plans.
    pub misplaced: usize,
    /// Files without any task line.
    pub no_checklist: usize,
}

/// The plans of a worktree or tree, sorted by path, and the per-path errors met on the way.
#[derive(Debug, Default)]
pub struct PlanReport {
    /// Every plan file, sorted by path.
    pub plans: Vec<PlanFile>,
    /// Paths that could not be classified, sorted by path.
    pub errors: Vec<PlanError>,
}

impl PlanReport {
    /// The plans of one class, in path order.
    pub fn with_class(&self, class: PlanClass) -> impl Iterator<Item = &PlanFile> {
        self.plans.iter().filter(move |plan| plan.class == class)
    }

    /// Totals for the progress bar and JSON.
    pub fn counts(&self) -> PlanCounts {
        let mut counts = PlanCounts::default();
        for plan in &self.plans {
            match plan.class {
                PlanClass::NoChecklist => {
                    counts.no_checklist += 1;
                    continue;
                }
                PlanClass::Active => counts.active += 1,
                PlanClass::Completed => counts.plans_completed += 1,
                PlanClass::Misplaced => counts.misplaced += 1,
            }
            counts.plans_total += 1;
            counts.tasks_total += plan.open + plan.done;
            counts.tasks_done += plan.done;
        }
        counts
    }

    /// No plan is in the wrong folder.
    pub fn placement_clean(&self) -> bool {
        self.with_class(PlanClass::Misplaced).next().is_none()
    }

    /// No plan is in the wrong folder and none has work left.
    pub fn hygiene_clean(&self) -> bool {
        self.placement_clean() && self.with_class(PlanClass::Active).next().is_none()
    }

    /// The one-line progress bar; see the module docs for the exact rule.
    pub fn bar(&self) -> String {
        let counts = self.counts();
        let (filled, percent) = match counts.plans_total {
            0 => (BAR_CELLS, 100),
            total => (
                BAR_CELLS * counts.plans_completed / total,
                100 * counts.plans_completed / total,
            ),
        };
        let mut bar = format!(
            "{}{} {}/{} plans {}/{} tasks ({}%)",
            "█".repeat(filled),
            "░".repeat(BAR_CELLS - filled),
            counts.plans_completed,
            counts.plans_total,
            counts.tasks_done,
            counts.tasks_total,
            percent,
        );
        if counts.misplaced > 0 {
            bar.push_str(&format!(" misplaced:{}", counts.misplaced));
        }
        bar
    }

    /// `{active, completed, misplaced, no_checklist: [path], plans: [{path, class, open, done}],
    /// counts: {plans_total, plans_completed, tasks_total, tasks_done, active, misplaced,
    /// no_checklist}, placement_clean, hygiene_clean, bar, errors: [{path, message}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let paths = |class| -> Vec<&str> {
            self.with_class(class)
                .map(|plan| plan.path.as_str())
                .collect()
        };
        serde_json::json!({
            "active": paths(PlanClass::Active),
            "completed": paths(PlanClass::Completed),
            "misplaced": paths(PlanClass::Misplaced),
            "no_checklist": paths(PlanClass::NoChecklist),
            "plans": self.plans,
            "counts": self.counts(),
            "placement_clean": self.placement_clean(),
            "hygiene_clean": self.hygiene_clean(),
            "bar": self.bar(),
            "errors": self.errors.iter().map(PlanError::to_json).collect::<Vec<_>>(),
        })
    }

    pub(super) fn sort(&mut self) {
        self.plans.sort_by(|a, b| a.path.cmp(&b.path));
        self.errors.sort_by(|a, b| a.path().cmp(b.path()));
    }
}
