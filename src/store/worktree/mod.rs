//! Linked worktrees of runs, and what a worktree looks like right now (branch, head, changes).

use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};

use super::refs::{self, RefFormat};
use super::repo::open_path;
use super::Store;

mod add;
mod heads;
pub mod snapshot;
mod status;

use heads::ListedHeads;
pub(crate) use status::UntrackedScan;
use status::{status_of, status_with_index};

/// What a new linked worktree checks out.
#[derive(Debug, Clone, Copy)]
pub enum NewHead<'a> {
    /// A branch (`refs/heads/…`), which HEAD then follows.
    Branch(&'a str),
    /// One commit, HEAD detached.
    Detached(gix::ObjectId),
}

/// The live state of one worktree.
#[derive(Debug, Clone)]
pub struct WorkspaceState {
    pub path: PathBuf,
    /// The branch checked out (`refs/heads/…`), `None` when HEAD is detached.
    pub branch: Option<String>,
    pub head: Option<gix::ObjectId>,
    /// Paths with staged or unstaged changes to tracked files.
    pub changed: Vec<String>,
    /// Untracked, not ignored paths.
    pub untracked: Vec<String>,
}

/// Where a branch is in use ([`Store::branch_use`]).
#[derive(Debug, Default)]
pub struct BranchUse {
    /// The worktrees that have it checked out.
    pub checked_out: Vec<PathBuf>,
    /// A rebase or bisect of it in a worktree whose HEAD is detached: `("rebased" |
    /// "bisected", worktree)`.
    pub operation: Option<(&'static str, PathBuf)>,
}

impl WorkspaceState {
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.untracked.is_empty()
    }
}

impl Store {
    /// The branch HEAD of the worktree whose git dir is `git_dir` names, as the ref backend
    /// keeps it: the `HEAD` file with the files backend ([`head_branch_at`]), the worktree's
    /// own reftable stack through git with reftable (its `HEAD` file is a stub there).
    /// Read once per ref snapshot ([`Store::snapshot_refs`]); with reftable, from `listed`
    /// ([`Store::listed_heads`]) when the worktree is there.
    fn head_branch_of(&self, git_dir: &Path, listed: &ListedHeads) -> Option<String> {
        self.head_branch_once(git_dir, || match self.ref_format() {
            RefFormat::Files => head_branch_at(git_dir),
            RefFormat::Reftable => {
                if let Some(branch) = listed.get(&self.git_dir_key(git_dir)) {
                    return branch.clone();
                }
                let args = ["symbolic-ref", "-q", "HEAD"].map(std::ffi::OsString::from);
                let out = super::git_cli::run_at_git_dir(git_dir, &args).ok()?;
                if !out.success() {
                    return None;
                }
                let name = out.stdout.trim();
                gix::refs::FullName::try_from(name).ok()?;
                Some(name.to_string())
            }
        })
    }

    /// Every worktree (main and linked) with the branch it has checked out. Read from this
    /// repository's administrative files ([`head_branch_at`]), without opening any worktree: a
    /// repository may hold hundreds of run worktrees.
    pub fn worktrees_with_branches(&self) -> Result<Vec<(PathBuf, Option<String>)>> {
        let mut out = Vec::new();
        let listed = self.listed_heads();
        let main = self.main_workdir()?;
        if let Some(main) = main {
            out.push((main, self.head_branch_of(self.repo.common_dir(), &listed)));
        }
        for proxy in self
            .repo
            .worktrees()
            .context(|| "could not list worktrees".into())?
        {
            let Ok(base) = proxy.base() else { continue };
            out.push((base, self.head_branch_of(proxy.git_dir(), &listed)));
        }
        Ok(out)
    }

    /// The branch checked out in the worktree at `path`, when it is one of this repository's
    /// linked worktrees (its `.git` file names an administrative directory under this
    /// repository's `worktrees/`); `None` for a detached HEAD, a directory that is no worktree
    /// of ours (another repository's is never read), or an unreadable one. No repository is
    /// opened.
    pub fn linked_worktree_branch(&self, path: &Path) -> Option<String> {
        let admin = admin_dir(path)?;
        let admin = std::fs::canonicalize(admin).ok()?;
        let ours = std::fs::canonicalize(self.repo.common_dir().join("worktrees")).ok()?;
        if admin.parent() != Some(ours.as_path()) {
            return None;
        }
        self.head_branch_of(&admin, &ListedHeads::new())
    }

