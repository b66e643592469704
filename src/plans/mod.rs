//! Plan hygiene: find the markdown plans of a worktree (or of a commit's tree), classify them by
//! their checkboxes, and move misplaced ones the way `git mv` would.
//!
//! # Rules
//!
//! - A plan is a regular file whose name ends in `.md` directly inside `plans/` or
//!   `plans_completed/` at the worktree root. Subfolders are not searched. `README.md` and
//!   `MASTER_PLAN.md` (exact, case-sensitive names) are not plans, and neither are dot-files
//!   (`.#x.md` editor locks, `.x.md` swap files), as with the shell glob `plans/*.md`.
//! - A task is a line that, after optional indentation (spaces or tabs), starts with exactly
//!   `- [ ]` (open) or `- [x]`, `- [X]`, `- [~]` (done), followed by whitespace or the end of the
//!   line. Anything else is prose: `* [ ]`, `-[ ]`, `-  [ ]`, `> - [ ]`, `- [-]`, `- [ ]x`, a `[ ]`
//!   in the middle of a line. Lines inside fenced code blocks are never tasks. A fence opens with
//!   three or more backticks or tildes after any indentation (a backtick fence's info string may
//!   not contain a backtick) and closes with at least as many of the same character and nothing
//!   else; an unclosed fence runs to the end of the file, as in CommonMark. A leading UTF-8 BOM
//!   and `\r\n` line ends are accepted; bytes that are not UTF-8 are read lossily.
//! - Classes: a plan without any task is [`PlanClass::NoChecklist`] wherever it is (counted
//!   nowhere, never moved). Otherwise in `plans/`: an open task makes it `Active`, none makes it
//!   `Misplaced`; in `plans_completed/`: no open task makes it `Completed`, one makes it
//!   `Misplaced`.
//! - [`PlanReport::placement_clean`] ⇔ no misplaced plan; [`PlanReport::hygiene_clean`] ⇔ no
//!   active and no misplaced plan. Neither looks at [`PlanReport::errors`]: a gate must treat a
//!   non-empty error list as "unknown" and fail closed itself.
//!
//! # Progress bar
//!
//! `██████████░░░░░░░░░░ 2/4 plans 5/9 tasks (50%)`, then ` misplaced:N` when N > 0. Plans
//! counted are active + completed + misplaced; tasks counted are theirs. The 20 cells and the
//! percentage both come from the *plans* ratio and are rounded **down**
//! (`filled = 20 * completed / total`, `percent = 100 * completed / total`, integer division), so
//! a full bar and `100%` mean every plan is completed and progress is never overstated
//! (1/3 → 6 cells, 33%). With no plans there is nothing outstanding: the ratio is taken as 1, so
//! the bar is full and reads `0/0 plans 0/0 tasks (100%)` — one rule, no special-cased bar.
//!
//! # Errors while scanning
//!
//! Problems are reported per path in [`PlanReport::errors`] and every other file is still
//! handled: a real IO error reading a file or folder; a plan-named entry that is not a regular
//! file (a directory `x.md`, a symbolic link — dangling or not, since following it could read
//! outside the folder or count a plan twice —, a submodule); a `plans` or `plans_completed`
//! entry that is not a directory; a plan-named file whose name is not UTF-8. A missing folder is
//! simply empty, but a missing or unreadable root is an error for the path `.`. [`scan_dir`] and
//! [`scan_tree`] apply the same rules, so a committed, clean worktree yields the same report from
//! both (except that a submodule reads as a directory on disk).
//!
//! # Reconcile
//!
//! [`reconcile`] moves each misplaced plan (`plans/` → `plans_completed/` when finished,
//! `plans_completed/` → `plans/` when reopened), creating the target folder if needed and never
//! touching content. On a name collision it tries `same_1.md`, `same_2.md`, … where a name is
//! taken if anything exists there on disk or in the index. The new name is claimed with a hard
//! link, which fails instead of overwriting, and only then is the old name removed (where hard
//! links are unsupported it falls back to `rename` after checking the name is free).
//!
//! The index is updated as `git mv` does: it is locked (`index.lock`, failing at once if held)
//! before it is read and kept locked until it is written; a tracked source's entry is renamed
//! with the same blob id, mode, flags and stat data (git refreshes stat on its next status); a
//! conflicted source is refused; untracked files are only renamed on disk. The cached-tree
//! extension is dropped because gix would write it back stale; git rebuilds it on the next
//! commit. (gix also does not write the untracked-cache, fsmonitor and resolve-undo extensions,
//! which git rebuilds or can do without.)
//!
//! Failure model: errors before any file is touched (not a repository, not its worktree root,
//! index locked or unreadable) are a [`ReconcileError`]. After that, each plan that cannot be
//! moved is reported in [`ReconcileOutcome::errors`] and the rest carry on. If the index cannot
//! be written at the end, the tracked files are moved back so the worktree matches the untouched
//! index, and each is reported; only a failed move-back leaves a file at its new name (reported
//! as [`PlanError::Restore`]). Untracked moves stand.

pub mod gate;
mod markdown;
pub mod owned;
mod reconcile;
mod report;
mod scan;
mod staged;
#[cfg(test)]
mod tests;

pub use markdown::{count_tasks, tasks, Task, TaskCount};
pub use reconcile::{reconcile, Move, ReconcileError, ReconcileOutcome};
pub use report::{PathKind, PlanClass, PlanCounts, PlanError, PlanFile, PlanReport};
pub use scan::{scan_dir, scan_tree, ScanTreeError};
pub use staged::staged_moves;

/// The folder holding plans that still have work to do.
pub const PLANS_DIR: &str = "plans";
/// The folder holding finished plans.
pub const COMPLETED_DIR: &str = "plans_completed";
/// Markdown files in the plan folders that are documentation, not plans.
pub const NOT_PLANS: [&str; 2] = ["README.md", "MASTER_PLAN.md"];
/// Number of cells in [`PlanReport::bar`].
pub const BAR_CELLS: usize = 20;

/// Where a plan lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Folder {
    /// `plans/`: work to do.
    Plans,
    /// `plans_completed/`: finished work.
    Completed,
}

impl Folder {
    /// Both folders, in scan order.
    pub const ALL: [Folder; 2] = [Folder::Plans, Folder::Completed];

    /// The folder's name relative to the worktree root.
    pub fn dir_name(self) -> &'static str {
        match self {
            Folder::Plans => PLANS_DIR,
            Folder::Completed => COMPLETED_DIR,
        }
    }

    pub(crate) fn other(self) -> Folder {
        match self {
            Folder::Plans => Folder::Completed,
            Folder::Completed => Folder::Plans,
        }
    }
}
