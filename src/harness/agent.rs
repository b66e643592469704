//! Finding the agent command before the loop writes anything.
//!
//! The agent runs in the run worktree, but a person types its path where they are: a relative
//! path with a `/` (`../agent.sh`, `./tools/agent`) is made absolute against the directory the
//! command was typed in, so it names the program the person meant, and the ledger records
//! that program. A bare name (`my-agent`) is looked up on `PATH`, as the runner's exec will,
//! and kept as typed. A program that is not there, is not a file or is not executable is
//! refused before the run changes state, naming the path that was looked for.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `argv` with its program resolved as the module docs say: relative paths against `typed_in`.
pub fn locate(argv: &[String], typed_in: &Path) -> Result<Vec<String>> {
    let Some(program) = argv.first() else {
        return Ok(Vec::new());
    };
    if program.is_empty() {
        return Err(Error::usage("the agent command is an empty string")
            .hint("give the agent's program after --, e.g. `-- ./agent.sh`"));
    }
    let mut out = argv.to_vec();
    if program.contains('/') {
        let path = resolve(&typed_in.join(program));
        check_program(&path, program)?;
        out[0] = path.to_string_lossy().into_owned();
    } else {
        let dirs = std::env::var_os("PATH").unwrap_or_default();
        let found = std::env::split_paths(&dirs)
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(program))
            .find(|p| is_executable_file(p));
        if found.is_none() {
            return Err(Error::usage(format!(
                "the agent command {program:?} was not found on PATH"
            ))
            .hint(format!(
                "give its path (`-- ./{program}` for one in the current directory; a relative path is resolved against the directory you run `loop` in), or put it on PATH"
            )));
        }
    }
    Ok(out)
}

/// `path` with its directory part resolved as the kernel resolves it (`..` after a symlink,
/// the symlinks themselves), and its last component kept: a symlinked program keeps the name
/// it was called by. As it is when the directory does not exist.
fn resolve(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// `path` (typed as `typed`) must be an executable file.
fn check_program(path: &Path, typed: &str) -> Result<()> {
    let shown = path.display();
    let typed_note = if Path::new(typed).is_absolute() {
        String::new()
    } else {
        format!(" ({typed:?} resolved against the directory `loop` was run in)")
    };
    match std::fs::metadata(path) {
        Err(e) => Err(Error::usage(format!(
            "the agent command {shown} cannot be used: {e}{typed_note}"
        ))
        .hint(
            "give the agent's path as seen from where you run `loop` (a relative path is resolved against that directory), or an absolute one",
        )),
        Ok(meta) if !meta.is_file() => Err(Error::usage(format!(
            "the agent command {shown} is not a file{typed_note}"
        ))
        .hint("give the agent's program after --, not a directory")),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => Err(Error::usage(format!(
            "the agent command {shown} is not executable{typed_note}"
        ))
        .hint(format!(
            "make it executable (`chmod +x {shown}`), or run it through its interpreter (`-- python3 {typed}`)"
        ))),
        Ok(_) => Ok(()),
    }
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn relative_paths_resolve_where_typed_and_bare_names_stay() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let agent = dir.path().join("agent.sh");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let got = locate(&argv(&["../agent.sh", "--fast"]), &sub).unwrap();
        let want = root.join("agent.sh").display().to_string();
        assert_eq!(got, [want.clone(), "--fast".into()]);
        let got = locate(&argv(&["./agent.sh"]), dir.path()).unwrap();
        assert_eq!(got, [want]);
        // `sh` is on every PATH: kept as typed.
        assert_eq!(locate(&argv(&["sh", "-c"]), &sub).unwrap(), ["sh", "-c"]);

        let e = locate(&argv(&["./agent.sh"]), &sub).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains(&format!("{}/sub/agent.sh", root.display())),
            "{e}"
        );
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = locate(&argv(&["../agent.sh"]), &sub).unwrap_err();
        assert!(e.to_string().contains("not executable"), "{e}");
        let e = locate(&argv(&["../sub"]), &sub).unwrap_err();
        assert!(e.to_string().contains("not a file"), "{e}");
        let e = locate(&argv(&["no-such-agent-anywhere"]), &sub).unwrap_err();
        assert!(e.to_string().contains("not found on PATH"), "{e}");
    }
}
