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
/// leaves it unread). In `prepared` it starts `git-tabellio` only when some line names a ref
/// outside the never-gated names (`NEVER_GATED_PREFIXES` in the hooks module, names outside
/// `refs/`: the very list `git-tabellio` itself skips), handing it the lines it read:
/// `git commit` runs a second transaction for the `AUTO_MERGE` pseudo-ref, and fetches update
/// only remote-tracking refs. The shell never decides more than the binary would: it only skips
/// what the binary allows from the same lines without opening the repository. Shell builtins
/// only (no `cat`): a process started here would cost what the shim saves.
pub fn shim(hook: HookName) -> String {
    let name = hook.as_str();
    let head = format!(
        "#!/bin/sh\n{MARKER}: installed by `git tabellio hooks install`, see docs/hooks.md.\n"
    );
    match hook {
        HookName::ReferenceTransaction => {
            let skip: Vec<String> = super::NEVER_GATED_PREFIXES
                .iter()
                .map(|p| format!("{p}*"))
                .chain(super::NEVER_GATED_REFS.iter().map(|r| r.to_string()))
                .collect();
            format!(
                "{head}[ \"$1\" = prepared ] || exit 0\n\
                 input= gate=\n\
                 while IFS= read -r line || [ -n \"$line\" ]; do\n\
                 \tinput=\"${{input:+$input\n\
                 }}$line\"\n\
                 \tcase ${{line##* }} in\n\
                 \t{skip}) ;;\n\
                 \trefs/*) gate=1 ;;\n\
                 \tesac\n\
                 done\n\
                 [ -n \"$gate\" ] || exit 0\n\
                 exec git-tabellio hook {name} \"$@\" <<EOF\n\
                 $input\n\
                 EOF\n",
                skip = skip.join("|")
            )
        }
        _ => format!("{head}exec git-tabellio hook {name} \"$@\"\n"),
    }
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

#[cfg(test)]
mod tests {
    use super::{shim, HookName};

    /// Run the `reference-transaction` shim as git does (a `#!/bin/sh` file, PATH first on a
    /// stand-in `git-tabellio` that records its arguments and input); what the stand-in saw,
    /// `None` when the shim did not start it.
    fn run_shim(phase: &str, input: &str) -> Option<String> {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("temp dir");
        let seen = dir.path().join("seen");
        let fake = dir.path().join("git-tabellio");
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho \"$@\" > {0}\ncat >> {0}\n", seen.display()),
        )
        .expect("stand-in");
        let hook = dir.path().join("reference-transaction");
        std::fs::write(&hook, shim(HookName::ReferenceTransaction)).expect("shim");
        for file in [&fake, &hook] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
                .expect("executable");
        }
        let path = format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = std::process::Command::new(&hook)
            .arg(phase)
            .env("PATH", path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("the shim runs");
        // Phases the shim returns from leave the input unread, as git allows.
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
        assert!(child.wait().expect("exit").success());
        std::fs::read_to_string(seen).ok()
    }

    #[test]
    fn the_shim_starts_the_gate_only_for_refs_it_may_gate() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let line = |name: &str| format!("{z} {a} {name}\n");
        let main = line("refs/heads/main");
        assert_eq!(run_shim("committed", &main), None);
        assert_eq!(run_shim("aborted", &main), None);
        for skipped in [
            "AUTO_MERGE",
            "HEAD",
            "refs/remotes/origin/main",
            "refs/notes/tabellio/evidence",
            "refs/tabellio/runs/r1",
            "refs/stash",
        ] {
            assert_eq!(run_shim("prepared", &line(skipped)), None, "{skipped}");
        }
        assert_eq!(run_shim("prepared", ""), None);
        // Any gated line among skipped ones starts it, with every line as git gave them.
        for gated in ["refs/heads/main", "refs/tags/v1", "refs/stashed", "refs/x"] {
            let input = format!("{}{}{}", line("HEAD"), line(gated), line("refs/notes/n"));
            assert_eq!(
                run_shim("prepared", &input),
                Some(format!("hook reference-transaction prepared\n{input}")),
                "{gated}"
            );
        }
    }
}
