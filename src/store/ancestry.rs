//! Ancestry: whether one commit is reachable from another, as `git merge-base --is-ancestor`
//! answers it, and the first-parent line between two commits.

use crate::error::{Context, Error, Result};

use super::Store;

/// How many commits [`Store::is_ancestor`] walks itself before it asks gix.
const NEAR_ANCESTORS: usize = 32;

impl Store {
    /// Is `ancestor` reachable from `descendant` (or equal to it)?
    pub fn is_ancestor(&self, ancestor: gix::ObjectId, descendant: gix::ObjectId) -> Result<bool> {
        if ancestor == descendant || self.near_ancestor(ancestor, descendant) {
            return Ok(true);
        }
        let base = self.repo.merge_base(ancestor, descendant).context(|| {
            format!("could not compute the merge base of {ancestor} and {descendant}")
        })?;
        Ok(base.map(|b| b.detach()) == Some(ancestor))
    }

    /// Is `ancestor` among the first [`NEAR_ANCESTORS`] ancestors of `descendant` (breadth
    /// first), read through the store's own commit reads? A run's validated commit is usually a
    /// few commits on top of its base, and promote and `status` ask exactly that; gix's merge
    /// base (which answers every other case, and any commit this walk cannot read) sets up a
    /// commit graph and reads through gix's object lookups for it.
    fn near_ancestor(&self, ancestor: gix::ObjectId, descendant: gix::ObjectId) -> bool {
        let mut next = std::collections::VecDeque::from([descendant]);
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = next.pop_front() {
            if seen.len() == NEAR_ANCESTORS {
                return false;
            }
            if !seen.insert(id) {
                continue;
            }
            let Ok(commit) = self.commit(id) else {
                return false;
            };
            for parent in commit.parent_ids() {
                if parent == ancestor {
                    return true;
                }
                next.push_back(parent.detach());
            }
        }
        false
    }
}

/// The first parent of `commit`, `None` for a root commit.
pub fn first_parent(store: &Store, commit: gix::ObjectId) -> Result<Option<gix::ObjectId>> {
    let c = store
        .commit(commit)
        .map_err(|e| Error::not_found(format!("commit {commit} not found: {e:#}")).caused_by(e))?;
    let parent = c.parent_ids().next().map(|p| p.detach());
    Ok(parent)
}

/// How far back a first-parent chain is followed before the step is judged as one.
const MAX_CHAIN: usize = 10_000;

/// The commits from `from` (exclusive) to `to` along first parents, oldest first; just `[to]`
/// when `from` is not on `to`'s first-parent line (the move is then judged as one step).
pub fn first_parent_chain(
    store: &Store,
    from: gix::ObjectId,
    to: gix::ObjectId,
) -> Result<Vec<gix::ObjectId>> {
    first_parent_chain_within(store, from, to, None)
}

/// [`first_parent_chain`], giving up (`[to]`) as soon as the line leaves `within`.
pub fn first_parent_chain_within(
    store: &Store,
    from: gix::ObjectId,
    to: gix::ObjectId,
    within: Option<&std::collections::HashSet<gix::ObjectId>>,
) -> Result<Vec<gix::ObjectId>> {
    let mut chain = Vec::new();
    let mut at = to;
    while at != from {
        if chain.len() >= MAX_CHAIN || within.is_some_and(|w| !w.contains(&at)) {
            return Ok(vec![to]);
        }
        chain.push(at);
        let commit = store
            .commit(at)
            .map_err(|e| Error::not_found(format!("commit {at} not found: {e:#}")).caused_by(e))?;
        let parent = commit.parent_ids().next().map(|p| p.detach());
        match parent {
            Some(p) => at = p,
            None => return Ok(vec![to]),
        }
    }
    chain.reverse();
    Ok(chain)
}

/// The commits reachable from `tips` and their root trees: what a note may annotate and still
/// be worth keeping. A commit that cannot be read (a shallow or partial clone) is an error, so
/// a caller never takes "not reached" for "not read".
pub fn reachable_commits_and_trees(
    store: &Store,
    tips: Vec<gix::ObjectId>,
) -> Result<std::collections::HashSet<gix::ObjectId>> {
    let mut out = std::collections::HashSet::new();
    if tips.is_empty() {
        return Ok(out);
    }
    let walk = store
        .repo
        .rev_walk(tips)
        .all()
        .context(|| "could not walk the history of the refs".into())?;
    for info in walk {
        let info = info.context(|| "could not walk the history of the refs".into())?;
        let commit = store
            .commit(info.id)
            .context(|| format!("could not read commit {}", info.id))?;
        let tree = commit
            .tree_id()
            .context(|| format!("could not read the tree of {}", info.id))?;
        out.insert(tree.detach());
        out.insert(info.id);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::store::test_git as git;
    use crate::store::Store;

    /// What `git merge-base --is-ancestor` says, near (the store's own walk) and far (gix's
    /// merge base): a parent, a second parent, the root of a long history, a side branch, a
    /// descendant asked the other way round, and an unrelated history short enough to walk
    /// to its end.
    #[test]
    fn is_ancestor_is_what_git_says() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = crate::store::test_repo(home, "r");
        let commit = |m: &str| git(home, &path, &["commit", "-q", "--allow-empty", "-m", m]);
        for i in 0..super::NEAR_ANCESTORS + 8 {
            commit(&format!("c{i}"));
        }
        git(home, &path, &["switch", "-q", "-c", "side", "HEAD~3"]);
        commit("side");
        git(home, &path, &["switch", "-q", "--orphan", "lone"]);
        commit("lone");
        git(home, &path, &["switch", "-q", "main"]);
        git(
            home,
            &path,
            &["merge", "-q", "--no-ff", "-m", "merge", "side"],
        );
        commit("top");
        let store = Store::open(&path).expect("open");
        let rev = |spec: &str| crate::store::test_rev(home, &path, spec);
        let git_says = |a: &str, d: &str| {
            crate::store::test_git_command(home, &path, &["merge-base", "--is-ancestor", a, d])
                .status()
                .expect("git")
                .success()
        };
        let pairs = [
            ("HEAD~1", "HEAD"),
            ("side", "HEAD"),
            ("HEAD~1^2", "HEAD~1"),
            ("main~20", "HEAD"),
            ("init", "HEAD"),
            (":/^init", "HEAD"),
            ("HEAD", "HEAD~1"),
            ("side", "HEAD~2"),
            ("HEAD~2", "side"),
            ("HEAD", "lone"),
            ("lone", "HEAD"),
        ];
        git(home, &path, &["tag", "init", ":/^init"]);
        for (a, d) in pairs {
            let got = store.is_ancestor(rev(a), rev(d)).expect("answer");
            assert_eq!(got, git_says(a, d), "{a} of {d}");
        }
    }
}
