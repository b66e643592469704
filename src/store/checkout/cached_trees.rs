//! The index's cached trees (its `TREE` extension) kept valid across a move of the worktree.

use gix::bstr::{BString, ByteSlice};

use crate::error::{Context, Result};
use crate::store::diff::PathChange;

/// Bring the cached trees of `index` (its `TREE` extension, valid for `old_tree`) to `new_tree`
/// after the move `changes` (file by file, every path's entry replaced as the move wrote it): the
/// directories along the moved paths get their `new_tree` ids and entry counts, as `git commit`
/// would write them, so the next look at the worktree need not read HEAD's tree. `false` when
/// they cannot be kept: not valid for `old_tree` (written by a tool that did not keep them), or
/// a directory appears or goes (git rebuilds them on its next commit). The caller drops them
/// then; `index` may be half edited.
pub(super) fn move_cached_trees(
    repo: &gix::Repository,
    index: &mut gix::index::State,
    (old_tree, new_tree): (gix::ObjectId, gix::ObjectId),
    changes: &[PathChange],
) -> Result<bool> {
    let entries = index.entries().len();
    let Some(root) = index.tree_mut() else {
        return Ok(false);
    };
    if root.id != old_tree || root.num_entries.is_none() {
        return Ok(false);
    }
    // Entry counts first, along each moved path; every directory on the way must be cached.
    let mut touched = std::collections::BTreeSet::<BString>::new();
    for change in changes {
        let delta = i64::from(change.new.is_some()) - i64::from(change.old.is_some());
        let dirs: Vec<&[u8]> = change.path.split(|b| *b == b'/').collect();
        let mut node = &mut *root;
        let mut at = BString::default();
        for dir in &dirs[..dirs.len() - 1] {
            if !add_entries(node, delta) {
                return Ok(false);
            }
            touched.insert(at.clone());
            let Some(child) = node.children.iter_mut().find(|c| c.name.as_slice() == *dir) else {
                return Ok(false); // a new directory
            };
            if !at.is_empty() {
                at.push(b'/');
            }
            at.extend_from_slice(dir);
            node = child;
        }
        if !add_entries(node, delta) {
            return Ok(false);
        }
        touched.insert(at);
    }
    // Then the ids of the touched directories, from `new_tree`; an emptied one is gone.
    let tree = repo
        .find_tree(new_tree)
        .context(|| format!("could not read tree {new_tree}"))?;
    for dir in touched {
        let mut node = &mut *root;
        for name in dir.split(|b| *b == b'/').filter(|n| !n.is_empty()) {
            node = node
                .children
                .iter_mut()
                .find(|c| c.name.as_slice() == name)
                .expect("a directory counted above");
        }
        if node.num_entries == Some(0) {
            return Ok(false);
        }
        node.id = if dir.is_empty() {
            new_tree
        } else {
            let Ok(rel) = gix::path::from_bstr(dir.as_bstr()) else {
                return Ok(false);
            };
            let entry = tree
                .clone()
                .peel_to_entry_by_path(rel)
                .context(|| format!("could not read {dir} in tree {new_tree}"))?;
            match entry {
                Some(e) if e.mode().is_tree() => e.object_id(),
                _ => return Ok(false),
            }
        };
    }
    Ok(root.num_entries.and_then(|n| usize::try_from(n).ok()) == Some(entries))
}

/// Add `delta` to the entry count of a cached tree; `false` when it is not valid or would go
/// below zero.
fn add_entries(node: &mut gix::index::extension::Tree, delta: i64) -> bool {
    let Some(n) = node
        .num_entries
        .and_then(|n| u32::try_from(i64::from(n) + delta).ok())
    else {
        return false;
    };
    node.num_entries = Some(n);
    true
}
