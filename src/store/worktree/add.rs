//! Adding and removing the linked worktrees of runs.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::error::{Context, Error, Result};
use crate::store::refs::RefFormat;
use crate::store::Store;

use super::NewHead;

impl Store {
    /// Add a linked worktree at `path` with `branch` checked out.
    pub fn add_worktree(&self, path: &Path, branch: &str) -> Result<()> {
        self.add_worktree_at(path, NewHead::Branch(branch), &AtomicBool::new(false))
    }

    /// Add a linked worktree at `path` with `head` checked out; `interrupt` stops the checkout
    /// (files backend: gix checks out in-process).
    pub fn add_worktree_at(
        &self,
        path: &Path,
        head: NewHead<'_>,
        interrupt: &AtomicBool,
    ) -> Result<()> {
        let gix_head = match head {
            NewHead::Branch(branch) => {
                gix::worktree::add::Head::Attached(gix::refs::FullName::try_from(branch).map_err(
                    |e| Error::usage(format!("{branch:?} is not a valid branch name: {e:#}")),
                )?)
            }
            NewHead::Detached(commit) => gix::worktree::add::Head::Detached(commit),
        };
        if self.ref_format() == RefFormat::Reftable {
            return self.add_worktree_with_git(path, head);
        }
        if let NewHead::Branch(branch) = head {
            if !self.config_includes_on_branch() {
                return self.add_worktree_on_branch(path, branch, interrupt);
            }
        }
        self.repo
            .add_worktree(path, gix_head, gix::progress::Discard, interrupt)
            .context(|| format!("could not add the worktree at {}", path.display()))?;
        Ok(())
    }

    /// Add a linked worktree at `path` on `branch` without opening every other worktree: gix's
    /// attached add opens each registered worktree as a repository to learn which branches are
    /// checked out, so `start` grew with the live runs. [`Store::branch_use`] answers that from
    /// their `HEAD` files (and refuses a branch being rebased or bisected, as git does); the
    /// worktree is then prepared detached at the branch's commit, its `HEAD` attached to the
    /// branch (the reflog entry is the same: none to the commit), and checked out. A failed
    /// checkout rolls the registration back, as gix's own add does; until the checkout ends the
    /// worktree stays locked as initializing, so nothing reads it half made.
    fn add_worktree_on_branch(
        &self,
        path: &Path,
        branch: &str,
        interrupt: &AtomicBool,
    ) -> Result<()> {
        let failed = |e: &dyn std::fmt::Display| {
            Error::internal(format!(
                "could not add the worktree at {}: {e}",
                path.display()
            ))
        };
        if !branch.starts_with("refs/heads/") {
            return Err(Error::usage(format!(
                "{branch:?} is not a branch under refs/heads/"
            )));
        }
        let used = self.branch_use(branch)?;
        if let Some(at) = used
            .checked_out
            .first()
            .or(used.operation.as_ref().map(|o| &o.1))
        {
            return Err(Error::refused(format!(
                "{branch} is already used by the worktree at {}",
                at.display()
            ))
            .hint("a run needs a branch of its own; choose another --branch or run id"));
        }
        let commit = self
            .ref_target(branch)?
            .ok_or_else(|| {
                Error::not_found(format!("branch {branch} not found"))
                    .hint("the run's branch is made before its worktree; `git tabellio status` says how to repair the run")
            })?;
        let prepared = self
            .repo
            .prepare_add_worktree(path, gix::worktree::add::Head::Detached(commit), interrupt)
            .map_err(|e| failed(&e))?;
        let head = prepared.repo().git_dir().join("HEAD");
        let attached = (|| -> std::io::Result<()> {
            use std::io::Write;
            let mut lock = gix::lock::File::acquire_to_update_resource(
                &head,
                gix::lock::acquire::Fail::Immediately,
                None,
                0,
            )
            .map_err(std::io::Error::other)?;
            lock.write_all(format!("ref: {branch}\n").as_bytes())?;
            lock.commit().map_err(|e| e.error)?;
            Ok(())
        })();
        if let Err(e) = attached {
            let _ = prepared.rollback();
            return Err(failed(&format!(
                "could not attach its HEAD to {branch}: {e}"
            )));
        }
        prepared
            .checkout(gix::progress::Discard, interrupt)
            .map_err(|e| failed(&e))?;
        Ok(())
    }

