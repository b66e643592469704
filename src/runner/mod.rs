//! The process runner: runs one command (a check, or the loop's agent) and reduces what it did
//! to a [`RunOutcome`] — a verdict, how it stopped, and a hashed, bounded, redacted summary of
//! its output. It knows nothing of evidence: callers decide what to record and where.
//!
//! Guarantees. `argv` is executed directly, never through a shell, with stdin `/dev/null`, in
//! `RunOptions::cwd`, with our environment plus `env_add` minus the repository-locating
//! variables of [`scrubbed_env_keys`]. The check runs in its own process group; on timeout the
//! whole group gets SIGTERM, then SIGKILL after `grace`, and whatever the check left running
//! in its group is killed when its main process exits. Output of any size is hashed in full
//! while memory stays bounded by the excerpt cap plus fixed buffers. The hash covers stdout and
//! stderr merged in the order our readers receive chunks: exact within one stream, approximate
//! across the two (the kernel does not record it), so a check writing to both at once may hash
//! differently from run to run. The stored excerpt is ⅓ head and ⅔ tail with an omission
//! marker, and secrets are redacted from it before it leaves this module.
//!
//! Failure model. Everything the *check* can do wrong (exit nonzero, die by a signal, hang,
//! not exist, not be executable) is an `Ok(RunOutcome)` with the matching [`CheckStatus`] and
//! [`CommandStop`]. `Err(RunError)` is kept for failures on our side (no threads, no file
//! descriptors, a broken wait); even then the child's process group has been killed and the
//! child reaped before returning. The one thing that can outlive a run is a process that left
//! the check's process group (`setsid`) — it cannot be signalled through the group; if it
//! still holds the output pipes we stop reading after a bounded drain
//! ([`RunOutcome::pipes_held_open`]) instead of waiting for it.
//!
//! Layout: `spawn` starts the check and judges how it ended, `pump` holds the reader threads,
//! `observe` the progress events a caller may watch ([`Stream::Observed`]), `wait` the deadline
//! and grace period, `capture` the bounded hashing capture and `redact` the
//! secret redaction. Process groups and signals are [`crate::sys::process`]'s.

mod capture;
mod escapes;
mod observe;
mod pump;
mod redact;
mod spawn;
mod wait;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use capture::{excerpt_of, omission_marker, OutputCapture, TailRing};
pub use escapes::strip_escapes;
pub use observe::{Observer, Progress};
pub use redact::{
    is_secret_name, is_secret_path, Redactor, Rule, MIN_SECRET_CHARS, REDACTED, RULES,
};
pub use spawn::run_command;

/// Default excerpt cap: 16 KiB, as the design's policy default.
pub const DEFAULT_EXCERPT_CAP: usize = 16 * 1024;

/// Default time between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// Variables that tell git which repository to use. Hooks run with them set (pointing at the
/// repository that runs the hook); a check that runs `git` inside its own worktree must find
/// that worktree, not the hook's repository, so they are removed from the child environment —
/// even when a caller passes them in `env_add`.
const SCRUBBED_ENV_KEYS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
];

/// The environment variables removed from every check's environment.
pub fn scrubbed_env_keys() -> &'static [&'static str] {
    SCRUBBED_ENV_KEYS
}

/// Whether the child gets this user's signing setup (docs/verify.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigningEnv {
    /// As inherited.
    #[default]
    Inherit,
    /// Without `SSH_AUTH_SOCK`, without configuration injected through the environment
    /// (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`), and with git told
    /// `user.signingKey=` (empty), `gpg.format=openpgp` (git's default, so no SSH signing
    /// setup applies), `commit.gpgSign=false`, `tag.gpgSign=false`: what `loop`
    /// gives an agent and its checks. It keeps the key out of casual reach, not out of reach of
    /// a process of the same user that reads the key file or the config files itself.
    Withheld,
}

/// The git configuration a [`SigningEnv::Withheld`] child is given (in the environment, which
/// git reads after every config file).
pub const WITHHELD_GIT_CONFIG: &[(&str, &str)] = &[
    ("user.signingKey", ""),
    ("gpg.format", "openpgp"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
];

/// One check to run: a name (for output prefixes and errors), the argv and a timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckCommand {
    pub name: String,
    /// `argv[0]` is resolved through `PATH` like [`std::process::Command`] does.
    pub argv: Vec<String>,
    /// Wall-clock limit from spawn; `Duration::MAX` means none.
    pub timeout: Duration,
}

