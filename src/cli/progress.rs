//! Live progress of the commands `finish`, `validate`, `land` and `loop` run, on stderr, drawn
//! from the runner's [`Progress`] events (the library reports, this prints).
//!
//! On a terminal: the check's output as it arrives, each line prefixed `[<name>] `, under a
//! status line (`running <name> … 12s`) redrawn in place every second and cleared when the
//! check ends, so a check that prints nothing still shows it is alive. Elsewhere (a CI log):
//! one line when a check starts, a heartbeat with the elapsed time every 30 seconds
//! (`TABELLIO_HEARTBEAT_SECS` changes it), one line with its outcome when it ends; the output
//! itself is not copied (the evidence keeps its excerpt). `-q` and `--json` show no progress.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tabellio::runner::{CommandStop, Observer, Progress, RunOutcome, Stream};

use super::color::{self, Palette, Style};

/// Seconds between heartbeats off a terminal, unless `TABELLIO_HEARTBEAT_SECS` says otherwise.
pub const HEARTBEAT_SECS: u64 = 30;

/// The environment variable that sets the heartbeat interval (whole seconds, at least 1): for
/// CI systems that want another cadence, and for tests.
pub const HEARTBEAT_ENV: &str = "TABELLIO_HEARTBEAT_SECS";

/// How often the status line on a terminal is redrawn (it shows whole seconds).
const REDRAW: Duration = Duration::from_secs(1);

/// Erase the current terminal line and return to its start.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A person watching a terminal.
    Terminal,
    /// A log read later (a pipe, a file, CI).
    Log { heartbeat: Duration },
}

/// The progress view: an [`Observer`] that prints to stderr.
pub struct View {
    mode: Mode,
    /// Asked at each event: the colour decision is made when something is first shown.
    palette: fn() -> Palette,
    state: Mutex<State>,
}

/// What is on the screen now (terminal) and which check runs.
#[derive(Debug)]
struct State {
    name: String,
    elapsed: Duration,
    /// The status line is drawn (the cursor is at its end).
    drawn: bool,
    /// The echoed output ended with a newline (or nothing was echoed yet).
    at_line_start: bool,
}

static VIEW: OnceLock<View> = OnceLock::new();

/// The stream commands run their checks with: progress on stderr, or none (`-q`, `--json`).
pub fn stream(json: bool, quiet: bool) -> Stream {
    if json || quiet {
        return Stream::Quiet;
    }
    let mode = if std::io::stderr().is_terminal() {
        Mode::Terminal
    } else {
        Mode::Log {
            heartbeat: heartbeat(std::env::var(HEARTBEAT_ENV).ok().as_deref()),
        }
    };
    Stream::Observed(VIEW.get_or_init(|| View::new(mode, color::stderr)))
}

/// The heartbeat interval from the variable's value: whole seconds, at least 1; anything else
/// is the default.
fn heartbeat(value: Option<&str>) -> Duration {
    let secs = value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| s >= 1)
        .unwrap_or(HEARTBEAT_SECS);
    Duration::from_secs(secs)
}

impl View {
    pub fn new(mode: Mode, palette: fn() -> Palette) -> View {
        View {
            mode,
            palette,
            state: Mutex::new(State {
                name: String::new(),
                elapsed: Duration::ZERO,
                drawn: false,
                at_line_start: true,
            }),
        }
    }

    /// The text one event puts on stderr (empty: nothing).
    fn render(&self, event: Progress<'_>) -> String {
        // A panic while printing progress must not hide the rest of it.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match self.mode {
            Mode::Terminal => render_terminal(&mut state, event, (self.palette)()),
            Mode::Log { .. } => render_log(event, (self.palette)()),
        }
    }
}

impl Observer for View {
    fn interval(&self) -> Option<Duration> {
        Some(match self.mode {
            Mode::Terminal => REDRAW,
            Mode::Log { heartbeat } => heartbeat,
        })
    }

    fn observe(&self, event: Progress<'_>) {
        let text = self.render(event);
        if text.is_empty() {
            return;
        }
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr must not fail the check.
        let _ = err.write_all(text.as_bytes()).and_then(|_| err.flush());
    }
}

