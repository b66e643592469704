//! Scoped trees: a tree restricted to a check's declared inputs.
//!
//! The scoped tree of a tree is the git tree object holding exactly the entries whose paths the
//! inputs match, directories that end up empty left out (git stores no empty directory). Its
//! id is the scoped digest evidence is keyed to: a git object id, so it is the same
//! computation in SHA-1 and SHA-256 repositories, and two trees whose inputs hold the same
//! content have the same scoped tree whatever else differs. Computing it writes nothing unless
//! asked ([`Materialise::Write`]): a hook judging a push only hashes.

use gix::bstr::{BString, ByteSlice};
use gix::objs::WriteTo;

use crate::error::{Context, Result};
use crate::model::inputs::Inputs;

use super::Store;

/// Whether the scoped tree's objects are written into the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Materialise {
    /// Hash only (judging).
    HashOnly,
    /// Write the trees, to check them out (running a check).
    Write,
}

impl Store {
    /// The id of `tree` restricted to `inputs`.
    pub fn scoped_tree(
        &self,
        tree: gix::ObjectId,
        inputs: &Inputs,
        how: Materialise,
    ) -> Result<gix::ObjectId> {
        let mut prefix = BString::default();
        match self.scope_level(tree, inputs, &mut prefix, how)? {
            Some(id) => Ok(id),
            None => self.put_tree(&gix::objs::Tree::empty(), how),
        }
    }

    /// A parentless commit of the scoped tree `scoped`, for a worktree that holds only a
    /// check's inputs (`what` names it in the message). Nothing refers to it: `git gc` prunes it.
    pub fn scoped_commit(&self, scoped: gix::ObjectId, what: &str) -> Result<gix::ObjectId> {
        self.write_commit(
            &format!("tabellio: the declared inputs of {what}\n"),
            scoped,
            [],
        )
    }

    /// Is `path` (a file or a directory) in `tree`? For naming an undeclared input.
    pub fn has_path(&self, tree: gix::ObjectId, path: &str) -> bool {
        matches!(self.entry_at(tree, path), Ok(Some(_)))
    }

    /// One level of [`Store::scoped_tree`]: `None` when nothing below matches.
    fn scope_level(
        &self,
        tree: gix::ObjectId,
        inputs: &Inputs,
        prefix: &mut BString,
        how: Materialise,
    ) -> Result<Option<gix::ObjectId>> {
        let object = self
            .object(tree)?
            .try_into_tree()
            .context(|| format!("could not read the tree {tree}"))?;
        let decoded = object
            .decode()
            .context(|| format!("could not decode the tree {tree}"))?;
        let mut kept = gix::objs::Tree::empty();
        let mut all = true;
        let entries: Vec<(gix::objs::tree::EntryMode, BString, gix::ObjectId)> = decoded
            .entries
            .iter()
            .map(|e| (e.mode, e.filename.to_owned(), e.oid.to_owned()))
            .collect();
        drop(object);
        for (mode, name, oid) in entries {
            let len = prefix.len();
            if len > 0 {
                prefix.push(b'/');
            }
            prefix.extend_from_slice(&name);
            let keep = if mode.is_tree() {
                if inputs.matches(prefix.as_bstr()) {
                    Some(oid)
                } else if inputs.may_contain(prefix.as_bstr()) {
                    self.scope_level(oid, inputs, prefix, how)?
                } else {
                    None
                }
            } else if inputs.matches(prefix.as_bstr()) {
                Some(oid)
            } else {
                None
            };
            prefix.truncate(len);
            match keep {
                Some(id) => {
                    all &= id == oid;
                    kept.entries.push(gix::objs::tree::Entry {
                        mode,
                        filename: name,
                        oid: id,
                    });
                }
                None => all = false,
            }
        }
        if kept.entries.is_empty() {
            return Ok(None);
        }
        if all {
            // Everything kept as it was: the tree itself.
            return Ok(Some(tree));
        }
        self.put_tree(&kept, how).map(Some)
    }

    fn put_tree(&self, tree: &gix::objs::Tree, how: Materialise) -> Result<gix::ObjectId> {
        match how {
            Materialise::Write => self.write_object(tree),
            Materialise::HashOnly => {
                let mut data = Vec::with_capacity(tree.size() as usize);
                tree.write_to(&mut data)
                    .context(|| "could not encode a tree".to_string())?;
                gix::objs::compute_hash(self.object_hash(), gix::object::Kind::Tree, &data)
                    .context(|| "could not hash a tree".to_string())
            }
        }
    }
}