    /// Whether the configuration includes a file only on some branch (`includeIf "onbranch:…"`):
    /// a worktree must then be checked out with its branch already attached when the repository
    /// is opened, which only gix's attached add does.
    fn config_includes_on_branch(&self) -> bool {
        let config = self.repo.config_snapshot();
        let sections = config.plumbing().sections_by_name("includeIf");
        sections.is_some_and(|mut s| {
            s.any(|s| {
                s.header()
                    .subsection_name()
                    .is_some_and(|n| n.starts_with(b"onbranch:"))
            })
        })
    }

    /// `git worktree add`: with reftable, a linked worktree's HEAD lives in a reftable stack of
    /// its own, which only git can create. The user's hooks are not run (gix runs none either):
    /// this writes no branch, only the new worktree's HEAD.
    fn add_worktree_with_git(&self, path: &Path, head: NewHead<'_>) -> Result<()> {
        let mut args = crate::store::git_cli::argv([
            "-c",
            "core.hooksPath=/dev/null",
            "worktree",
            "add",
            "--quiet",
        ]);
        let what = match head {
            NewHead::Branch(branch) => branch
                .strip_prefix("refs/heads/")
                .ok_or_else(|| {
                    Error::usage(format!("{branch:?} is not a branch under refs/heads/"))
                })?
                .to_string(),
            NewHead::Detached(commit) => {
                args.push("--detach".into());
                commit.to_string()
            }
        };
        args.push(path.as_os_str().to_os_string());
        args.push(what.into());
        self.git_worktree(&args, "add", path)
    }

    /// Run `git <args>`, a `git worktree <verb>` of the worktree at `path`: its failure is an
    /// internal error that names the worktree and git's message.
    fn git_worktree(&self, args: &[std::ffi::OsString], verb: &str, path: &Path) -> Result<()> {
        let out = crate::store::git_cli::run(self, args)?;
        if !out.success() {
            return Err(Error::internal(format!(
                "could not {verb} the worktree at {}: git worktree {verb} failed: {}",
                path.display(),
                out.stderr_tail()
            ))
            .hint("git's message says why; `git worktree list` shows the worktrees git has registered"));
        }
        Ok(())
    }

    /// Forget linked worktrees registered at `path` whose directory is gone (what
    /// `git worktree prune` does for them): their administrative directory is removed.
    pub fn prune_missing_worktree(&self, path: &Path) -> Result<bool> {
        if path.exists() {
            return Ok(false);
        }
        let mut pruned = false;
        for proxy in self
            .repo
            .worktrees()
            .context(|| "could not list worktrees".into())?
        {
            if proxy.base().ok().as_deref() == Some(path) {
                let admin = proxy.git_dir().to_path_buf();
                std::fs::remove_dir_all(&admin)
                    .context(|| format!("could not remove {}", admin.display()))?;
                pruned = true;
            }
        }
        Ok(pruned)
    }

    /// Remove an unusable worktree at `path` (see [`broken_reason`](super::broken_reason)): its
    /// administrative directory (found by its `gitdir` file, or by name when that file is
    /// unreadable, as a killed `git worktree add` can leave it) and the directory itself.
    pub fn forget_broken_worktree(&self, path: &Path) -> Result<()> {
        let admin_root = self.repo.common_dir().join("worktrees");
        let want = path.join(".git");
        let want_real = std::fs::canonicalize(path).ok().map(|p| p.join(".git"));
        let name = path.file_name().map(|n| n.to_os_string());
        if let Ok(entries) = std::fs::read_dir(&admin_root) {
            for entry in entries.flatten() {
                let admin = entry.path();
                let gitdir = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
                let gitdir = Path::new(gitdir.trim());
                let matches = if gitdir.as_os_str().is_empty() {
                    Some(entry.file_name()) == name
                } else {
                    gitdir == want || Some(gitdir) == want_real.as_deref()
                };
                if matches {
                    std::fs::remove_dir_all(&admin)
                        .context(|| format!("could not remove {}", admin.display()))?;
                }
            }
        }
        if path.exists() {
            std::fs::remove_dir_all(path)
                .context(|| format!("could not remove {}", path.display()))?;
        }
        Ok(())
    }

