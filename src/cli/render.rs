//! The one renderer: what a command produced (or why it failed) becomes one JSON object with
//! `--json` or lines for people, and the process's exit code is decided here and nowhere else.
//! A closed stdout (a pager quit early, `| head`) is not an error.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{Map, Value};

use tabellio::{Error, ErrorKind};

use super::color::{self, Palette, Style};

/// What a command produced: the JSON object (without `ok`), the text for a person, and how it
/// ended, which decides the exit code.
pub struct Output {
    pub json: Map<String, Value>,
    pub human: String,
    ending: Ending,
}

/// How a command that produced output ended.
#[derive(Debug)]
enum Ending {
    /// It did its job and the verdict, if any, is positive (exit 0).
    Done,
    /// It did its job and recorded or reported a negative verdict (exit 1, still `"ok": true`).
    Negative,
    /// It failed, but what it did before failing is worth showing: `"ok": false`, the error,
    /// and the report's fields (exit by the error's kind).
    Failed(Error),
    /// A remote's hook declined what was pushed: the server's verdict (exit 1, `"ok": false`,
    /// `error.code` `declined`).
    Declined(Error),
}

impl Output {
    pub fn new(json: Value, human: impl Into<String>) -> Self {
        let json = match json {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("result".into(), other);
                m
            }
        };
        Output {
            json,
            human: human.into(),
            ending: Ending::Done,
        }
    }

    /// The command's verdict: a negative one exits 1.
    pub fn verdict(mut self, positive: bool) -> Self {
        self.ending = if positive {
            Ending::Done
        } else {
            Ending::Negative
        };
        self
    }

    /// The command failed with `err` but still reports what it did.
    pub fn failed(mut self, err: Error) -> Self {
        self.ending = Ending::Failed(err);
        self
    }

    /// A remote's hook declined the push; `err` says what the server said.
    pub fn declined(mut self, err: Error) -> Self {
        self.ending = Ending::Declined(err);
        self
    }
}

/// The exit code of an error kind (docs/cli.md, "Exit codes").
fn kind_code(kind: ErrorKind) -> u8 {
    u8::try_from(kind.exit_code()).unwrap_or(70)
}

/// The exit code of a command's result: the one table.
fn exit_code(result: &Result<Output, Error>) -> u8 {
    match result {
        Ok(out) => match &out.ending {
            Ending::Done => 0,
            Ending::Negative | Ending::Declined(_) => 1,
            Ending::Failed(err) => kind_code(err.kind),
        },
        Err(err) => kind_code(err.kind),
    }
}

/// Print a command's result and say how the process exits.
pub fn render(result: Result<Output, Error>, json_mode: bool, quiet: bool) -> ExitCode {
    let code = exit_code(&result);
    match result {
        Ok(out) => {
            let failure = match &out.ending {
                Ending::Failed(err) => Some((err, err.kind.as_str())),
                Ending::Declined(err) => Some((err, "declined")),
                Ending::Done | Ending::Negative => None,
            };
            let mut m = Map::new();
            m.insert("ok".into(), Value::Bool(failure.is_none()));
            if let Some((err, name)) = failure {
                m.insert("error".into(), error_json(err, name, code));
                if !json_mode {
                    print_stderr(&error_text(err));
                }
            }
            m.extend(out.json);
            if json_mode {
                print_stdout(&format!("{}\n", Value::Object(m)));
            } else if !quiet && !out.human.is_empty() {
                let mut text = out.human;
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                print_stdout(&text);
            }
        }
        Err(err) => {
            if json_mode {
                let mut m = Map::new();
                m.insert("ok".into(), Value::Bool(false));
                m.insert("error".into(), error_json(&err, err.kind.as_str(), code));
                print_stdout(&format!("{}\n", Value::Object(m)));
            } else {
                print_stderr(&error_text(&err));
            }
        }
    }
    ExitCode::from(code)
}

