//! Spawning a check, waiting for it with a timeout, and the capture threads.
//!
//! Threads: one reader per pipe (stdout, stderr) feeding a shared, bounded [`OutputCapture`]
//! under a mutex, and one waiter blocked in `waitid(WNOWAIT)`. All three report to the calling
//! thread over one channel, which it reads with `recv_timeout` — the only timed waits are the
//! check's own deadline, the grace period and the final drain.

use std::io::{self, Read, Write};
use std::mem;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::capture::{excerpt_of, OutputCapture, TailRing};
use super::redact::Redactor;
use super::{
    scrubbed_env_keys, CheckCommand, CheckStatus, CommandStop, RunError, RunOptions, RunOutcome,
    Stream,
};

/// Bytes read from a pipe at a time (the default Linux pipe capacity).
const READ_CHUNK: usize = 64 * 1024;

/// How long we keep reading after the check's whole process group got SIGKILL. Only a process
/// that left the group can keep the pipes open that long, and we do not wait for it.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// Runs `cmd` as described in the module docs.
///
/// A check that cannot be started (not found, not executable) is an `Ok` outcome with
/// [`CheckStatus::Error`]; `Err` means we could not run or observe it.
pub fn run_command(cmd: &CheckCommand, opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let program = cmd.argv.first().ok_or_else(|| RunError::EmptyArgv {
        check: cmd.name.clone(),
    })?;
    let redactor = Redactor::from_env_with(&opts.env_add);
    let started_at = SystemTime::now();
    let clock = Instant::now();

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
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return not_started(cmd, opts, program, err, started_at, clock, &redactor),
    };
    // `process_group(0)` makes the group id the child's pid.
    let group = ProcessGroup(libc::pid_t::try_from(child.id()).unwrap_or(0));

    let state = Arc::new(Mutex::new(CaptureState {
        output: OutputCapture::new(opts.excerpt_cap),
        stdout_tail: TailRing::new(opts.keep_stdout_tail),
        closed: false,
        read_error: None,
    }));
    let (events, receiver) = mpsc::channel();
    let mut monitor = Monitor {
        events: receiver,
        exited: false,
        wait_error: None,
        disconnected: false,
        open_readers: 0,
    };
    let thread_error = |source| RunError::Thread {
        check: cmd.name.clone(),
        source,
    };
    if let Some(pipe) = child.stdout.take() {
        let echo = echo_for(cmd, opts);
        if let Err(err) = spawn_reader(pipe, Source::Stdout, &state, &events, echo) {
            abort(&group, &mut child);
            return Err(thread_error(err));
        }
        monitor.open_readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        let echo = echo_for(cmd, opts);
        if let Err(err) = spawn_reader(pipe, Source::Stderr, &state, &events, echo) {
            abort(&group, &mut child);
            return Err(thread_error(err));
        }
        monitor.open_readers += 1;
    }
    let waiter = events.clone();
    let pid = child.id();
    let spawned = thread::Builder::new()
        .name("tabellio-check-wait".into())
        .spawn(move || {
            let _ = waiter.send(Event::ChildExited(wait_exited_unreaped(pid)));
        });
    if let Err(err) = spawned {
        abort(&group, &mut child);
        return Err(thread_error(err));
    }
    // Only the threads hold senders now: a closed channel means they are all gone.
    drop(events);

    let wait_error = |source| RunError::Wait {
        check: cmd.name.clone(),
        source,
    };
    let deadline = clock.checked_add(cmd.timeout);
    let timed_out = match wait_with_timeout(&mut monitor, &group, deadline, opts.grace) {
        Ok(timed_out) => timed_out,
        Err(err) => {
            abort(&group, &mut child);
            return Err(wait_error(err));
        }
    };
    let finished_at = SystemTime::now();
    let duration = clock.elapsed();

    // The main process has exited but is not reaped yet, so its pid — the group id — cannot
    // be reused while we signal the group. Checks must not leave processes behind: whatever
    // the check left running in its group (a daemon, a background job that may be holding
    // stdout open) is stopped now — SIGTERM first unless the timeout already spent the grace
    // period, SIGKILL once the output pipes are closed or the grace is over. Without this a
    // grandchild holding a pipe would keep the readers (and us) waiting as long as it lives.
    let drained = if timed_out {
        group.signal(libc::SIGKILL);
        monitor.wait_readers(after(DRAIN_AFTER_KILL))
    } else {
        group.signal(libc::SIGTERM);
        let closed = monitor.wait_readers(after(opts.grace));
        group.signal(libc::SIGKILL);
        closed || monitor.wait_readers(after(DRAIN_AFTER_KILL))
    };
    let status = child.wait().map_err(wait_error)?;

    // Freeze the capture: a reader still attached to a pipe held open from outside the group
    // stops at its next chunk instead of changing what we hash and report.
    let (output, stdout_tail, read_error) = {
        let mut state = lock(&state);
        state.closed = true;
        (
            mem::replace(&mut state.output, OutputCapture::new(0)),
            state.stdout_tail.to_vec(),
            state.read_error.take(),
        )
    };
    if let Some(source) = read_error {
        return Err(RunError::Read {
            check: cmd.name.clone(),
            source,
        });
    }

    let (status, stop, exit_code, signal) = match (timed_out, status.code(), status.signal()) {
        (true, code, signal) => (CheckStatus::TimedOut, CommandStop::TimedOut, code, signal),
        (false, Some(0), _) => (CheckStatus::Passed, CommandStop::Exited, Some(0), None),
        (false, Some(code), _) => (CheckStatus::Failed, CommandStop::Exited, Some(code), None),
        (false, None, signal) => (CheckStatus::Failed, CommandStop::Signaled, None, signal),
    };
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
    // not named: local paths are never stored in evidence.
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

