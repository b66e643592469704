//! Stopping a loop cleanly on SIGINT, SIGTERM or SIGHUP.
//!
//! The agent and the checks run in process groups of their own (so a timeout reaches all they
//! started), which also means a terminal's Ctrl-C reaches only the loop. On the first signal we
//! therefore set a flag and send SIGTERM to the process group of every direct child that leads
//! its own group (the agent or the check running now); the runner then reaps it as usual and
//! kills what is left of its group. The loop sees the flag when the phase returns, discards the
//! interrupted phase's results and records the stop (`why_harness_stopped: interrupted`) so that
//! `--resume` runs that phase again. A second signal ends the process at once (the default
//! action), as people expect from a second Ctrl-C. The mechanics are
//! [`crate::sys::signals`] with [`Forwarding::TerminateOnceThenExit`].

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};

use crate::error::{Context, Result};
use crate::sys::signals::{self, Forwarding, Guard};

/// Install the handlers (once per process, for the rest of its life) and return the flag they
/// set.
pub fn install() -> Result<&'static AtomicBool> {
    static INSTALLED: Mutex<Option<Guard>> = Mutex::new(None);
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    if installed.is_none() {
        let guard = Guard::install(Forwarding::TerminateOnceThenExit)
            .context(|| "could not install the signal handlers".to_string())?;
        *installed = Some(guard);
    }
    Ok(signals::flag())
}
