//! What a git command that talked to a remote and failed means for the person who ran ours.
//!
//! git says it on stderr in the words of its transport (curl for HTTP, ssh, the git protocol)
//! and of the server. A remote that refuses — no or wrong credentials, a read-only remote or
//! area, a ref the server will not take — is not an internal error of ours: it is the remote's
//! own state, so exit 3 (`refused`); a repository that is not at the URL is exit 5; a remote that
//! cannot be reached, or a connection that breaks while git talks to it, is a passing condition
//! like a lost race, exit 4, and the command is run again. Each error names the remote and the
//! operation (`fetch`, `push`, `ls-remote`) and keeps git's own last words.

use crate::error::{Error, ErrorKind};

/// The network operation git was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Fetch,
    Push,
    LsRemote,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Fetch => "fetch",
            Op::Push => "push",
            Op::LsRemote => "ls-remote",
        }
    }

    /// What did not happen, for the hint.
    fn nothing(self) -> &'static str {
        match self {
            Op::Push => "nothing was pushed",
            Op::Fetch | Op::LsRemote => "nothing was fetched",
        }
    }
}

/// Why a remote did not do what git asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No credentials, or ones the remote did not accept.
    Auth,
    /// The remote does not let this user do this (a read-only remote or area).
    Forbidden,
    /// No repository at the URL.
    NotFound,
    /// The remote could not be reached at all.
    Unreachable,
    /// The connection broke while git talked to the remote.
    Broken,
    /// Anything else.
    Other,
}

/// What git's stderr says happened. The patterns are git's, curl's, ssh's and the usual
/// servers' words; the first kind that matches wins, most specific first.
pub fn classify(stderr: &str) -> Failure {
    let text = stderr.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    if any(&[
        "authentication failed",
        "could not read username",
        "could not read password",
        "terminal prompts disabled",
        "permission denied (publickey",
        "permission denied (password",
        "permission denied, please try again",
        "http basic: access denied",
        "returned error: 401",
        "invalid username or password",
        "invalid credentials",
    ]) {
        return Failure::Auth;
    }
    if any(&[
        "returned error: 403",
        "service not enabled",
        "access denied or repository not exported",
        "write access to repository not granted",
        "not allowed to push",
        "you are not allowed",
        "read-only",
        "read only",
        "permission denied",
        "access denied",
    ]) || (text.contains("permission to ") && text.contains(" denied"))
    {
        return Failure::Forbidden;
    }
    if any(&[
        "repository not found",
        "does not appear to be a git repository",
        "returned error: 404",
        "no such repository",
        "not a git repository",
    ]) {
        return Failure::NotFound;
    }
    // The exchange had begun when the connection broke (curl's own reconnection may then fail
    // to connect: that is still a broken exchange, and a push may have landed).
    if any(&[
        "rpc failed",
        "unexpected disconnect",
        "the remote end hung up",
        "early eof",
        "empty reply from server",
        "connection reset",
        "transfer closed",
    ]) {
        return Failure::Broken;
    }
    if any(&[
        "could not resolve host",
        "could not resolve hostname",
        "name or service not known",
        "connection refused",
        "couldn't connect",
        "failed to connect",
        "unable to connect",
        "connection timed out",
        "operation timed out",
        "no route to host",
        "network is unreachable",
    ]) {
        return Failure::Unreachable;
    }
    if any(&[
        "connection closed",
        "broken pipe",
        "recv failure",
        "could not read from remote repository",
    ]) {
        return Failure::Broken;
    }
    Failure::Other
}