struct CaptureState {
    output: OutputCapture,
    stdout_tail: TailRing,
    /// Set once we have taken the result; late chunks are dropped.
    closed: bool,
    read_error: Option<io::Error>,
}

fn lock(state: &Mutex<CaptureState>) -> MutexGuard<'_, CaptureState> {
    // A panicking reader cannot leave the capture half-updated in a way that matters more
    // than losing the whole run would.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Stdout,
    Stderr,
}

enum Event {
    /// The direct child has exited (still unreaped), or waiting for it failed.
    ChildExited(io::Result<()>),
    ReaderDone,
}

/// Sends `ReaderDone` however the reader ends, panics included.
struct DoneGuard(Sender<Event>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(Event::ReaderDone);
    }
}

fn spawn_reader<R: Read + Send + 'static>(
    pipe: R,
    source: Source,
    state: &Arc<Mutex<CaptureState>>,
    events: &Sender<Event>,
    echo: Option<Echo>,
) -> io::Result<()> {
    let state = Arc::clone(state);
    let done = DoneGuard(events.clone());
    let name = match source {
        Source::Stdout => "tabellio-check-stdout",
        Source::Stderr => "tabellio-check-stderr",
    };
    thread::Builder::new().name(name.into()).spawn(move || {
        let _done = done;
        pump(pipe, source, &state, echo);
    })?;
    Ok(())
}

/// Copies one pipe into the capture until EOF, an error or the capture is closed.
fn pump(mut pipe: impl Read, source: Source, state: &Mutex<CaptureState>, mut echo: Option<Echo>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                let mut state = lock(state);
                if !state.closed && state.read_error.is_none() {
                    state.read_error = Some(err);
                }
                return;
            }
        };
        let chunk = &buf[..n];
        {
            let mut state = lock(state);
            if state.closed {
                return;
            }
            state.output.push(chunk);
            if source == Source::Stdout {
                state.stdout_tail.push(chunk);
            }
        }
        if let Some(echo) = echo.as_mut() {
            echo.write(chunk);
        }
    }
}

/// Live echo of one stream to our stderr, `[<name>] ` before every line. Not redacted: it
/// goes where the output would go if the person ran the check by hand.
struct Echo {
    prefix: Vec<u8>,
    at_line_start: bool,
}

fn echo_for(cmd: &CheckCommand, opts: &RunOptions) -> Option<Echo> {
    match opts.stream {
        Stream::Quiet => None,
        Stream::Stderr => Some(Echo {
            prefix: format!("[{}] ", cmd.name).into_bytes(),
            at_line_start: true,
        }),
    }
}

impl Echo {
    /// Best effort: a closed or broken terminal must not fail the check.
    fn write(&mut self, chunk: &[u8]) {
        let stderr = io::stderr();
        // Bounded buffer, and the lock keeps a chunk's lines together.
        let mut out = io::BufWriter::with_capacity(8 * 1024, stderr.lock());
        let _ = write_prefixed(&mut out, &self.prefix, chunk, &mut self.at_line_start);
        let _ = out.flush();
    }
}

