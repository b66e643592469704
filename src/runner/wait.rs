//! Waiting for a check: its own deadline, then SIGTERM to its group, then SIGKILL after the
//! grace period, and the bounded wait for the readers to reach EOF.
//!
//! The threads (two readers, one waiter blocked in `waitid(WNOWAIT)`) report over one channel,
//! which the calling thread reads with `recv_timeout` — the only timed waits are the check's
//! own deadline, the grace period, the final drain and, for an observer that asks for them,
//! the `Running` progress events while the main process runs.

use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::observe::Ticker;
use super::pump::Event;
use crate::sys::process::ProcessGroup;

/// Collects the threads' reports.
pub(super) struct Monitor {
    events: Receiver<Event>,
    exited: bool,
    wait_error: Option<io::Error>,
    disconnected: bool,
    pub(super) open_readers: usize,
    /// Sends `Running` progress while set.
    pub(super) ticker: Option<Ticker>,
}

impl Monitor {
    pub(super) fn new(events: Receiver<Event>) -> Monitor {
        Monitor {
            events,
            exited: false,
            wait_error: None,
            disconnected: false,
            open_readers: 0,
            ticker: None,
        }
    }

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
    pub(super) fn wait_readers(&mut self, until: Option<Instant>) -> bool {
        self.wait_until(until, |m| m.open_readers == 0)
    }

    /// Handles events until `done` holds (true) or `until` passes (false); `None` waits
    /// without a limit.
    fn wait_until(&mut self, until: Option<Instant>, done: impl Fn(&Self) -> bool) -> bool {
        while !done(self) {
            if self.disconnected {
                return false;
            }
            // Wake for the next progress tick too, without mistaking it for `until`.
            let wake = match (until, self.ticker.as_ref().map(Ticker::next)) {
                (Some(until), Some(tick)) => Some(until.min(tick)),
                (until, tick) => until.or(tick),
            };
            let event = match wake {
                None => self
                    .events
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(wake) => self
                    .events
                    .recv_timeout(wake.saturating_duration_since(Instant::now())),
            };
            if let Some(ticker) = self.ticker.as_mut() {
                ticker.tick_if_due();
            }
            match event {
                Ok(Event::ChildExited(Ok(()))) => self.exited = true,
                Ok(Event::ChildExited(Err(err))) => self.wait_error = Some(err),
                Ok(Event::ReaderDone) => self.open_readers = self.open_readers.saturating_sub(1),
                Err(RecvTimeoutError::Timeout) => {
                    if until.is_some_and(|until| Instant::now() >= until) {
                        return false;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => self.disconnected = true,
            }
        }
        true
    }
}

/// Waits for the child to exit; at `deadline` sends SIGTERM to its group, and SIGKILL after
/// `grace`. Returns whether the deadline passed.
pub(super) fn wait_with_timeout(
    monitor: &mut Monitor,
    group: ProcessGroup,
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
pub(super) fn after(duration: Duration) -> Option<Instant> {
    Instant::now().checked_add(duration)
}
