//! What one argument of a command line is, as far as secrets go: the classifier that the
//! command-line scanner ([`super::argv`]) and the matcher of a tool's password on a line of
//! output ([`super::patterns`]) share.

use super::names::{names_secret, FlagValue, ToolFlag};

/// What one argument of a command line is, as far as secrets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arg<'a> {
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
pub(super) enum Next {
    /// A secret, whole.
    Whole,
    /// `user:secret`.
    AfterColon,
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
pub(super) enum Generic {
    Too,
    No,
}

pub(super) fn classify<'a>(
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
