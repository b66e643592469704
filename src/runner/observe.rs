//! Progress while a command runs, for whoever shows it: the runner reports typed events to an
//! [`Observer`] (the CLI draws a status line or writes log lines from them) and prints nothing
//! itself.
//!
//! Events come from the calling thread ([`Progress::Started`], [`Progress::Running`],
//! [`Progress::Finished`]) and from the two reader threads ([`Progress::Output`]), so an
//! observer must be `Sync` and keep its own state behind a lock. An observer cannot change
//! what is captured, hashed or decided: it only watches.

use std::fmt;
use std::time::{Duration, Instant};

use super::RunOutcome;

/// What happens to one command, in order: `Started`, then `Output` and `Running` in any number
/// and order, then `Finished` exactly once.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// The command is about to be spawned.
    Started { name: &'a str },
    /// A chunk the command wrote to stdout or stderr, as it arrived (raw bytes: any encoding,
    /// partial lines, escape sequences).
    Output { name: &'a str, chunk: &'a [u8] },
    /// Still running, `elapsed` since the start; sent every [`Observer::interval`].
    Running { name: &'a str, elapsed: Duration },
    /// It ended: its outcome, or `None` when we could not run or observe it (the caller gets
    /// the error).
    Finished {
        name: &'a str,
        outcome: Option<&'a RunOutcome>,
    },
}

/// Receives the [`Progress`] of the commands run with [`super::Stream::Observed`].
pub trait Observer: Sync {
    /// How often [`Progress::Running`] is sent while a command runs; `None`: never.
    fn interval(&self) -> Option<Duration>;
    /// One event; must return quickly (the reader threads wait for it).
    fn observe(&self, event: Progress<'_>);
}

impl fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
}

/// The shortest interval between two `Running` events, however small an observer asks for:
/// the wait loop must not spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Sends `Running` at `start + k × every` while the command's main process runs.
pub(super) struct Ticker {
    observer: &'static dyn Observer,
    name: String,
    start: Instant,
    every: Duration,
    next: Instant,
}

impl Ticker {
    pub(super) fn new(observer: &'static dyn Observer, name: &str, start: Instant) -> Option<Self> {
        let every = observer.interval()?.max(MIN_INTERVAL);
        Some(Ticker {
            observer,
            name: name.to_string(),
            start,
            every,
            next: start.checked_add(every)?,
        })
    }

    /// When the next `Running` is due.
    pub(super) fn next(&self) -> Instant {
        self.next
    }

    /// Sends `Running` if it is due, and schedules the next one after now (ticks missed while
    /// the observer was slow are skipped, not sent in a burst).
    pub(super) fn tick_if_due(&mut self) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.observer.observe(Progress::Running {
            name: &self.name,
            elapsed: now.saturating_duration_since(self.start),
        });
        while self.next <= now {
            match self.next.checked_add(self.every) {
                Some(next) => self.next = next,
                None => return,
            }
        }
    }
}
