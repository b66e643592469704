//! One view of the refs for a read-only phase ([`Store::snapshot_refs`]): each ref, each
//! listing and each worktree's `HEAD` read once.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::store::Store;

use super::{find, for_each_ref, head_with, list, Head, RefFormat};

/// What was read while a [`Store::snapshot_refs`] runs.
#[derive(Default)]
struct Seen {
    /// Direct refs by name, as first read (`None`: absent, or symbolic).
    refs: BTreeMap<String, Option<gix::ObjectId>>,
    /// Prefixes listed whole: a direct ref under one of them is in `refs`, or is absent.
    listed: Vec<String>,
    /// The `HEAD` of a worktree, by its git dir.
    heads: HashMap<PathBuf, Head>,
    /// The branch a worktree's `HEAD` names, by its git dir, where only the branch was read.
    branches: HashMap<PathBuf, Option<String>>,
    /// Every worktree's `HEAD` branch, listed at once ([`Store::listed_heads`]).
    listed_heads: Option<HashMap<PathBuf, Option<String>>>,
    /// Revisions resolved by git (reftable), by the expression asked.
    revs: HashMap<String, Option<gix::ObjectId>>,
}

impl Seen {
    fn listed(&self, name: &str) -> bool {
        self.listed.iter().any(|prefix| name.starts_with(prefix))
    }

    /// Keep what a listing of `prefixes` found (`direct` refs; a ref read before keeps its
    /// first value): a direct ref under one of them is now kept, or absent.
    fn keep_listing(
        &mut self,
        direct: impl IntoIterator<Item = (String, gix::ObjectId)>,
        prefixes: impl IntoIterator<Item = String>,
    ) {
        for (name, id) in direct {
            self.refs.entry(name).or_insert(Some(id));
        }
        self.listed.extend(prefixes);
    }

    /// The direct refs kept under `prefix`, sorted by name.
    fn under(&self, prefix: &str) -> Vec<(String, gix::ObjectId)> {
        self.refs
            .range(prefix.to_string()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .filter_map(|(name, id)| id.map(|id| (name.clone(), id)))
            .collect()
    }
}

/// The refs read while a [`Store::snapshot_refs`] runs (`None`: no snapshot is open).
#[derive(Default)]
pub(in crate::store) struct Snapshot(std::sync::Mutex<Option<Seen>>);

impl Snapshot {
    fn seen(&self) -> std::sync::MutexGuard<'_, Option<Seen>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Closes the snapshot it opened, however `read` returns.
struct Opened<'s>(&'s Snapshot);

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        *self.0.seen() = None;
    }
}

impl Store {
    /// Run `read` with each ref read at most once: its first value is the one every later read
    /// gets. `status` and promote's preconditions ask for the same few refs (the target, the
    /// run's branch, the notes refs, the run worktree's `HEAD`) up to five times each, and every
    /// ask is a file read (with reftable, a request to `git`); one value per ref also makes what
    /// `read` judges a single view of the refs. Only reads belong in `read`: a ref transaction
    /// started inside forgets what was read ([`Store::forget_refs`]), so its checks and its
    /// diagnosis see the refs as they are. Nested calls share the outer snapshot.
    pub fn snapshot_refs<T>(&self, read: impl FnOnce() -> T) -> T {
        let opened = {
            let mut seen = self.ref_snapshot.seen();
            if seen.is_some() {
                None
            } else {
                *seen = Some(Seen::default());
                Some(Opened(&self.ref_snapshot))
            }
        };
        let out = read();
        drop(opened);
        out
    }

    /// Forget what an open snapshot read: the refs are about to change.
    pub(crate) fn forget_refs(&self) {
        if let Some(seen) = self.ref_snapshot.seen().as_mut() {
            *seen = Seen::default();
        }
    }

    /// In an open snapshot of a reftable repository, read every ref under `prefix` (which ends
    /// in `/`) with one listing, so that the reads of single refs under it that follow are
    /// answered from it: each read of a ref that does not exist is otherwise a `git` process of
    /// its own. Nothing is read with the files backend, where a single ref is one file read and
    /// a listing would walk directories, or outside a snapshot.
    pub fn snapshot_refs_under(&self, prefix: &str) -> Result<()> {
        if self.ref_format() == RefFormat::Reftable && self.ref_snapshot.seen().is_some() {
            self.refs_under(prefix)?;
        }
        Ok(())
    }

