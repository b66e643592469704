//! Opening the repository: discovery as git does it, the ref backend chosen once from
//! `extensions.refStorage` ([`super::refs`]), the fallback identity, and the repository identity
//! written into records.

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;

use crate::error::{Context, Error, Result};
use crate::model::canonical::sha256_hex;

use super::refs::{self, RefFormat};

/// The identity of ledger and notes commits when the user configured none (the actor of a run
/// is recorded in `run.json` anyway).
pub const FALLBACK_NAME: &str = "tabellio";
pub const FALLBACK_EMAIL: &str = "tabellio@localhost";

/// What a revision names, for commands that read the records of a commit or a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOrTree {
    Commit(gix::ObjectId),
    Tree(gix::ObjectId),
}

/// An open repository, seen from wherever the command was started.
pub struct Store {
    pub repo: gix::Repository,
    /// How refs are read and written (see [`super::refs`]).
    ref_format: RefFormat,
    /// Single-ref reads of a reftable repository (started on first use).
    pub(super) ref_reader: refs::Reader,
    /// The refs read in an open [`Store::snapshot_refs`].
    pub(super) ref_snapshot: refs::Snapshot,
    /// The main worktree's directory, found once (from a linked worktree that opens the main
    /// repository).
    main_workdir: std::sync::OnceLock<Option<PathBuf>>,
    /// The one deflate stream of this store's object writes, and the one inflate stream of its
    /// loose object reads (see [`super::objects`]).
    pub(super) loose: super::objects::LooseStreams,
    /// Notes trees this command has looked notes up in, by tree id, with what their lookups
    /// have parsed of them (see [`Store::note_lines`]).
    pub(super) note_trees: super::notes::NoteTrees,
    /// The tree of each commit [`Store::tree_of`] has read.
    pub(super) commit_trees: super::trees::CommitTrees,
    /// The delta bases of the objects read past the object cache ([`Store::read_blob`]).
    pub(super) read_once_deltas: super::objects::ReadOnceDeltas,
    /// The records of the ledger commits this command has read across all runs (see
    /// [`Store::readable_ledgers`]).
    pub(super) ledger_records: super::ledger::Records,
}

/// The most memory the decoded-object cache of one open repository takes: enough for the trees
/// and commits of a range of thousands of commits in a typical repository. It grows with use,
/// so a small command allocates little of it.
const OBJECT_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The most memory the delta-base cache of one open repository takes, unless
/// `core.deltaBaseCacheLimit` says otherwise (0 turns it off). Reading a range newest first
/// finds each object's delta base among the objects just read (git packs newer objects as the
/// bases of older ones), so a few megabytes turn a walk down a whole delta chain into one step.
const PACK_CACHE_BYTES: usize = 4 * 1024 * 1024;

