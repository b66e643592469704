//! Colour and escape sequences: the only escape sequences that reach a person's terminal are
//! ours, and ours only when colour is on.
//!
//! Colour is on for a stream when it is a terminal (`TERM` not `dumb`), or when
//! `CLICOLOR_FORCE` is set (not `0`) whatever the stream is — unless `NO_COLOR` is set (not
//! empty), `CLICOLOR=0` on a terminal, or git's `color.tabellio` (else `color.ui`) says
//! `never`/`false`. `--json` output is never coloured. The decision is made once per process,
//! when the first coloured text is asked for; git's configuration is read only when the answer
//! could be yes.
//!
//! Check output is another matter: it comes from programs (and, in evidence, from other
//! machines), so `tabellio::runner::strip_escapes` removes every escape sequence and control character but
//! newline and tab from it before it is shown.

use std::cell::OnceCell;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tabellio::store::Store;

/// What a piece of text means, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A positive verdict: green.
    Passed,
    /// A negative verdict: red.
    Failed,
    /// Advice and secondary detail: dimmed.
    Hint,
}

impl Style {
    fn sgr(self) -> &'static str {
        match self {
            Style::Passed => "32",
            Style::Failed => "31",
            Style::Hint => "2",
        }
    }

    /// The style of a verdict or status word (`passed`, `failed`, `timed_out`, `completed` …).
    pub fn of_status(status: &str) -> Option<Style> {
        match status {
            "passed" | "completed" | "validated" | "promoted" | "reused" | "not_applicable" => {
                Some(Style::Passed)
            }
            "failed" | "FAILED" | "timed_out" | "error" | "validation_failed" | "blocked" => {
                Some(Style::Failed)
            }
            _ => None,
        }
    }
}

/// Whether one output stream gets colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Palette {
    pub on: bool,
}

impl Palette {
    /// `text` in `style`'s colour, or unchanged when colour is off.
    pub fn paint(self, style: Style, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("\x1b[{}m{text}\x1b[0m", style.sgr())
        } else {
            text.to_string()
        }
    }

    /// A status word padded to `width` (padding outside the colour, so columns line up).
    pub fn status(self, status: &str, width: usize) -> String {
        let pad = " ".repeat(width.saturating_sub(status.chars().count()));
        match Style::of_status(status) {
            Some(style) => format!("{}{pad}", self.paint(style, status)),
            None => format!("{status}{pad}"),
        }
    }
}

/// The palettes of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Palettes {
    pub stdout: Palette,
    pub stderr: Palette,
}

/// What the decision needs, given before the command runs.
struct Setup {
    json: bool,
    cwd: PathBuf,
}

static SETUP: OnceLock<Setup> = OnceLock::new();
static PALETTES: OnceLock<Palettes> = OnceLock::new();

/// Say how this process prints (the first call wins). Nothing is decided yet: a command that
/// prints nothing (a hook letting a ref through) never reads the environment or git's
/// configuration for colour.
pub fn init(json: bool, cwd: PathBuf) {
    let _ = SETUP.set(Setup { json, cwd });
}

/// The palette for text printed on stdout (off before [`init`] and with `--json`).
pub fn stdout() -> Palette {
    palettes().stdout
}

/// The palette for text printed on stderr (off before [`init`] and with `--json`).
pub fn stderr() -> Palette {
    palettes().stderr
}

fn palettes() -> Palettes {
    *PALETTES.get_or_init(|| {
        let Some(setup) = SETUP.get().filter(|s| !s.json) else {
            return Palettes::default();
        };
        let git = OnceCell::new();
        let git = || *git.get_or_init(|| git_color(&setup.cwd));
        let var = |name: &str| std::env::var_os(name);
        Palettes {
            stdout: Palette {
                on: enabled(std::io::stdout().is_terminal(), var, git),
            },
            stderr: Palette {
                on: enabled(std::io::stderr().is_terminal(), var, git),
            },
        }
    })
}

/// git's colour setting for us (`color.tabellio`, else `color.ui`), from the repository around
/// `cwd` when there is one.
fn git_color(cwd: &Path) -> Option<GitColor> {
    let store = Store::discover(cwd).ok()?;
    let value = store
        .config_string("color.tabellio")
        .or_else(|| store.config_string("color.ui"))?;
    Some(GitColor::parse(&value))
}

/// git's colour setting for us: `never` turns colour off, anything else leaves it to the
/// terminal (git's `always` included: only `CLICOLOR_FORCE` colours what is not a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitColor {
    Never,
    Auto,
}

impl GitColor {
    /// A `color.ui`-style value as git reads it (`false`, `no`, `off`, `0` and `never` are off).
    pub fn parse(value: &str) -> GitColor {
        match value.trim().to_ascii_lowercase().as_str() {
            "never" | "false" | "no" | "off" | "0" => GitColor::Never,
            _ => GitColor::Auto,
        }
    }
}

/// Whether a stream gets colour (see the module docs). `var` reads the environment; `git` reads
/// git's setting and is called only when colour would otherwise be on.
pub fn enabled(
    is_terminal: bool,
    var: impl Fn(&str) -> Option<OsString>,
    git: impl FnOnce() -> Option<GitColor>,
) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    let forced = var("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0");
    let on = forced
        || (is_terminal
            && var("CLICOLOR").is_none_or(|v| v != "0")
            && var("TERM").is_none_or(|v| v != "dumb"));
    on && git() != Some(GitColor::Never)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn a_terminal_gets_colour_a_pipe_does_not_unless_forced() {
        assert!(enabled(true, env(&[]), || None));
        assert!(!enabled(false, env(&[]), || None));
        assert!(enabled(false, env(&[("CLICOLOR_FORCE", "1")]), || None));
        assert!(!enabled(false, env(&[("CLICOLOR_FORCE", "0")]), || None));
        assert!(!enabled(true, env(&[("TERM", "dumb")]), || None));
        assert!(!enabled(true, env(&[("CLICOLOR", "0")]), || None));
    }

    #[test]
    fn no_color_and_git_never_win_over_everything() {
        let forced = [("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")];
        assert!(!enabled(true, env(&forced), || None));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(enabled(true, env(&[("NO_COLOR", "")]), || None));
        let forced = [("CLICOLOR_FORCE", "1")];
        assert!(!enabled(true, env(&forced), || Some(GitColor::Never)));
        assert!(enabled(true, env(&forced), || Some(GitColor::Auto)));
    }

    #[test]
    fn git_config_is_read_only_when_colour_could_be_on() {
        let read = std::cell::Cell::new(false);
        assert!(!enabled(false, env(&[]), || {
            read.set(true);
            None
        }));
        assert!(!read.get());
    }

    #[test]
    fn git_values() {
        for v in ["never", "false", "No", "off", "0"] {
            assert_eq!(GitColor::parse(v), GitColor::Never, "{v}");
        }
        for v in ["auto", "always", "true", "yes"] {
            assert_eq!(GitColor::parse(v), GitColor::Auto, "{v}");
        }
    }

    #[test]
    fn paint_and_pad() {
        let on = Palette { on: true };
        let off = Palette { on: false };
        assert_eq!(on.paint(Style::Failed, "failed"), "\x1b[31mfailed\x1b[0m");
        assert_eq!(off.paint(Style::Failed, "failed"), "failed");
        assert_eq!(on.status("passed", 9), "\x1b[32mpassed\x1b[0m   ");
        assert_eq!(off.status("passed", 9), "passed   ");
        assert_eq!(on.status("odd", 5), "odd  ");
    }
}
