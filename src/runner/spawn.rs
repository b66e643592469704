//! Starting a check and turning what it did into a [`RunOutcome`]: the command line and
//! environment it gets, the outcome of a check that could not start, and the verdict on one
//! that ran. The threads that read its output are [`super::pump`]'s, the waiting is
//! [`super::wait`]'s.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::capture::excerpt_of;
use super::observe::Ticker;
use super::pump::{self, live_for, spawn_reader, Captured, Event, Source};
use super::redact::Redactor;
use super::wait::{after, wait_with_timeout, Monitor};
use super::{
    scrubbed_env_keys, CheckCommand, CheckStatus, CommandStop, Progress, RunError, RunOptions,
    RunOutcome, SigningEnv, WITHHELD_GIT_CONFIG,
};
use crate::sys::process::{wait_exited_unreaped, ProcessGroup};

/// How long we keep reading after the check's whole process group got SIGKILL. Only a process
/// that left the group can keep the pipes open that long, and we do not wait for it.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// Runs `cmd` as described in the module docs.
///
/// A check that cannot be started (not found, not executable) is an `Ok` outcome with
/// [`CheckStatus::Error`]; `Err` means we could not run or observe it. With
/// [`super::Stream::Observed`] the observer sees it start and end, whichever way it ends.
pub fn run_command(cmd: &CheckCommand, opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let Some(observer) = opts.stream.observer() else {
        return run_and_judge(cmd, opts);
    };
    observer.observe(Progress::Started { name: &cmd.name });
    let result = run_and_judge(cmd, opts);
    observer.observe(Progress::Finished {
        name: &cmd.name,
        outcome: result.as_ref().ok(),
    });
    result
}

fn run_and_judge(cmd: &CheckCommand, opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let program = cmd.argv.first().ok_or_else(|| RunError::EmptyArgv {
        check: cmd.name.clone(),
    })?;
    // What its own command line passes as secrets is redacted from what it prints, too.
    let redactor = Redactor::from_env_with(&opts.env_add).with_argv(&cmd.argv);
    let started_at = SystemTime::now();
    let clock = Instant::now();

    let mut child = match command_for(cmd, opts, program).spawn() {
        Ok(child) => child,
        Err(err) => return not_started(cmd, opts, program, err, started_at, clock, &redactor),
    };
    // `process_group(0)` makes the group id the child's pid.
    let group = ProcessGroup::led_by(child.id());
    let (captured, mut monitor) = start_threads(cmd, opts, group, &mut child)?;
    monitor.ticker = opts
        .stream
        .observer()
        .and_then(|observer| Ticker::new(observer, &cmd.name, clock));

    let wait_error = |source| RunError::Wait {
        check: cmd.name.clone(),
        source,
    };
    let deadline = clock.checked_add(cmd.timeout);
    let timed_out = match wait_with_timeout(&mut monitor, group, deadline, opts.grace) {
        Ok(timed_out) => timed_out,
        Err(err) => {
            abort(group, &mut child);
            return Err(wait_error(err));
        }
    };
    let finished_at = SystemTime::now();
    let duration = clock.elapsed();
    // The command has ended: what follows is our cleanup, not its running time.
    monitor.ticker = None;
    let drained = stop_leftovers(&mut monitor, group, timed_out, opts.grace);
    let status = child.wait().map_err(wait_error)?;

    let (output, stdout_tail) = captured.freeze().map_err(|source| RunError::Read {
        check: cmd.name.clone(),
        source,
    })?;
    let (status, stop, exit_code, signal) = verdict(timed_out, status);
    Ok(RunOutcome {
        status,
        stop,
        exit_code,
        signal,
        started_at,
        finished_at,
        duration_ms: millis(duration),
        output: output.finish(&redactor),
        stdout_tail,
        pipes_held_open: !drained,
    })
}

/// The command line, directory, streams, process group and environment of one check.
fn command_for(cmd: &CheckCommand, opts: &RunOptions, program: &str) -> Command {
    let mut command = Command::new(program);
    command
        .args(&cmd.argv[1..])
        .current_dir(&opts.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a timeout must reach everything the check started.
        .process_group(0);
    for (key, value) in &opts.env_add {
        command.env(key, value);
    }
    // As a shell would: `$PWD` names the directory the check runs in. Inherited, it would be
    // the caller's logical directory (a symlinked spelling no scrubbing knows).
    command.env(
        "PWD",
        std::path::absolute(&opts.cwd).unwrap_or_else(|_| opts.cwd.clone()),
    );
    // The caller's previous directory means nothing to the check, and would carry a local
    // path into its output.
    command.env_remove("OLDPWD");
    // After `env_add`, so a scrubbed key cannot be added back.
    for key in scrubbed_env_keys() {
        command.env_remove(key);
    }
    if opts.signing_env == SigningEnv::Withheld {
        withhold_signing(&mut command);
    }
    command
}

/// Take this user's signing setup out of `command`'s environment ([`SigningEnv::Withheld`]).
fn withhold_signing(command: &mut Command) {
    command.env_remove("SSH_AUTH_SOCK");
    command.env_remove("GIT_CONFIG_PARAMETERS");
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("GIT_CONFIG_KEY_") || key.starts_with("GIT_CONFIG_VALUE_") {
            command.env_remove(key.as_ref());
        }
    }
    command.env("GIT_CONFIG_COUNT", WITHHELD_GIT_CONFIG.len().to_string());
    for (i, (key, value)) in WITHHELD_GIT_CONFIG.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{i}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
}

