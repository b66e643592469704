//! Stopping a loop cleanly on SIGINT, SIGTERM or SIGHUP.
//!
//! The agent and the checks run in process groups of their own (so a timeout reaches all they
//! started), which also means a terminal's Ctrl-C reaches only the loop. On the first signal we
//! therefore set a flag and send SIGTERM to the process group of every direct child that leads
//! its own group (the agent or the check running now); the runner then reaps it as usual and
//! kills what is left of its group. The loop sees the flag when the phase returns, discards the
//! interrupted phase's results and records the stop (`why_harness_stopped: interrupted`) so that
//! `--resume` runs that phase again. A second signal ends the process at once (the default
//! action), as people expect from a second Ctrl-C.
//!
//! Children are found through `/proc/<pid>/stat` (Linux); elsewhere the flag still works but the
//! running child is not signalled and the loop stops after it ends by itself.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::error::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe calls in here.
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return;
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = [1u8];
        // SAFETY: write is async-signal-safe; the buffer outlives the call.
        unsafe {
            libc::write(fd, byte.as_ptr().cast(), 1);
        }
    }
}

/// Install the handlers (once per process) and return the flag they set.
pub fn install() -> Result<&'static AtomicBool> {
    if WAKE_FD.load(Ordering::SeqCst) >= 0 {
        return Ok(&INTERRUPTED);
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::internal(format!(
            "could not create a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    let [read_fd, write_fd] = fds;
    WAKE_FD.store(write_fd, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("tabellio-interrupt".into())
        .spawn(move || {
            let mut byte = [0u8; 1];
            loop {
                // SAFETY: reading into a one-byte buffer we own.
                let n = unsafe { libc::read(read_fd, byte.as_mut_ptr().cast(), 1) };
                if n == 1 {
                    terminate_child_groups();
                    continue;
                }
                if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                return;
            }
        })
        .map_err(|e| Error::internal(format!("could not start a thread: {e}")))?;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that only touches atomics and calls async-signal-safe
        // functions. SA_RESTART keeps our blocking reads and waits going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    Ok(&INTERRUPTED)
}

/// SIGTERM to the group of each direct child that leads its own process group.
fn terminate_child_groups() {
    let me = std::process::id() as i64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i64>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (Some(ppid), Some(pgrp)) = (
            fields.get(1).and_then(|f| f.parse::<i64>().ok()),
            fields.get(2).and_then(|f| f.parse::<i64>().ok()),
        ) else {
            continue;
        };
        if ppid == me && pgrp == pid && pid > 1 {
            if let Ok(group) = libc::pid_t::try_from(pid) {
                // SAFETY: kill has no memory-safety preconditions; a negative pid names a group
                // that the check above shows is our child's own.
                unsafe {
                    libc::kill(-group, libc::SIGTERM);
                }
            }
        }
    }
}
