//! The branch of every worktree's `HEAD` at once, in a reftable repository: there each worktree
//! keeps `HEAD` in a reftable stack of its own, which only git reads, and a `git symbolic-ref`
//! per worktree costs a process each (a promote in a repository of 50 run worktrees started 52
//! of them). `git worktree list --porcelain -z` reads them all in one.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::super::git_cli;
use super::super::refs::RefFormat;
use super::super::Store;
use super::admin_dir;

/// The branch each worktree's `HEAD` names (`None`: detached), by git dir as
/// [`Store::git_dir_key`] names it; empty when nothing was listed.
pub(in crate::store) type ListedHeads = HashMap<PathBuf, Option<String>>;

impl Store {
    /// With reftable, every worktree's `HEAD` branch from one `git worktree list`: once per
    /// ref snapshot, else at each call. Empty with the files backend (a `HEAD` is one file
    /// read there) and when git cannot list them; a worktree missing from it is read alone.
    pub(in crate::store) fn listed_heads(&self) -> ListedHeads {
        if self.ref_format() != RefFormat::Reftable {
            return ListedHeads::new();
        }
        self.worktree_heads_once(|| self.list_heads().unwrap_or_default())
    }

    fn list_heads(&self) -> Option<ListedHeads> {
        let common = self.repo.common_dir();
        let args = ["worktree", "list", "--porcelain", "-z"].map(OsString::from);
        let out = git_cli::run_at_git_dir(common, &args).ok()?;
        if !out.success() {
            return None;
        }
        let listed = parse(&out.stdout);
        let mut times: HashMap<&str, usize> = HashMap::new();
        for (path, _) in &listed {
            *times.entry(path.as_str()).or_default() += 1;
        }
        let mut heads = ListedHeads::new();
        for (i, (path, branch)) in listed.iter().enumerate() {
            // The main worktree comes first; the others are found by their `.git` file, which
            // names their administrative directory. A path listed twice (two administrative
            // directories claiming one worktree), or one whose administrative directory does
            // not name it back, is left out: its `HEAD` is then read alone.
            let git_dir = match i {
                0 => common.to_path_buf(),
                _ if times[path.as_str()] > 1 => continue,
                _ => match admin_dir(Path::new(path)) {
                    Some(dir) if names_back(&dir, path) => dir,
                    _ => continue,
                },
            };
            heads.insert(self.git_dir_key(&git_dir), branch.clone());
        }
        Some(heads)
    }
}

/// Whether the administrative directory `admin` belongs to the worktree at `path`: its
/// `gitdir` file names `path`'s `.git`, as git wrote it (and read it to list `path`).
fn names_back(admin: &Path, path: &str) -> bool {
    std::fs::read_to_string(admin.join("gitdir"))
        .is_ok_and(|text| Path::new(text.trim_end_matches('\n')) == Path::new(path).join(".git"))
}

/// The worktrees of `git worktree list --porcelain -z`, in order: (path, branch).
fn parse(out: &str) -> Vec<(String, Option<String>)> {
    let mut worktrees: Vec<(String, Option<String>)> = Vec::new();
    for field in out.split('\0') {
        if let Some(path) = field.strip_prefix("worktree ") {
            worktrees.push((path.to_string(), None));
        } else if let (Some(name), Some(last)) =
            (field.strip_prefix("branch "), worktrees.last_mut())
        {
            if gix::refs::FullName::try_from(name).is_ok() {
                last.1 = Some(name.to_string());
            }
        }
    }
    worktrees
}

#[cfg(test)]
mod tests {
    use crate::store::{test_git as git, test_repo_in_format, Store};

    /// A repository in `format` under `home` with a worktree `../on-x` on branch `x` and a
    /// detached one `../<detached>`: the repository's path and its git dir.
    fn with_two_worktrees(
        home: &std::path::Path,
        format: &str,
        detached: &str,
    ) -> (std::path::PathBuf, std::path::PathBuf) {
        let path = test_repo_in_format(home, "r", format);
        git(
            home,
            &path,
            &["worktree", "add", "-q", "-b", "x", "../on-x"],
        );
        let detached = format!("../{detached}");
        git(
            home,
            &path,
            &["worktree", "add", "-q", "--detach", detached.as_str()],
        );
        let common = path.join(".git");
        (path, common)
    }

