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

use std::fmt;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice as _};

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

    fn other(self) -> Folder {
        match self {
            Folder::Plans => Folder::Completed,
            Folder::Completed => Folder::Plans,
        }
    }
}

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

/// Task lines found in one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskCount {
    /// `- [ ]` lines.
    pub open: usize,
    /// `- [x]`, `- [X]` and `- [~]` lines.
    pub done: usize,
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
    fn of_file_type(file_type: std::fs::FileType) -> PathKind {
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

    fn of_tree_mode(mode: gix::object::tree::EntryMode) -> PathKind {
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
        chain_message(self)
    }

    fn to_json(&self) -> serde_json::Value {
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

    fn sort(&mut self) {
        self.plans.sort_by(|a, b| a.path.cmp(&b.path));
        self.errors.sort_by(|a, b| a.path().cmp(b.path()));
    }
}

/// Count the task lines of a plan's text; see the module docs for what counts.
pub fn count_tasks(text: &str) -> TaskCount {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut count = TaskCount::default();
    let mut fence: Option<Fence> = None;
    for line in text.lines() {
        if let Some(open) = fence {
            if open.is_closed_by(line) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = Fence::opened_by(line) {
            fence = Some(open);
            continue;
        }
        match task_mark(line) {
            Some(TaskMark::Open) => count.open += 1,
            Some(TaskMark::Done) => count.done += 1,
            None => {}
        }
    }
    count
}

enum TaskMark {
    Open,
    Done,
}

fn task_mark(line: &str) -> Option<TaskMark> {
    let rest = line.trim_start_matches([' ', '\t']).strip_prefix("- [")?;
    let mut chars = rest.chars();
    let mark = chars.next()?;
    let after = chars.as_str().strip_prefix(']')?;
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    match mark {
        ' ' => Some(TaskMark::Open),
        'x' | 'X' | '~' => Some(TaskMark::Done),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Fence {
    ch: char,
    len: usize,
}

impl Fence {
    fn opened_by(line: &str) -> Option<Fence> {
        let rest = line.trim_start_matches([' ', '\t']);
        let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let len = rest.chars().take_while(|&c| c == ch).count();
        // CommonMark: a backtick fence's info string cannot contain a backtick (that would be
        // inline code such as ```` ```x``` ````).
        let info = &rest[len * ch.len_utf8()..];
        (len >= 3 && !(ch == '`' && info.contains('`'))).then_some(Fence { ch, len })
    }

    fn is_closed_by(self, line: &str) -> bool {
        let rest = line.trim_start_matches([' ', '\t']);
        let len = rest.chars().take_while(|&c| c == self.ch).count();
        len >= self.len && rest[len * self.ch.len_utf8()..].trim().is_empty()
    }
}

fn is_plan_name(name: &str) -> bool {
    name.ends_with(".md") && !name.starts_with('.') && !NOT_PLANS.contains(&name)
}

fn rel_path(folder: Folder, name: &str) -> String {
    format!("{}/{}", folder.dir_name(), name)
}

/// A plan found on disk, with what [`reconcile`] needs to move it.
struct FoundPlan {
    folder: Folder,
    name: String,
    plan: PlanFile,
}

/// Scan `plans/` and `plans_completed/` of the worktree at `root` on the filesystem.
pub fn scan_dir(root: &Path) -> PlanReport {
    let (found, errors) = scan_dir_found(root);
    let mut report = PlanReport {
        plans: found.into_iter().map(|found| found.plan).collect(),
        errors,
    };
    report.sort();
    report
}

fn scan_dir_found(root: &Path) -> (Vec<FoundPlan>, Vec<PlanError>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    // Without this, a mistyped root would read as a clean worktree with no plans.
    if let Err(source) = std::fs::metadata(root) {
        errors.push(PlanError::Read {
            path: ".".to_owned(),
            source,
        });
        return (found, errors);
    }
    for folder in Folder::ALL {
        let dir = root.join(folder.dir_name());
        let folder_path = folder.dir_name().to_owned();
        // lstat, not stat: a symlinked folder would be a symlink in the tree, and following it
        // could read plans from outside the worktree.
        match std::fs::symlink_metadata(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                errors.push(PlanError::Read {
                    path: folder_path,
                    source,
                });
                continue;
            }
            Ok(meta) if !meta.is_dir() => {
                errors.push(PlanError::NotADirectory {
                    path: folder_path,
                    found: PathKind::of_file_type(meta.file_type()),
                });
                continue;
            }
            Ok(_) => {}
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(source) => {
                errors.push(PlanError::Read {
                    path: folder_path,
                    source,
                });
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(source) => {
                    errors.push(PlanError::Read {
                        path: folder_path.clone(),
                        source,
                    });
                    continue;
                }
            };
            let os_name = entry.file_name();
            let lossy = os_name.to_string_lossy();
            if !is_plan_name(&lossy) {
                continue;
            }
            let Some(name) = os_name.to_str() else {
                errors.push(PlanError::NameNotUtf8 {
                    path: rel_path(folder, &lossy),
                });
                continue;
            };
            let path = rel_path(folder, name);
            // DirEntry::file_type does not follow symlinks.
            match entry.file_type() {
                Ok(file_type) if file_type.is_file() => {}
                Ok(file_type) => {
                    errors.push(PlanError::NotAFile {
                        path,
                        found: PathKind::of_file_type(file_type),
                    });
                    continue;
                }
                Err(source) => {
                    errors.push(PlanError::Read { path, source });
                    continue;
                }
            }
            match std::fs::read(entry.path()) {
                Ok(bytes) => found.push(FoundPlan {
                    folder,
                    name: name.to_owned(),
                    plan: classify(folder, path, &bytes),
                }),
                Err(source) => errors.push(PlanError::Read { path, source }),
            }
        }
    }
    (found, errors)
}

fn classify(folder: Folder, path: String, bytes: &[u8]) -> PlanFile {
    let tasks = count_tasks(&String::from_utf8_lossy(bytes));
    PlanFile {
        path,
        class: PlanClass::of(folder, tasks),
        open: tasks.open,
        done: tasks.done,
    }
}

/// Failure to read the tree handed to [`scan_tree`].
#[derive(Debug, thiserror::Error)]
pub enum ScanTreeError {
    /// The object is missing or does not peel to a tree.
    #[error("cannot read the tree of {id}")]
    FindTree {
        /// The object asked for.
        id: gix::ObjectId,
        /// The cause.
        #[source]
        source: gix::Error,
    },
}

/// Scan `plans/*.md` and `plans_completed/*.md` in the tree of `tree` (a tree, or a commit or
/// tag, which is peeled to its tree), as [`scan_dir`] would in a checkout of it.
pub fn scan_tree(repo: &gix::Repository, tree: gix::ObjectId) -> Result<PlanReport, ScanTreeError> {
    let root = repo
        .find_object(tree)
        .and_then(|object| object.peel_to_tree())
        .map_err(|source| ScanTreeError::FindTree { id: tree, source })?;
    let mut report = PlanReport::default();
    for folder in Folder::ALL {
        let folder_path = folder.dir_name().to_owned();
        let Some(entry) = root.find_entry(folder.dir_name()) else {
            continue;
        };
        if !entry.mode().is_tree() {
            report.errors.push(PlanError::NotADirectory {
                path: folder_path,
                found: PathKind::of_tree_mode(entry.mode()),
            });
            continue;
        }
        let subtree = match repo.find_tree(entry.object_id()) {
            Ok(subtree) => subtree,
            Err(source) => {
                report.errors.push(PlanError::Object {
                    path: folder_path,
                    source,
                });
                continue;
            }
        };
        for item in subtree.iter() {
            let item = match item {
                Ok(item) => item,
                Err(source) => {
                    // A tree that fails to decode cannot be walked any further.
                    report.errors.push(PlanError::Object {
                        path: folder_path.clone(),
                        source,
                    });
                    break;
                }
            };
            let raw_name: &BStr = item.filename();
            let lossy = raw_name.to_str_lossy();
            if !is_plan_name(&lossy) {
                continue;
            }
            let Ok(name) = raw_name.to_str() else {
                report.errors.push(PlanError::NameNotUtf8 {
                    path: rel_path(folder, &lossy),
                });
                continue;
            };
            let path = rel_path(folder, name);
            let kind = PathKind::of_tree_mode(item.mode());
            if kind != PathKind::File {
                report
                    .errors
                    .push(PlanError::NotAFile { path, found: kind });
                continue;
            }
            match repo.find_blob(item.object_id()) {
                Ok(blob) => report.plans.push(classify(folder, path, &blob.data)),
                Err(source) => report.errors.push(PlanError::Object { path, source }),
            }
        }
    }
    report.sort();
    Ok(report)
}

/// One plan moved by [`reconcile`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Move {
    /// Old path, relative to the worktree root.
    pub from: String,
    /// New path, relative to the worktree root.
    pub to: String,
}

/// What [`reconcile`] did.
#[derive(Debug, Default)]
pub struct ReconcileOutcome {
    /// Plans moved (and, if tracked, renamed in the index), in path order of their old names.
    pub moved: Vec<Move>,
    /// Per-path problems: scan errors (those files were not considered) and failed moves.
    pub errors: Vec<PlanError>,
}

impl ReconcileOutcome {
    /// `{moved: [{from, to}], errors: [{path, message}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "moved": self.moved,
            "errors": self.errors.iter().map(PlanError::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Failures that stop [`reconcile`] before any file is touched.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// `worktree_root` is not a git worktree.
    #[error("cannot open a git repository at {}", path.display())]
    Open {
        /// The directory given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: gix::Error,
    },
    /// The repository has no worktree to reconcile.
    #[error("the repository at {} is bare", path.display())]
    Bare {
        /// The directory given.
        path: PathBuf,
    },
    /// `worktree_root` is inside a worktree but not its root.
    #[error("{} is not the root of its worktree {}", path.display(), workdir.display())]
    NotWorktreeRoot {
        /// The directory given.
        path: PathBuf,
        /// The worktree root.
        workdir: PathBuf,
    },
    /// The index lock could not be taken (another git process, or a stale `index.lock`).
    #[error("cannot lock the index {}", path.display())]
    LockIndex {
        /// The index file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: gix::Error,
    },
    /// The index exists but could not be read.
    #[error("cannot read the index {}", path.display())]
    ReadIndex {
        /// The index file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: gix::Error,
    },
}

/// Move every misplaced plan of the worktree at `worktree_root` to the folder it belongs in,
/// renaming tracked files in the index as `git mv` would; see the module docs for the rules and
/// the failure model.
pub fn reconcile(worktree_root: &Path) -> Result<ReconcileOutcome, ReconcileError> {
    reconcile_with(worktree_root, write_index)
}

/// The index writer taken by [`reconcile_with`]: the index, its held lock, `index.skipHash`.
type IndexWriter = fn(&gix::index::File, gix::lock::File, bool) -> Result<(), String>;

/// [`reconcile`] with the final index write injectable, so tests can make it fail.
fn reconcile_with(
    worktree_root: &Path,
    write_index: IndexWriter,
) -> Result<ReconcileOutcome, ReconcileError> {
    let repo = gix::open(worktree_root).map_err(|source| ReconcileError::Open {
        path: worktree_root.to_owned(),
        source,
    })?;
    let workdir = repo.workdir().ok_or_else(|| ReconcileError::Bare {
        path: worktree_root.to_owned(),
    })?;
    // Index paths are relative to the worktree root, so the files we move must be under it.
    if !same_directory(workdir, worktree_root) {
        return Err(ReconcileError::NotWorktreeRoot {
            path: worktree_root.to_owned(),
            workdir: workdir.to_owned(),
        });
    }

    let (mut found, errors) = scan_dir_found(worktree_root);
    let mut outcome = ReconcileOutcome {
        moved: Vec::new(),
        errors,
    };
    found.retain(|found| found.plan.class == PlanClass::Misplaced);
    found.sort_by(|a, b| a.plan.path.cmp(&b.plan.path));
    if found.is_empty() {
        outcome.errors.sort_by(|a, b| a.path().cmp(b.path()));
        return Ok(outcome);
    }

    // Hold the lock from before reading the index until it is written, as git does, so no other
    // git process can slip an index update in between that we would then overwrite.
    let index_path = repo.index_path();
    let lock = gix::lock::File::acquire_to_update_resource(
        &index_path,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .map_err(|source| ReconcileError::LockIndex {
        path: index_path.clone(),
        source,
    })?;
    let mut index = match std::fs::symlink_metadata(&index_path) {
        // A repository where nothing was ever added has no index: every plan is untracked.
        Err(err) if err.kind() == io::ErrorKind::NotFound => gix::index::File::from_state(
            gix::index::State::new(repo.object_hash()),
            index_path.clone(),
        ),
        _ => repo
            .open_index()
            .map_err(|source| ReconcileError::ReadIndex {
                path: index_path.clone(),
                source,
            })?,
    };

    let mut tracked_moves: Vec<Move> = Vec::new();
    for plan in &found {
        match move_plan(worktree_root, &mut index, plan) {
            Ok((moved, tracked)) => {
                if tracked {
                    tracked_moves.push(moved.clone());
                }
                outcome.moved.push(moved);
            }
            Err(err) => outcome.errors.push(err),
        }
    }

    if !tracked_moves.is_empty() {
        index.sort_entries();
        // gix writes the cached-tree extension back as it was read, which would now claim the
        // old contents of plans/ and plans_completed/ and mislead the next `git commit`.
        index.remove_tree();
        let skip_hash = repo
            .config_snapshot()
            .boolean("index.skipHash")
            .unwrap_or(false);
        if let Err(reason) = write_index(&index, lock, skip_hash) {
            undo_moves(worktree_root, &tracked_moves, &reason, &mut outcome);
        }
    }
    outcome.errors.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(outcome)
}

fn same_directory(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Move one misplaced plan on disk and in `index`; returns the move and whether it was tracked.
fn move_plan(
    root: &Path,
    index: &mut gix::index::File,
    plan: &FoundPlan,
) -> Result<(Move, bool), PlanError> {
    let from = plan.plan.path.clone();
    let target = plan.folder.other();
    let target_dir = root.join(target.dir_name());

    let tracked_at = match index.entry_range(from.as_str().into()) {
        None => None,
        Some(range) => {
            let unconflicted = range.len() == 1
                && index.entry(range.start).stage() == gix::index::entry::Stage::Unconflicted;
            if !unconflicted {
                return Err(PlanError::Conflicted { path: from });
            }
            Some(range.start)
        }
    };

    match std::fs::symlink_metadata(&target_dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => {
            return Err(PlanError::TargetNotADirectory {
                path: target.dir_name().to_owned(),
                plan: from,
                found: PathKind::of_file_type(meta.file_type()),
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&target_dir).map_err(|source| PlanError::CreateDir {
                path: target.dir_name().to_owned(),
                plan: from.clone(),
                source,
            })?;
        }
        Err(source) => {
            return Err(PlanError::CreateDir {
                path: target.dir_name().to_owned(),
                plan: from,
                source,
            })
        }
    }

    let stem = plan.name.strip_suffix(".md").unwrap_or(&plan.name);
    let src = root.join(plan.folder.dir_name()).join(&plan.name);
    let mut attempt = 0_usize;
    let to = loop {
        let name = match attempt {
            0 => plan.name.clone(),
            n => format!("{stem}_{n}.md"),
        };
        attempt += 1;
        let to = rel_path(target, &name);
        let to_key: &BStr = to.as_str().into();
        if index.entry_range(to_key).is_some() || index.path_is_directory(to_key) {
            continue;
        }
        match move_no_clobber(&src, &target_dir.join(&name)) {
            Ok(()) => break to,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(PlanError::Move { from, to, source }),
        }
    };

    if let Some(position) = tracked_at {
        // git mv keeps the entry as it is under the new name (rename_index_entry_at): the staged
        // blob, mode, flags and stat; a stale ctime only makes git re-hash the file once.
        let entry = index.remove_entry_at_index(position);
        index.dangerously_push_entry(
            entry.stat,
            entry.id,
            entry.flags,
            entry.mode,
            to.as_str().into(),
        );
        // Later lookups (the next plan's source and destination) need sorted entries.
        index.sort_entries();
    }
    Ok((Move { from, to }, tracked_at.is_some()))
}

/// Rename `src` to `dst` without ever replacing an existing `dst` (which `rename` would).
fn move_no_clobber(src: &Path, dst: &Path) -> io::Result<()> {
    match std::fs::hard_link(src, dst) {
        Ok(()) => std::fs::remove_file(src).inspect_err(|_| {
            // Leave things as they were: the only name is the old one again.
            let _ = std::fs::remove_file(dst);
        }),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // No hard links here (filesystem without them, or a mount boundary): check, then rename.
        Err(_) => match std::fs::symlink_metadata(dst) {
            Ok(_) => Err(io::ErrorKind::AlreadyExists.into()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => std::fs::rename(src, dst),
            Err(err) => Err(err),
        },
    }
}

fn write_index(
    index: &gix::index::File,
    lock: gix::lock::File,
    skip_hash: bool,
) -> Result<(), String> {
    let options = gix::index::write::Options {
        skip_hash,
        ..Default::default()
    };
    let mut out = io::BufWriter::with_capacity(64 * 1024, lock);
    index
        .write_to(&mut out, options)
        .map_err(|err| chain_message(&err))?;
    out.flush().map_err(|err| chain_message(&err))?;
    let lock = out.into_inner().map_err(|err| chain_message(err.error()))?;
    lock.commit().map_err(|err| chain_message(&err.error))?;
    Ok(())
}

fn chain_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The index was not written: put tracked files back where the index still expects them.
fn undo_moves(root: &Path, tracked: &[Move], reason: &str, outcome: &mut ReconcileOutcome) {
    for undo in tracked.iter().rev() {
        outcome.moved.retain(|moved| moved != undo);
        let error = match move_no_clobber(&root.join(&undo.to), &root.join(&undo.from)) {
            Ok(()) => PlanError::IndexNotWritten {
                from: undo.from.clone(),
                to: undo.to.clone(),
                reason: reason.to_owned(),
            },
            Err(source) => PlanError::Restore {
                from: undo.from.clone(),
                to: undo.to.clone(),
                source,
            },
        };
        outcome.errors.push(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A temp dir with a hermetic HOME and a worktree at `root`.
    struct Fixture {
        _dir: tempfile::TempDir,
        home: PathBuf,
        root: PathBuf,
    }

    impl Fixture {
        /// A plain directory, no git.
        fn plain() -> Fixture {
            let dir = tempfile::tempdir().expect("temp dir");
            let home = dir.path().join("home");
            let root = dir.path().join("repo");
            std::fs::create_dir_all(&home).expect("mkdir home");
            std::fs::create_dir_all(&root).expect("mkdir repo");
            Fixture {
                _dir: dir,
                home,
                root,
            }
        }

        /// A fresh git repository on branch `main`.
        fn repo() -> Fixture {
            let fixture = Fixture::plain();
            fixture.git(&["init", "-q", "-b", "main"]);
            fixture
        }

        fn git(&self, args: &[&str]) -> String {
            git_in(&self.home, &self.root, args)
        }

        fn write(&self, rel: &str, content: &str) {
            let path = self.root.join(rel);
            std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir -p");
            std::fs::write(path, content).expect("write file");
        }

        fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.root.join(rel)).expect("read file")
        }

        fn exists(&self, rel: &str) -> bool {
            std::fs::symlink_metadata(self.root.join(rel)).is_ok()
        }

        fn commit_all(&self) {
            self.git(&["add", "-A"]);
            self.git(&["commit", "-q", "-m", "plans"]);
        }
    }

    fn git_in(home: &Path, cwd: &Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(cwd)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_OBJECT_DIRECTORY")
            .env_remove("GIT_COMMON_DIR")
            .env("HOME", home)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Plan Tester")
            .env("GIT_AUTHOR_EMAIL", "plans@example.com")
            .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
            .env("GIT_COMMITTER_NAME", "Plan Tester")
            .env("GIT_COMMITTER_EMAIL", "plans@example.com")
            .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
            .output()
            .expect("git can be spawned");
        assert!(
            output.status.success(),
            "git {args:?} in {} failed ({})\nstdout:\n{}\nstderr:\n{}",
            cwd.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        String::from_utf8(output.stdout).expect("git prints UTF-8 here")
    }

    /// A plan titled `title` with `done` ticked and `open` unticked tasks.
    fn plan(title: &str, done: usize, open: usize) -> String {
        let mut text = format!("# {title}\n\nWhy {title} exists.\n\n");
        for i in 0..done {
            text.push_str(&format!("- [x] {title} step {i}\n"));
        }
        for i in 0..open {
            text.push_str(&format!("- [ ] {title} later {i}\n"));
        }
        text
    }

    fn sorted_lines(text: &str) -> Vec<String> {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    }

    fn paths(report: &PlanReport, class: PlanClass) -> Vec<&str> {
        report.with_class(class).map(|p| p.path.as_str()).collect()
    }

    fn error_list(errors: &[PlanError]) -> Vec<(String, String)> {
        errors
            .iter()
            .map(|e| (e.path().to_owned(), e.message()))
            .collect()
    }

    #[test]
    fn task_lines_follow_the_rules() {
        let text = "\u{feff}- [ ] open at the very start\r\n\
                    - [x] done\r\n\
                    \t  - [X] indented done\n\
                    - [~] dropped counts as done\n\
                    - [ ]\n\
                    * [ ] star bullet\n\
                    -[ ] no space\n\
                    -  [ ] two spaces\n\
                    > - [ ] quoted\n\
                    - [-] other mark\n\
                    - [ ]glued\n\
                    - [xx] two marks\n\
                    text with - [ ] in the middle\n\
                    1. [ ] numbered\n";
        assert_eq!(count_tasks(text), TaskCount { open: 2, done: 3 });
        assert_eq!(count_tasks(""), TaskCount::default());
    }

    #[test]
    fn fenced_code_blocks_hold_no_tasks() {
        let text = "- [ ] real\n\
                    ```markdown\n- [ ] example\n```\n\
                    ~~~~\n- [x] example\n~~~\nstill inside: a shorter fence does not close\n~~~~~\n\
                    ``` not a fence ` because of the backtick\n- [x] real done\n\
                    \x20 ```\n  - [ ] indented fence example\n  ```\n\
                    ```\n- [ ] unclosed fence runs to the end\n";
        assert_eq!(count_tasks(text), TaskCount { open: 1, done: 1 });
    }

    #[test]
    fn classes_follow_folder_and_open_tasks() {
        let t = |open, done| TaskCount { open, done };
        assert_eq!(PlanClass::of(Folder::Plans, t(1, 3)), PlanClass::Active);
        assert_eq!(PlanClass::of(Folder::Plans, t(0, 3)), PlanClass::Misplaced);
        assert_eq!(
            PlanClass::of(Folder::Completed, t(0, 3)),
            PlanClass::Completed
        );
        assert_eq!(
            PlanClass::of(Folder::Completed, t(1, 0)),
            PlanClass::Misplaced
        );
        assert_eq!(
            PlanClass::of(Folder::Plans, t(0, 0)),
            PlanClass::NoChecklist
        );
        assert_eq!(
            PlanClass::of(Folder::Completed, t(0, 0)),
            PlanClass::NoChecklist
        );
    }

    #[test]
    fn two_active_and_two_completed_plans_are_fifty_percent() {
        let fx = Fixture::plain();
        fx.write("plans/a.md", &plan("a", 1, 1));
        fx.write("plans/b.md", &plan("b", 2, 3));
        fx.write("plans_completed/c.md", &plan("c", 2, 0));
        fx.write("plans_completed/d.md", &plan("d", 1, 0));
        let report = scan_dir(&fx.root);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(
            paths(&report, PlanClass::Active),
            ["plans/a.md", "plans/b.md"]
        );
        assert_eq!(
            paths(&report, PlanClass::Completed),
            ["plans_completed/c.md", "plans_completed/d.md"]
        );
        assert_eq!(
            report.bar(),
            "██████████░░░░░░░░░░ 2/4 plans 6/10 tasks (50%)"
        );
        let counts = report.counts();
        assert_eq!((counts.plans_total, counts.plans_completed), (4, 2));
        assert_eq!((counts.tasks_total, counts.tasks_done), (10, 6));
    }

    #[test]
    fn bar_rounds_down_and_names_misplaced_plans() {
        let file = |path: &str, class, open, done| PlanFile {
            path: path.to_owned(),
            class,
            open,
            done,
        };
        let report = PlanReport {
            plans: vec![
                file("plans/a.md", PlanClass::Active, 1, 0),
                file("plans/b.md", PlanClass::Misplaced, 0, 2),
                file("plans/n.md", PlanClass::NoChecklist, 0, 0),
                file("plans_completed/c.md", PlanClass::Completed, 0, 1),
            ],
            errors: Vec::new(),
        };
        assert_eq!(
            report.bar(),
            "██████░░░░░░░░░░░░░░ 1/3 plans 3/4 tasks (33%) misplaced:1"
        );
        // 19 of 20 would round to a full bar and 100%; it must not.
        let mut almost = PlanReport::default();
        for i in 0..40 {
            let class = if i == 0 {
                PlanClass::Active
            } else {
                PlanClass::Completed
            };
            almost
                .plans
                .push(file(&format!("p{i}.md"), class, usize::from(i == 0), 1));
        }
        assert!(almost.bar().ends_with("(97%)"), "{}", almost.bar());
        assert!(almost.bar().starts_with(&format!("{}░", "█".repeat(19))));
        assert_eq!(
            PlanReport::default().bar(),
            format!("{} 0/0 plans 0/0 tasks (100%)", "█".repeat(20))
        );
    }

    #[test]
    fn nested_files_readmes_and_dotfiles_are_not_plans() {
        let fx = Fixture::plain();
        let example = "# How to write plans\n\n```\n- [ ] fenced example\n```\n- [ ] a bare example\n- [x] another\n";
        fx.write("plans/README.md", example);
        fx.write("plans/MASTER_PLAN.md", &plan("master", 1, 1));
        fx.write("plans_completed/README.md", example);
        fx.write("plans/sub/finished.md", &plan("nested", 3, 0));
        fx.write("plans_completed/old/open.md", &plan("nested open", 0, 1));
        fx.write("plans/.draft.md", &plan("dot", 1, 0));
        fx.write("plans/notes.txt", &plan("txt", 1, 0));
        fx.write("plans/readme.MD", &plan("upper", 1, 0));
        fx.write("plan.md", &plan("top level", 1, 0));
        let report = scan_dir(&fx.root);
        assert!(report.plans.is_empty(), "{:?}", report.plans);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(report.placement_clean() && report.hygiene_clean());

        let missing = scan_dir(&fx.root.join("missing"));
        assert_eq!(missing.errors.len(), 1);
        assert_eq!(missing.errors[0].path(), ".");
    }

    #[test]
    fn a_live_backlog_is_placement_clean_but_not_hygiene_clean() {
        let fx = Fixture::plain();
        fx.write("plans/now.md", &plan("now", 1, 2));
        fx.write("plans/prose.md", "# Ideas\n\nNo checklist [ ] here.\n");
        fx.write("plans_completed/then.md", &plan("then", 4, 0));
        let report = scan_dir(&fx.root);
        assert!(report.placement_clean());
        assert!(!report.hygiene_clean());
        assert_eq!(paths(&report, PlanClass::NoChecklist), ["plans/prose.md"]);

        fx.write("plans/now.md", &plan("now", 3, 0));
        let report = scan_dir(&fx.root);
        assert!(!report.placement_clean() && !report.hygiene_clean());
        assert!(report.bar().ends_with(" misplaced:1"), "{}", report.bar());

        std::fs::remove_file(fx.root.join("plans/now.md")).expect("rm");
        let report = scan_dir(&fx.root);
        assert!(report.placement_clean() && report.hygiene_clean());
    }

    #[test]
    fn to_json_has_the_documented_shape() {
        let fx = Fixture::plain();
        fx.write("plans/a.md", &plan("a", 1, 1));
        fx.write("plans/b.md", &plan("b", 1, 0));
        fx.write("plans/n.md", "prose\n");
        fx.write("plans_completed/c.md", &plan("c", 2, 0));
        std::fs::create_dir_all(fx.root.join("plans/d.md")).expect("mkdir");
        let json = scan_dir(&fx.root).to_json();
        assert_eq!(json["active"], serde_json::json!(["plans/a.md"]));
        assert_eq!(
            json["completed"],
            serde_json::json!(["plans_completed/c.md"])
        );
        assert_eq!(json["misplaced"], serde_json::json!(["plans/b.md"]));
        assert_eq!(json["no_checklist"], serde_json::json!(["plans/n.md"]));
        assert_eq!(json["counts"]["plans_total"], 3);
        assert_eq!(json["counts"]["plans_completed"], 1);
        assert_eq!(json["counts"]["tasks_total"], 5);
        assert_eq!(json["counts"]["tasks_done"], 4);
        assert_eq!(json["counts"]["misplaced"], 1);
        assert_eq!(json["placement_clean"], false);
        assert_eq!(json["hygiene_clean"], false);
        assert_eq!(
            json["bar"],
            "██████░░░░░░░░░░░░░░ 1/3 plans 4/5 tasks (33%) misplaced:1"
        );
        assert_eq!(json["plans"][0]["class"], "active");
        assert_eq!(json["errors"][0]["path"], "plans/d.md");
        assert_eq!(
            json["errors"][0]["message"],
            "plans/d.md is a directory, not a regular file, so it is not read as a plan"
        );
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_entries_are_reported_and_the_others_still_handled() {
        let fx = Fixture::repo();
        fx.write("plans/active.md", &plan("active", 1, 1));
        fx.write("plans/finished.md", &plan("finished", 2, 0));
        fx.write("plans/folder.md/inside.md", &plan("inside", 1, 0));
        std::os::unix::fs::symlink("nowhere.md", fx.root.join("plans/dangling.md"))
            .expect("symlink");
        std::os::unix::fs::symlink("finished.md", fx.root.join("plans/alias.md")).expect("symlink");
        fx.write("plans_completed", "a file where a folder should be\n");

        let expected_errors = vec![
            (
                "plans/alias.md".to_owned(),
                "plans/alias.md is a symbolic link, not a regular file, so it is not read as a plan"
                    .to_owned(),
            ),
            (
                "plans/dangling.md".to_owned(),
                "plans/dangling.md is a symbolic link, not a regular file, so it is not read as a plan"
                    .to_owned(),
            ),
            (
                "plans/folder.md".to_owned(),
                "plans/folder.md is a directory, not a regular file, so it is not read as a plan"
                    .to_owned(),
            ),
            (
                "plans_completed".to_owned(),
                "plans_completed is a file, not a directory, so it holds no plans".to_owned(),
            ),
        ];
        let report = scan_dir(&fx.root);
        assert_eq!(error_list(&report.errors), expected_errors);
        assert_eq!(paths(&report, PlanClass::Active), ["plans/active.md"]);
        assert_eq!(paths(&report, PlanClass::Misplaced), ["plans/finished.md"]);

        // The misplaced plan cannot go anywhere while plans_completed is a file; the error says so
        // and the scan errors are still reported.
        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert!(outcome.moved.is_empty());
        let mut expected = expected_errors.clone();
        expected.push((
            "plans/finished.md".to_owned(),
            "cannot move plans/finished.md: plans_completed is a file, not a directory".to_owned(),
        ));
        expected.sort();
        assert_eq!(error_list(&outcome.errors), expected);

        std::fs::remove_file(fx.root.join("plans_completed")).expect("rm");
        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert_eq!(
            outcome.moved,
            [Move {
                from: "plans/finished.md".into(),
                to: "plans_completed/finished.md".into()
            }]
        );
        assert_eq!(outcome.errors.len(), 3, "{:?}", outcome.errors);
        assert!(fx.exists("plans/dangling.md") && fx.exists("plans/folder.md/inside.md"));
    }

    #[test]
    fn a_prose_only_plan_is_not_moved() {
        let fx = Fixture::repo();
        fx.write("plans/prose.md", "# Thoughts\n\nNothing to tick.\n");
        fx.write(
            "plans_completed/history.md",
            "# History\n\n* [ ] not a task\n",
        );
        fx.commit_all();
        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert!(outcome.moved.is_empty() && outcome.errors.is_empty());
        assert!(fx.exists("plans/prose.md") && fx.exists("plans_completed/history.md"));
        assert_eq!(fx.git(&["status", "--porcelain"]), "");
        assert!(!fx.root.join(".git/index.lock").exists());
    }

    #[test]
    fn reconcile_moves_misplaced_plans_like_git_mv() {
        let fx = Fixture::repo();
        fx.write("plans/active.md", &plan("active", 1, 1));
        fx.write("plans/done.md", &plan("done", 3, 0));
        fx.write("plans/edited.md", &plan("edited", 1, 1));
        fx.write("plans/same.md", &plan("same moving", 2, 0));
        fx.write("plans_completed/same.md", &plan("same staying", 2, 0));
        fx.write("plans/twice.md", &plan("twice moving", 2, 0));
        fx.write("plans_completed/twice.md", &plan("twice staying", 2, 0));
        fx.write("plans_completed/twice_1.md", &plan("twice one", 2, 0));
        fx.write("plans/ghost.md", &plan("ghost moving", 1, 0));
        fx.write("plans_completed/ghost.md", &plan("ghost staged", 1, 0));
        fx.write("plans_completed/reopened.md", &plan("reopened", 2, 1));
        fx.write("plans_completed/kept.md", &plan("kept", 2, 0));
        fx.write("src/main.rs", "fn main() {}\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let done = fx.root.join("plans/done.md");
            std::fs::set_permissions(&done, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        fx.commit_all();
        // Tracked but deleted on disk: its name is still taken in the index.
        std::fs::remove_file(fx.root.join("plans_completed/ghost.md")).expect("rm");
        // Ticked in the worktree only: the staged blob must move unchanged, like git mv.
        fx.write("plans/edited.md", &plan("edited", 2, 0));
        fx.write("plans/untracked.md", &plan("untracked", 1, 0));
        let blob_before = fx.git(&["rev-parse", ":plans/done.md"]);
        let stage_before = fx.git(&["ls-files", "-s", "plans/done.md"]);
        #[cfg(unix)]
        assert!(stage_before.starts_with("100755 "), "{stage_before}");
        let edited_blob_before = fx.git(&["rev-parse", ":plans/edited.md"]);
        let done_text = fx.read("plans/done.md");

        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
        let moves: Vec<(&str, &str)> = outcome
            .moved
            .iter()
            .map(|m| (m.from.as_str(), m.to.as_str()))
            .collect();
        assert_eq!(
            moves,
            [
                ("plans/done.md", "plans_completed/done.md"),
                ("plans/edited.md", "plans_completed/edited.md"),
                ("plans/ghost.md", "plans_completed/ghost_1.md"),
                ("plans/same.md", "plans_completed/same_1.md"),
                ("plans/twice.md", "plans_completed/twice_2.md"),
                ("plans/untracked.md", "plans_completed/untracked.md"),
                ("plans_completed/reopened.md", "plans/reopened.md"),
            ]
        );

        assert_eq!(
            sorted_lines(&fx.git(&["status", "--porcelain"])),
            sorted_lines(
                " D plans_completed/ghost.md\n\
                 ?? plans_completed/untracked.md\n\
                 R  plans/done.md -> plans_completed/done.md\n\
                 RM plans/edited.md -> plans_completed/edited.md\n\
                 R  plans/ghost.md -> plans_completed/ghost_1.md\n\
                 R  plans/same.md -> plans_completed/same_1.md\n\
                 R  plans/twice.md -> plans_completed/twice_2.md\n\
                 R  plans_completed/reopened.md -> plans/reopened.md\n"
            )
        );
        assert_eq!(
            sorted_lines(&fx.git(&["diff", "--cached", "-M", "--name-status"])),
            sorted_lines(
                "R100\tplans/done.md\tplans_completed/done.md\n\
                 R100\tplans/edited.md\tplans_completed/edited.md\n\
                 R100\tplans/ghost.md\tplans_completed/ghost_1.md\n\
                 R100\tplans/same.md\tplans_completed/same_1.md\n\
                 R100\tplans/twice.md\tplans_completed/twice_2.md\n\
                 R100\tplans_completed/reopened.md\tplans/reopened.md\n"
            )
        );
        assert_eq!(
            fx.git(&["rev-parse", ":plans_completed/done.md"]),
            blob_before
        );
        // Same mode (100755 on unix), blob and stage under the new name.
        assert_eq!(
            fx.git(&["ls-files", "-s", "plans_completed/done.md"]),
            stage_before.replace("plans/done.md", "plans_completed/done.md")
        );
        assert_eq!(
            fx.git(&["rev-parse", ":plans_completed/edited.md"]),
            edited_blob_before
        );
        assert_eq!(fx.read("plans_completed/done.md"), done_text);
        assert_eq!(
            fx.read("plans_completed/same.md"),
            plan("same staying", 2, 0)
        );
        assert_eq!(
            fx.read("plans_completed/same_1.md"),
            plan("same moving", 2, 0)
        );
        assert_eq!(
            fx.read("plans_completed/twice_1.md"),
            plan("twice one", 2, 0)
        );
        assert!(!fx.root.join(".git/index.lock").exists());

        // The index is whole: a commit of it is what `git add -A` would have staged for these.
        fx.git(&["commit", "-q", "-m", "reconciled"]);
        fx.git(&["fsck", "--strict", "--no-progress"]);
        let tree_files = fx.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
        assert!(tree_files.contains("plans_completed/done.md\n"));
        assert!(!tree_files.contains("plans/done.md\n"));
        let report = scan_dir(&fx.root);
        assert!(report.placement_clean(), "{:?}", report.plans);
        assert!(reconcile(&fx.root).expect("second run").moved.is_empty());
    }

    #[test]
    fn reconcile_creates_the_missing_target_folder() {
        let fx = Fixture::repo();
        fx.write("plans/a.md", &plan("a", 2, 0));
        fx.write("README.md", "repo\n");
        fx.commit_all();
        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
        assert_eq!(
            fx.git(&["status", "--porcelain"]),
            "R  plans/a.md -> plans_completed/a.md\n"
        );
    }

    #[test]
    fn reconcile_without_an_index_only_renames() {
        let fx = Fixture::repo();
        fx.write("plans_completed/back.md", &plan("back", 1, 1));
        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert_eq!(
            outcome.to_json(),
            serde_json::json!({
                "moved": [{"from": "plans_completed/back.md", "to": "plans/back.md"}],
                "errors": [],
            })
        );
        assert!(fx.exists("plans/back.md") && !fx.exists("plans_completed/back.md"));
        assert!(!fx.root.join(".git/index").exists());
        assert!(!fx.root.join(".git/index.lock").exists());
    }

    #[test]
    fn a_conflicted_plan_is_not_moved() {
        let fx = Fixture::repo();
        fx.write("plans/c.md", &plan("c", 1, 0));
        fx.write("plans/d.md", &plan("d", 1, 0));
        fx.commit_all();
        let blob = fx.git(&["hash-object", "-w", "plans/c.md"]);
        let blob = blob.trim();
        let info = format!(
            "0 {zero}\tplans/c.md\n100644 {blob} 1\tplans/c.md\n100644 {blob} 2\tplans/c.md\n100644 {blob} 3\tplans/c.md\n",
            zero = "0".repeat(40)
        );
        let mut child = Command::new("git")
            .args(["update-index", "--index-info"])
            .current_dir(&fx.root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &fx.home)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn git");
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(info.as_bytes())
            .expect("write stdin");
        assert!(child.wait().expect("git waits").success());
        assert!(fx.git(&["ls-files", "-u"]).contains("plans/c.md"));

        let outcome = reconcile(&fx.root).expect("reconcile runs");
        assert_eq!(
            error_list(&outcome.errors),
            [(
                "plans/c.md".to_owned(),
                "plans/c.md is conflicted in the index; resolve the conflict before it can be moved"
                    .to_owned()
            )]
        );
        assert_eq!(
            outcome.moved,
            [Move {
                from: "plans/d.md".into(),
                to: "plans_completed/d.md".into()
            }]
        );
        assert!(fx.exists("plans/c.md"));
        assert_eq!(fx.git(&["ls-files", "-u"]).lines().count(), 3);
    }

    #[test]
    fn a_held_index_lock_stops_reconcile_before_anything_moves() {
        let fx = Fixture::repo();
        fx.write("plans/a.md", &plan("a", 1, 0));
        fx.commit_all();
        let lock = fx.root.join(".git/index.lock");
        std::fs::write(&lock, b"someone else's").expect("write lock");
        let err = reconcile(&fx.root).expect_err("the index is locked");
        assert!(matches!(err, ReconcileError::LockIndex { .. }), "{err:?}");
        assert!(fx.exists("plans/a.md") && !fx.exists("plans_completed/a.md"));
        assert_eq!(std::fs::read(&lock).expect("lock kept"), b"someone else's");
    }

    #[test]
    fn reconcile_needs_the_worktree_root() {
        let fx = Fixture::repo();
        fx.write("plans/a.md", &plan("a", 1, 0));
        assert!(reconcile(&fx.root.join("plans")).is_err());
        assert!(matches!(
            reconcile(&fx.root.join("missing")),
            Err(ReconcileError::Open { .. })
        ));
    }

    #[test]
    fn a_failed_index_write_moves_tracked_plans_back() {
        let fx = Fixture::repo();
        fx.write("plans/tracked.md", &plan("tracked", 2, 0));
        fx.write("plans_completed/reopened.md", &plan("reopened", 1, 1));
        fx.commit_all();
        fx.write("plans/untracked.md", &plan("untracked", 1, 0));
        let index_before = std::fs::read(fx.root.join(".git/index")).expect("index");

        fn failing_writer(_: &gix::index::File, _: gix::lock::File, _: bool) -> Result<(), String> {
            Err("disk full".to_owned())
        }
        let outcome = reconcile_with(&fx.root, failing_writer).expect("reconcile runs");
        assert_eq!(
            outcome.moved,
            [Move {
                from: "plans/untracked.md".into(),
                to: "plans_completed/untracked.md".into()
            }]
        );
        assert_eq!(
            error_list(&outcome.errors),
            [
                (
                    "plans/tracked.md".to_owned(),
                    "moved plans_completed/tracked.md back to plans/tracked.md because the index \
                     could not be written: disk full"
                        .to_owned()
                ),
                (
                    "plans_completed/reopened.md".to_owned(),
                    "moved plans/reopened.md back to plans_completed/reopened.md because the index \
                     could not be written: disk full"
                        .to_owned()
                ),
            ]
        );
        assert_eq!(
            std::fs::read(fx.root.join(".git/index")).expect("index"),
            index_before
        );
        assert!(!fx.root.join(".git/index.lock").exists());
        assert_eq!(
            fx.git(&["status", "--porcelain"]),
            "?? plans_completed/untracked.md\n"
        );
    }

    #[test]
    fn a_linked_worktree_reconciles_its_own_index() {
        let fx = Fixture::repo();
        fx.write("plans/a.md", &plan("a", 1, 1));
        fx.commit_all();
        let linked = fx.root.parent().expect("has a parent").join("linked");
        let linked_str = linked.to_str().expect("temp paths are UTF-8");
        fx.git(&["worktree", "add", "-q", "-b", "run", linked_str]);
        std::fs::write(linked.join("plans/a.md"), plan("a", 2, 0)).expect("tick");

        let outcome = reconcile(&linked).expect("reconcile runs");
        assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
        assert_eq!(
            git_in(&fx.home, &linked, &["status", "--porcelain"]),
            "RM plans/a.md -> plans_completed/a.md\n"
        );
        assert_eq!(fx.git(&["status", "--porcelain"]), "");
        assert!(fx.exists("plans/a.md"));
    }

    #[cfg(unix)]
    #[test]
    fn tree_scan_equals_dir_scan_on_a_committed_worktree() {
        let fx = Fixture::repo();
        fx.write("plans/active.md", &plan("active", 1, 1));
        fx.write("plans/finished.md", &plan("finished", 2, 0));
        fx.write("plans/prose.md", "just words\n");
        fx.write("plans/README.md", "- [ ] example\n");
        fx.write("plans/sub/nested.md", &plan("nested", 1, 0));
        fx.write("plans/folder.md/inside.md", &plan("inside", 1, 0));
        fx.write("plans_completed/old.md", &plan("old", 3, 0));
        fx.write("plans_completed/reopened.md", &plan("reopened", 3, 1));
        fx.write("plans_completed/latin1.md", "- [x] caf\u{e9}\n");
        std::fs::write(
            fx.root.join("plans_completed/latin1.md"),
            b"- [x] caf\xe9\n",
        )
        .expect("write bytes");
        std::os::unix::fs::symlink("old.md", fx.root.join("plans_completed/link.md"))
            .expect("symlink");
        fx.commit_all();

        let from_dir = scan_dir(&fx.root);
        let repo = gix::open_opts(&fx.root, gix::open::Options::isolated()).expect("open");
        let head = repo.head_id().expect("head").detach();
        let tree = repo
            .find_commit(head)
            .expect("commit")
            .tree_id()
            .expect("tree")
            .detach();
        for id in [head, tree] {
            let from_tree = scan_tree(&repo, id).expect("tree scan");
            assert_eq!(from_tree.plans, from_dir.plans);
            assert_eq!(error_list(&from_tree.errors), error_list(&from_dir.errors));
            assert_eq!(from_tree.to_json(), from_dir.to_json());
        }
        assert_eq!(from_dir.plans.len(), 6, "{:?}", from_dir.plans);
        assert_eq!(
            from_dir.bar(),
            "████████░░░░░░░░░░░░ 2/5 plans 10/12 tasks (40%) misplaced:2"
        );
        assert_eq!(from_dir.errors.len(), 2, "{:?}", from_dir.errors);

        let missing = gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111")
            .expect("valid hex");
        assert!(matches!(
            scan_tree(&repo, missing),
            Err(ScanTreeError::FindTree { .. })
        ));
    }
}