    /// The worktrees in which `branch` is checked out. Only a worktree that has it is asked
    /// where it lives (its `gitdir` file): the others cost one `HEAD` read each.
    pub fn worktrees_of_branch(&self, branch: &str) -> Result<Vec<PathBuf>> {
        Ok(self.branch_use(branch)?.checked_out)
    }

    /// Where `branch` is in use, in one pass over the worktrees: each worktree's `HEAD` is read
    /// once, and only one whose HEAD is detached (or unreadable) is asked for a rebase or bisect
    /// (git detaches HEAD for both), so a repository of run worktrees, each on its own branch,
    /// costs one `HEAD` read per worktree. Moving a branch under a rebase or bisect of it
    /// breaks that operation.
    pub fn branch_use(&self, branch: &str) -> Result<BranchUse> {
        let mut found = BranchUse::default();
        let short = branch.trim_start_matches("refs/heads/");
        let listed = self.listed_heads();
        let mut look = |git_dir: &Path, base: &dyn Fn() -> Option<PathBuf>| -> Result<()> {
            let head = self.head_branch_of(git_dir, &listed);
            if head.as_deref() == Some(branch) {
                found.checked_out.extend(base());
            }
            if head.is_some() || found.operation.is_some() {
                return Ok(());
            }
            // A linked worktree's administrative directory without its `gitdir` file is no
            // worktree gix or git lists (the main worktree's git dir has none).
            if git_dir != self.repo.common_dir() && !git_dir.join("gitdir").is_file() {
                return Ok(());
            }
            for (file, what) in [
                ("rebase-merge/head-name", "rebased"),
                ("rebase-apply/head-name", "rebased"),
                ("BISECT_START", "bisected"),
            ] {
                if let Ok(text) = std::fs::read_to_string(git_dir.join(file)) {
                    let name = text.trim();
                    if name == branch || name == short {
                        // Where a linked worktree lives is read only for the one that matches.
                        let at = base().unwrap_or_else(|| git_dir.to_path_buf());
                        found.operation = Some((what, at));
                        return Ok(());
                    }
                }
            }
            Ok(())
        };
        if let Some(main) = self.main_workdir()? {
            look(self.repo.common_dir(), &|| Some(main.clone()))?;
        }
        for git_dir in self.linked_admin_dirs()? {
            look(&git_dir, &|| self.linked_worktree_base(&git_dir))?;
        }
        Ok(found)
    }

    /// The administrative directories of the linked worktrees (`<common dir>/worktrees/*`
    /// that have a `gitdir` file, as gix lists them), read from the directory listing alone:
    /// one `HEAD` read per worktree is what the callers pay, not a file check besides.
    fn linked_admin_dirs(&self) -> Result<Vec<PathBuf>> {
        let dir = self.repo.common_dir().join("worktrees");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::internal(format!(
                    "could not list worktrees in {}: {e}",
                    dir.display()
                ))
                .hint("git worktree list reads the same directory: check that it is readable"))
            }
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry =
                entry.context(|| format!("could not list worktrees in {}", dir.display()))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(entry.path());
            }
        }
        Ok(out)
    }

    /// Where the linked worktree whose administrative directory is `git_dir` lives, as gix
    /// reads its `gitdir` file; `None` for a directory gix does not list as a worktree.
    fn linked_worktree_base(&self, git_dir: &Path) -> Option<PathBuf> {
        self.repo
            .worktrees()
            .ok()?
            .into_iter()
            .find(|p| p.git_dir() == git_dir)
            .and_then(|p| p.base().ok())
    }
}

/// The branch a worktree has checked out, read from its git dir's `HEAD` file (`git_dir` is
/// the common dir for the main worktree, `worktrees/<name>` for a linked one): the full ref
/// name of a symbolic HEAD, `None` when detached or unreadable.
///
/// The one place a worktree's HEAD is read as a file: that is valid for the files ref backend
/// only (with reftable, HEAD lives in the worktree's own reftable stack and the file holds a
/// placeholder), so a second ref backend branches here.
pub fn head_branch_at(git_dir: &Path) -> Option<String> {
    let text = read_small(&git_dir.join("HEAD"))?;
    let name = text.strip_prefix("ref:")?.trim();
    gix::refs::FullName::try_from(name).ok()?;
    Some(name.to_string())
}