fn render_terminal(state: &mut State, event: Progress<'_>, palette: Palette) -> String {
    let mut out = String::new();
    match event {
        Progress::Started { name } => {
            state.name = name.to_string();
            state.elapsed = Duration::ZERO;
            state.at_line_start = true;
            draw_status(state, palette, &mut out);
        }
        Progress::Output { name, chunk } => {
            if state.drawn {
                out.push_str(CLEAR_LINE);
                state.drawn = false;
            }
            // As if the person ran the check: its own colours and all.
            let text = String::from_utf8_lossy(chunk);
            for line in text.split_inclusive('\n') {
                if state.at_line_start {
                    out.push_str(&format!("[{name}] "));
                }
                out.push_str(line);
                state.at_line_start = line.ends_with('\n');
            }
            if state.at_line_start {
                draw_status(state, palette, &mut out);
            }
        }
        Progress::Running { elapsed, .. } => {
            state.elapsed = elapsed;
            // Over a half-written line of output the status line would garble it.
            if state.at_line_start {
                out.push_str(CLEAR_LINE);
                draw_status(state, palette, &mut out);
            }
        }
        Progress::Finished { .. } => {
            if state.drawn {
                out.push_str(CLEAR_LINE);
                state.drawn = false;
            }
            if !state.at_line_start {
                out.push('\n');
                state.at_line_start = true;
            }
        }
    }
    out
}

fn draw_status(state: &mut State, palette: Palette, out: &mut String) {
    out.push_str(&palette.paint(
        Style::Hint,
        &format!("running {} … {}", state.name, whole(state.elapsed)),
    ));
    state.drawn = true;
}

fn render_log(event: Progress<'_>, palette: Palette) -> String {
    match event {
        Progress::Started { name } => format!("running {name} …\n"),
        Progress::Output { .. } => String::new(),
        Progress::Running { name, elapsed } => format!("running {name} … {}\n", whole(elapsed)),
        Progress::Finished {
            name,
            outcome: Some(o),
        } => format!(
            "{} {name} ({}) in {}\n",
            palette.paint(
                Style::of_status(o.status.as_str()).unwrap_or(Style::Hint),
                o.status.as_str()
            ),
            how(o),
            elapsed(Duration::from_millis(o.duration_ms))
        ),
        // The error that stopped it is reported by the command.
        Progress::Finished { outcome: None, .. } => String::new(),
    }
}

/// How a command ended, in a few words: `exit 1`, `signal 9`, `timed_out`, `not_found`.
fn how(o: &RunOutcome) -> String {
    match (o.stop, o.exit_code, o.signal) {
        (CommandStop::Exited, Some(code), _) => format!("exit {code}"),
        (CommandStop::Signaled, _, Some(signal)) => format!("signal {signal}"),
        (stop, _, _) => stop.as_str().to_string(),
    }
}

/// A command's duration: `0.4s`, `12s`, `1m30s`, `2h05m00s` (tenths under ten seconds).
pub fn elapsed(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        return format!("{:.1}s", d.as_secs_f64());
    }
    whole(d)
}