impl Store {
    /// Discover the repository containing `dir`, honouring `GIT_DIR` and friends like git does.
    pub fn discover(dir: &Path) -> Result<Store> {
        let repo = match gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
            dir,
            Default::default(),
            open_options(),
        ) {
            Ok(repo) => repo.to_thread_local(),
            Err(e) => {
                use gix::discover::upwards::Error as Upwards;
                let message = match e.downcast_any_ref::<Upwards>() {
                    Some(
                        Upwards::NoGitRepository { .. }
                        | Upwards::NoGitRepositoryWithinCeiling { .. }
                        | Upwards::NoGitRepositoryWithinFs { .. },
                    ) => format!(
                        "not a git repository (or any parent up to /): {}",
                        dir.display()
                    ),
                    // Found but not usable (not trusted, unreadable): say what gix says, in
                    // words rather than its error tree.
                    _ => format!(
                        "could not open the git repository at or above {}: {}",
                        dir.display(),
                        e.probable_cause()
                    ),
                };
                return Err(Error::not_found(message)
                    .hint("run git tabellio inside a git repository, or use git -C <path>"));
            }
        };
        Self::from_repo(repo)
    }

    /// Open the repository at exactly `path` (a worktree or git dir), ignoring the
    /// repository-local environment (see [`open_path`]).
    pub fn open(path: &Path) -> Result<Store> {
        let repo = gix::ThreadSafeRepository::open_opts(path, path_options(open_options().full))
            .context(|| format!("could not open the repository at {}", path.display()))?
            .to_thread_local();
        Self::from_repo(repo)
    }

    /// The committer and author identity is not resolved here: gix resolves it (and the time,
    /// which walks the timezone database) on first use, so only commands that write a commit or
    /// a reflog entry pay for it. The open options carry the fallback identity as configuration
    /// fallbacks ([`open_options`]), so a repository without `user.name` still gets one.
    ///
    /// Every open gets an object cache ([`OBJECT_CACHE_BYTES`]): a command reads the same
    /// commits and trees several times (the policy, the allowed signers, the guarded paths and
    /// the notes of one commit each start from its tree), and a packed object read again
    /// otherwise costs its whole delta chain again. And a delta-base cache
    /// ([`PACK_CACHE_BYTES`]) for the first read of each.
    pub(crate) fn from_repo(mut repo: gix::Repository) -> Result<Store> {
        repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
        let pack_cache = repo
            .config_snapshot()
            .integer("core.deltaBaseCacheLimit")
            .map_or(PACK_CACHE_BYTES, |bytes| {
                usize::try_from(bytes).unwrap_or(0)
            });
        if pack_cache > 0 {
            repo.objects.set_pack_cache(move || {
                Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
                    pack_cache,
                ))
            });
        }
        let ref_format = RefFormat::of(&repo)?;
        Ok(Store {
            repo,
            ref_format,
            ref_reader: refs::Reader::default(),
            ref_snapshot: Default::default(),
            main_workdir: std::sync::OnceLock::new(),
            loose: Default::default(),
            note_trees: Default::default(),
            commit_trees: Default::default(),
            read_once_deltas: super::objects::ReadOnceDeltas::new(pack_cache),
            ledger_records: Default::default(),
        })
    }

    /// How this repository stores its refs.
    pub fn ref_format(&self) -> RefFormat {
        self.ref_format
    }

    pub fn is_bare(&self) -> bool {
        self.repo.is_bare()
    }

    /// The main worktree's directory, `None` in a bare repository.
    pub fn main_workdir(&self) -> Result<Option<PathBuf>> {
        if let Some(dir) = self.main_workdir.get() {
            return Ok(dir.clone());
        }
        let dir = if self.repo.worktree().map(|w| w.is_main()).unwrap_or(false) {
            self.repo.workdir().map(Path::to_path_buf)
        } else if let Some(dir) = self.plain_main_workdir() {
            dir
        } else {
            let main = self
                .repo
                .main_repo()
                .context(|| "could not open the main worktree".into())?;
            main.workdir().map(Path::to_path_buf)
        };
        Ok(self.main_workdir.get_or_init(|| dir).clone())
    }

    /// The main worktree of a linked worktree or a bare repository, without opening the main
    /// repository, when its layout leaves no doubt: a common dir named `.git` with `core.bare`
    /// false, no `core.worktree` and no `config.worktree` of its own (what `git init` and
    /// `git clone` make) is the git dir of its parent, and a common dir with `core.bare` true has
    /// no main worktree. Anything else (`core.worktree`, an unusual name, no `core.bare`) is
    /// `None`: gix opens the main repository and says.
    fn plain_main_workdir(&self) -> Option<Option<PathBuf>> {
        let config = self.repo.config_snapshot();
        let common = self.repo.common_dir();
        // The main worktree's own `config.worktree` may say otherwise, and this worktree's
        // configuration does not include it.
        if config.string("core.worktree").is_some() || common.join("config.worktree").exists() {
            return None;
        }
        match config.boolean("core.bare")? {
            true if self.repo.worktree().is_none() => Some(None),
            true => None,
            false => {
                // A linked worktree names its common dir as `<admin dir>/../..`: taken back
                // lexically, and trusted only where that is the same directory the file system
                // finds (no symbolic link on the way).
                let absolute = if common.is_absolute() {
                    common.to_path_buf()
                } else {
                    std::env::current_dir().ok()?.join(common)
                };
                let lexical = normalize(&absolute);
                let same =
                    std::fs::canonicalize(&lexical).ok()? == std::fs::canonicalize(common).ok()?;
                (same && lexical.file_name() == Some(std::ffi::OsStr::new(".git")))
                    .then(|| lexical.parent().map(Path::to_path_buf))
            }
        }
    }

    /// Where run worktrees live: `tabellio.worktreeRoot`, else `<main worktree>/.tabellio/worktrees`,
    /// else (bare) `<git-dir>/tabellio/worktrees`.
    pub fn worktree_root(&self) -> Result<PathBuf> {
        if let Some(root) = self.config_string("tabellio.worktreeRoot") {
            let root = PathBuf::from(root);
            return Ok(if root.is_absolute() {
                root
            } else {
                self.main_workdir()?
                    .unwrap_or_else(|| self.repo.common_dir().to_path_buf())
                    .join(root)
            });
        }
        Ok(match self.main_workdir()? {
            Some(dir) => dir.join(".tabellio").join("worktrees"),
            None => self.repo.common_dir().join("tabellio").join("worktrees"),
        })
    }

    /// The first symbolic link on the way from the repository to the default worktree root
    /// (`.tabellio`, `.tabellio/worktrees`, or the bare repository's `tabellio/…`), if any. A
    /// committed symlink there would decide where runs are written and what `cleanup --force`
    /// deletes, outside the repository. A root the user configured (`tabellio.worktreeRoot`)
    /// is theirs to place: `None`.
    pub fn worktree_root_link(&self) -> Result<Option<PathBuf>> {
        if self.config_string("tabellio.worktreeRoot").is_some() {
            return Ok(None);
        }
        let anchor = match self.main_workdir()? {
            Some(dir) => dir,
            None => self.repo.common_dir().to_path_buf(),
        };
        let root = self.worktree_root()?;
        let Ok(below) = root.strip_prefix(&anchor) else {
            return Ok(None);
        };
        let mut at = anchor.clone();
        for part in below.components() {
            at.push(part);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .string(key)
            .map(|v| v.to_str_lossy().into_owned())
    }

    /// The repository identity stored in records (docs/storage.md): never a local path.
    pub fn repository_id(&self) -> String {
        if let Some(id) = self.config_string("tabellio.repoId") {
            return id;
        }
        // Where git resolves a relative remote path from: the main worktree, or the git dir of
        // a bare repository.
        let dir = self
            .main_workdir()
            .ok()
            .flatten()
            .unwrap_or_else(|| self.repo.common_dir().to_path_buf());
        if let Some(url) = self.config_string("remote.origin.url") {
            return identity_from_url(&url, &dir);
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".git").to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "repository".into());
        format!("local/{name}")
    }

    pub fn object_hash(&self) -> gix::hash::Kind {
        self.repo.object_hash()
    }

    /// Parse a full hex object id of this repository's hash kind.
    pub fn parse_oid(&self, hex: &str) -> Result<gix::ObjectId> {
        gix::ObjectId::from_hex(hex.as_bytes())
            .context(|| format!("stored object id {hex:?} is invalid"))
    }

    /// Resolve a revision (`HEAD`, a branch, an id, `main~2`) to a commit id.
    pub fn resolve_commit(&self, rev: &str) -> Result<gix::ObjectId> {
        let id = self.rev_parse(rev).map_err(|why| {
            Error::not_found(format!("revision {rev:?} not found ({why})"))
                .hint("name a branch, tag or commit id that exists in this repository")
        })?;
        let object = id.object().context(|| format!("could not read {rev}"))?;
        let commit = object
            .peel_to_kind(gix::object::Kind::Commit)
            .map_err(|_| {
                Error::usage(format!(
                    "{rev:?} names a {}, not a commit",
                    object_kind_of(&self.repo, id.detach())
                ))
                .hint("name a commit: a branch, a tag of a commit, or a commit id")
            })?;
        Ok(commit.id)
    }

    /// Resolve a revision to a commit, or to a tree when it names one (`main^{tree}`, a tree
    /// id, a tag of a tree). A blob is not found as either.
    pub fn resolve_commit_or_tree(&self, rev: &str) -> Result<CommitOrTree> {
        let id = self.rev_parse(rev).map_err(|why| {
            Error::not_found(format!("revision {rev:?} not found ({why})"))
                .hint("name a branch, tag, commit or tree that exists in this repository")
        })?;
        let object = id
            .object()
            .context(|| format!("could not read {rev}"))?
            .peel_tags_to_end()
            .context(|| format!("could not peel {rev}"))?;
        match object.kind {
            gix::object::Kind::Commit => Ok(CommitOrTree::Commit(object.id)),
            gix::object::Kind::Tree => Ok(CommitOrTree::Tree(object.id)),
            other => Err(
                Error::usage(format!("{rev:?} names a {other}, not a commit or tree"))
                    .hint("evidence is noted on commits and on their trees"),
            ),
        }
    }

    /// Resolve a revision to an object id: gix for the files backend; git for reftable, whose
    /// refs gix cannot see. The error is the reason, in words.
    fn rev_parse(&self, rev: &str) -> std::result::Result<gix::Id<'_>, String> {
        match self.ref_format {
            RefFormat::Files => self.repo.rev_parse_single(rev).map_err(|e| e.to_string()),
            RefFormat::Reftable => {
                match self.rev_parse_once(rev, || refs::rev_parse(&self.repo, rev)) {
                    Ok(Some(id)) => Ok(gix::prelude::ObjectIdExt::attach(id, &self.repo)),
                    Ok(None) => Err("git rev-parse does not know it".into()),
                    Err(e) => Err(e.message),
                }
            }
        }
    }

    /// The first value the reflog of `name` records (newest first) that `pick` accepts, of at
    /// most `limit` looked at; `None` without a reflog. Both ref backends
    /// ([`refs::find_in_reflog`]).
    pub fn find_in_reflog(
        &self,
        name: &str,
        limit: usize,
        pick: impl FnMut(gix::ObjectId) -> bool,
    ) -> Option<gix::ObjectId> {
        refs::find_in_reflog(&self.repo, self.ref_format, name, limit, pick)
    }

    /// The newest `limit` reflog messages of `name` with the files backend (empty with reftable
    /// and without a reflog).
    pub fn reflog_messages(&self, name: &str, limit: usize) -> Vec<String> {
        refs::reflog_messages(&self.repo, self.ref_format, name, limit)
    }

    /// The ref `name` points to when it is symbolic (one hop), `None` when direct or absent.
    pub fn symbolic_target(&self, name: &str) -> Result<Option<String>> {
        refs::symbolic_target(&self.repo, self.ref_format, name)
    }

    /// Refuse (exit 3) a ref of ours, `name` at `tip`, that does not point at a commit: a blob,
    /// a tree, a tag or a missing object. `repair` says how to put it right.
    pub fn ensure_commit_ref(&self, name: &str, tip: gix::ObjectId, repair: &str) -> Result<()> {
        // The whole object, not its header: the caller reads the commit next, and a full read
        // goes through the object cache where a header read decompresses the object again.
        let what = match self.try_object(tip) {
            Ok(Some(o)) if o.kind == gix::object::Kind::Commit => return Ok(()),
            Ok(Some(o)) => format!("a {}", o.kind),
            // Present but unreadable (a damaged loose object): the reader's own error names
            // the object and its cause, which says more than "corrupt ref" would.
            Err(_) if self.repo.has_object(tip) => return Ok(()),
            Ok(None) | Err(_) => "an object that is not in this repository".into(),
        };
        Err(Error::refused(format!(
            "{name} points at {what} ({tip}), not a commit: the ref is corrupt"
        ))
        .hint(repair.to_string()))
    }

    /// Add the worktree root to `info/exclude` once, when it lies inside the main worktree:
    /// `/.tabellio/worktrees/` by default, `/<root relative to the main worktree>/` for a
    /// `tabellio.worktreeRoot` there. `Ok(false)` when the line was there already or there is
    /// nothing to exclude (a bare repository, a root outside the main worktree).
    pub fn ensure_excluded(&self) -> Result<bool> {
        let Some(main) = self.main_workdir()? else {
            return Ok(false);
        };
        let Some(line) = exclude_line(&main, &self.worktree_root()?) else {
            return Ok(false);
        };
        let path = self.repo.common_dir().join("info").join("exclude");
        // Bytes, not text: the user's file may hold any encoding, and we only ever append
        // one line to it (never rewrite it).
        let current = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(
                    Error::refused(format!("could not read {}: {e}", path.display()))
                        .hint("make it readable; tabellio adds one line to it"),
                )
            }
        };
        if current
            .split(|b| *b == b'\n')
            .any(|l| l.trim_ascii() == line.as_bytes())
        {
            return Ok(false);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .context(|| format!("could not create {}", parent.display()))?;
        }
        let mut add = Vec::new();
        if !current.is_empty() && !current.ends_with(b"\n") {
            add.push(b'\n');
        }
        add.extend_from_slice(line.as_bytes());
        add.push(b'\n');
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&add))
            .context(|| format!("could not append to {}", path.display()))?;
        Ok(true)
    }
}

