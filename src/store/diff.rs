//! Which paths differ between two trees, file by file (submodules and symlinks are entries
//! like files). Read-only.

use std::collections::BTreeSet;

use gix::bstr::BString;

use crate::error::{Context, Result};

/// Paths that differ between two trees: (changed or added in `new`, removed in `new`).
pub fn differing_paths(
    repo: &gix::Repository,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<(BTreeSet<BString>, BTreeSet<BString>)> {
    let old = repo
        .index_from_tree(&old_tree)
        .context(|| format!("could not read tree {old_tree}"))?;
    let new = repo
        .index_from_tree(&new_tree)
        .context(|| format!("could not read tree {new_tree}"))?;
    let mut changed = BTreeSet::new();
    for e in new.entries() {
        let path = e.path(&new);
        match old.entry_by_path(path) {
            Some(o) if o.id == e.id && o.mode == e.mode => {}
            _ => {
                changed.insert(path.to_owned());
            }
        }
    }
    let removed = old
        .entries()
        .iter()
        .map(|e| e.path(&old))
        .filter(|p| new.entry_by_path(p).is_none())
        .map(ToOwned::to_owned)
        .collect();
    Ok((changed, removed))
}

/// Every path added, changed or removed from `old_tree` to `new_tree`, sorted, as text.
pub fn touched_paths(
    repo: &gix::Repository,
    old_tree: gix::ObjectId,
    new_tree: gix::ObjectId,
) -> Result<Vec<String>> {
    if old_tree == new_tree {
        return Ok(Vec::new());
    }
    let (changed, removed) = differing_paths(repo, old_tree, new_tree)?;
    let all: BTreeSet<String> = changed
        .iter()
        .chain(removed.iter())
        .map(|p| p.to_string())
        .collect();
    Ok(all.into_iter().collect())
}
