//! `hooks install`: write the hook shims into the repository's hooks directory.
//!
//! A shim is a short `#!/bin/sh` file that `exec`s `git-tabellio hook <name> "$@"`: git runs
//! hooks itself, so the shim is the one place a shell appears, and it only hands over. The same
//! files are in the project's top-level `hooks/` for hook managers.
//!
//! A hook file that is not one of our shims (a "foreign" hook) is never overwritten silently: the
//! install is refused, naming every such file, before anything is written. `--force` replaces it
//! after moving it aside to `<name>.pre-tabellio` (numbered if that exists). We do not chain to a
//! foreign hook: a hook's standard input can be read once, and a shim that tees it into two
//! programs needs more shell than we want to own — see docs/hooks.md for combining them.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::store::Store;

use super::HookName;

/// The line that marks a file as our shim.
pub const MARKER: &str = "# git-tabellio hook shim";

/// The shim for `hook`.
///
/// It `exec`s `git-tabellio` itself rather than `git tabellio`: git puts its exec-path first on a
/// hook's `PATH`, so the binary is found wherever `git tabellio` would find it, without a second
/// `git` process. git runs `reference-transaction` in three phases per transaction (`prepared`,
/// `committed`, `aborted`) and only `prepared` can refuse, so the shim returns at once for the
/// others, without starting a process or reading its standard input (git ignores a hook that
/// leaves it unread).
pub fn shim(hook: HookName) -> String {
    let name = hook.as_str();
    let phases = match hook {
        HookName::ReferenceTransaction => "[ \"$1\" = prepared ] || exit 0\n",
        _ => "",
    };
    format!(
        "#!/bin/sh\n{MARKER}: installed by `git tabellio hooks install`, see docs/hooks.md.\n{phases}exec git-tabellio hook {name} \"$@\"\n"
    )
}

/// The hooks a client gets; a server gets [`HookName::PreReceive`].
pub fn hooks_for(server: bool) -> Vec<HookName> {
    if server {
        vec![HookName::PreReceive]
    } else {
        vec![HookName::ReferenceTransaction, HookName::PrePush]
    }
}

#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    pub server: bool,
    pub force: bool,
}

/// What happened to one hook file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    /// A foreign hook was moved aside (`--force`).
    Replaced,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstalledHook {
    pub name: &'static str,
    pub path: PathBuf,
    pub action: Action,
    /// Where a replaced foreign hook now is.
    pub backup: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstallOutcome {
    pub hooks_dir: PathBuf,
    pub hooks: Vec<InstalledHook>,
}

/// The directory git runs hooks from: `core.hooksPath` (relative to the worktree root, or the
/// git dir when bare, as git resolves it), else `<common-dir>/hooks`.
pub fn hooks_dir(store: &Store) -> PathBuf {
    let Some(configured) = store.config_string("core.hooksPath") else {
        return store.repo.common_dir().join("hooks");
    };
    let configured = match configured.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| PathBuf::from(&configured)),
        None => PathBuf::from(&configured),
    };
    if configured.is_absolute() {
        return configured;
    }
    match store.repo.workdir() {
        Some(dir) => dir.join(configured),
        None => store.repo.git_dir().join(configured),
    }
}

fn is_shim(content: &str) -> bool {
    content.lines().any(|l| l.starts_with(MARKER))
}

/// Install the shims. Refuses (writing nothing) when a foreign hook is in the way, unless
/// `force`.
pub fn install(store: &Store, opts: &InstallOptions) -> Result<InstallOutcome> {
    if store.is_bare() && !opts.server {
        // Nobody commits or pushes from a bare repository: its gate is pre-receive.
        return Err(Error::usage(
            "this is a bare repository: the client hooks would never run here",
        )
        .hint("install the server gate: `git tabellio hooks install --server`"));
    }
    let dir = hooks_dir(store);
    let hooks = hooks_for(opts.server);
    let mut plan = Vec::new();
    let mut foreign = Vec::new();
    for hook in hooks {
        let path = dir.join(hook.as_str());
        let want = shim(hook);
        let action = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Action::Created,
            Err(e) => {
                return Err(Error::internal(format!(
                    "could not read {}: {e}",
                    path.display()
                )))
            }
            Ok(bytes) => {
                let current = String::from_utf8_lossy(&bytes);
                if current == want && is_executable(&path) {
                    Action::Unchanged
                } else if is_shim(&current) {
                    Action::Updated
                } else {
                    foreign.push(path.clone());
                    Action::Replaced
                }
            }
        };
        plan.push((hook, path, want, action));
    }
    if !foreign.is_empty() && !opts.force {
        let list: Vec<String> = foreign.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::refused(format!(
            "not overwriting existing hook{} that git-tabellio did not install: {}",
            if list.len() == 1 { "" } else { "s" },
            list.join(", ")
        ))
        .hint("merge them by hand (docs/hooks.md), point your hook manager at the shims in git-tabellio's hooks/, or rerun with --force to move them aside to <name>.pre-tabellio"));
    }
    std::fs::create_dir_all(&dir).context(|| format!("could not create {}", dir.display()))?;
    let mut out = Vec::new();
    for (hook, path, want, action) in plan {
        let mut backup = None;
        if action == Action::Replaced {
            let aside = free_backup_path(&path);
            std::fs::rename(&path, &aside).context(|| {
                format!(
                    "could not move {} aside to {}",
                    path.display(),
                    aside.display()
                )
            })?;
            backup = Some(aside);
        }
        if action != Action::Unchanged {
            write_executable(&path, &want)?;
        }
        out.push(InstalledHook {
            name: hook.as_str(),
            path,
            action,
            backup,
        });
    }
    Ok(InstallOutcome {
        hooks_dir: dir,
        hooks: out,
    })
}

fn free_backup_path(path: &Path) -> PathBuf {
    let base = format!("{}.pre-tabellio", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// Write `content` to `path` with mode 0755, atomically (temp file, then rename).
fn write_executable(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .context(|| format!("could not create a temporary file in {}", dir.display()))?;
    tmp.write_all(content.as_bytes())
        .context(|| format!("could not write {}", path.display()))?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))
        .context(|| format!("could not make {} executable", path.display()))?;
    tmp.persist(path)
        .map_err(|e| Error::internal(format!("could not write {}: {}", path.display(), e.error)))?;
    Ok(())
}