/// The `info/exclude` line for the worktree root `root` when it lies strictly inside the main
/// worktree `main` (compared lexically, `.` and `..` resolved): anchored, a directory, with the
/// gitignore glob characters escaped.
fn exclude_line(main: &Path, root: &Path) -> Option<String> {
    let relative = normalize(root)
        .strip_prefix(normalize(main))
        .ok()?
        .to_path_buf();
    if relative.as_os_str().is_empty() {
        return None;
    }
    let mut line = String::from("/");
    for c in relative.to_str()?.chars() {
        if matches!(c, '\\' | '*' | '?' | '[') {
            line.push('\\');
        }
        line.push(c);
    }
    line.push('/');
    Some(line)
}

/// `path` with `.` dropped and `..` taken back lexically (no file system access: the root may
/// not exist yet).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The kind of an object, in words, for error messages.
fn object_kind_of(repo: &gix::Repository, id: gix::ObjectId) -> String {
    repo.find_header(id)
        .map(|h| h.kind().to_string())
        .unwrap_or_else(|_| "object".into())
}

/// Replacement objects (`refs/replace/*`, `git replace`) are never followed: the object that is
/// judged must be the object that moves, and a replacement swaps the content seen under an id.
/// As an API override it comes after every configuration file, so no `core.useReplaceRefs=true`
/// turns it back on.
const NO_REPLACE_OBJECTS: &str = "core.useReplaceRefs=false";