    /// In an open snapshot of a reftable repository, read each of the refs `names` and the refs
    /// below each of them (`<name>/…`) with one `git for-each-ref`, so that the reads of those
    /// names and the listings of their directories that follow are answered from it: a read of
    /// a ref that does not exist is otherwise a `git` process of its own (`start` checks that
    /// its ledger and branch are absent and that nothing is below the branch). A ref read
    /// before keeps its first value. A named ref that is symbolic is left to its own read, as
    /// before the listing (git's lookup follows it). Nothing is read with the files backend, or
    /// outside a snapshot.
    pub fn snapshot_refs_named(&self, names: &[&str]) -> Result<()> {
        if self.ref_format() != RefFormat::Reftable || self.ref_snapshot.seen().is_none() {
            return Ok(());
        }
        let found = for_each_ref(&self.repo, names)?;
        let absent: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| !found.iter().any(|(n, _)| n == name))
            .collect();
        let direct = found.iter().filter_map(|(n, id)| Some((n.clone(), (*id)?)));
        let mut guard = self.ref_snapshot.seen();
        let Some(seen) = guard.as_mut() else {
            return Ok(());
        };
        seen.keep_listing(direct, names.iter().map(|name| format!("{name}/")));
        for name in absent {
            seen.refs.entry(name.to_string()).or_insert(None);
        }
        Ok(())
    }

    /// The current value of the direct ref `name`, `None` when it does not exist (as of the
    /// snapshot's first read of it while one is open).
    pub fn ref_target(&self, name: &str) -> Result<Option<gix::ObjectId>> {
        if let Some(seen) = self.ref_snapshot.seen().as_ref() {
            if let Some(value) = seen.refs.get(name) {
                return Ok(*value);
            }
            if seen.listed(name) {
                return Ok(None);
            }
        }
        self.ref_target_now(name)
    }

    /// The value of the direct ref `name` as it is now, in or out of a snapshot: for a read
    /// that looks for someone else's move of a ref read before. An open snapshot keeps it.
    pub fn ref_target_now(&self, name: &str) -> Result<Option<gix::ObjectId>> {
        let value = find(&self.repo, self.ref_format(), Some(&self.ref_reader), name)?;
        if let Some(seen) = self.ref_snapshot.seen().as_mut() {
            seen.refs.insert(name.to_string(), value);
        }
        Ok(value)
    }

    /// Names and targets of the direct refs under `prefix` (which ends in `/`), sorted by name.
    /// In an open snapshot a prefix is listed once, and a ref read before keeps its first value.
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<(String, gix::ObjectId)>> {
        if let Some(seen) = self.ref_snapshot.seen().as_ref() {
            if seen.listed(prefix) {
                return Ok(seen.under(prefix));
            }
        }
        let now = list(&self.repo, self.ref_format(), prefix)?;
        let mut guard = self.ref_snapshot.seen();
        let Some(seen) = guard.as_mut() else {
            return Ok(now);
        };
        seen.keep_listing(now, [prefix.to_string()]);
        Ok(seen.under(prefix))
    }

    /// HEAD of the worktree this store was opened in.
    pub fn head(&self) -> Result<Head> {
        self.head_of(&self.repo)
    }

    /// HEAD of the worktree `repo` was opened in (this store's, or another worktree of the same
    /// repository): read once per snapshot, afresh outside one. With reftable the commit of this
    /// store's own worktree comes from the ref reader already running, not a `git rev-parse`.
    pub(crate) fn head_of(&self, repo: &gix::Repository) -> Result<Head> {
        let git_dir = repo.git_dir();
        let key = self
            .ref_snapshot
            .seen()
            .is_some()
            .then(|| self.git_dir_key(git_dir));
        let mut known_branch = None;
        if let Some(key) = &key {
            if let Some(seen) = self.ref_snapshot.seen().as_ref() {
                if let Some(head) = seen.heads.get(key) {
                    return Ok(head.clone());
                }
                // The branch read alone before: only the commit is left to read.
                known_branch = seen.branches.get(key).cloned();
            }
        }
        // The reader runs in this store's worktree, where `HEAD` is its HEAD.
        let reader = (git_dir == self.repo.git_dir()).then_some(&self.ref_reader);
        let head = head_with(repo, reader, known_branch)?;
        if let (Some(key), Some(seen)) = (key, self.ref_snapshot.seen().as_mut()) {
            seen.heads.insert(key, head.clone());
        }
        Ok(head)
    }

    /// The branch `HEAD` names in the worktree whose git dir is `git_dir`, as `branch` reads it
    /// (`None`: detached or unreadable): with reftable read once per snapshot, and not at all
    /// when the snapshot read that worktree's whole `HEAD`. With the files backend it is read
    /// each time: one small file, cheaper than keeping it (promote asks it of every worktree,
    /// and keeping 240 of them cost `status` 6% in alternating pairs).
    pub(in crate::store) fn head_branch_once(
        &self,
        git_dir: &Path,
        branch: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        if self.ref_format() == RefFormat::Files || self.ref_snapshot.seen().is_none() {
            return branch();
        }
        let key = self.git_dir_key(git_dir);
        if let Some(seen) = self.ref_snapshot.seen().as_ref() {
            if let Some(head) = seen.heads.get(&key) {
                return head.branch.clone();
            }
            if let Some(found) = seen.branches.get(&key) {
                return found.clone();
            }
        }
        let found = branch();
        if let Some(seen) = self.ref_snapshot.seen().as_mut() {
            seen.branches.insert(key, found.clone());
        }
        found
    }

    /// Every worktree's `HEAD` branch as `list` reads them, once per snapshot.
    pub(in crate::store) fn worktree_heads_once(
        &self,
        list: impl FnOnce() -> HashMap<PathBuf, Option<String>>,
    ) -> HashMap<PathBuf, Option<String>> {
        if let Some(listed) = self
            .ref_snapshot
            .seen()
            .as_ref()
            .and_then(|s| s.listed_heads.clone())
        {
            return listed;
        }
        let listed = list();
        if let Some(seen) = self.ref_snapshot.seen().as_mut() {
            seen.listed_heads = Some(listed.clone());
        }
        listed
    }

    /// The object the revision `rev` names as `parse` resolves it (`None`: not found), once
    /// per snapshot: `verify main..topic` resolves each end twice, for the range and for its
    /// guarded steps, and with reftable each is a `git rev-parse`.
    pub(in crate::store) fn rev_parse_once(
        &self,
        rev: &str,
        parse: impl FnOnce() -> Result<Option<gix::ObjectId>>,
    ) -> Result<Option<gix::ObjectId>> {
        if let Some(found) = self
            .ref_snapshot
            .seen()
            .as_ref()
            .and_then(|s| s.revs.get(rev))
        {
            return Ok(*found);
        }
        let found = parse()?;
        if let Some(seen) = self.ref_snapshot.seen().as_mut() {
            seen.revs.insert(rev.to_string(), found);
        }
        Ok(found)
    }

    /// How a worktree's git dir is known in the snapshot. The same directory is spelled in
    /// more than one way (`<git dir>/worktrees/<id>` from the worktree list, the `gitdir:` line
    /// of the worktree's `.git` file, `worktrees/<id>/../..` for the common directory): with
    /// reftable, where each `HEAD` read is a `git` process, it is the canonical path, worth its
    /// few system calls. With the files backend, where a `HEAD` read is one file read, the path
    /// as given.
    pub(in crate::store) fn git_dir_key(&self, git_dir: &Path) -> PathBuf {
        match self.ref_format() {
            RefFormat::Reftable => {
                std::fs::canonicalize(git_dir).unwrap_or_else(|_| git_dir.to_path_buf())
            }
            RefFormat::Files => git_dir.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{test_git as git, test_repo as repo, test_repo_in_format, test_rev};

    /// Inside a snapshot a ref keeps the value first read (git moves it meanwhile) and an
    /// absent ref stays absent; a ref transaction inside forgets them, so its checks and what
    /// is read after it see the refs as they are; outside, every read is fresh.
    #[test]
    fn a_snapshot_reads_each_ref_once_until_a_transaction() {
        use crate::store::{tx, Store};
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        git(home, &path, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let rev = |spec: &str| test_rev(home, &path, spec);
        let (two, one) = (rev("HEAD"), rev("HEAD~1"));
        let store = Store::open(&path).expect("open");
        let read = |name: &str| store.ref_target(name).expect("read");
        store.snapshot_refs(|| {
            assert_eq!(read("refs/heads/main"), Some(two));
            assert_eq!(read("refs/heads/other"), None);
            git(home, &path, &["update-ref", "refs/heads/main", "HEAD~1"]);
            git(home, &path, &["update-ref", "refs/heads/other", "HEAD"]);
            assert_eq!(read("refs/heads/main"), Some(two), "the first value stays");
            assert_eq!(read("refs/heads/other"), None, "absent stays absent");
            let now = store.ref_target_now("refs/heads/other").expect("read");
            assert_eq!(now, Some(one), "read as it is now");
            assert_eq!(read("refs/heads/other"), Some(one), "and kept");
            // Expected at the value the snapshot holds: the transaction must see main as it
            // is, and refuse.
            let stale = tx::Cas::update("refs/heads/main", Some(two), one, "stale");
            assert!(tx::apply(&store, &[stale]).is_err());
            assert_eq!(
                read("refs/heads/main"),
                Some(one),
                "forgotten by the transaction"
            );
            assert_eq!(read("refs/heads/other"), Some(one));
            git(
                home,
                &path,
                &["update-ref", "refs/heads/main", two.to_string().as_str()],
            );
            let moved = tx::Cas::update("refs/heads/main", Some(two), one, "moved");
            tx::apply(&store, &[moved]).expect("the transaction");
            assert_eq!(read("refs/heads/main"), Some(one));
        });
        git(
            home,
            &path,
            &["update-ref", "refs/heads/main", two.to_string().as_str()],
        );
        assert_eq!(
            read("refs/heads/main"),
            Some(two),
            "fresh outside a snapshot"
        );
    }

    /// In a snapshot a listed prefix answers the reads of the refs under it (a ref made
    /// after the listing stays absent, a listing again gives the same refs) and a worktree's
    /// `HEAD` and (with reftable, where git resolves them) each revision are read once; a
    /// transaction forgets them all. With reftable the notes refs are
    /// listed in advance ([`crate::store::Store::snapshot_refs_under`]), with files they are not.
    #[test]
    fn a_snapshot_lists_a_prefix_once_and_reads_each_head_once() {
        use crate::store::{tx, Store};
        for format in ["files", "reftable"] {
            let dir = tempfile::tempdir().expect("temp dir");
            let home = dir.path();
            let path = test_repo_in_format(home, "r", format);
            git(home, &path, &["commit", "-q", "--allow-empty", "-m", "two"]);
            let rev = |spec: &str| test_rev(home, &path, spec);
            let (two, one) = (rev("HEAD"), rev("HEAD~1"));
            git(home, &path, &["update-ref", "refs/notes/x/a", "HEAD"]);
            let store = Store::open(&path).expect("open");
            store.snapshot_refs(|| {
                store.snapshot_refs_under("refs/notes/").expect("listed");
                git(home, &path, &["update-ref", "refs/notes/x/b", "HEAD"]);
                let b = store.ref_target("refs/notes/x/b").expect("read");
                match format {
                    "reftable" => assert_eq!(b, None, "answered by the listing"),
                    _ => assert_eq!(b, Some(two), "read as it is: nothing listed"),
                }
                let listed = store.refs_under("refs/notes/x/").expect("list");
                git(home, &path, &["update-ref", "refs/notes/x/c", "HEAD"]);
                assert_eq!(store.refs_under("refs/notes/x/").expect("list"), listed);
                assert_eq!(store.ref_target("refs/notes/x/c").expect("read"), None);
                git(home, &path, &["tag", "t", "HEAD"]);
                assert_eq!(store.resolve_commit("t").expect("t"), two);
                git(home, &path, &["tag", "-f", "t", "HEAD~1"]);
                let t = store.resolve_commit("t").expect("t");
                match format {
                    "reftable" => assert_eq!(t, two, "git rev-parse asked once"),
                    _ => assert_eq!(t, one, "gix resolves it in-process each time"),
                }
                assert_eq!(store.head().expect("head").id, Some(two));
                git(home, &path, &["checkout", "-q", "--detach", "HEAD~1"]);
                let head = store.head().expect("head");
                assert_eq!(head.id, Some(two), "{format}: HEAD read once");
                assert_eq!(head.branch.as_deref(), Some("refs/heads/main"));
                let moved = tx::Cas::update("refs/notes/x/a", Some(two), one, "moved");
                tx::apply(&store, &[moved]).expect("the transaction");
                assert_eq!(store.head().expect("head").id, Some(one), "{format}");
                assert_eq!(store.head().expect("head").branch, None, "{format}");
                assert_eq!(store.resolve_commit("t").expect("t"), one, "{format}");
                let names: Vec<String> = store
                    .refs_under("refs/notes/x/")
                    .expect("list")
                    .into_iter()
                    .map(|(name, _)| name)
                    .collect();
                assert_eq!(
                    names,
                    ["refs/notes/x/a", "refs/notes/x/b", "refs/notes/x/c"]
                );
            });
        }
    }

    /// `snapshot_refs_named` reads named refs and the refs below them at once: with reftable a
    /// named ref made after it stays absent, one below it too, and a listing of a named ref's
    /// directory comes from it; a ref whose name only begins with a named one (`refs/x0` for
    /// `refs/x`) is not answered by it. With files nothing is read in advance.
    #[test]
    fn named_refs_and_the_refs_below_them_are_read_at_once() {
        use crate::store::Store;
        for format in ["files", "reftable"] {
            let dir = tempfile::tempdir().expect("temp dir");
            let home = dir.path();
            let path = test_repo_in_format(home, "r", format);
            let head = test_rev(home, &path, "HEAD");
            git(home, &path, &["update-ref", "refs/x", "HEAD"]);
            git(home, &path, &["update-ref", "refs/heads/a/b", "HEAD"]);
            git(
                home,
                &path,
                &["symbolic-ref", "refs/heads/s", "refs/heads/main"],
            );
            let store = Store::open(&path).expect("open");
            // A symbolic ref reads as it does without the listing.
            let symbolic = store.ref_target("refs/heads/s").expect("read");
            store.snapshot_refs(|| {
                let names = ["refs/x", "refs/heads/a", "refs/y", "refs/heads/s"];
                store.snapshot_refs_named(&names).expect("read");
                for made in ["refs/y", "refs/heads/a/c", "refs/x0"] {
                    git(home, &path, &["update-ref", made, "HEAD"]);
                }
                let read = |name: &str| store.ref_target(name).expect("read");
                assert_eq!(read("refs/x"), Some(head), "{format}");
                assert_eq!(read("refs/heads/a"), None, "{format}");
                assert_eq!(read("refs/x0"), Some(head), "{format}: not a named ref's");
                assert_eq!(read("refs/heads/s"), symbolic, "{format}: a symbolic ref");
                let below: Vec<String> = store
                    .refs_under("refs/heads/a/")
                    .expect("list")
                    .into_iter()
                    .map(|(name, _)| name)
                    .collect();
                match format {
                    "reftable" => {
                        assert_eq!(read("refs/y"), None, "answered by the listing");
                        assert_eq!(read("refs/heads/a/c"), None, "answered by the listing");
                        assert_eq!(below, ["refs/heads/a/b"], "listed with the names");
                    }
                    _ => {
                        assert_eq!(read("refs/y"), Some(head), "read as it is");
                        assert_eq!(below, ["refs/heads/a/b", "refs/heads/a/c"]);
                    }
                }
            });
        }
    }
}
