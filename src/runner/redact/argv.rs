//! Secrets on a command line: the values people pass by hand to secret-named options
//! (`--token=…`, `--api-key …`, `-password …`), as secret-named assignments (`env API_TOKEN=…`)
//! and to the password flags of known tools (`mysql -p…`, `sshpass -p …`). One scanner
//! ([`scan`]) says what each argument is; finding the values to hunt in output, redacting the
//! command line itself, and finding a tool's password on a line of output all read it.

use std::path::Path;

use super::classify::{classify, Arg, Generic};
use super::names::ToolFlag;
use super::rules::{Finder, RULES};
use super::{Redactor, MIN_ARGV_SECRET_CHARS, REDACTED};

/// Classifies each argument of `argv`, in order. A tool's password flags count after an
/// argument naming the tool.
fn scan<S: AsRef<str>>(argv: &[S]) -> Vec<Arg<'_>> {
    let mut next = None;
    let mut tools: Vec<ToolFlag> = Vec::new();
    argv.iter()
        .map(|arg| {
            let arg = arg.as_ref();
            let kind = classify(arg, &mut next, &tools, Generic::Too);
            if kind == Arg::Plain {
                tools.extend(tool_flags_of(arg));
            }
            kind
        })
        .collect()
}

/// The password flags of the tool `arg` names (by file name: `/usr/bin/mysql` too).
fn tool_flags_of(arg: &str) -> impl Iterator<Item = ToolFlag> + '_ {
    let name = Path::new(arg)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(arg);
    RULES.iter().filter_map(move |rule| match rule.finder {
        Finder::ToolFlag(flag) if flag.tools.contains(&name) => Some(flag),
        _ => None,
    })
}

impl Redactor {
    /// The secrets a command line passes to its secret-named options, as literals to redact
    /// from anything it prints. Shorter than [`super::MIN_SECRET_CHARS`] is accepted here (the
    /// user named them secret), down to `MIN_ARGV_SECRET_CHARS` (4): below that a value cannot
    /// be told apart from ordinary text.
    pub fn for_argv(argv: &[String]) -> Self {
        let values = Self::argv_secret_values(argv)
            .into_iter()
            .map(String::into_bytes);
        Self::from_literals(values, MIN_ARGV_SECRET_CHARS)
    }

    /// The values a command line passes to secret-named options (`--token=…`, `--api-key …`):
    /// the literals to redact from that command's output too, whatever their length.
    pub fn argv_secret_values(argv: &[String]) -> Vec<String> {
        scan(argv)
            .into_iter()
            .zip(argv)
            .filter_map(|(kind, arg)| match kind {
                Arg::InlineSecret { value } => Some(value.to_string()),
                Arg::SecretValue if !arg.is_empty() => Some(arg.clone()),
                _ => None,
            })
            .collect()
    }

    /// This redactor plus the secrets `argv` passes (see [`Redactor::for_argv`]): what the
    /// output of that command is redacted with.
    pub fn with_argv(self, argv: &[String]) -> Self {
        let values = Self::argv_secret_values(argv)
            .into_iter()
            .map(String::into_bytes)
            .filter(|value| super::char_count(value) >= MIN_ARGV_SECRET_CHARS);
        let literals = self.literals.into_iter().chain(values);
        Self::from_literals(literals, MIN_ARGV_SECRET_CHARS)
    }

    /// Redact a command line: each argument as text, plus the values of secret-named options
    /// (`--token=…`, `--api-key …`, `-password …`), whatever their length — a command line is
    /// where people pass credentials by hand.
    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        // A secret given to an option may be repeated elsewhere on the line.
        let literals = Redactor::for_argv(argv);
        scan(argv)
            .into_iter()
            .zip(argv)
            .map(|(kind, arg)| match kind {
                Arg::SecretValue => REDACTED.to_string(),
                Arg::InlineSecret { value } => {
                    let prefix = &arg[..arg.len() - value.len()];
                    format!("{prefix}{REDACTED}")
                }
                Arg::Plain | Arg::SecretOption => literals.redact(&self.redact(arg).0).0,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn secret_options_on_a_command_line() {
        let argv = args(&[
            "agent",
            "--token=sekrit123",
            "--api-key",
            "abc",
            "-password",
            "hunter2",
            "--verbose",
            "--keyboard=us",
            "plain",
        ]);
        let out = Redactor::default().redact_argv(&argv);
        assert_eq!(
            out,
            [
                "agent",
                "--token=[REDACTED]",
                "--api-key",
                "[REDACTED]",
                "-password",
                "[REDACTED]",
                "--verbose",
                "--keyboard=us",
                "plain"
            ]
        );
        assert_eq!(
            Redactor::argv_secret_values(&argv),
            ["sekrit123", "abc", "hunter2"]
        );
    }

    #[test]
    fn the_scanner_takes_the_next_argument_whatever_it_is() {
        let argv = args(&["--token", "--token", "x", "--secret=", "", "--key", ""]);
        let kinds = scan(&argv);
        assert_eq!(
            kinds,
            [
                Arg::SecretOption,
                Arg::SecretValue,
                Arg::Plain,
                Arg::Plain,
                Arg::Plain,
                Arg::SecretOption,
                Arg::SecretValue,
            ]
        );
        // An empty value is redacted on the line but is nothing to hunt in output.
        assert_eq!(Redactor::argv_secret_values(&argv), ["--token"]);
        let out = Redactor::default().redact_argv(&argv);
        assert_eq!(out[1], REDACTED);
        assert_eq!(out[6], REDACTED);
        // Four characters are hunted in output, three are not.
        let hunted = Redactor::for_argv(&args(&["--token", "abcd", "--key=xyz"]));
        assert_eq!(hunted.redact("abcd xyz"), ("[REDACTED] xyz".to_string(), 1));
    }
}