/// A small file whole, as git writes it (ending in a newline), in one read where
/// `std::fs::read_to_string` asks for its size and reads again to see the end: this is read
/// for every worktree of the repository. Anything else (longer, no final newline) is read the
/// plain way.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = [0u8; 512];
    let n = file.read(&mut buf).ok()?;
    if n < buf.len() && n > 0 && buf[n - 1] == b'\n' {
        return String::from_utf8(buf[..n].to_vec()).ok();
    }
    let mut text = String::from_utf8(buf[..n].to_vec()).ok()?;
    file.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The git dir a worktree's `.git` names: the directory itself, or the `gitdir:` of a `.git`
/// file (relative to the worktree when relative). `None` when there is no readable `.git`.
pub fn admin_dir(worktree: &Path) -> Option<PathBuf> {
    let dot_git = worktree.join(".git");
    let meta = std::fs::metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = Path::new(text.strip_prefix("gitdir:")?.trim());
    Some(if target.is_absolute() {
        target.to_path_buf()
    } else {
        worktree.join(target)
    })
}

/// Why the existing worktree directory `path` cannot be used, if it cannot: a `git worktree
/// add` (ours, in `start`) killed half-way leaves no `.git` file, no index, or an
/// administrative directory still locked as "initializing".
///
/// Read from the administrative files alone (no repository is opened: `status` asks this of
/// every run it shows). A worktree that passes is still opened, and so checked in full, by
/// whatever reads it next ([`inspect`]).
pub fn broken_reason(path: &Path) -> Option<String> {
    let dot_git = path.join(".git");
    if !dot_git.exists() {
        return Some("no .git file".into());
    }
    let Some(git_dir) = admin_dir(path) else {
        return Some(format!(
            "not a repository: {} names no git dir",
            dot_git.display()
        ));
    };
    if !git_dir.join("HEAD").is_file() {
        return Some(format!(
            "not a repository: {} has no HEAD",
            git_dir.display()
        ));
    }
    if dot_git.is_file() {
        if !git_dir.join("commondir").is_file() {
            return Some(format!(
                "not a repository: {} is no linked worktree's git dir",
                git_dir.display()
            ));
        }
        let lock = git_dir.join("locked");
        if std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("initializing")) {
            return Some("still locked as initializing".into());
        }
    }
    if !git_dir.join("index").exists() {
        return Some("no index".into());
    }
    None
}

impl Store {
    /// Refuse a worktree at `path` that is not one of this repository's: its git dir must be
    /// this repository's common dir (the main worktree) or an administrative directory under its
    /// `worktrees/`. A `.git` file pointing into another repository would have that
    /// repository's commits judged and recorded here as the run's.
    pub fn check_own_worktree(&self, path: &Path) -> Result<()> {
        self.check_own_repo(path, &open_path(path)?)
    }

    /// [`inspect`] the worktree at `path` after [`Store::check_own_worktree`], opening it once:
    /// a worktree of another repository is refused before its status is computed (which would
    /// apply that repository's configuration and attributes).
    pub fn inspect_own(&self, path: &Path) -> Result<WorkspaceState> {
        if let Some(repo) = self.opened_at(path)? {
            return status_of(Some(self), path, repo);
        }
        let repo = open_checked(path)?;
        self.check_own_repo(path, &repo)?;
        status_of(Some(self), path, repo)
    }

    /// [`inspect`] the worktree at `path`, through this store's own repository when the
    /// command was started in that worktree (and the environment locates nothing else), else
    /// by opening it.
    pub fn inspect(&self, path: &Path) -> Result<WorkspaceState> {
        status_of(Some(self), path, self.worktree_repo(path)?)
    }