/// Open the worktree or repository at exactly `path`, as [`Store`] reads it: replacement
/// objects off, and the repository-local environment (`GIT_WORK_TREE`, `GIT_INDEX_FILE`, and the
/// other `GIT_*` overrides) ignored. That environment belongs to the repository the command was
/// started from (a hook's `GIT_INDEX_FILE` names the index of the commit in progress), never to
/// another worktree opened by its path. `GIT_DIR` is never read here: only discovery reads it.
pub fn open_path(path: &Path) -> Result<gix::Repository> {
    let options =
        path_options(gix::open::Options::default().config_overrides([NO_REPLACE_OBJECTS]));
    Ok(gix::ThreadSafeRepository::open_opts(path, options)
        .context(|| format!("could not open the repository at {}", path.display()))?
        .to_thread_local())
}

/// The worktree's directory of `repo`, opened at `path` (a bare repository has none: an
/// internal error, since only worktrees are handed here).
pub fn workdir_of(repo: &gix::Repository, path: &Path) -> Result<std::path::PathBuf> {
    repo.workdir()
        .map(Path::to_path_buf)
        .ok_or_else(|| crate::error::Error::internal(format!("{} has no worktree", path.display())))
}

/// `options` with the `GIT_*` environment overrides denied (see [`open_path`]).
fn path_options(options: gix::open::Options) -> gix::open::Options {
    let mut permissions = gix::open::Permissions::default();
    permissions.env.git_prefix = gix::sec::Permission::Deny;
    options.permissions(permissions)
}

