//! The library's error: what went wrong, in words for a person, a hint saying what to do, and
//! the kind that decides the exit code (DESIGN.md section 4). Every fallible operation of the
//! library returns it; `main.rs` only renders it.

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

/// A failure with a message that is never empty and, where we know one, a hint.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
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
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
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

/// Attach context to a lower-level failure as an internal error.
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        // `{:#}` gives gix's whole chain on one line.
        self.map_err(|e| Error::internal(format!("{}: {e:#}", what())))
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

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a/b.lock"), "/tmp/a/b.lock");
        assert_eq!(shell_quote("/tmp/a dir/x"), "'/tmp/a dir/x'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