    /// The repository to read the worktree at `path` through: [`Store::opened_at`], else
    /// opened by its path (an unusable worktree refused).
    pub(crate) fn worktree_repo(&self, path: &Path) -> Result<gix::Repository> {
        if let Some(repo) = self.opened_at(path)? {
            return Ok(repo);
        }
        let mut repo = open_checked(path)?;
        // A worktree of this repository reads its objects through the store's object database:
        // each pack index is opened once a command (gix reads all of one to open it: 2 MB in a
        // repository of 500,000 objects), not once for every worktree looked at.
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same(repo.common_dir(), self.repo.common_dir()) {
            repo.objects = self.repo.objects.clone();
        }
        Ok(repo)
    }

    /// [`Store::inspect`], also handing back the repository it opened there and the index it
    /// compared: what promote checks before it moves a checked-out target, without reading
    /// a large index a second time. `untracked` says whether every directory is read for
    /// untracked files.
    pub(crate) fn inspect_with_index(
        &self,
        path: &Path,
        untracked: UntrackedScan,
    ) -> Result<(WorkspaceState, gix::Repository, gix::worktree::Index)> {
        let repo = self.worktree_repo(path)?;
        let (state, index) = status_with_index(Some(self), path, repo.clone(), untracked)?;
        Ok((state, repo, index))
    }

    /// This store's repository, when it was opened in the worktree at `path` and nothing in the
    /// environment made it see that worktree differently from [`open_path`]: an agent's
    /// `checkpoint`, `finish` or `status` in its run worktree then reads that worktree through
    /// the repository it already opened instead of opening it a second time. `None` (open it
    /// by its path) when the store is another worktree's, or when a `GIT_*` variable outside
    /// [`environment_locates_nothing`]'s list is set: a hook's `GIT_INDEX_FILE`,
    /// `GIT_WORK_TREE` or `GIT_DIR` belong to the command's repository as git located it,
    /// never to a worktree named by its path. Unusable worktrees are refused
    /// as [`inspect`] refuses them.
    pub(crate) fn opened_at(&self, path: &Path) -> Result<Option<gix::Repository>> {
        let Some(workdir) = self.repo.workdir() else {
            return Ok(None);
        };
        if !environment_locates_nothing() {
            return Ok(None);
        }
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        let here = canonical(path);
        if here.is_none() || here != canonical(workdir) {
            return Ok(None);
        }
        let dot_git = admin_dir(path).and_then(|d| canonical(&d));
        if dot_git.is_none() || dot_git != canonical(self.repo.git_dir()) {
            return Ok(None);
        }
        if let Some(why) = broken_reason(path) {
            return Err(unusable(path, &why));
        }
        Ok(Some(self.repo.clone()))
    }

    fn check_own_repo(&self, path: &Path, repo: &gix::Repository) -> Result<()> {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let ours = canonical(self.repo.common_dir());
        let git_dir = canonical(repo.git_dir());
        let own = canonical(repo.common_dir()) == ours
            && (git_dir == ours || git_dir.parent() == Some(ours.join("worktrees").as_path()));
        if own {
            return Ok(());
        }
        Err(Error::refused(format!(
            "the worktree {} belongs to another repository (its git dir is {}), not to {}",
            path.display(),
            git_dir.display(),
            ours.display()
        ))
        .hint(
            "nothing in it is judged; move it away, then recreate the run worktree with \
             `git worktree add <path> <run branch>` (or abandon the run)",
        ))
    }
}

