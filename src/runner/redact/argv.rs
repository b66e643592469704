//! Secrets on a command line: the values people pass by hand to secret-named options
//! (`--token=…`, `--api-key …`, `-password …`). One scanner ([`scan`]) says what each argument
//! is; finding the values to hunt in output and redacting the command line itself both read it.

use super::{Redactor, MIN_ARGV_SECRET_CHARS, REDACTED};

/// What one argument of a command line is, as far as secrets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg<'a> {
    /// Nothing secret about it (it may still contain a known secret format).
    Plain,
    /// A secret-named option with its value attached: `--token=<value>`.
    InlineSecret { value: &'a str },
    /// A secret-named option whose value is the next argument: `--api-key`.
    SecretOption,
    /// The argument after a [`Arg::SecretOption`], whatever it looks like.
    SecretValue,
}

/// Classifies each argument of `argv`, in order.
fn scan(argv: &[String]) -> impl Iterator<Item = (&String, Arg<'_>)> {
    let mut secret_next = false;
    argv.iter().map(move |arg| {
        if std::mem::take(&mut secret_next) {
            return (arg, Arg::SecretValue);
        }
        let option = arg.trim_start_matches('-');
        if !arg.starts_with('-') || option.is_empty() {
            return (arg, Arg::Plain);
        }
        let kind = match option.split_once('=') {
            Some((name, value)) if is_secret_option(name) && !value.is_empty() => {
                Arg::InlineSecret { value }
            }
            None if is_secret_option(option) => {
                secret_next = true;
                Arg::SecretOption
            }
            _ => Arg::Plain,
        };
        (arg, kind)
    })
}

/// Whether a command-line option names a secret: one of its words (split at `-`, `_`, `.`) is,
/// or ends in, TOKEN, SECRET, PASSWORD, PASSWD or KEY (`--api-key`, `--authtoken`), but not
/// `--keyboard`.
fn is_secret_option(name: &str) -> bool {
    name.split(['-', '_', '.']).any(|word| {
        let w = word.to_ascii_uppercase();
        ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY"]
            .iter()
            .any(|p| w.ends_with(p))
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
            .filter_map(|(arg, kind)| match kind {
                Arg::InlineSecret { value } => Some(value.to_string()),
                Arg::SecretValue if !arg.is_empty() => Some(arg.clone()),
                _ => None,
            })
            .collect()
    }

    /// Redact a command line: each argument as text, plus the values of secret-named options
    /// (`--token=…`, `--api-key …`, `-password …`), whatever their length — a command line is
    /// where people pass credentials by hand.
    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        // A secret given to an option may be repeated elsewhere on the line.
        let literals = Redactor::for_argv(argv);
        scan(argv)
            .map(|(arg, kind)| match kind {
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
        let kinds: Vec<Arg> = scan(&argv).map(|(_, kind)| kind).collect();
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