fn write_prefixed(
    out: &mut impl Write,
    prefix: &[u8],
    chunk: &[u8],
    at_line_start: &mut bool,
) -> io::Result<()> {
    for line in chunk.split_inclusive(|&b| b == b'\n') {
        if *at_line_start {
            out.write_all(prefix)?;
        }
        out.write_all(line)?;
        *at_line_start = line.ends_with(b"\n");
    }
    Ok(())
}

/// Blocks until the child `pid` has exited, without reaping it (`WNOWAIT`): while it is a
/// zombie its pid, which is also its process group id, stays reserved.
fn wait_exited_unreaped(pid: u32) -> io::Result<()> {
    loop {
        // SAFETY: `siginfo_t` is plain data for which all-zero is a valid value; `waitid`
        // only writes into it.
        let mut info: libc::siginfo_t = unsafe { mem::zeroed() };
        // SAFETY: a plain syscall on our own child with a valid out-pointer.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                libc::id_t::from(pid),
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The check's process group.
struct ProcessGroup(libc::pid_t);

impl ProcessGroup {
    /// Signals every process still in the group; an empty group (ESRCH) is fine.
    fn signal(&self, signal: libc::c_int) {
        // kill(0, _) or kill(-1, _) would hit our own group or every process we may signal.
        if self.0 > 1 {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(-self.0, signal);
            }
        }
    }
}

/// Kills the group and reaps the child before an early error return.
fn abort(group: &ProcessGroup, child: &mut Child) {
    group.signal(libc::SIGKILL);
    let _ = child.wait();
}

/// Collects the threads' reports.
struct Monitor {
    events: Receiver<Event>,
    exited: bool,
    wait_error: Option<io::Error>,
    disconnected: bool,
    open_readers: usize,
}

impl Monitor {
    /// `Ok(true)` once the child has exited, `Ok(false)` if `until` passed first.
    fn wait_child(&mut self, until: Option<Instant>) -> io::Result<bool> {
        self.wait_until(until, |m| {
            m.exited || m.wait_error.is_some() || m.disconnected
        });
        if let Some(err) = self.wait_error.take() {
            return Err(err);
        }
        if self.exited {
            return Ok(true);
        }
        if self.disconnected {
            return Err(io::Error::other("the wait thread ended without a report"));
        }
        Ok(false)
    }

    /// Whether both pipes reached EOF before `until`.
    fn wait_readers(&mut self, until: Option<Instant>) -> bool {
        self.wait_until(until, |m| m.open_readers == 0)
    }

    /// Handles events until `done` holds (true) or `until` passes (false); `None` waits
    /// without a limit.
    fn wait_until(&mut self, until: Option<Instant>, done: impl Fn(&Self) -> bool) -> bool {
        while !done(self) {
            if self.disconnected {
                return false;
            }
            let event = match until {
                None => self
                    .events
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(until) => self
                    .events
                    .recv_timeout(until.saturating_duration_since(Instant::now())),
            };
            match event {
                Ok(Event::ChildExited(Ok(()))) => self.exited = true,
                Ok(Event::ChildExited(Err(err))) => self.wait_error = Some(err),
                Ok(Event::ReaderDone) => self.open_readers = self.open_readers.saturating_sub(1),
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => self.disconnected = true,
            }
        }
        true
    }
}

/// Waits for the child to exit; at `deadline` sends SIGTERM to its group, and SIGKILL after
/// `grace`. Returns whether the deadline passed.
fn wait_with_timeout(
    monitor: &mut Monitor,
    group: &ProcessGroup,
    deadline: Option<Instant>,
    grace: Duration,
) -> io::Result<bool> {
    if monitor.wait_child(deadline)? {
        return Ok(false);
    }
    group.signal(libc::SIGTERM);
    if !monitor.wait_child(after(grace))? {
        group.signal(libc::SIGKILL);
        // Without a deadline `wait_child` only returns once the child exited or on error.
        if !monitor.wait_child(None)? {
            return Err(io::Error::other("the check outlived SIGKILL"));
        }
    }
    Ok(true)
}

/// `None` (no deadline) if the addition overflows, e.g. for `Duration::MAX`.
fn after(duration: Duration) -> Option<Instant> {
    Instant::now().checked_add(duration)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn check(argv: &[&str], timeout: Duration) -> CheckCommand {
        CheckCommand {
            name: "t".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout,
        }
    }

    fn perl(script: &str, timeout: Duration) -> CheckCommand {
        check(&["perl", "-e", script], timeout)
    }

    fn run(cmd: &CheckCommand, opts: &RunOptions) -> RunOutcome {
        match run_command(cmd, opts) {
            Ok(outcome) => outcome,
            Err(err) => panic!("run {:?} in {:?}: {err}", cmd.argv, opts.cwd),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let path =
                std::env::temp_dir().join(format!("tabellio-validate-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Waits (bounded) for `pid` to exit, whoever its parent is: a pidfd becomes readable when
    /// the process exits. A zombie counts as gone.
    fn assert_process_ends(pid: libc::pid_t) {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::ESRCH),
                "pidfd_open({pid}): {err}"
            );
            return;
        }
        let fd = libc::c_int::try_from(fd).expect("fd fits c_int");
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pollfd, 1, 10_000) };
        // SAFETY: we own fd.
        unsafe { libc::close(fd) };
        assert_eq!(
            ready, 1,
            "process {pid} still running after the run returned"
        );
    }

    fn kill_process(pid: libc::pid_t) {
        // SAFETY: plain syscall.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }

    fn first_line_pid(outcome: &RunOutcome) -> libc::pid_t {
        let text = String::from_utf8_lossy(&outcome.stdout_tail);
        text.lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid in stdout: {outcome:?}"))
    }

    fn peak_rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/self/status")
    }

    #[test]
    fn exit_zero_passes() {
        let outcome = run(&check(&["true"], secs(30)), &RunOptions::default());
        assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
        assert_eq!(outcome.stop, CommandStop::Exited);
        assert_eq!((outcome.exit_code, outcome.signal), (Some(0), None));
        assert_eq!(outcome.output.bytes, 0);
        assert!(!outcome.pipes_held_open);
        assert!(outcome.finished_at >= outcome.started_at);
    }

    #[test]
    fn nonzero_exit_fails_and_both_streams_are_captured() {
        let cmd = perl(
            r#"$|=1; print "out\n"; print STDERR "err\n"; exit 3"#,
            secs(30),
        );
        let outcome = run(&cmd, &RunOptions::default());
        assert_eq!(outcome.status, CheckStatus::Failed, "{outcome:?}");
        assert_eq!(outcome.stop, CommandStop::Exited);
        assert_eq!((outcome.exit_code, outcome.signal), (Some(3), None));
        assert_eq!(outcome.output.bytes, 8);
        assert!(outcome.output.excerpt.contains("out\n"), "{outcome:?}");
        assert!(outcome.output.excerpt.contains("err\n"), "{outcome:?}");
        assert!(!outcome.output.truncated);
    }

    #[test]
    fn missing_executable_is_not_found_not_an_error() {
        let cmd = check(&["tabellio-no-such-command-5d1c"], secs(30));
        let outcome = run(&cmd, &RunOptions::default());
        assert_eq!(outcome.status, CheckStatus::Error);
        assert_eq!(outcome.stop, CommandStop::NotFound);
        assert_eq!((outcome.exit_code, outcome.signal), (None, None));
        assert!(outcome.output.excerpt.contains("not found"), "{outcome:?}");
        assert_eq!(outcome.output.bytes, outcome.output.excerpt.len() as u64);
    }

    #[test]
    fn non_executable_file_is_a_spawn_failure() {
        let dir = TempDir::new();
        let script = dir.0.join("script");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write script");
        let path = script.to_str().expect("utf-8 temp path");
        let outcome = run(&check(&[path], secs(30)), &RunOptions::default());
        assert_eq!(outcome.status, CheckStatus::Error);
        assert_eq!(outcome.stop, CommandStop::SpawnFailed);
        assert_eq!(outcome.exit_code, None);
        assert!(
            outcome.output.excerpt.contains("Permission denied"),
            "{outcome:?}"
        );
    }

    #[test]
    fn missing_working_directory_is_a_spawn_failure_not_a_missing_command() {
        let dir = TempDir::new();
        let opts = RunOptions {
            cwd: dir.0.join("gone"),
            ..RunOptions::default()
        };
        let outcome = run(&check(&["true"], secs(30)), &opts);
        assert_eq!(outcome.stop, CommandStop::SpawnFailed, "{outcome:?}");
        assert_eq!(outcome.status, CheckStatus::Error);
        assert!(outcome.output.excerpt.contains("working directory"));
        assert!(!outcome.output.excerpt.contains("gone"), "no local paths");
    }

    #[test]
    fn empty_argv_is_an_error() {
        let err = run_command(&check(&[], secs(1)), &RunOptions::default());
        assert!(matches!(err, Err(RunError::EmptyArgv { .. })), "{err:?}");
    }

    #[test]
    fn death_by_signal_fails_with_the_signal() {
        let outcome = run(
            &perl(r#"kill "KILL", $$"#, secs(30)),
            &RunOptions::default(),
        );
        assert_eq!(outcome.status, CheckStatus::Failed, "{outcome:?}");
        assert_eq!(outcome.stop, CommandStop::Signaled);
        assert_eq!(
            (outcome.exit_code, outcome.signal),
            (None, Some(libc::SIGKILL))
        );
    }

    #[test]
    fn timeout_terminates_the_whole_group() {
        // The grandchild sleeps too; it shares the group and must die with it.
        let cmd = perl(
            r#"$|=1; my $p = fork(); if ($p == 0) { sleep 600; exit 0 } print "$p\n"; sleep 600"#,
            secs(1),
        );
        let opts = RunOptions {
            grace: secs(1),
            keep_stdout_tail: 64,
            ..RunOptions::default()
        };
        let clock = Instant::now();
        let outcome = run(&cmd, &opts);
        assert!(clock.elapsed() < secs(60), "took {:?}", clock.elapsed());
        assert_eq!(outcome.status, CheckStatus::TimedOut, "{outcome:?}");
        assert_eq!(outcome.stop, CommandStop::TimedOut);
        assert_eq!(outcome.signal, Some(libc::SIGTERM));
        assert_eq!(outcome.exit_code, None);
        assert!(!outcome.pipes_held_open);
        assert_process_ends(first_line_pid(&outcome));
    }

    #[test]
    fn timeout_escalates_to_sigkill_when_sigterm_is_ignored() {
        let cmd = perl(r#"$SIG{TERM} = "IGNORE"; sleep 600"#, secs(1));
        let opts = RunOptions {
            grace: Duration::from_millis(300),
            ..RunOptions::default()
        };
        let outcome = run(&cmd, &opts);
        assert_eq!(outcome.status, CheckStatus::TimedOut, "{outcome:?}");
        assert_eq!(outcome.signal, Some(libc::SIGKILL));
    }

    #[test]
    fn background_grandchild_holding_stdout_is_killed_when_the_check_exits() {
        // One grandchild dies of SIGTERM, the other ignores it (the disposition is set before
        // the fork, so there is no race) and needs the SIGKILL after the grace.
        for ignore_term in ["", r#"$SIG{TERM} = "IGNORE";"#] {
            let script = format!(
                r#"$|=1; {ignore_term} my $p = fork();
                   if ($p == 0) {{ sleep 600; exit 0 }} print "$p\n"; exit 0"#
            );
            let opts = RunOptions {
                grace: Duration::from_millis(500),
                keep_stdout_tail: 64,
                ..RunOptions::default()
            };
            let clock = Instant::now();
            let outcome = run(&perl(&script, secs(300)), &opts);
            assert!(clock.elapsed() < secs(60), "took {:?}", clock.elapsed());
            assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
            assert!(!outcome.pipes_held_open, "{outcome:?}");
            assert_process_ends(first_line_pid(&outcome));
        }
    }

    #[test]
    fn a_process_that_left_the_group_cannot_hold_us() {
        // The grandchild moves to its own group (out of our reach) and keeps stdout open for a
        // while; the parent waits until it has moved, then exits.
        let script = r#"$|=1; pipe(my $r, my $w); my $p = fork();
            if ($p == 0) { close $r; setpgrp(0, 0); close $w; sleep 120; exit 0 }
            close $w; my $ignored = <$r>; print "$p\n"; exit 0"#;
        let opts = RunOptions {
            grace: Duration::from_millis(200),
            keep_stdout_tail: 64,
            ..RunOptions::default()
        };
        let clock = Instant::now();
        let outcome = run(&perl(script, secs(300)), &opts);
        let elapsed = clock.elapsed();
        let pid = first_line_pid(&outcome);
        kill_process(pid);
        assert!(elapsed < secs(60), "took {elapsed:?}");
        assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
        assert!(outcome.pipes_held_open, "{outcome:?}");
        assert_process_ends(pid);
    }

    #[test]
    fn huge_output_is_hashed_in_full_with_bounded_memory() {
        const TOTAL: u64 = 300_000_000;
        let before = peak_rss_kib();
        let total = TOTAL.to_string();
        let cmd = check(&["head", "-c", &total, "/dev/zero"], secs(600));
        let outcome = run(&cmd, &RunOptions::default());
        let after = peak_rss_kib();
        assert_eq!(outcome.status, CheckStatus::Passed, "{:?}", outcome.status);
        assert_eq!(outcome.output.bytes, TOTAL);
        assert!(outcome.output.truncated);
        let growth_mib = after.saturating_sub(before) / 1024;
        assert!(growth_mib < 64, "peak RSS grew by {growth_mib} MiB");

        let mut expected = OutputCapture::new(0);
        let zeros = vec![0u8; 1 << 20];
        let mut left = TOTAL;
        while left > 0 {
            let n = left.min(zeros.len() as u64);
            expected.push(&zeros[..n as usize]);
            left -= n;
        }
        let expected = expected.finish(&Redactor::default());
        assert_eq!(outcome.output.sha256, expected.sha256);
        let kept = outcome.output.excerpt.matches('\0').count();
        assert_eq!(kept, 16 * 1024, "head + tail bytes in the excerpt");
    }

    #[test]
    fn long_output_keeps_a_third_head_and_two_thirds_tail() {
        let cmd = perl(
            // One stream: the order of chunks across stdout and stderr is only approximate.
            r#"print "A" x 10000; print "B" x 100000; print "C" x 10000"#,
            secs(60),
        );
        let opts = RunOptions {
            excerpt_cap: 3000,
            ..RunOptions::default()
        };
        let outcome = run(&cmd, &opts);
        assert_eq!(outcome.output.bytes, 120_000);
        assert!(outcome.output.truncated);
        let expected = format!(
            "{}\n[... tabellio: 117000 bytes omitted ...]\n{}",
            "A".repeat(1000),
            "C".repeat(2000)
        );
        assert_eq!(outcome.output.excerpt, expected);
    }

    #[test]
    fn planted_secrets_are_redacted_but_hashed() {
        let cmd = perl(
            r#"print "value=$ENV{TABELLIO_TEST_TOKEN}\n"; print "gh=ghp_", "a" x 30, "\n""#,
            secs(60),
        );
        let opts = RunOptions {
            env_add: vec![("TABELLIO_TEST_TOKEN".into(), "hunter2-very-secret".into())],
            ..RunOptions::default()
        };
        let outcome = run(&cmd, &opts);
        assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
        assert_eq!(outcome.output.excerpt, "value=[REDACTED]\ngh=[REDACTED]\n");
        assert_eq!(outcome.output.redactions, 2);
        let raw = format!("value=hunter2-very-secret\ngh=ghp_{}\n", "a".repeat(30));
        assert_eq!(outcome.output.bytes, raw.len() as u64);
        let raw_summary = excerpt_of(raw.as_bytes(), 1 << 20, &Redactor::default());
        assert_eq!(outcome.output.sha256, raw_summary.sha256);
    }

    #[test]
    fn repository_locating_variables_are_scrubbed_even_from_env_add() {
        let mut env_add: Vec<(String, String)> = scrubbed_env_keys()
            .iter()
            .map(|key| (key.to_string(), "/tabellio-should-not-see".to_string()))
            .collect();
        env_add.push(("TABELLIO_TEST_VISIBLE".into(), "yes".into()));
        env_add.push(("GIT_CEILING_DIRECTORIES".into(), "/kept".into()));
        let opts = RunOptions {
            env_add,
            excerpt_cap: 1 << 20,
            ..RunOptions::default()
        };
        let outcome = run(&check(&["env"], secs(60)), &opts);
        let env = &outcome.output.excerpt;
        assert!(!outcome.output.truncated);
        assert!(
            env.lines().any(|l| l == "TABELLIO_TEST_VISIBLE=yes"),
            "{env}"
        );
        assert!(
            env.lines().any(|l| l == "GIT_CEILING_DIRECTORIES=/kept"),
            "{env}"
        );
        for key in scrubbed_env_keys() {
            let prefix = format!("{key}=");
            assert!(
                !env.lines().any(|l| l.starts_with(&prefix)),
                "{key} leaked: {env}"
            );
        }
        assert!(!env.contains("tabellio-should-not-see"), "{env}");
    }

    #[test]
    fn scrubbed_keys_are_the_repository_locating_ones() {
        let keys = scrubbed_env_keys();
        for key in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_COMMON_DIR",
        ] {
            assert!(keys.contains(&key), "{key}");
        }
        assert!(!keys.contains(&"GIT_CEILING_DIRECTORIES"));
    }

    #[test]
    fn runs_in_cwd_with_stdin_at_dev_null() {
        let dir = TempDir::new();
        let opts = RunOptions {
            cwd: dir.0.clone(),
            ..RunOptions::default()
        };
        let outcome = run(&check(&["pwd", "-P"], secs(60)), &opts);
        let canonical = std::fs::canonicalize(&dir.0).expect("canonicalize");
        assert_eq!(
            Path::new(outcome.output.excerpt.trim_end()),
            canonical.as_path()
        );
        // `$PWD` is where the check runs, not the directory we were started from.
        let outcome = run(&check(&["printenv", "PWD"], secs(60)), &opts);
        assert_eq!(outcome.output.excerpt, format!("{}\n", dir.0.display()));
        // `cat` would block on an inherited or piped stdin; /dev/null ends it at once.
        let outcome = run(&check(&["cat"], secs(60)), &opts);
        assert_eq!(outcome.status, CheckStatus::Passed, "{outcome:?}");
        assert_eq!(outcome.output.bytes, 0);
        let outcome = run(&perl(r#"exit(-t STDIN ? 1 : 0)"#, secs(60)), &opts);
        assert_eq!(outcome.status, CheckStatus::Passed, "stdin is a terminal");
    }

    #[test]
    fn stdout_tail_holds_stdout_only() {
        let cmd = perl(
            r#"$|=1; print STDERR "noise\n"; print "x" x 1000; print "DONE\n";
               print STDERR "more noise\n""#,
            secs(60),
        );
        let opts = RunOptions {
            keep_stdout_tail: 5,
            ..RunOptions::default()
        };
        let outcome = run(&cmd, &opts);
        assert_eq!(outcome.stdout_tail, b"DONE\n");
        assert_eq!(outcome.output.bytes, 6 + 1000 + 5 + 11);
        let none = run(&cmd, &RunOptions::default());
        assert!(none.stdout_tail.is_empty());
    }

    #[test]
    fn live_stream_still_captures() {
        let opts = RunOptions {
            stream: Stream::Stderr,
            ..RunOptions::default()
        };
        let outcome = run(&perl(r#"print "streamed line\n""#, secs(60)), &opts);
        assert_eq!(outcome.output.excerpt, "streamed line\n");
    }

    #[test]
    fn echo_prefixes_every_line_across_chunks() {
        let mut out = Vec::new();
        let mut at_line_start = true;
        for chunk in [&b"one\ntw"[..], b"o\n", b"\nthree"] {
            write_prefixed(&mut out, b"[c] ", chunk, &mut at_line_start).expect("write");
        }
        assert_eq!(out, b"[c] one\n[c] two\n[c] \n[c] three");
    }

    #[test]
    fn enum_strings() {
        let stops = [
            (CommandStop::Exited, "exited"),
            (CommandStop::Signaled, "signaled"),
            (CommandStop::TimedOut, "timed_out"),
            (CommandStop::NotFound, "not_found"),
            (CommandStop::SpawnFailed, "spawn_failed"),
        ];
        for (stop, text) in stops {
            assert_eq!(stop.as_str(), text);
        }
        let statuses = [
            (CheckStatus::Passed, "passed"),
            (CheckStatus::Failed, "failed"),
            (CheckStatus::TimedOut, "timed_out"),
            (CheckStatus::Error, "error"),
        ];
        for (status, text) in statuses {
            assert_eq!(status.to_string(), text);
        }
        let defaults = RunOptions::default();
        assert_eq!(defaults.excerpt_cap, 16 * 1024);
        assert_eq!(defaults.grace, secs(2));
        assert_eq!(
            (defaults.stream, defaults.keep_stdout_tail),
            (Stream::Quiet, 0)
        );
    }
}