/// Who sees the command while it runs.
#[derive(Debug, Clone, Copy, Default)]
pub enum Stream {
    /// Nobody: only capture.
    #[default]
    Quiet,
    /// An observer gets the start, every chunk of output, a `Running` event every
    /// [`Observer::interval`] and the end ([`Progress`]); what to show is its business.
    Observed(&'static dyn Observer),
}

impl Stream {
    /// The observer of [`Stream::Observed`].
    pub fn observer(self) -> Option<&'static dyn Observer> {
        match self {
            Stream::Observed(observer) => Some(observer),
            Stream::Quiet => None,
        }
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stream::Quiet, Stream::Quiet) => true,
            (Stream::Observed(a), Stream::Observed(b)) => std::ptr::addr_eq(*a, *b),
            _ => false,
        }
    }
}

impl Eq for Stream {}

/// How [`run_command`] runs a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    pub cwd: PathBuf,
    /// Bytes of merged output kept for the excerpt: ⅓ head, ⅔ tail.
    pub excerpt_cap: usize,
    pub stream: Stream,
    /// Extra variables for the child (scrubbed keys are removed even from here).
    pub env_add: Vec<(String, String)>,
    /// Time between SIGTERM and SIGKILL to the check's process group.
    pub grace: Duration,
    /// Bytes at the end of the child's stdout alone to return in [`RunOutcome::stdout_tail`]
    /// (0 = none), so a caller can look for a completion marker without the stderr noise.
    pub keep_stdout_tail: usize,
    /// Whether the child gets this user's signing setup.
    pub signing_env: SigningEnv,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            cwd: PathBuf::from("."),
            excerpt_cap: DEFAULT_EXCERPT_CAP,
            stream: Stream::Quiet,
            env_add: Vec::new(),
            grace: DEFAULT_GRACE,
            keep_stdout_tail: 0,
            signing_env: SigningEnv::Inherit,
        }
    }
}

/// How the command stopped (recorded by callers, e.g. as evidence's `stopped.command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandStop {
    /// Exited by itself with an exit code.
    Exited,
    /// Killed by a signal we did not send.
    Signaled,
    /// Stopped by us at its timeout.
    TimedOut,
    /// `argv[0]` was not found.
    NotFound,
    /// It could not be started for another reason (not executable, bad format, bad cwd …).
    SpawnFailed,
}

impl CommandStop {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandStop::Exited => "exited",
            CommandStop::Signaled => "signaled",
            CommandStop::TimedOut => "timed_out",
            CommandStop::NotFound => "not_found",
            CommandStop::SpawnFailed => "spawn_failed",
        }
    }
}

impl std::fmt::Display for CommandStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use crate::model::evidence::CheckStatus;

/// What may be stored of the output (callers record it, e.g. as evidence's `output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSummary {
    /// Every byte the check wrote to stdout and stderr.
    pub bytes: u64,
    /// Lower-case hex SHA-256 of all those bytes, in arrival order, before redaction.
    pub sha256: String,
    /// Redacted, lossily decoded excerpt: everything, or head + omission marker + tail.
    pub excerpt: String,
    pub truncated: bool,
    /// How many secrets were replaced by [`REDACTED`] in `excerpt`.
    pub redactions: u64,
}

/// Everything [`run_command`] learned about one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub status: CheckStatus,
    pub stop: CommandStop,
    pub exit_code: Option<i32>,
    /// The signal that ended the command, ours (timeout) or not.
    pub signal: Option<i32>,
    pub started_at: SystemTime,
    /// When the command's main process was seen to end (or failed to start).
    pub finished_at: SystemTime,
    pub duration_ms: u64,
    /// For `NotFound` and `SpawnFailed` the "output" is our one-line diagnostic, so that
    /// `bytes`, `sha256` and `excerpt` describe the same text.
    pub output: OutputSummary,
    /// The last `keep_stdout_tail` bytes of stdout alone (not redacted: never store it).
    pub stdout_tail: Vec<u8>,
    /// A process outside the check's process group still held stdout or stderr open after the
    /// check ended and its group was killed; output is what arrived until we stopped reading.
    pub pipes_held_open: bool,
}

/// Failures on our side, not the check's. See the module docs.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("check {check:?} has an empty argv")]
    EmptyArgv { check: String },
    #[error("could not start check {check:?}: out of processes, memory or file descriptors")]
    Resources {
        check: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start a capture thread for check {check:?}")]
    Thread {
        check: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for check {check:?} failed")]
    Wait {
        check: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the output of check {check:?} failed")]
    Read {
        check: String,
        #[source]
        source: std::io::Error,
    },
}