/// Open options carrying the fallback identity as configuration *fallbacks* (a configured
/// identity wins), and replacement objects off. They are options rather than a change to one
/// handle because gix opens further handles from them (a new linked worktree writes its HEAD
/// reflog through its own handle).
fn open_options() -> gix::sec::trust::Mapping<gix::open::Options> {
    use gix::sec::trust::DefaultForLevel;
    let fallbacks = [
        format!("gitoxide.committer.nameFallback={FALLBACK_NAME}"),
        format!("gitoxide.committer.emailFallback={FALLBACK_EMAIL}"),
        format!("gitoxide.author.nameFallback={FALLBACK_NAME}"),
        format!("gitoxide.author.emailFallback={FALLBACK_EMAIL}"),
        NO_REPLACE_OBJECTS.to_string(),
    ];
    gix::sec::trust::Mapping {
        full: gix::open::Options::default_for_level(gix::sec::Trust::Full)
            .config_overrides(fallbacks.clone()),
        reduced: gix::open::Options::default_for_level(gix::sec::Trust::Reduced)
            .config_overrides(fallbacks),
    }
}

/// `github.com/o/n` from any URL form (credentials, port, `?query` and `.git` dropped). A local
/// path (plain or `file://`) becomes `local/<16 hex of sha256>` of the path resolved against
/// `base` (where git resolves a relative remote from), canonicalized when it exists, without a
/// trailing `/` or `.git`: `../src`, `/abs/src/` and `file:///abs/src` are one repository.
pub fn identity_from_url(url: &str, base: &Path) -> String {
    let url = url.trim();
    if let Some(path) = windows_path(url) {
        return local_identity(&path);
    }
    let (rest, is_network) = if let Some(i) = url.find("://") {
        let scheme = &url[..i];
        (&url[i + 3..], scheme != "file")
    } else if let Some(colon) = url.find(':') {
        // scp-like `user@host:path`, unless it looks like a local path.
        if url[..colon].contains('/') {
            (url, false)
        } else {
            (url, true)
        }
    } else {
        (url, false)
    };
    if !is_network {
        if let Some(path) = windows_path(rest) {
            return local_identity(&path);
        }
        let path = base.join(rest);
        let path = std::fs::canonicalize(&path).unwrap_or_else(|_| normalize(&path));
        return local_identity(&path.to_string_lossy());
    }
    // Drop credentials, normalise `host:path` and a port.
    let rest = match rest.rfind('@') {
        Some(at) if rest[..at].find('/').is_none() => &rest[at + 1..],
        _ => rest,
    };
    // After the credentials, which may hold a `?`: a query or fragment names no part of the
    // repository.
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let rest = rest.replacen(':', "/", 1);
    let mut parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(host) = parts.first_mut() {
        if let Some(port) = host.find('/') {
            *host = &host[..port];
        }
    }
    let mut id = parts.join("/");
    // `host/22/path` from `ssh://host:22/path` after the `:` replacement: drop a numeric segment.
    let segs: Vec<&str> = id.split('/').collect();
    if segs.len() > 2 && segs[1].chars().all(|c| c.is_ascii_digit()) {
        let mut v = segs.clone();
        v.remove(1);
        id = v.join("/");
    }
    id.trim_end_matches(".git").to_string()
}

