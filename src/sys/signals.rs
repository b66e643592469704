//! SIGINT, SIGTERM and SIGHUP while our children run in process groups of their own.
//!
//! The runner puts each agent and check in its own process group (so a timeout reaches all
//! they started), which also means a terminal's Ctrl-C reaches only us. While a [`Guard`]
//! lives, a signal sets a flag ([`flag`], [`received`]) and wakes a watcher thread, which
//! signals the process group of every direct child that leads its own group
//! ([`super::process::child_groups`]) as its [`Forwarding`] says. Dropping the guard restores
//! the previous handlers and stops the watcher.
//!
//! A signal can reach us twice for one event: a terminal's Ctrl-C (or a hang-up, or a `kill`
//! of the whole process group) reaches every process of the foreground group, and when git's
//! dispatcher runs us (`git tabellio …`), git is one of them and sends the same signal on to
//! its child, to us, before it waits for us to end. That copy is no second Ctrl-C: a signal
//! from our parent right after the same signal came from elsewhere (or the reverse), within
//! [`ECHO_WINDOW_MS`], is taken for the first one's echo and ignored, once.
//!
//! The handler itself only touches atomics, reads the clock, writes one byte to a pipe and,
//! for a second signal under [`Forwarding::TerminateOnceThenExit`], resets the disposition and
//! re-raises: all async-signal-safe. Failure model: installing fails only when no pipe or thread can be
//! created (nothing is left installed then). Forwarding is best effort and needs `/proc`
//! (Linux); elsewhere the flag still works but a running child is not signalled and ends by
//! itself or at its timeout.

use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::process::child_groups;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static EXIT_ON_SECOND: AtomicBool = AtomicBool::new(false);
/// Where the first signal came from: [`FROM_PARENT`] or [`FROM_ELSEWHERE`] (0 before it).
static FIRST_ORIGIN: AtomicI32 = AtomicI32::new(0);
/// When the first signal came, in milliseconds of the monotonic clock.
static FIRST_AT_MS: AtomicI64 = AtomicI64::new(0);
/// The first signal's echo was seen (and ignored) already.
static ECHO_SEEN: AtomicBool = AtomicBool::new(false);

const FROM_PARENT: i32 = 1;
const FROM_ELSEWHERE: i32 = 2;
/// How soon after the first signal its echo must come to be taken for one. git forwards the
/// signal from its own handler at once; a person's second Ctrl-C comes later than this.
const ECHO_WINDOW_MS: i64 = 1000;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
/// Written to the wake pipe by [`Guard::drop`] to stop the watcher.
const STOP: u8 = 0xff;
/// How often the watcher looks for children to stop once interrupted
/// ([`Forwarding::UntilDropped`]).
const SWEEP: Duration = Duration::from_millis(50);

/// What the watcher does with the signals it is woken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// On the first signal, SIGTERM once to each child group; the caller sees the flag when
    /// its child ends and stops cleanly. A second signal ends this process at once by its
    /// default action, as people expect from a second Ctrl-C.
    TerminateOnceThenExit,
    /// Forward each signal received to each child group, and keep doing so until the guard
    /// is dropped (so a child started after the signal is stopped at once too), escalating to
    /// SIGKILL once `grace` has passed since the first signal.
    UntilDropped { grace: Duration },
}