/// A command line clap refused. Help and version go to stdout and exit 0; everything else is
/// a usage error (exit 2), as one JSON object with `--json`.
pub fn parse_error(e: &clap::Error, json_mode: bool) -> ExitCode {
    use clap::error::ErrorKind as K;
    let help = matches!(e.kind(), K::DisplayHelp | K::DisplayVersion);
    if help || (!json_mode && e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand) {
        let _ = e.print();
        return ExitCode::from(if help { 0 } else { kind_code(ErrorKind::Usage) });
    }
    if json_mode {
        // `-h` reaches our own help; `git tabellio --help` is git's, and opens the manual page
        // only once `git tabellio man --install` has put it where `man` looks.
        let err = Error::usage(clap_message(e))
            .hint("see `git tabellio -h`, or `git tabellio <command> -h` for one command");
        return render(Err(err), true, false);
    }
    let _ = e.print();
    ExitCode::from(kind_code(ErrorKind::Usage))
}

/// clap's error as one line: the message and its details (a missing argument's name), without
/// the usage block.
fn clap_message(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "a subcommand is required".into();
    }
    let text = e.render().to_string();
    let body = text.split("\n\nUsage:").next().unwrap_or(&text);
    let joined = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let joined = joined.trim_start_matches("error: ").to_string();
    if joined.is_empty() {
        "invalid usage".into()
    } else {
        joined
    }
}

/// The causes below `err` worth a line of their own: each one not already said verbatim by
/// the message (plainly or in its alternate form, `{:#}`, which for gix's errors holds their
/// whole chain and is what `Context` puts in the message) or by a cause shown before it.
fn causes(err: &Error) -> Vec<String> {
    let mut shown: Vec<String> = Vec::new();
    for cause in err.causes() {
        let plain = cause.to_string();
        let said = plain.is_empty()
            || err.message.contains(&plain)
            || err.message.contains(&format!("{cause:#}"))
            || shown.iter().any(|s| s.contains(&plain));
        if !said {
            shown.push(plain);
        }
    }
    shown
}

/// `{"code", "exit_code", "message", "hint"}`, plus `causes` when there are any.
fn error_json(err: &Error, code_name: &str, exit: u8) -> Value {
    let mut m = Map::new();
    m.insert("code".into(), code_name.into());
    m.insert("exit_code".into(), exit.into());
    m.insert("message".into(), err.message.clone().into());
    m.insert("hint".into(), err.hint.clone().into());
    let causes = causes(err);
    if !causes.is_empty() {
        m.insert("causes".into(), causes.into());
    }
    Value::Object(m)
}

/// `error: …`, `hint: …` and a `caused by: …` line per cause; the `error:` red and the hint
/// dimmed when stderr is coloured.
fn error_text(err: &Error) -> String {
    error_text_in(err, color::stderr())
}

fn error_text_in(err: &Error, palette: Palette) -> String {
    let mut text = format!(
        "{} {}\n",
        palette.paint(Style::Failed, "error:"),
        err.message
    );
    if let Some(h) = &err.hint {
        text.push_str(&format!(
            "{}\n",
            palette.paint(Style::Hint, &format!("hint: {h}"))
        ));
    }
    for c in causes(err) {
        text.push_str(&format!("caused by: {c}\n"));
    }
    text
}

/// The one line a command interrupted by a signal prints before it re-raises the signal (its
/// exit is the signal's, not ours).
pub fn interrupted(err: &Error) {
    print_stderr(&format!("error: {}\n", err.message));
}

/// Write `text` to stdout; a closed stdout is ignored.
pub fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    // A broken pipe means the reader has seen enough: not our failure.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