/// `local/<16 hex of sha256>` of a local path's text, without a trailing `/` or `.git`.
fn local_identity(path: &str) -> String {
    let text = path.trim_end_matches('/');
    let text = text
        .strip_suffix(".git")
        .unwrap_or(text)
        .trim_end_matches('/');
    format!("local/{}", &sha256_hex(text.as_bytes())[..16])
}

/// A Windows path (`C:\x`, `D:/x`, `c:x`, `\\server\share\x`, `\x`; also after `file://`
/// as `/C:/x`) in `/` spelling, the drive letter upper-cased; `None` for anything else. On this
/// side of the wire a drive letter looks like an scp-like host (`C:path`), and a path like
/// a relative one: either would put the path into the repository id.
fn windows_path(url: &str) -> Option<String> {
    let bytes = url.as_bytes();
    let after_slash = url.strip_prefix('/').unwrap_or(url);
    let drive = after_slash.as_bytes();
    if drive.len() >= 2 && drive[0].is_ascii_alphabetic() && drive[1] == b':' {
        let rest = after_slash[2..].replace('\\', "/");
        let letter = (drive[0] as char).to_ascii_uppercase();
        let sep = if rest.starts_with('/') { "" } else { "/" };
        return Some(format!("{letter}:{sep}{rest}"));
    }
    if bytes.first() == Some(&b'\\') {
        return Some(url.replace('\\', "/"));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::{exclude_line, identity_from_url, Store};

    use crate::store::test_git as git;

    #[test]
    fn the_main_worktree_of_a_linked_worktree_is_found_as_the_main_repository_says() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let main = crate::store::test_repo(home, "main");
        git(
            home,
            &main,
            &["worktree", "add", "-q", "-b", "w", "../linked"],
        );
        let linked = Store::open(&home.join("linked")).expect("linked worktree opens");
        let canonical = |p: PathBuf| std::fs::canonicalize(p).expect("exists");
        let want = canonical(main.clone());
        // The layout `git init` makes: found from the common dir, no repository opened.
        let plain = linked.plain_main_workdir().expect("a plain layout");
        assert_eq!(plain.map(canonical), Some(want.clone()));
        assert_eq!(
            linked.main_workdir().unwrap().map(canonical),
            Some(want.clone())
        );
        // `core.worktree` in the common config: gix opens the main repository and says.
        git(
            home,
            &main,
            &["config", "core.worktree", main.to_str().unwrap()],
        );
        let linked = Store::open(&home.join("linked")).expect("linked worktree opens");
        assert!(linked.plain_main_workdir().is_none());
        assert_eq!(
            linked.main_workdir().unwrap().map(canonical),
            Some(want.clone())
        );
        git(home, &main, &["config", "--unset", "core.worktree"]);
        // The main worktree's own `config.worktree`, which this worktree does not read.
        let own = main.join(".git/config.worktree");
        std::fs::write(&own, "[core]\n").expect("config.worktree");
        let linked = Store::open(&home.join("linked")).expect("linked worktree opens");
        assert!(linked.plain_main_workdir().is_none());
        std::fs::remove_file(&own).expect("removed");
        // No `core.bare` at all: not plain either.
        git(home, &main, &["config", "--unset", "core.bare"]);
        let linked = Store::open(&home.join("linked")).expect("linked worktree opens");
        assert!(linked.plain_main_workdir().is_none());
        assert_eq!(linked.main_workdir().unwrap().map(canonical), Some(want));
        // A bare repository has no main worktree, from the bare repository itself.
        git(home, home, &["init", "-q", "--bare", "bare.git"]);
        let bare = Store::open(&home.join("bare.git")).expect("bare opens");
        assert_eq!(bare.main_workdir().unwrap(), None);
    }

    #[test]
    fn url_identities() {
        let base = Path::new("/nonexistent-tabellio-base/repo");
        for (url, want) in [
            ("https://github.com/o/n.git", "github.com/o/n"),
            ("https://user:secret@github.com/o/n", "github.com/o/n"),
            ("https://user:p?ss@github.com/o/n.git", "github.com/o/n"),
            ("https://github.com/o/n.git?ref=main", "github.com/o/n"),
            ("https://github.com/o/n?x=a@b", "github.com/o/n"),
            ("git@github.com:o/n.git", "github.com/o/n"),
            (
                "ssh://git@example.org:2222/team/repo.git",
                "example.org/team/repo",
            ),
        ] {
            assert_eq!(identity_from_url(url, base), want, "{url}");
        }
        let local = identity_from_url("/srv/git/repo.git", base);
        assert!(
            local.starts_with("local/") && local.len() == 6 + 16,
            "{local}"
        );
        for same in [
            "file:///srv/git/repo.git",
            "/srv/git/repo",
            "/srv/git/repo/",
            "/srv/git/repo.git/",
            "/srv/git/./x/../repo.git",
            "../../srv/git/repo.git",
        ] {
            assert_eq!(
                identity_from_url(same, Path::new("/home/u")),
                local,
                "{same}"
            );
        }
        assert_ne!(identity_from_url("/srv/git/repo2", base), local);
    }

    #[test]
    fn windows_paths_are_local_identities() {
        let base = Path::new("/home/u/repo");
        let secret = identity_from_url(r"C:\Users\agent\secret.git", base);
        for same in [
            r"C:\Users\agent\secret",
            r"c:\Users\agent\secret.git\",
            "C:/Users/agent/secret.git",
            "file:///C:/Users/agent/secret.git",
            "file://C:/Users/agent/secret",
        ] {
            assert_eq!(identity_from_url(same, base), secret, "{same}");
        }
        // Wherever the repository lives: the base plays no part.
        assert_eq!(
            identity_from_url(r"C:\Users\agent\secret.git", Path::new("/x")),
            secret
        );
        for url in [
            r"C:\Users\agent\secret.git",
            "D:/x/y.git",
            r"\\server\share\r.git",
            r"\\?\C:\deep\r.git",
            "e:relative\\r",
        ] {
            let id = identity_from_url(url, base);
            assert!(
                id.starts_with("local/") && id.len() == 6 + 16,
                "{url}: {id}"
            );
        }
        assert_ne!(identity_from_url("D:/x/y.git", base), secret);
        assert_ne!(
            identity_from_url(r"\\server\share\r.git", base),
            identity_from_url(r"\\server\share\s.git", base)
        );
    }

    #[test]
    fn local_remotes_resolve_against_the_base_and_through_symlinks() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        let (src, repo) = (real.join("src"), real.join("repo"));
        std::fs::create_dir_all(&src).expect("src");
        std::fs::create_dir_all(&repo).expect("repo");
        std::os::unix::fs::symlink(&src, real.join("alias")).expect("symlink");
        let want = identity_from_url(&format!("file://{}", src.display()), &repo);
        for url in [
            "../src".to_string(),
            "../src/".to_string(),
            "../alias".to_string(),
            format!("{}/", src.display()),
            format!("{}/./src", real.display()),
        ] {
            assert_eq!(identity_from_url(&url, &repo), want, "{url}");
        }
        // Relative to the base, not to wherever the process runs.
        assert_ne!(identity_from_url("../src", &repo.join("sub")), want);
    }

    #[test]
    fn exclude_lines_for_roots_inside_the_main_worktree() {
        let main = Path::new("/w/repo");
        let line = |root: &str| exclude_line(main, &PathBuf::from(root));
        assert_eq!(
            line("/w/repo/.tabellio/worktrees").as_deref(),
            Some("/.tabellio/worktrees/")
        );
        assert_eq!(line("/w/repo/wts").as_deref(), Some("/wts/"));
        assert_eq!(line("/w/repo/./a/../wts/").as_deref(), Some("/wts/"));
        assert_eq!(line("/w/repo/odd[1]*").as_deref(), Some("/odd\\[1]\\*/"));
        assert_eq!(line("/w/repo"), None);
        assert_eq!(line("/w/repo/../wts"), None);
        assert_eq!(line("/w/repo2/wts"), None);
        assert_eq!(line("/elsewhere"), None);
    }
}