    /// Remove the linked worktree at `path`; with `force`, even with changes in it (or locked).
    pub fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        if self.ref_format() == RefFormat::Reftable {
            return self.remove_worktree_with_git(path, force);
        }
        let target = self
            .repo
            .prepare_remove_worktree(path)
            .context(|| format!("could not find the worktree at {}", path.display()))?;
        let force = if force {
            gix::worktree::remove::Force::OverrideLock
        } else {
            gix::worktree::remove::Force::Never
        };
        target
            .remove(force, gix::progress::Discard)
            .context(|| format!("could not remove the worktree at {}", path.display()))
    }

    /// `git worktree remove`: with reftable gix cannot read a linked worktree's `HEAD` (it lives
    /// in the worktree's own reftable stack), so it cannot tell whether the worktree is clean
    /// before removing it; git can. `force` is git's `--force --force`, as gix's
    /// `OverrideLock`: changes are discarded and a lock is overridden.
    fn remove_worktree_with_git(&self, path: &Path, force: bool) -> Result<()> {
        let mut args = crate::store::git_cli::argv(["worktree", "remove"]);
        if force {
            args.extend(["--force".into(), "--force".into()]);
        }
        args.push(path.as_os_str().to_os_string());
        self.git_worktree(&args, "remove", path)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_git as git;
    use crate::store::test_repo as repo;
    use crate::store::Store;

    /// A worktree added on a branch without opening the others: on the branch, checked out,
    /// its HEAD reflog one entry to the commit; a branch in use elsewhere is refused before
    /// anything is written; and with a configuration included on some branch, gix's own add
    /// (which opens the worktree with its branch attached) does it.
    #[test]
    fn a_worktree_is_added_on_its_branch_without_opening_the_others() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let ours = repo(home, "ours");
        std::fs::write(ours.join("f.txt"), "f\n").expect("write");
        git(home, &ours, &["add", "f.txt"]);
        git(home, &ours, &["commit", "-q", "-m", "f"]);
        git(home, &ours, &["branch", "run"]);
        git(
            home,
            &ours,
            &["worktree", "add", "-q", "-b", "other", "../other"],
        );
        let store = Store::open(&ours).expect("open");
        assert!(!store.config_includes_on_branch());

        let wt = home.join("wt");
        store.add_worktree(&wt, "refs/heads/run").expect("added");
        let admin = ours.join(".git/worktrees/wt");
        assert_eq!(
            std::fs::read_to_string(admin.join("HEAD")).expect("HEAD"),
            "ref: refs/heads/run\n"
        );
        assert_eq!(std::fs::read_to_string(wt.join("f.txt")).expect("f"), "f\n");
        assert!(!admin.join("locked").exists());
        assert!(crate::store::worktree::inspect(&wt)
            .expect("inspect")
            .is_clean());
        let reflog = std::fs::read_to_string(admin.join("logs/HEAD")).expect("reflog");
        let tip = store
            .ref_target("refs/heads/run")
            .expect("read")
            .expect("run");
        assert_eq!(reflog.lines().count(), 1, "{reflog}");
        assert!(
            reflog.starts_with(&format!("{} {tip} ", "0".repeat(40))),
            "{reflog}"
        );

        assert!(store
            .add_worktree(&home.join("remote"), "refs/remotes/origin/run")
            .is_err());
        let listed = |s: &Store| s.worktrees_with_branches().expect("listed").len();
        let before = listed(&store);
        let err = store
            .add_worktree(&home.join("again"), "refs/heads/other")
            .expect_err("in use");
        assert!(
            err.message.contains("already used by the worktree"),
            "{}",
            err.message
        );
        assert_eq!(listed(&store), before);
        assert!(!home.join("again").exists());

        git(
            home,
            &ours,
            &["config", "includeIf.onbranch:run2.path", "nothing.inc"],
        );
        git(home, &ours, &["branch", "run2"]);
        let store = Store::open(&ours).expect("open");
        assert!(store.config_includes_on_branch());
        let wt2 = home.join("wt2");
        store.add_worktree(&wt2, "refs/heads/run2").expect("added");
        assert_eq!(
            store.linked_worktree_branch(&wt2).as_deref(),
            Some("refs/heads/run2")
        );
    }
}