fn print_stderr(text: &str) {
    // Nowhere left to say it if stderr is closed too.
    let _ = std::io::stderr().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KINDS: [(ErrorKind, u8, &str); 5] = [
        (ErrorKind::Usage, 2, "usage"),
        (ErrorKind::Refused, 3, "refused"),
        (ErrorKind::Conflict, 4, "conflict"),
        (ErrorKind::NotFound, 5, "not_found"),
        (ErrorKind::Internal, 70, "internal"),
    ];

    fn out() -> Output {
        Output::new(json!({"verdict": "x"}), "text")
    }

    #[test]
    fn every_error_kind_has_its_exit_code() {
        for (kind, code, name) in KINDS {
            assert_eq!(exit_code(&Err(Error::new(kind, "m"))), code, "{kind:?}");
            let failed = out().failed(Error::new(kind, "m"));
            assert_eq!(exit_code(&Ok(failed)), code, "{kind:?} with a report");
            // The JSON's `exit_code` is checked from outside, against the process's own exit
            // status (tests/it/exit_codes.rs); here, the kind's name.
            let j = error_json(&Error::new(kind, "m"), kind.as_str(), code);
            assert_eq!(j["code"], name);
        }
    }

    #[test]
    fn verdicts_decide_between_zero_and_one() {
        assert_eq!(exit_code(&Ok(out())), 0);
        assert_eq!(exit_code(&Ok(out().verdict(true))), 0);
        assert_eq!(exit_code(&Ok(out().verdict(false))), 1);
        // A declining hook is the server's verdict, whatever kind the error has.
        let declined = out().declined(Error::refused("no"));
        assert_eq!(exit_code(&Ok(declined)), 1);
    }

    #[test]
    fn the_json_error_keeps_its_fields_and_adds_causes_only_when_there_are_some() {
        let plain = error_json(&Error::usage("bad").hint("do x"), "usage", 2);
        assert_eq!(
            plain,
            json!({"code": "usage", "exit_code": 2, "message": "bad", "hint": "do x"})
        );
        let io = std::io::Error::other("permission denied");
        let caused = Error::internal("could not write y").caused_by(io);
        assert_eq!(
            error_json(&caused, "internal", 70),
            json!({"code": "internal", "exit_code": 70, "message": "could not write y",
                   "hint": null, "causes": ["permission denied"]})
        );
    }

    #[test]
    fn errors_are_red_and_hints_dim_only_when_coloured() {
        let err = Error::usage("bad").hint("do x");
        assert_eq!(
            error_text_in(&err, Palette { on: true }),
            "\x1b[31merror:\x1b[0m bad\n\x1b[2mhint: do x\x1b[0m\n"
        );
        assert_eq!(
            error_text_in(&err, Palette { on: false }),
            "error: bad\nhint: do x\n"
        );
    }

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let inner = Error::usage("disk full");
        let middle = Error::internal("write failed: disk full").caused_by(inner);
        let err = Error::internal("could not save: write failed: disk full").caused_by(middle);
        assert!(causes(&err).is_empty());
        assert_eq!(
            error_text(&err),
            "error: could not save: write failed: disk full\n"
        );

        let err = Error::conflict("ref moved")
            .hint("try again")
            .caused_by(Error::internal("lock held").caused_by(Error::usage("lock held")));
        assert_eq!(
            error_text(&err),
            "error: ref moved\nhint: try again\ncaused by: lock held\n"
        );
    }

    /// Like gix's errors: `{:#}` prints the whole chain, `{}` one line in other words.
    #[derive(Debug)]
    struct Chained;
    impl std::fmt::Display for Chained {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            if f.alternate() {
                write!(f, "Message {{ read failed }}\n\nCaused by:\n    0: corrupt")
            } else {
                write!(f, "read failed, path=x")
            }
        }
    }
    impl std::error::Error for Chained {}

    #[test]
    fn a_cause_whose_alternate_form_is_in_the_message_is_not_repeated() {
        let err = Error::internal(format!("could not read y: {Chained:#}")).caused_by(Chained);
        assert!(causes(&err).is_empty());
        let err = Error::internal(format!("could not read y: {Chained}")).caused_by(Chained);
        assert!(causes(&err).is_empty());
        let err = Error::internal("could not read y").caused_by(Chained);
        assert_eq!(causes(&err), ["read failed, path=x"]);
    }
}
