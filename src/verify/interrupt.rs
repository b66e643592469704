//! Ctrl-C (SIGINT), SIGTERM and SIGHUP while `validate` runs checks.
//!
//! The validation runner puts each check in its own process group, so a Ctrl-C at the terminal
//! reaches us but not the check. While a [`Guard`] lives, a signal sets a flag (also handed to
//! gix as its `should_interrupt`) and wakes a watcher thread, which forwards the signal to the
//! process group of every child we started and keeps doing so — SIGKILL after a grace period —
//! until the guard is dropped, so a check started after the signal is stopped at once too. The
//! caller sees [`received`], removes what it created, writes nothing, and the CLI ends the
//! process by the same signal ([`reraise`]) so a shell or `git` sees the usual status.
//!
//! The handler itself only stores atomics and writes one byte to a pipe: both async-signal-safe.
//! Finding our children reads `/proc` (Linux). Elsewhere the forwarding is skipped: the check
//! then runs to its end or its timeout, and the cleanup still happens afterwards.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
/// Written to the wake pipe by [`Guard::drop`] to stop the watcher.
const STOP: u8 = 0xff;
/// Between the forwarded signal and SIGKILL to a check that ignores it.
const GRACE: Duration = Duration::from_secs(2);
/// How often the watcher looks for children to stop once interrupted.
const SWEEP: Duration = Duration::from_millis(50);

/// The flag gix and our loops poll: set once a signal arrived.
pub fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// The signal that interrupted us, if one did.
pub fn received() -> Option<i32> {
    INTERRUPTED
        .load(Ordering::SeqCst)
        .then(|| SIGNAL.load(Ordering::SeqCst))
}

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a live local.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Signal handling for as long as it lives; dropping it restores the previous handlers.
pub struct Guard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
    write_fd: libc::c_int,
    watcher: Option<JoinHandle<()>>,
}

/// Install the handlers and start the watcher.
pub fn install() -> Result<Guard> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(Error::internal(format!(
            "could not create a pipe for signal handling: {}",
            std::io::Error::last_os_error()
        )));
    }
    let [read_fd, write_fd] = fds;
    for fd in fds {
        // Checks must not inherit either end.
        // SAFETY: plain fcntl on descriptors we own.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    WAKE_FD.store(write_fd, Ordering::SeqCst);
    let watcher = std::thread::Builder::new()
        .name("tabellio-interrupt".into())
        .spawn(move || watch(read_fd))
        .map_err(|e| Error::internal(format!("could not start the signal watcher: {e}")))?;
    let mut previous = Vec::new();
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler is an
        // `extern "C" fn(c_int)` as sa_handler requires without SA_SIGINFO.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &action, &mut old) == 0 {
                previous.push((sig, old));
            }
        }
    }
    Ok(Guard {
        previous,
        write_fd,
        watcher: Some(watcher),
    })
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restoring the action sigaction(2) gave us.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        WAKE_FD.store(-1, Ordering::SeqCst);
        // SAFETY: our own pipe's write end; the watcher owns and closes the read end.
        unsafe {
            libc::write(self.write_fd, (&STOP as *const u8).cast(), 1);
        }
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        // SAFETY: closed once, after the watcher stopped reading.
        unsafe { libc::close(self.write_fd) };
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

fn watch(read_fd: libc::c_int) {
    let mut forwarding: Option<(libc::c_int, Instant)> = None;
    loop {
        let mut byte = 0u8;
        if forwarding.is_some() {
            // Already interrupted: sweep children until told to stop.
            let mut pfd = libc::pollfd {
                fd: read_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, SWEEP.as_millis() as libc::c_int) };
            if ready <= 0 {
                if let Some((sig, since)) = forwarding {
                    let sig = if since.elapsed() >= GRACE {
                        libc::SIGKILL
                    } else {
                        sig
                    };
                    signal_child_groups(sig);
                }
                continue;
            }
        }
        // SAFETY: reading one byte into a live local from our pipe.
        let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 || byte == STOP {
            break;
        }
        let sig = libc::c_int::from(byte);
        if forwarding.is_none() {
            forwarding = Some((sig, Instant::now()));
        }
        signal_child_groups(sig);
    }
    // SAFETY: the read end is ours alone.
    unsafe { libc::close(read_fd) };
}

/// Send `sig` to the process group of each child of ours that leads its own group (each check).
fn signal_child_groups(sig: libc::c_int) {
    for group in child_groups() {
        if group > 1 {
            // SAFETY: kill(2) on a positive group id that is not ours.
            unsafe { libc::kill(-group, sig) };
        }
    }
}

#[cfg(target_os = "linux")]
fn child_groups() -> Vec<libc::pid_t> {
    // SAFETY: getpid/getpgrp cannot fail.
    let (me, my_group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may contain anything, so split after the last `)`.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut fields = rest.split_whitespace().skip(1);
        let ppid = fields.next().and_then(|f| f.parse::<libc::pid_t>().ok());
        let pgrp = fields.next().and_then(|f| f.parse::<libc::pid_t>().ok());
        if let (Some(ppid), Some(pgrp)) = (ppid, pgrp) {
            if ppid == me && pgrp != my_group && !out.contains(&pgrp) {
                out.push(pgrp);
            }
        }
    }
    out
}

#[cfg(not(target_os = "linux"))]
fn child_groups() -> Vec<libc::pid_t> {
    Vec::new()
}
