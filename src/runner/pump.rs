//! The reader threads: one per pipe (stdout, stderr), each copying its pipe into the shared,
//! bounded capture and, when asked, handing every chunk to the caller's observer.
//!
//! A reader reports [`Event::ReaderDone`] however it ends, panics included; once the capture
//! is frozen ([`Captured::freeze`]) a reader still attached to a pipe held open from outside
//! the check's group stops at its next chunk instead of changing what we hash and report.

use std::io::{self, Read};
use std::mem;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;

use super::capture::{OutputCapture, TailRing};
use super::{CheckCommand, Observer, Progress, RunOptions, Stream};

/// Bytes read from a pipe at a time (the default Linux pipe capacity).
const READ_CHUNK: usize = 64 * 1024;

/// Which of the check's pipes a reader copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Stdout,
    Stderr,
}

/// What the threads report to the calling thread.
pub(super) enum Event {
    /// The direct child has exited (still unreaped), or waiting for it failed.
    ChildExited(io::Result<()>),
    ReaderDone,
}

/// A pipe of the child, whichever it is.
pub(super) type Pipe = Box<dyn Read + Send>;

pub(super) fn boxed(pipe: impl Read + Send + 'static) -> Pipe {
    Box::new(pipe)
}

struct CaptureState {
    output: OutputCapture,
    stdout_tail: TailRing,
    /// Set once we have taken the result; late chunks are dropped.
    closed: bool,
    read_error: Option<io::Error>,
}

/// The output the readers share.
pub(super) struct Captured(Arc<Mutex<CaptureState>>);

impl Captured {
    pub(super) fn new(excerpt_cap: usize, keep_stdout_tail: usize) -> Captured {
        Captured(Arc::new(Mutex::new(CaptureState {
            output: OutputCapture::new(excerpt_cap),
            stdout_tail: TailRing::new(keep_stdout_tail),
            closed: false,
            read_error: None,
        })))
    }

    /// Stops taking chunks and returns the merged output and the stdout tail, or the first
    /// read error.
    pub(super) fn freeze(&self) -> io::Result<(OutputCapture, Vec<u8>)> {
        let mut state = lock(&self.0);
        state.closed = true;
        if let Some(err) = state.read_error.take() {
            return Err(err);
        }
        Ok((
            mem::replace(&mut state.output, OutputCapture::new(0)),
            state.stdout_tail.to_vec(),
        ))
    }
}

fn lock(state: &Mutex<CaptureState>) -> MutexGuard<'_, CaptureState> {
    // A panicking reader cannot leave the capture half-updated in a way that matters more
    // than losing the whole run would.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends `ReaderDone` however the reader ends, panics included.
struct DoneGuard(Sender<Event>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(Event::ReaderDone);
    }
}

/// Starts the reader of one pipe.
pub(super) fn spawn_reader(
    pipe: Pipe,
    source: Source,
    captured: &Captured,
    events: &Sender<Event>,
    live: Option<Live>,
) -> io::Result<()> {
    let state = Arc::clone(&captured.0);
    let done = DoneGuard(events.clone());
    let name = match source {
        Source::Stdout => "tabellio-check-stdout",
        Source::Stderr => "tabellio-check-stderr",
    };
    thread::Builder::new().name(name.into()).spawn(move || {
        let _done = done;
        pump(pipe, source, &state, live);
    })?;
    Ok(())
}

/// Copies one pipe into the capture until EOF, an error or the capture is closed.
fn pump(mut pipe: impl Read, source: Source, state: &Mutex<CaptureState>, mut live: Option<Live>) {
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
        if let Some(live) = live.as_mut() {
            live.write(chunk);
        }
    }
}

/// Who sees one stream live, besides the capture: the observer of [`Stream::Observed`].
pub(super) struct Live {
    observer: &'static dyn Observer,
    name: String,
}

impl Live {
    /// Every chunk to the observer, unchanged (not redacted: it goes where the output would go
    /// if the person ran the check by hand).
    fn write(&mut self, chunk: &[u8]) {
        self.observer.observe(Progress::Output {
            name: &self.name,
            chunk,
        });
    }
}

pub(super) fn live_for(cmd: &CheckCommand, opts: &RunOptions) -> Option<Live> {
    match opts.stream {
        Stream::Quiet => None,
        Stream::Observed(observer) => Some(Live {
            observer,
            name: cmd.name.clone(),
        }),
    }
}