/// The error for `op` with `remote` that failed with `stderr` (git's last lines in `said`), or
/// `None` when git's words say nothing about the remote (the caller keeps its own error).
pub fn error(remote: &str, op: Op, stderr: &str, said: &str) -> Option<Error> {
    let what = op.as_str();
    let nothing = op.nothing();
    let check = match op {
        Op::Push => format!("`git push --dry-run {remote}`"),
        Op::Fetch | Op::LsRemote => format!("`git ls-remote {remote}`"),
    };
    let (kind, message, hint) = match classify(stderr) {
        Failure::Auth => (
            ErrorKind::Refused,
            format!("{remote} refused the {what}: it did not accept the credentials (or was given none): {said}"),
            format!(
                "{nothing}; give git credentials {remote} accepts (a credential helper, the user in the URL, \
                 the SSH key the server knows), check with {check}, then run the same command again"
            ),
        ),
        Failure::Forbidden => (
            ErrorKind::Refused,
            format!("{remote} refused the {what}: it does not allow it to this user, or is read-only: {said}"),
            match op {
                Op::Push => format!(
                    "{nothing}; push through a URL where you may write (`git remote set-url --push {remote} <url>`) \
                     or with a login that may, check with {check}, then run the same command again"
                ),
                Op::Fetch | Op::LsRemote => format!(
                    "{nothing}; log in with a user that may read {remote}, check with {check}, then run the same command again"
                ),
            },
        ),
        Failure::NotFound => (
            ErrorKind::NotFound,
            format!("{remote} has no repository at its URL ({what}): {said}"),
            format!("{nothing}; check the URL (`git remote get-url {remote}`)"),
        ),
        Failure::Unreachable => (
            ErrorKind::Conflict,
            format!("could not reach {remote} for the {what}: {said}"),
            format!(
                "{nothing}; check the network and the URL (`git remote get-url {remote}`), then run the same command again"
            ),
        ),
        Failure::Broken => (
            ErrorKind::Conflict,
            format!("the connection to {remote} broke during the {what}: {said}"),
            match op {
                Op::Push => format!(
                    "the push is atomic: it landed whole or not at all; `git tabellio sync {remote}` brings here \
                     whatever landed, then run the same command again"
                ),
                Op::Fetch | Op::LsRemote => {
                    format!("{nothing}; run the same command again")
                }
            },
        ),
        Failure::Other => return None,
    };
    Some(Error::new(kind, message).hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_git_and_the_servers_say() {
        for (stderr, want) in [
            ("fatal: could not read Username for 'http://127.0.0.1:8080': terminal prompts disabled", Failure::Auth),
            ("fatal: Authentication failed for 'http://127.0.0.1:8080/ro/r.git/'", Failure::Auth),
            ("git@127.0.0.1: Permission denied (publickey).\r\nfatal: Could not read from remote repository.", Failure::Auth),
            ("fatal: unable to access 'http://h/r.git/': The requested URL returned error: 403", Failure::Forbidden),
            ("fatal: remote error: access denied or repository not exported: /r.git", Failure::Forbidden),
            ("ERROR: Permission to o/r.git denied to u.\nfatal: Could not read from remote repository.", Failure::Forbidden),
            ("remote: Repository not found.\nfatal: repository 'https://h/o/r.git/' not found", Failure::NotFound),
            ("fatal: '/nope' does not appear to be a git repository", Failure::NotFound),
            ("fatal: unable to access 'http://127.0.0.1:9/r.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server", Failure::Unreachable),
            ("ssh: connect to host 127.0.0.1 port 9: Connection refused\r\nfatal: Could not read from remote repository.", Failure::Unreachable),
            ("error: RPC failed; curl 52 Empty reply from server\nfatal: the remote end hung up unexpectedly", Failure::Broken),
            ("error: RPC failed; curl 7 Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server\nsend-pack: unexpected disconnect while reading sideband packet", Failure::Broken),
            ("fatal: bad object 1234", Failure::Other),
        ] {
            assert_eq!(classify(stderr), want, "{stderr}");
        }
    }

    #[test]
    fn errors_name_the_remote_and_the_operation() {
        let e = error(
            "origin",
            Op::Push,
            "fatal: Authentication failed for 'x'",
            "fatal: Authentication failed for 'x'",
        )
        .unwrap();
        assert_eq!(e.kind, ErrorKind::Refused);
        assert!(
            e.message.starts_with("origin refused the push"),
            "{}",
            e.message
        );
        assert!(e.hint.unwrap().contains("git push --dry-run origin"));
        let e = error("up", Op::Fetch, "Connection refused", "Connection refused").unwrap();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert!(
            e.message.contains("could not reach up for the fetch"),
            "{}",
            e.message
        );
        assert!(error("up", Op::Fetch, "fatal: bad object", "").is_none());
    }
}
