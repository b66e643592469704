//! Which paths differ between two trees, file by file (submodules and symlinks are entries
//! like files). Read-only.

use std::collections::{BTreeMap, BTreeSet};

use gix::bstr::BString;

use crate::error::{Context, Result};

/// An entry of a tree: its mode and object.
pub type TreeEntry = (gix::objs::tree::EntryMode, gix::ObjectId);

/// One path (a file, symlink or submodule) that differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    pub path: BString,
    /// The entry in the old tree, `None` when added.
    pub old: Option<TreeEntry>,
    /// The entry in the new tree, `None` when removed.
    pub new: Option<TreeEntry>,
}

/// The paths that differ from `old_tree` to `new_tree`, found by walking both trees together
/// and descending only into subtrees whose ids differ: the cost follows what changed, not the
/// size of the trees. A file that became a directory (or the reverse) is the file removed (or
/// added) and every path under the directory added (or removed).
pub fn tree_changes(
    objects: &impl gix::objs::Find,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<Vec<PathChange>> {
    let mut out = Vec::new();
    walk(
        objects,
        Some(old_tree),
        Some(new_tree),
        &BString::default(),
        &mut out,
    )?;
    Ok(out)
}

/// [`tree_changes`] from `old_tree`, or from nothing (every path of `new_tree` added).
pub fn tree_changes_from(
    objects: &impl gix::objs::Find,
    old_tree: Option<gix::ObjectId>,
    new_tree: gix::ObjectId,
) -> Result<Vec<PathChange>> {
    let mut out = Vec::new();
    walk(
        objects,
        old_tree,
        Some(new_tree),
        &BString::default(),
        &mut out,
    )?;
    Ok(out)
}

fn walk(
    objects: &impl gix::objs::Find,
    old: Option<gix::ObjectId>,
    new: Option<gix::ObjectId>,
    prefix: &BString,
    out: &mut Vec<PathChange>,
) -> Result<()> {
    if old == new {
        return Ok(());
    }
    let (old_entries, new_entries) = (entries_of(objects, old)?, entries_of(objects, new)?);
    let names: BTreeSet<&BString> = old_entries.keys().chain(new_entries.keys()).collect();
    for name in names {
        let (o, n) = (
            old_entries.get(name).copied(),
            new_entries.get(name).copied(),
        );
        if o == n {
            continue;
        }
        let mut path = prefix.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        let is_tree = |e: Option<TreeEntry>| e.is_some_and(|(mode, _)| mode.is_tree());
        let subtree = |e: Option<TreeEntry>| e.filter(|(m, _)| m.is_tree()).map(|(_, id)| id);
        let (o_file, n_file) = (o.filter(|_| !is_tree(o)), n.filter(|_| !is_tree(n)));
        if is_tree(o) || is_tree(n) {
            walk(objects, subtree(o), subtree(n), &path, out)?;
        }
        if o_file.is_some() || n_file.is_some() {
            out.push(PathChange {
                path,
                old: o_file,
                new: n_file,
            });
        }
    }
    Ok(())
}

/// The entries of tree `id` by name, in byte order (none for `None`).
pub fn entries_of(
    objects: &impl gix::objs::Find,
    id: Option<gix::ObjectId>,
) -> Result<BTreeMap<BString, TreeEntry>> {
    let Some(id) = id else {
        return Ok(BTreeMap::new());
    };
    use gix::objs::FindExt as _;
    let mut buf = Vec::new();
    let mut out = BTreeMap::new();
    for entry in objects
        .find_tree_iter(&id, &mut buf)
        .context(|| format!("could not read tree {id}"))?
    {
        let e = entry.context(|| format!("could not read tree {id}"))?;
        out.insert(e.filename.to_owned(), (e.mode, e.oid.to_owned()));
    }
    Ok(out)
}

/// Paths that differ between two trees: (changed or added in `new`, removed in `new`).
pub fn differing_paths(
    objects: &impl gix::objs::Find,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<(BTreeSet<BString>, BTreeSet<BString>)> {
    let mut changed = BTreeSet::new();
    let mut removed = BTreeSet::new();
    for c in tree_changes(objects, old_tree, new_tree)? {
        if c.new.is_some() {
            changed.insert(c.path);
        } else {
            removed.insert(c.path);
        }
    }
    Ok((changed, removed))
}

/// Every path added, changed or removed from `old_tree` to `new_tree`, sorted, as text.
pub fn touched_paths(
    objects: &impl gix::objs::Find,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<Vec<String>> {
    if old_tree == new_tree {
        return Ok(Vec::new());
    }
    let (changed, removed) = differing_paths(objects, old_tree, new_tree)?;
    let all: BTreeSet<String> = changed
        .iter()
        .chain(removed.iter())
        .map(|p| p.to_string())
        .collect();
    Ok(all.into_iter().collect())
}
