//! Secrets on a command line: the values people pass by hand to secret-named options
//! (`--token=…`, `--api-key …`, `-password …`), as secret-named assignments (`env API_TOKEN=…`)
//! and to the password flags of known tools (`mysql -p…`, `sshpass -p …`). One scanner
//! ([`scan`]) says what each argument is; finding the values to hunt in output, redacting the
//! command line itself, and finding a tool's password on a line of output all read it.

use std::path::Path;

use super::names::{names_secret, FlagValue, ToolFlag};
use super::rules::{Finder, RULES};
use super::{Redactor, MIN_ARGV_SECRET_CHARS, REDACTED};

/// What one argument of a command line is, as far as secrets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg<'a> {
    /// Nothing secret about it (it may still contain a known secret format).
    Plain,
    /// A secret at the end of the argument: `--token=<value>`, `API_TOKEN=<value>`,
    /// `-p<value>`, `user:<value>` after `curl -u`.
    InlineSecret { value: &'a str },
    /// An option whose value is the next argument: `--api-key`, `sshpass`'s `-p`.
    SecretOption,
    /// The argument after a [`Arg::SecretOption`], whatever it looks like.
    SecretValue,
}

/// What the argument after a [`Arg::SecretOption`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A secret, whole.
    Whole,
    /// `user:secret`.
    AfterColon,
}

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

/// The first password of `flag`'s tool on a command line that starts with the tool: the
/// index of the word and the secret at its end.
pub(super) fn scan_tool_flags<'a>(flag: &ToolFlag, words: &[&'a str]) -> Option<(usize, &'a str)> {
    let mut next = None;
    words.iter().enumerate().find_map(|(index, word)| {
        match classify(word, &mut next, std::slice::from_ref(flag), Generic::No) {
            Arg::InlineSecret { value } => Some((index, value)),
            Arg::SecretValue if !word.is_empty() => Some((index, *word)),
            _ => None,
        }
    })
}

/// Whether secret-named options and assignments count, besides the tools' flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generic {
    Too,
    No,
}

fn classify<'a>(
    arg: &'a str,
    next: &mut Option<Next>,
    tools: &[ToolFlag],
    generic: Generic,
) -> Arg<'a> {
    match next.take() {
        Some(Next::Whole) => return Arg::SecretValue,
        Some(Next::AfterColon) => return after_colon(arg),
        None => {}
    }
    for tool in tools {
        for flag in tool.flags {
            if arg == *flag {
                if tool.value == FlagValue::AttachedOrNext {
                    *next = Some(if tool.user_colon {
                        Next::AfterColon
                    } else {
                        Next::Whole
                    });
                    return Arg::SecretOption;
                }
                continue;
            }
            let attached = if flag.starts_with("--") {
                arg.strip_prefix(flag)
                    .and_then(|rest| rest.strip_prefix('='))
            } else {
                arg.strip_prefix(flag)
            };
            match attached {
                Some(value) if !value.is_empty() && tool.user_colon => return after_colon(value),
                Some(value) if !value.is_empty() => return Arg::InlineSecret { value },
                _ => {}
            }
        }
    }
    if generic == Generic::No {
        return Arg::Plain;
    }
    if let Some(option) = arg.strip_prefix('-') {
        let option = option.trim_start_matches('-');
        return match option.split_once('=') {
            Some((name, value)) if names_secret(name) && !value.is_empty() => {
                Arg::InlineSecret { value }
            }
            None if !option.is_empty() && names_secret(option) => {
                *next = Some(Next::Whole);
                Arg::SecretOption
            }
            _ => Arg::Plain,
        };
    }
    match arg.split_once('=') {
        Some((name, value))
            if is_variable_name(name) && names_secret(name) && !value.is_empty() =>
        {
            Arg::InlineSecret { value }
        }
        _ => Arg::Plain,
    }
}

/// The secret of `user:secret` (nothing when there is no password: the tool prompts).
fn after_colon(arg: &str) -> Arg<'_> {
    match arg.split_once(':') {
        Some((_, value)) if !value.is_empty() => Arg::InlineSecret { value },
        _ => Arg::Plain,
    }
}

/// `API_TOKEN`, `db.password`: what `env`, `make` or a JVM takes as a variable name.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
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
