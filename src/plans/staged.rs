//! Recognising the moves an earlier reconcile staged and nobody committed: so that
//! `plans reconcile --commit` after a plain `plans reconcile` commits them instead of refusing
//! them as someone's uncommitted changes.
//!
//! A staged change counts as such a move only when it is exactly what reconcile leaves behind:
//! a plan deleted from the index in one plan folder and the same blob, with the same mode, added
//! in the other folder under the same name (or the `name_N.md` reconcile picks on a collision),
//! with the file on disk unchanged from the index (hashed as stored, without git's filters, so a
//! filtered file reads as changed: the safe side) and nothing left at the old name. Anything
//! else, an edited moved plan included, stays the person's own change.

use std::collections::HashMap;
use std::path::Path;

use gix::bstr::ByteSlice as _;

use super::scan::{is_plan_name, rel_path};
use super::{Folder, Move};

/// A plan entry: its blob and mode.
type Entry = (gix::ObjectId, Option<gix::objs::tree::EntryMode>);

/// The plan moves staged in the worktree at `worktree_root` (HEAD against the index), in path
/// order of their old names. Errors reading the repository are the caller's to report.
pub fn staged_moves(worktree_root: &Path) -> crate::Result<Vec<Move>> {
    let repo = crate::store::repo::open_path(worktree_root)?;
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        crate::Error::internal(format!("{what} in {}: {e}", worktree_root.display()))
    };
    let index = repo
        .index_or_empty()
        .map_err(|e| fail("could not read the index", &e))?;
    let mut staged: HashMap<String, Entry> = HashMap::new();
    for e in index.entries() {
        let path = e.path(&index).to_str_lossy().into_owned();
        if e.stage() == gix::index::entry::Stage::Unconflicted && plan_folder(&path).is_some() {
            staged.insert(path, (e.id, e.mode.to_tree_entry_mode()));
        }
    }
    let mut head: HashMap<String, Entry> = HashMap::new();
    if let Ok(commit) = repo.head_commit() {
        let tree = commit
            .tree()
            .map_err(|e| fail("could not read HEAD's tree", &e))?;
        for folder in Folder::ALL {
            let Some(entry) = tree
                .lookup_entry_by_path(folder.dir_name())
                .map_err(|e| fail("could not read HEAD's tree", &e))?
            else {
                continue;
            };
            let Ok(sub) = entry.object().map(|o| o.into_tree()) else {
                continue;
            };
            let sub = sub
                .decode()
                .map_err(|e| fail("could not read HEAD's tree", &e))?;
            for item in &sub.entries {
                let name = item.filename.to_str_lossy();
                if is_plan_name(&name) {
                    head.insert(
                        rel_path(folder, &name),
                        (item.oid.to_owned(), Some(item.mode)),
                    );
                }
            }
        }
    }
    let deleted: Vec<(&String, &Entry)> = head
        .iter()
        .filter(|(p, _)| !staged.contains_key(*p))
        .collect();
    let mut added: Vec<(&String, &Entry)> = staged
        .iter()
        .filter(|(p, _)| !head.contains_key(*p))
        .collect();
    added.sort();
    let mut moves = Vec::new();
    let mut used = std::collections::HashSet::new();
    for (to, entry) in added {
        let Some((to_folder, to_name)) = plan_folder(to) else {
            continue;
        };
        let from = deleted.iter().find(|(from, e)| {
            *e == entry
                && !used.contains(*from)
                && plan_folder(from).is_some_and(|(folder, name)| {
                    folder == to_folder.other() && reconcile_name(name, to_name)
                })
        });
        let Some((from, _)) = from else { continue };
        if std::fs::symlink_metadata(worktree_root.join(from.as_str())).is_ok()
            || !unchanged_on_disk(&repo, &worktree_root.join(to.as_str()), entry.0)
        {
            continue;
        }
        used.insert(*from);
        moves.push(Move {
            from: (*from).clone(),
            to: to.clone(),
        });
    }
    moves.sort_by(|a, b| a.from.cmp(&b.from));
    Ok(moves)
}

/// The plan folder and file name of `path`, when it names a plan directly inside one.
fn plan_folder(path: &str) -> Option<(Folder, &str)> {
    let (dir, name) = path.split_once('/')?;
    let folder = Folder::ALL.into_iter().find(|f| f.dir_name() == dir)?;
    (!name.contains('/') && is_plan_name(name)).then_some((folder, name))
}

/// Is `to` the name reconcile gives a plan named `from`: the same, or `stem_N.md`?
fn reconcile_name(from: &str, to: &str) -> bool {
    if from == to {
        return true;
    }
    let stem = from.strip_suffix(".md").unwrap_or(from);
    to.strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('_'))
        .and_then(|rest| rest.strip_suffix(".md"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The regular file at `file` holds exactly blob `id`.
fn unchanged_on_disk(repo: &gix::Repository, file: &Path, id: gix::ObjectId) -> bool {
    if !std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_file()) {
        return false;
    }
    std::fs::read(file).is_ok_and(|content| {
        gix::objs::compute_hash(repo.object_hash(), gix::object::Kind::Blob, &content)
            .is_ok_and(|h| h == id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_names() {
        assert!(reconcile_name("a.md", "a.md"));
        assert!(reconcile_name("a.md", "a_1.md"));
        assert!(reconcile_name("a.md", "a_12.md"));
        assert!(!reconcile_name("a.md", "a_.md"));
        assert!(!reconcile_name("a.md", "a_x.md"));
        assert!(!reconcile_name("a.md", "b.md"));
        assert!(!reconcile_name("a.md", "ab.md"));
    }

    #[test]
    fn plan_folders() {
        assert_eq!(plan_folder("plans/a.md"), Some((Folder::Plans, "a.md")));
        assert_eq!(
            plan_folder("plans_completed/a.md"),
            Some((Folder::Completed, "a.md"))
        );
        assert_eq!(plan_folder("plans/sub/a.md"), None);
        assert_eq!(plan_folder("plans/README.md"), None);
        assert_eq!(plan_folder("docs/a.md"), None);
    }
}