/// With reftable, point `repo`'s own ref store at a scratch directory whose only ref is HEAD as
/// the ref backend read it (`head`): gix resolves HEAD through its ref store (the status's HEAD
/// tree, `.gitmodules` from HEAD), and that store cannot see a reftable stack. The scratch
/// directory must outlive every use of `repo`; nothing is written into the repository. With
/// the files backend `repo` is left alone (`None`).
pub fn shadow_head(
    repo: &mut gix::Repository,
    head: &refs::Head,
) -> Result<Option<tempfile::TempDir>> {
    if RefFormat::of(repo)? != RefFormat::Reftable {
        return Ok(None);
    }
    let scratch = tempfile::Builder::new()
        .prefix("tabellio-head-")
        .tempdir()
        .context(|| "could not create a scratch directory".into())?;
    let text = match (&head.id, &head.branch) {
        (Some(id), _) => format!("{id}\n"),
        (None, Some(branch)) => format!("ref: {branch}\n"),
        (None, None) => String::new(),
    };
    let file = scratch.path().join("HEAD");
    std::fs::write(&file, text).context(|| format!("could not write {}", file.display()))?;
    // gix finds more than refs through the ref store's directory (its `git_dir()`, which is
    // also the common dir of a main worktree): `info/exclude`, `info/attributes`, submodule git
    // dirs under `modules/`. Everything but the refs is linked back to the real git dir.
    let real = repo.git_dir().to_path_buf();
    let entries =
        std::fs::read_dir(&real).context(|| format!("could not read {}", real.display()))?;
    for entry in entries {
        let entry = entry.context(|| format!("could not read {}", real.display()))?;
        let name = entry.file_name();
        if matches!(
            name.to_str(),
            Some("HEAD" | "refs" | "reftable" | "packed-refs" | "logs")
        ) {
            continue;
        }
        let link = scratch.path().join(&name);
        std::os::unix::fs::symlink(entry.path(), &link)
            .context(|| format!("could not link {}", link.display()))?;
    }
    repo.refs = gix::refs::file::Store::at(scratch.path().to_path_buf(), repo.object_hash());
    Ok(Some(scratch))
}

/// Inspect the worktree at `path`: branch, head, tracked changes and untracked files.
pub fn inspect(path: &Path) -> Result<WorkspaceState> {
    status_of(None, path, open_checked(path)?)
}

/// Open the worktree at `path`, refusing one that is gone or unusable.
fn open_checked(path: &Path) -> Result<gix::Repository> {
    if !path.exists() {
        return Err(
            Error::refused(format!("the worktree {} no longer exists", path.display()))
                .hint("it was deleted by hand; `git worktree prune` forgets it"),
        );
    }
    if let Some(why) = broken_reason(path) {
        return Err(unusable(path, &why));
    }
    open_path(path)
}

fn unusable(path: &Path, why: &str) -> Error {
    Error::refused(format!(
        "the worktree {} is unusable ({why}): it was never completed, or was damaged",
        path.display()
    ))
    .hint("abandon its run, then `git tabellio cleanup <run> --force` removes it")
}

/// Whether no `GIT_*` variable is set that could make git (or gix) locate or read a repository
/// differently from its path: only the identity and date variables, the choice of
/// configuration files, git's own exec path, and the variables of the network, the terminal and
/// tracing (`GIT_SSL_*`, `GIT_SSH*`, `GIT_HTTP_*`, `GIT_TRACE*`, the pager, editor and
/// prompt) may be set.
fn environment_locates_nothing() -> bool {
    const HARMLESS_FAMILIES: &[&str] = &["GIT_SSL_", "GIT_SSH", "GIT_HTTP_", "GIT_TRACE"];
    const HARMLESS: &[&str] = &[
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_EXEC_PATH",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_ASKPASS",
        "GIT_TERMINAL_PROMPT",
    ];
    std::env::vars_os().all(|(key, _)| {
        let key = key.to_string_lossy();
        !key.starts_with("GIT_")
            || HARMLESS.contains(&key.as_ref())
            || HARMLESS_FAMILIES.iter().any(|f| key.starts_with(f))
    })
}

/// The index of `repo`'s worktree read afresh, decoded (honouring `index.threads`). As git
/// reads it, its trailing checksum is not verified: git verifies it only in `git fsck`, and
/// whoever can write the index can write its checksum too.
pub(crate) fn read_index(repo: &gix::Repository) -> Result<gix::index::File> {
    let path = repo.index_path();
    let threads = repo
        .config_snapshot()
        .string("index.threads")
        .map(|v| gix::config::tree::Index::THREADS.try_into_index_threads(&*v))
        .transpose()
        .context(|| format!("invalid index.threads in {}", repo.git_dir().display()))?;
    let options = gix::index::decode::Options {
        thread_limit: threads,
        ..Default::default()
    };
    gix::index::File::at(&path, repo.object_hash(), true, options)
        .context(|| format!("could not read the index {}", path.display()))
        .map_err(|e| damaged_index(e, &path))
}