    /// With reftable every worktree is in the listing, with the branch `git symbolic-ref` gives
    /// in it (detached: none), keyed as the worktree lookups key it; with files nothing is listed.
    #[test]
    fn every_worktree_is_listed_with_its_branch() {
        for format in ["reftable", "files"] {
            let dir = tempfile::tempdir().expect("temp dir");
            let home = dir.path();
            let (path, common) = with_two_worktrees(home, format, "detached");
            let store = Store::open(&path).expect("open");
            let listed = store.listed_heads();
            if format == "files" {
                assert!(listed.is_empty());
                continue;
            }
            let key = |p: &std::path::Path| store.git_dir_key(p);
            let expected = std::collections::HashMap::from([
                (key(&common), Some("refs/heads/main".to_string())),
                (
                    key(&common.join("worktrees/on-x")),
                    Some("refs/heads/x".to_string()),
                ),
                (key(&common.join("worktrees/detached")), None),
            ]);
            assert_eq!(listed, expected);
        }
    }

    /// A worktree git lists under a path whose `.git` file names another worktree's
    /// administrative directory is left out: that other worktree keeps its own branch.
    #[test]
    fn a_worktree_whose_admin_dir_does_not_name_it_back_is_left_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let (path, common) = with_two_worktrees(home, "reftable", "z-detached");
        // `z-detached`'s administrative directory now says its worktree is `z-fake` (git lists
        // it after `on-x`, by path), whose `.git` file names `on-x`'s administrative directory.
        let fake = home.join("z-fake");
        std::fs::create_dir(&fake).expect("mkdir");
        let on_x_admin = common.join("worktrees/on-x");
        std::fs::write(
            fake.join(".git"),
            format!("gitdir: {}\n", on_x_admin.display()),
        )
        .expect("write");
        let detached_admin = common.join("worktrees/z-detached");
        std::fs::write(
            detached_admin.join("gitdir"),
            format!("{}\n", fake.join(".git").display()),
        )
        .expect("write");
        let store = Store::open(&path).expect("open");
        let listed = store.listed_heads();
        let key = |p: &std::path::Path| store.git_dir_key(p);
        assert_eq!(
            listed.get(&key(&on_x_admin)),
            Some(&Some("refs/heads/x".to_string()))
        );
        assert_eq!(listed.get(&key(&detached_admin)), None);
        assert_eq!(listed.len(), 2, "{listed:?}");
    }

    #[test]
    fn parses_the_porcelain_listing() {
        let out = "worktree /r\0HEAD 1111111111111111111111111111111111111111\0branch refs/heads/main\0\0\
                   worktree /r/.tabellio/worktrees/a b\0HEAD 2222222222222222222222222222222222222222\0detached\0locked\0\0\
                   worktree /w\0HEAD 0000000000000000000000000000000000000000\0branch refs/heads/unborn\0prunable gitdir file points to non-existent location\0\0";
        assert_eq!(
            super::parse(out),
            [
                ("/r".to_string(), Some("refs/heads/main".to_string())),
                ("/r/.tabellio/worktrees/a b".to_string(), None),
                ("/w".to_string(), Some("refs/heads/unborn".to_string())),
            ]
        );
    }

    /// Two administrative directories claiming one worktree path: neither is taken from the
    /// listing (each is read alone).
    #[test]
    fn a_path_two_worktrees_claim_is_left_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let (path, common) = with_two_worktrees(home, "reftable", "detached");
        let (on_x, detached) = (
            common.join("worktrees/on-x"),
            common.join("worktrees/detached"),
        );
        let claimed = std::fs::read_to_string(on_x.join("gitdir")).expect("gitdir");
        std::fs::write(detached.join("gitdir"), claimed).expect("write");
        let store = Store::open(&path).expect("open");
        let listed = store.listed_heads();
        assert_eq!(listed.get(&store.git_dir_key(&on_x)), None, "{listed:?}");
        assert_eq!(listed.len(), 1, "{listed:?}");
    }
}