/// The flag set once a signal arrived (gix takes it as its `should_interrupt`).
pub fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// The signal that interrupted us, if one did.
pub fn received() -> Option<i32> {
    INTERRUPTED
        .load(Ordering::SeqCst)
        .then(|| SIGNAL.load(Ordering::SeqCst))
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // Only async-signal-safe calls in here.
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo_t (checked for null).
    let origin = if unsafe { sent_by_parent(info) } {
        FROM_PARENT
    } else {
        FROM_ELSEWHERE
    };
    if INTERRUPTED.load(Ordering::SeqCst) {
        if is_echo(sig, origin) {
            return;
        }
        if EXIT_ON_SECOND.load(Ordering::SeqCst) {
            // SAFETY: signal(2) and raise(3) are async-signal-safe.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            return;
        }
    } else {
        FIRST_ORIGIN.store(origin, Ordering::SeqCst);
        FIRST_AT_MS.store(monotonic_ms(), Ordering::SeqCst);
    }
    SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a live local.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Whether a signal `sig` from `origin`, arriving after the first one, is that first signal's
/// echo (see the module docs); the first echo only.
fn is_echo(sig: libc::c_int, origin: i32) -> bool {
    let first = FIRST_ORIGIN.load(Ordering::SeqCst);
    let same_event = sig == SIGNAL.load(Ordering::SeqCst)
        && first != 0
        && origin != first
        && (first == FROM_PARENT || origin == FROM_PARENT)
        && monotonic_ms().saturating_sub(FIRST_AT_MS.load(Ordering::SeqCst)) <= ECHO_WINDOW_MS;
    same_event && !ECHO_SEEN.swap(true, Ordering::SeqCst)
}

/// Whether the signal described by `info` was sent with kill(2) by our parent process.
///
/// # Safety
/// `info` is null or points to the `siginfo_t` the kernel passed to the handler.
unsafe fn sent_by_parent(info: *const libc::siginfo_t) -> bool {
    if info.is_null() || (*info).si_code != libc::SI_USER {
        return false;
    }
    // getppid(2) is async-signal-safe.
    sender_pid(info) == libc::getppid()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
unsafe fn sender_pid(info: *const libc::siginfo_t) -> libc::pid_t {
    (*info).si_pid()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
unsafe fn sender_pid(info: *const libc::siginfo_t) -> libc::pid_t {
    (*info).si_pid
}

/// Milliseconds of the monotonic clock (clock_gettime(2) is async-signal-safe).
// `time_t` and `c_long` are `i64` here, narrower on some 32-bit targets.
#[allow(clippy::useless_conversion)]
fn monotonic_ms() -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    i64::from(now.tv_sec) * 1000 + i64::from(now.tv_nsec) / 1_000_000
}

/// Signal handling for as long as it lives; dropping it restores the previous handlers.
pub struct Guard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
    previous_wake_fd: i32,
    previous_exit_on_second: bool,
    wake: io::PipeWriter,
    watcher: Option<JoinHandle<()>>,
}

impl Guard {
    /// Is a guard installed now (in any thread)? Threads that run checks side by side share
    /// the one guard their parent installed: guards dropped out of order would restore the
    /// wrong handlers.
    pub fn active() -> bool {
        WAKE_FD.load(Ordering::SeqCst) != -1
    }

    /// Install the handlers and start the watcher.
    pub fn install(forwarding: Forwarding) -> io::Result<Guard> {
        // Both ends are close-on-exec: children must not inherit either.
        let (wake_read, wake) = io::pipe()?;
        let watcher = std::thread::Builder::new()
            .name("tabellio-interrupt".into())
            .spawn(move || watch(wake_read, forwarding))?;
        let previous_wake_fd = WAKE_FD.swap(wake.as_raw_fd(), Ordering::SeqCst);
        let previous_exit_on_second = EXIT_ON_SECOND.swap(
            forwarding == Forwarding::TerminateOnceThenExit,
            Ordering::SeqCst,
        );
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is a valid starting point; the handler has the
            // three-argument signature SA_SIGINFO calls for, and only touches atomics and
            // async-signal-safe calls. SA_RESTART keeps our blocking reads and waits going.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal
                    as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                    as usize;
                action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        Ok(Guard {
            previous,
            previous_wake_fd,
            previous_exit_on_second,
            wake,
            watcher: Some(watcher),
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restoring the action sigaction(2) gave us.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        WAKE_FD.store(self.previous_wake_fd, Ordering::SeqCst);
        EXIT_ON_SECOND.store(self.previous_exit_on_second, Ordering::SeqCst);
        let _ = self.wake.write_all(&[STOP]);
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        // `wake` closes when the fields drop, after the watcher stopped reading.
    }
}

/// End the process by `sig` with its default action (after our cleanup), as an uninterrupted
/// program killed by it would end.
pub fn reraise(sig: i32) -> ! {
    // SAFETY: resetting a disposition and raising a signal have no memory-safety preconditions.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
    // Only reached when the signal is blocked: fall back to the shell convention.
    std::process::exit(128 + sig)
}

/// The watcher thread: reads the signals the handler wrote until [`STOP`].
fn watch(mut wake: io::PipeReader, forwarding: Forwarding) {
    let mut first: Option<(libc::c_int, Instant)> = None;
    loop {
        if let (Some((sig, since)), Forwarding::UntilDropped { grace }) = (first, forwarding) {
            // Already interrupted: sweep children until told to stop.
            if !readable_within(&wake, SWEEP) {
                let sig = if since.elapsed() >= grace {
                    libc::SIGKILL
                } else {
                    sig
                };
                signal_child_groups(sig);
                continue;
            }
        }
        let mut byte = [0u8; 1];
        match wake.read(&mut byte) {
            Ok(1) if byte[0] != STOP => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            _ => return,
        }
        let sig = libc::c_int::from(byte[0]);
        first.get_or_insert((sig, Instant::now()));
        match forwarding {
            Forwarding::TerminateOnceThenExit => signal_child_groups(libc::SIGTERM),
            Forwarding::UntilDropped { .. } => signal_child_groups(sig),
        }
    }
}

/// Whether the pipe has something to read (or is closed) within `timeout`.
fn readable_within(pipe: &io::PipeReader, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd that lives across the call, on a descriptor `pipe` keeps open.
    unsafe { libc::poll(&mut pfd, 1, millis) > 0 }
}

fn signal_child_groups(sig: libc::c_int) {
    for group in child_groups() {
        group.signal(sig);
    }
}