/// Time so far, in whole seconds (it is shown every second or every heartbeat): `0s`, `12s`,
/// `1m30s`, `2h05m00s`.
pub fn whole(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;
    use tabellio::runner::{CheckStatus, OutputSummary};

    fn outcome(status: CheckStatus, exit_code: Option<i32>, duration_ms: u64) -> RunOutcome {
        RunOutcome {
            status,
            stop: CommandStop::Exited,
            exit_code,
            signal: None,
            started_at: SystemTime::UNIX_EPOCH,
            finished_at: SystemTime::UNIX_EPOCH,
            duration_ms,
            output: OutputSummary {
                bytes: 0,
                sha256: String::new(),
                excerpt: String::new(),
                truncated: false,
                redactions: 0,
            },
            stdout_tail: Vec::new(),
            pipes_held_open: false,
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn elapsed_times() {
        assert_eq!(elapsed(Duration::from_millis(430)), "0.4s");
        assert_eq!(elapsed(secs(12)), "12s");
        assert_eq!(elapsed(secs(90)), "1m30s");
        assert_eq!(elapsed(secs(3600 + 5 * 60)), "1h05m00s");
        assert_eq!(whole(Duration::from_millis(1_900)), "1s");
        assert_eq!(whole(secs(90)), "1m30s");
    }

    #[test]
    fn the_heartbeat_interval_comes_from_the_variable_or_is_thirty_seconds() {
        assert_eq!(heartbeat(None), secs(30));
        assert_eq!(heartbeat(Some("2")), secs(2));
        for bad in ["0", "-1", "1.5", "soon", ""] {
            assert_eq!(heartbeat(Some(bad)), secs(30), "{bad:?}");
        }
    }

    #[test]
    fn a_log_gets_start_heartbeats_and_outcome_and_no_output() {
        let view = View::new(
            Mode::Log {
                heartbeat: secs(30),
            },
            Palette::default,
        );
        let passed = outcome(CheckStatus::Passed, Some(0), 95_000);
        let failed = outcome(CheckStatus::Failed, Some(101), 1_200);
        let events = [
            Progress::Started { name: "test" },
            Progress::Output {
                name: "test",
                chunk: b"compiling\n",
            },
            Progress::Running {
                name: "test",
                elapsed: secs(30),
            },
            Progress::Running {
                name: "test",
                elapsed: secs(90),
            },
            Progress::Finished {
                name: "test",
                outcome: Some(&passed),
            },
            Progress::Started { name: "lint" },
            Progress::Finished {
                name: "lint",
                outcome: Some(&failed),
            },
            Progress::Started { name: "gone" },
            Progress::Finished {
                name: "gone",
                outcome: None,
            },
        ];
        let text: String = events.into_iter().map(|e| view.render(e)).collect();
        assert_eq!(
            text,
            "running test …\nrunning test … 30s\nrunning test … 1m30s\n\
             passed test (exit 0) in 1m35s\nrunning lint …\nfailed lint (exit 101) in 1.2s\n\
             running gone …\n"
        );
        assert_eq!(view.interval(), Some(secs(30)));
    }

    #[test]
    fn a_terminal_gets_a_status_line_redrawn_around_the_output_and_cleared_at_the_end() {
        let view = View::new(Mode::Terminal, Palette::default);
        let passed = outcome(CheckStatus::Passed, Some(0), 2_000);
        let steps: [(Progress<'_>, &str); 6] = [
            (Progress::Started { name: "t" }, "running t … 0s"),
            (
                Progress::Running {
                    name: "t",
                    elapsed: secs(1),
                },
                "\r\x1b[2Krunning t … 1s",
            ),
            // Output clears the status line, and redraws it after a whole line.
            (
                Progress::Output {
                    name: "t",
                    chunk: b"one\ntw",
                },
                "\r\x1b[2K[t] one\n[t] tw",
            ),
            // Not over a half-written line.
            (
                Progress::Running {
                    name: "t",
                    elapsed: secs(2),
                },
                "",
            ),
            (
                Progress::Output {
                    name: "t",
                    chunk: b"o\n",
                },
                "o\nrunning t … 2s",
            ),
            (
                Progress::Finished {
                    name: "t",
                    outcome: Some(&passed),
                },
                "\r\x1b[2K",
            ),
        ];
        for (event, want) in steps {
            assert_eq!(view.render(event), want, "{event:?}");
        }
        assert_eq!(view.interval(), Some(REDRAW));
    }

    #[test]
    fn a_terminal_ends_a_half_written_line_and_colours_when_asked() {
        let view = View::new(Mode::Terminal, || Palette { on: true });
        assert_eq!(
            view.render(Progress::Started { name: "t" }),
            "\x1b[2mrunning t … 0s\x1b[0m"
        );
        view.render(Progress::Output {
            name: "t",
            chunk: b"partial",
        });
        assert_eq!(
            view.render(Progress::Finished {
                name: "t",
                outcome: None
            }),
            "\n"
        );
    }
}
