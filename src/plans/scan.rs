//! Finding the plans of a worktree on disk or of a tree in the object database, by the same
//! rules.

use std::io;
use std::path::Path;

use gix::bstr::{BStr, ByteSlice as _};

use super::{count_tasks, Folder, PathKind, PlanClass, PlanError, PlanFile, PlanReport, NOT_PLANS};

pub(super) fn is_plan_name(name: &str) -> bool {
    name.ends_with(".md") && !name.starts_with('.') && !NOT_PLANS.contains(&name)
}

pub(super) fn rel_path(folder: Folder, name: &str) -> String {
    format!("{}/{}", folder.dir_name(), name)
}

/// A plan found on disk, with what [`reconcile`] needs to move it.
pub(super) struct FoundPlan {
    pub(super) folder: Folder,
    pub(super) name: String,
    pub(super) plan: PlanFile,
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

pub(super) fn scan_dir_found(root: &Path) -> (Vec<FoundPlan>, Vec<PlanError>) {
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
