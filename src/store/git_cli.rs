//! The one place that spawns the git CLI. Tabellio uses it for the network (`fetch`, `push`,
//! `ls-remote`): gix does every local read and write, but transports, credential helpers, SSH
//! configuration and server quirks are git's own business and the user's set-up for them must
//! work unchanged. The demo also uses it for the person's own actions (`init`, `commit`), and
//! the reftable ref backend ([`super::refs`]) for every ref read and write.
//!
//! The child gets the user's environment (credential helpers, `SSH_AUTH_SOCK`, proxies,
//! `GIT_SSH_COMMAND`, `-c` overrides in `GIT_CONFIG_PARAMETERS`), minus the variables that say
//! *which repository* to use: when tabellio runs inside a hook those point at the hook's
//! repository (possibly a quarantine), and the repository we mean is named explicitly with
//! `--git-dir`/`--work-tree` instead. Arguments go to git as argv, never through a shell.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::Store;
use crate::sys::process::ProcessGroup;

/// What a git command printed and how it ended.
#[derive(Debug)]
pub struct GitOutput {
    /// The exit code; `None` when git was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl GitOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The last few lines git printed on stderr, for an error message.
    pub fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .collect();
        let start = lines.len().saturating_sub(6);
        lines[start..].join("; ")
    }
}

/// Run `git <args>` on the repository of `store`. A git that cannot be started is an error;
/// a git that fails is returned as output for the caller to judge.
pub fn run(store: &Store, args: &[OsString]) -> Result<GitOutput> {
    output(repository_command(&store.repo, args), NEEDED_FOR)
}

/// `git --git-dir=… <args>` run in the git dir, without a work tree: for reading refs of a
/// worktree whose directory may be gone (its HEAD is in its administrative directory).
pub fn run_git_dir(repo: &gix::Repository, args: &[OsString]) -> Result<GitOutput> {
    output(git_dir_command(repo, args), NEEDED_FOR)
}

/// Start [`run_git_dir`]'s command with stdin and stdout piped (stderr dropped), for a
/// long-lived reader (`cat-file --batch-check`).
pub fn spawn_git_dir(repo: &gix::Repository, args: &[OsString]) -> Result<std::process::Child> {
    let mut cmd = git_dir_command(repo, args);
    cmd.stdin(Stdio::piped()).stderr(Stdio::null());
    cmd.spawn().map_err(|e| {
        Error::internal(format!("could not run git: {e:#}"))
            .hint(NEEDED_FOR)
            .caused_by(e)
    })
}

/// [`run_git_dir`] on the git dir at `git_dir`: a linked worktree's administrative directory.
pub fn run_at_git_dir(git_dir: &Path, args: &[OsString]) -> Result<GitOutput> {
    output(git_dir_command_at(git_dir, args), NEEDED_FOR)
}

fn git_dir_command(repo: &gix::Repository, args: &[OsString]) -> Command {
    git_dir_command_at(repo.git_dir(), args)
}

fn git_dir_command_at(git_dir: &Path, args: &[OsString]) -> Command {
    let mut cmd = command(git_dir);
    let mut flag = OsString::from("--git-dir=");
    flag.push(git_dir);
    cmd.arg(flag).args(args);
    cmd
}

/// Start `git <args>` on the repository of `store` with stdin, stdout and stderr piped, for a
/// conversation (`update-ref --stdin`).
pub fn spawn(
    store: &Store,
    args: &[OsString],
    envs: &[(&str, String)],
) -> Result<std::process::Child> {
    let mut cmd = repository_command(&store.repo, args);
    cmd.stdin(Stdio::piped());
    cmd.envs(envs.iter().map(|(k, v)| (k, v)));
    cmd.spawn().map_err(|e| {
        Error::internal(format!("could not run git: {e:#}"))
            .hint(NEEDED_FOR)
            .caused_by(e)
    })
}

/// Why tabellio needs git on PATH, for the hint when it cannot be started.
const NEEDED_FOR: &str =
    "git-tabellio uses the git CLI for fetch and push (and for every ref of a \
     reftable repository): install git and put it on PATH";

/// Like [`run`], but git (and whatever it started: `ssh`, a credential helper) is killed when
/// it has not finished within `limit`, and git never prompts: for callers that must not hang,
/// such as a hook in the middle of someone's `git pull`. A git stopped that way is returned
/// with `code: None`.
pub fn run_bounded(store: &Store, args: &[OsString], limit: Duration) -> Result<GitOutput> {
    let mut cmd = repository_command(&store.repo, args);
    cmd.env("GIT_TERMINAL_PROMPT", "0").process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        Error::internal(format!("could not run git: {e:#}"))
            .hint(NEEDED_FOR)
            .caused_by(e)
    })?;
    let group = ProcessGroup::led_by(child.id());
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => {
                group.signal(libc::SIGKILL);
                let _ = child.wait();
                break None;
            }
        }
    };
    Ok(GitOutput {
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Read a pipe to its end on a thread of its own (so neither pipe can fill up and stall git).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// How often [`run_bounded`] looks whether git has finished.
const POLL: Duration = Duration::from_millis(20);

/// `git --git-dir=… [--work-tree=…] <args>` for the repository `repo`, output piped.
fn repository_command(repo: &gix::Repository, args: &[OsString]) -> Command {
    // git resolves relative paths in remote URLs against its cwd: make it the repository's.
    let mut cmd = command(repo.workdir().unwrap_or(repo.git_dir()));
    let mut git_dir = OsString::from("--git-dir=");
    git_dir.push(repo.git_dir());
    cmd.arg(git_dir);
    if let Some(workdir) = repo.workdir() {
        let mut wt = OsString::from("--work-tree=");
        wt.push(workdir);
        cmd.arg(wt);
    }
    cmd.args(args);
    cmd
}

/// Run `git <args>` in `dir`, letting git find the repository from there as a person's git
/// would. `hint` says why git is needed if it cannot be started; a git that fails is returned
/// as output for the caller to judge.
pub fn run_in(dir: &Path, args: &[OsString], hint: &str) -> Result<GitOutput> {
    let mut cmd = command(dir);
    cmd.args(args);
    output(cmd, hint)
}

/// `git` in `cwd`, with no stdin, its output captured and the repository-locating variables of
/// our own environment removed.
fn command(cwd: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for key in crate::runner::scrubbed_env_keys() {
        cmd.env_remove(key);
    }
    // As in every repository gix opens for us: what git checks out, merges or sends must be
    // the object named, never a replacement (`git replace`).
    cmd.env("GIT_NO_REPLACE_OBJECTS", "1");
    cmd
}

fn output(mut cmd: Command, hint: &str) -> Result<GitOutput> {
    let out = cmd.output().map_err(|e| {
        Error::internal(format!("could not run git: {e:#}"))
            .hint(hint)
            .caused_by(e)
    })?;
    Ok(GitOutput {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `args` as `OsString`s.
pub fn argv<I, S>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    args.into_iter().map(Into::into).collect()
}
