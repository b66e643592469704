//! Reading trees: a commit's tree (remembered per commit), and the entry at a path in a tree.

use crate::error::{Context, Error, Result};

use super::Store;

/// The tree of each commit [`Store::tree_of`] has read (a commit never changes): judging a
/// commit asks for its tree several times (its policy, its notes, its guarded paths).
pub type CommitTrees = std::cell::RefCell<std::collections::HashMap<gix::ObjectId, gix::ObjectId>>;

/// The most commits [`Store::tree_of`] remembers the tree of: 40 bytes each.
const COMMIT_TREES: usize = 1 << 16;

impl Store {
    /// The tree of a commit.
    pub fn tree_of(&self, commit: gix::ObjectId) -> Result<gix::ObjectId> {
        if let Some(tree) = self.commit_trees.borrow().get(&commit) {
            return Ok(*tree);
        }
        let c = self.commit(commit).map_err(|e| {
            Error::not_found(format!("commit {commit} not found: {e:#}")).caused_by(e)
        })?;
        let tree = c
            .tree_id()
            .map(|t| t.detach())
            .context(|| format!("could not read the tree of {commit}"))?;
        let mut known = self.commit_trees.borrow_mut();
        if known.len() < COMMIT_TREES {
            known.insert(commit, tree);
        }
        Ok(tree)
    }

    /// The tree of `commit`, read as a commit first: a damaged commit is an internal error
    /// naming gix's cause (a plain tree lookup would call it missing).
    pub fn commit_tree(&self, commit: gix::ObjectId) -> Result<gix::Tree<'_>> {
        let tree = self.commit_tree_id(commit)?;
        self.object(tree)
            .and_then(|o| o.try_into_tree().context(|| "not a tree".into()))
            .context(|| format!("could not read the tree of {commit}"))
    }

    /// The id of `commit`'s tree, read as [`Store::commit_tree`] reads the commit.
    fn commit_tree_id(&self, commit: gix::ObjectId) -> Result<gix::ObjectId> {
        self.commit(commit)
            .and_then(|c| c.tree_id().map(|t| t.detach()).context(|| "no tree".into()))
            .context(|| format!("could not read commit {commit}"))
    }

    /// Read a file from a commit's tree, `None` when absent (the tree is read once, by the
    /// lookup).
    pub fn read_file_at(&self, commit: gix::ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
        let tree = self.commit_tree_id(commit)?;
        let Some((_, id)) = self
            .entry_at(tree, path)
            .context(|| format!("could not look up {path} in {commit}"))?
        else {
            return Ok(None);
        };
        let mut object = self
            .object(id)
            .context(|| format!("could not read {path} in {commit}"))?;
        Ok(Some(std::mem::take(&mut object.data)))
    }

    /// The mode and object of the entry at `path` (names joined by `/`) in the tree `tree`,
    /// `None` when there is none; each tree on the way is read through [`Store::object`].
    pub fn entry_at(
        &self,
        tree: gix::ObjectId,
        path: &str,
    ) -> Result<Option<(gix::object::tree::EntryMode, gix::ObjectId)>> {
        let mut names = path.split('/').filter(|n| !n.is_empty()).peekable();
        let mut current = tree;
        while let Some(name) = names.next() {
            let tree = self
                .object(current)?
                .try_into_tree()
                .context(|| format!("could not read the tree {current}"))?;
            let Some(entry) = tree.find_entry(name) else {
                return Ok(None);
            };
            let (mode, id) = (entry.mode(), entry.object_id());
            if names.peek().is_none() {
                return Ok(Some((mode, id)));
            }
            if !mode.is_tree() {
                return Ok(None);
            }
            current = id;
        }
        Ok(None)
    }
}