/// `e`, about the index at `path`, with the way out of a damaged index.
fn damaged_index(e: Error, path: &Path) -> Error {
    e.hint(format!(
        "if it is damaged, remove it (`rm {}`) and `git reset` rebuilds it from HEAD, keeping \
         the files",
        crate::error::shell_path(path)
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{broken_reason, head_branch_at};
    use crate::store::Store;

    use crate::store::test_git as git;
    use crate::store::test_repo as repo;

    /// A linked worktree of the store's repository reads objects through the store's own
    /// database (one open of each pack index a command); another repository's worktree does not.
    #[test]
    fn a_worktree_shares_the_stores_object_database() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let store = Store::open(&ours_and_theirs(home)).expect("open");
        let db = |r: &gix::Repository| -> *const gix::odb::Store { r.objects.store_ref() };
        let wt = store.worktree_repo(&home.join("wt")).expect("wt");
        assert_eq!(db(&wt), db(&store.repo));
        let foreign = store.worktree_repo(&home.join("foreign")).expect("foreign");
        assert_ne!(db(&foreign), db(&store.repo));
    }

    /// Under `home`: our repository, with worktrees `wt` (branch `w`) and `detached`, and
    /// another repository with its worktree `foreign`. Ours.
    fn ours_and_theirs(home: &Path) -> std::path::PathBuf {
        let ours = repo(home, "ours");
        let theirs = repo(home, "theirs");
        git(home, &ours, &["worktree", "add", "-q", "-b", "w", "../wt"]);
        git(
            home,
            &ours,
            &["worktree", "add", "-q", "--detach", "../detached"],
        );
        git(
            home,
            &theirs,
            &["worktree", "add", "-q", "-b", "w", "../foreign"],
        );
        ours
    }

    #[test]
    fn worktree_heads_are_read_from_our_admin_files_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let ours = ours_and_theirs(home);
        let store = Store::open(&ours).expect("open");

        assert_eq!(
            head_branch_at(&ours.join(".git")).as_deref(),
            Some("refs/heads/main")
        );
        let wt = home.join("wt");
        assert_eq!(
            store.linked_worktree_branch(&wt).as_deref(),
            Some("refs/heads/w")
        );
        assert_eq!(store.linked_worktree_branch(&home.join("detached")), None);
        // Another repository's worktree is never read as ours, whatever it has checked out.
        assert_eq!(store.linked_worktree_branch(&home.join("foreign")), None);
        // Nor is the main worktree, or a directory that is no worktree.
        assert_eq!(store.linked_worktree_branch(&ours), None);
        assert_eq!(store.linked_worktree_branch(home), None);

        let mut listed = store.worktrees_with_branches().expect("listed");
        listed.sort();
        let canonical = |p: &Path| std::fs::canonicalize(p).expect("exists");
        let listed: Vec<_> = listed
            .into_iter()
            .map(|(p, b)| (canonical(&p), b))
            .collect();
        assert!(listed.contains(&(canonical(&wt), Some("refs/heads/w".into()))));
        assert!(listed.contains(&(canonical(&home.join("detached")), None)));
        assert!(listed.contains(&(canonical(&ours), Some("refs/heads/main".into()))));
        assert_eq!(listed.len(), 3, "{listed:?}");

        let of_w: Vec<_> = store
            .worktrees_of_branch("refs/heads/w")
            .expect("listed")
            .iter()
            .map(|p| canonical(p))
            .collect();
        assert_eq!(of_w, vec![canonical(&wt)]);
        let admin = ours.join(".git/worktrees/wt");
        std::fs::create_dir_all(admin.join("rebase-merge")).expect("rebase dir");
        std::fs::write(admin.join("rebase-merge/head-name"), "refs/heads/x\n").expect("write");
        // git detaches HEAD for a rebase: a worktree still on a branch is rebasing nothing.
        assert_eq!(
            store.branch_use("refs/heads/x").expect("read").operation,
            None
        );
        let tip = store.ref_target("refs/heads/w").expect("read").expect("w");
        std::fs::write(admin.join("HEAD"), format!("{tip}\n")).expect("detach");
        let (what, at) = store
            .branch_use("refs/heads/x")
            .expect("read")
            .operation
            .expect("a rebase");
        assert_eq!((what, canonical(&at)), ("rebased", canonical(&wt)));
        assert_eq!(
            store.branch_use("refs/heads/w").expect("read").operation,
            None
        );

        assert_eq!(broken_reason(&wt), None);
        std::fs::write(admin.join("locked"), "initializing").expect("lock");
        assert_eq!(
            broken_reason(&wt).as_deref(),
            Some("still locked as initializing")
        );
        std::fs::remove_file(admin.join("locked")).expect("unlock");
        std::fs::remove_file(admin.join("index")).expect("no index");
        assert_eq!(broken_reason(&wt).as_deref(), Some("no index"));
        std::fs::write(wt.join(".git"), "gitdir: /nonexistent/admin\n").expect("retarget");
        assert!(broken_reason(&wt).is_some_and(|r| r.starts_with("not a repository")));
        std::fs::remove_file(wt.join(".git")).expect("no .git");
        assert_eq!(broken_reason(&wt).as_deref(), Some("no .git file"));
    }

    /// The status of a reftable worktree sees HEAD as git does, and still reads everything else
    /// gix finds through the git dir: `info/exclude`, the index.
    #[test]
    fn a_reftable_worktree_is_inspected_with_its_excludes_and_head() {
        for format in ["files", "reftable"] {
            let dir = tempfile::tempdir().expect("temp dir");
            let repo = dir.path();
            git(
                repo,
                repo,
                &[
                    "init",
                    "-q",
                    "-b",
                    "main",
                    &format!("--ref-format={format}"),
                ],
            );
            std::fs::write(repo.join("a.txt"), "a\n").expect("write");
            git(repo, repo, &["add", "a.txt"]);
            git(repo, repo, &["commit", "-q", "-m", "a"]);
            std::fs::create_dir_all(repo.join("skip")).expect("mkdir");
            std::fs::write(repo.join("skip/x"), "x").expect("write");
            std::fs::write(repo.join(".git/info/exclude"), "/skip/\n").expect("write");
            std::fs::write(repo.join("new.txt"), "n").expect("write");
            std::fs::write(repo.join("a.txt"), "changed\n").expect("write");
            let state = super::inspect(repo).expect("inspect");
            assert_eq!(state.branch.as_deref(), Some("refs/heads/main"), "{format}");
            assert!(state.head.is_some(), "{format}");
            assert_eq!(state.changed, ["a.txt"], "{format}");
            assert_eq!(state.untracked, ["new.txt"], "{format}");
            // A linked worktree: its own HEAD, the common dir's excludes.
            let linked = dir.path().join("linked");
            git(
                repo,
                repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    "side",
                    linked.to_str().expect("utf-8"),
                ],
            );
            std::fs::create_dir_all(linked.join("skip")).expect("mkdir");
            std::fs::write(linked.join("skip/y"), "y").expect("write");
            let state = super::inspect(&linked).expect("inspect the linked worktree");
            assert_eq!(state.branch.as_deref(), Some("refs/heads/side"), "{format}");
            assert!(state.is_clean(), "{format}: {state:?}");
        }
    }

    /// With reftable a linked worktree's HEAD lives in its own stack (its `HEAD` file is a
    /// stub): the branches are read through git, not from the file.
    #[test]
    fn reftable_worktree_heads_are_read_through_git() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        git(
            home,
            home,
            &["init", "-q", "-b", "main", "--ref-format=reftable", "ours"],
        );
        let ours = home.join("ours");
        git(
            home,
            &ours,
            &["commit", "-q", "--allow-empty", "-m", "init"],
        );
        git(home, &ours, &["worktree", "add", "-q", "-b", "w", "../wt"]);
        let store = Store::open(&ours).expect("open");
        let wt = home.join("wt");
        assert_eq!(
            store.linked_worktree_branch(&wt).as_deref(),
            Some("refs/heads/w")
        );
        let mut branches: Vec<_> = store
            .worktrees_with_branches()
            .expect("listed")
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        branches.sort();
        assert_eq!(
            branches,
            [
                Some("refs/heads/main".to_string()),
                Some("refs/heads/w".to_string())
            ]
        );
        assert_eq!(
            store
                .worktrees_of_branch("refs/heads/w")
                .expect("listed")
                .len(),
            1
        );
    }
}