/// Starts a reader per pipe and the waiter; on failure the group is killed and the child
/// reaped before returning.
fn start_threads(
    cmd: &CheckCommand,
    opts: &RunOptions,
    group: ProcessGroup,
    child: &mut Child,
) -> Result<(Captured, Monitor), RunError> {
    let captured = Captured::new(opts.excerpt_cap, opts.keep_stdout_tail);
    let (events, receiver) = mpsc::channel();
    let mut monitor = Monitor::new(receiver);
    let pipes = [
        (child.stdout.take().map(pump::boxed), Source::Stdout),
        (child.stderr.take().map(pump::boxed), Source::Stderr),
    ];
    let mut started = Ok(());
    for (pipe, source) in pipes {
        let Some(pipe) = pipe else { continue };
        started = spawn_reader(pipe, source, &captured, &events, live_for(cmd, opts));
        if started.is_err() {
            break;
        }
        monitor.open_readers += 1;
    }
    if started.is_ok() {
        let waiter = events.clone();
        let pid = child.id();
        started = thread::Builder::new()
            .name("tabellio-check-wait".into())
            .spawn(move || {
                let _ = waiter.send(Event::ChildExited(wait_exited_unreaped(pid)));
            })
            .map(drop);
    }
    if let Err(source) = started {
        abort(group, child);
        return Err(RunError::Thread {
            check: cmd.name.clone(),
            source,
        });
    }
    // Only the threads hold senders now: a closed channel means they are all gone.
    drop(events);
    Ok((captured, monitor))
}

/// Stops whatever the check left running in its group; whether both pipes reached EOF.
///
/// The main process has exited but is not reaped yet, so its pid — the group id — cannot be
/// reused while we signal the group. Checks must not leave processes behind: whatever the
/// check left running in its group (a daemon, a background job that may be holding stdout
/// open) is stopped now — SIGTERM first unless the timeout already spent the grace period,
/// SIGKILL once the output pipes are closed or the grace is over. Without this a grandchild
/// holding a pipe would keep the readers (and us) waiting as long as it lives.
fn stop_leftovers(
    monitor: &mut Monitor,
    group: ProcessGroup,
    timed_out: bool,
    grace: Duration,
) -> bool {
    if timed_out {
        group.signal(libc::SIGKILL);
        monitor.wait_readers(after(DRAIN_AFTER_KILL))
    } else {
        group.signal(libc::SIGTERM);
        let closed = monitor.wait_readers(after(grace));
        group.signal(libc::SIGKILL);
        closed || monitor.wait_readers(after(DRAIN_AFTER_KILL))
    }
}

/// Status, stop, exit code and signal of a check that ran.
fn verdict(
    timed_out: bool,
    status: ExitStatus,
) -> (CheckStatus, CommandStop, Option<i32>, Option<i32>) {
    match (timed_out, status.code(), status.signal()) {
        (true, code, signal) => (CheckStatus::TimedOut, CommandStop::TimedOut, code, signal),
        (false, Some(0), _) => (CheckStatus::Passed, CommandStop::Exited, Some(0), None),
        (false, Some(code), _) => (CheckStatus::Failed, CommandStop::Exited, Some(code), None),
        (false, None, signal) => (CheckStatus::Failed, CommandStop::Signaled, None, signal),
    }
}

/// Kills the group and reaps the child before an early error return.
fn abort(group: ProcessGroup, child: &mut Child) {
    group.signal(libc::SIGKILL);
    let _ = child.wait();
}

/// The outcome for a command that never ran. Out-of-resource errors are ours, not the check's.
fn not_started(
    cmd: &CheckCommand,
    opts: &RunOptions,
    program: &str,
    err: io::Error,
    started_at: SystemTime,
    clock: Instant,
    redactor: &Redactor,
) -> Result<RunOutcome, RunError> {
    if let Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN) = err.raw_os_error() {
        return Err(RunError::Resources {
            check: cmd.name.clone(),
            source: err,
        });
    }
    // A missing working directory is also ENOENT; it is not a missing command. The path is
    // not named: callers publish this output, and local paths must never leave the machine.
    let (stop, message) = if err.kind() == io::ErrorKind::NotFound {
        match std::fs::metadata(&opts.cwd) {
            Ok(_) => (
                CommandStop::NotFound,
                format!("tabellio: command not found: {program}: {err}\n"),
            ),
            Err(cwd_err) => (
                CommandStop::SpawnFailed,
                format!("tabellio: cannot use the working directory: {cwd_err}\n"),
            ),
        }
    } else {
        (
            CommandStop::SpawnFailed,
            format!("tabellio: cannot run {program}: {err}\n"),
        )
    };
    let finished_at = SystemTime::now();
    Ok(RunOutcome {
        status: CheckStatus::Error,
        stop,
        exit_code: None,
        signal: None,
        started_at,
        finished_at,
        duration_ms: millis(clock.elapsed()),
        output: excerpt_of(message.as_bytes(), opts.excerpt_cap, redactor),
        stdout_tail: Vec::new(),
        pipes_held_open: false,
    })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
