//! The library's error: what went wrong, in words for a person, a hint saying what to do, the
//! kind that decides the exit code (docs/cli.md, "Exit codes"), and the lower-level error that
//! caused it, if any. Every fallible operation of the library returns it; the CLI's renderer
//! only prints it.

/// What kind of failure, which fixes the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad usage or invalid input (exit 2).
    Usage,
    /// Refused by the run's or workspace's own state (exit 3).
    Refused,
    /// Another writer got there first: a ref moved, a lock is held (exit 4).
    Conflict,
    /// A run, ref or commit does not exist (exit 5).
    NotFound,
    /// Something that should not happen (exit 70).
    Internal,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Refused => 3,
            ErrorKind::Conflict => 4,
            ErrorKind::NotFound => 5,
            ErrorKind::Internal => 70,
        }
    }

    /// The stable machine-readable name used as `error.code` in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::Refused => "refused",
            ErrorKind::Conflict => "conflict",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Internal => "internal",
        }
    }
}

/// The lower-level failure an [`Error`] was caused by.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure with a message that is never empty and, where we know one, a hint and the lower
/// error that caused it. The message is what a person reads first; the cause chain
/// ([`std::error::Error::source`]) is what the renderer adds below it as `caused by:` lines.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
    #[source]
    pub source: Option<Cause>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
            source: None,
        }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    /// Keep `cause` as this error's source (the message stays as it is).
    pub fn caused_by(mut self, cause: impl Into<Cause>) -> Self {
        self.source = Some(cause.into());
        self
    }
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
    /// The errors below this one, outermost first.
    pub fn causes(&self) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
        causes_of(self)
    }
}

/// The errors below `err`, outermost first: the one walk of a cause chain, for the renderer's
/// `caused by:` lines and for messages that must stay one line ([`one_line`]).
pub fn causes_of<'e>(
    err: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    let mut next = err.source();
    std::iter::from_fn(move || {
        let e = next?;
        next = e.source();
        Some(e)
    })
}

/// `err` and its causes in one line, `outer: inner: innermost`.
pub fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    for cause in causes_of(err) {
        message.push_str(": ");
        message.push_str(&cause.to_string());
    }
    message
}

/// `s` as one shell word, for commands people copy from a hint: as is when it holds only
/// characters no shell treats specially, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '/' | '.' | '_' | '-' | '+' | ':' | '@' | '=' | ',')
        });
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A path as one shell word, normalised (`a/b/../c` → `a/c`) when it exists.
pub fn shell_path(p: &std::path::Path) -> String {
    let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    shell_quote(&p.display().to_string())
}

/// Attach context to a lower-level failure as an internal error that keeps it as its source.
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E> Context<T> for std::result::Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        // The message stays one line with the lower error in it (`{:#}` gives gix's whole chain
        // where it supports that); the error itself is kept so its own causes are not lost.
        self.map_err(|e| Error::internal(format!("{}: {e:#}", what())).caused_by(e))
    }
}

impl From<crate::model::SchemaError> for Error {
    fn from(e: crate::model::SchemaError) -> Self {
        Error::refused(e.to_string())
            .hint("this record was written by a newer or different tool; upgrade git-tabellio")
    }
}

impl From<crate::model::policy::PolicyError> for Error {
    fn from(e: crate::model::policy::PolicyError) -> Self {
        Error::usage(e.to_string()).hint("fix .tabellio/policy.json and commit it")
    }
}

impl From<crate::model::allowed_signers::AllowedSignersError> for Error {
    fn from(e: crate::model::allowed_signers::AllowedSignersError) -> Self {
        let hint = format!(
            "fix {} (ssh-keygen's allowed-signers format) and commit it",
            e.source_name
        );
        Error::usage(e.to_string()).hint(hint)
    }
}

#[cfg(test)]
mod tests {
    use super::{shell_quote, Context, Error, ErrorKind};

    #[derive(Debug, thiserror::Error)]
    #[error("outer failure")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn context_keeps_the_message_and_the_cause() {
        let lower: std::result::Result<(), Outer> =
            Err(Outer(std::io::Error::other("disk on fire")));
        let err = lower.context(|| "could not write x".into()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert_eq!(err.message, "could not write x: outer failure");
        let causes: Vec<String> = err.causes().map(|e| e.to_string()).collect();
        assert_eq!(causes, ["outer failure", "disk on fire"]);
    }

    #[test]
    fn an_error_without_a_cause_has_no_causes() {
        assert_eq!(Error::usage("x").causes().count(), 0);
        let caused = Error::refused("y").caused_by(Error::usage("z"));
        let causes: Vec<String> = caused.causes().map(|e| e.to_string()).collect();
        assert_eq!(causes, ["z"]);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a/b.lock"), "/tmp/a/b.lock");
        assert_eq!(shell_quote("/tmp/a dir/x"), "'/tmp/a dir/x'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
