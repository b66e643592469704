//! Ref transactions of a reftable repository, through `git update-ref --stdin`.
//!
//! One git process per transaction: `start`, one `update`/`create`/`delete`/`verify` line per
//! edit, then `prepare`, which takes the stack's lock and checks every expected value. Until
//! `commit` nothing is visible; `commit` writes one new table and swaps it into `tables.list`
//! with a rename, so every ref of the transaction changes at once or none does, even when a
//! process is killed (ours or git). Closing git's stdin without `commit`, which is what
//! happens when we drop the transaction or die, makes git abort and release the lock.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout};

use crate::error::{Error, Result};

use super::cas::Cas;
use super::git_cli;
use super::Store;

/// A running `git update-ref --stdin` conversation.
pub struct UpdateRef {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// How a step of the conversation failed: git's words, for the caller to diagnose.
#[derive(Debug)]
pub struct Refused {
    pub stderr: String,
}

impl UpdateRef {
    /// Start git, send every edit and `prepare`: on success the lock is held and every expected
    /// value was checked.
    pub fn prepare(store: &Store, edits: &[Cas]) -> Result<std::result::Result<Self, Refused>> {
        let mut args = git_cli::argv([
            // git 2.48+ retries a held stack lock this long (older gits ignore the key and fail
            // at once; callers retry shared refs themselves).
            "-c",
            "reftable.lockTimeout=1000",
            "update-ref",
            "--stdin",
        ]);
        let mut messages: Vec<&str> = Vec::new();
        for edit in edits {
            if !edit.message.is_empty() && !messages.contains(&edit.message.as_str()) {
                messages.push(&edit.message);
            }
        }
        // One reflog message for the transaction (git takes one per `update-ref` call).
        if !messages.is_empty() {
            args.extend(git_cli::argv(["-m".to_string(), messages.join("; ")]));
        }
        // The reflog identity gix would have written (configured, or the fallback identity).
        let mut envs = Vec::new();
        let who = store.signature(super::identity::Role::Committer);
        envs.push(("GIT_COMMITTER_NAME", who.name.to_string()));
        envs.push(("GIT_COMMITTER_EMAIL", who.email.to_string()));
        let mut child = git_cli::spawn(store, &args, &envs)?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::internal("git update-ref has no stdout"))?;
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
                text
            })
        });
        let mut tx = UpdateRef {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr,
        };
        let mut script = String::from("start\n");
        for edit in edits {
            script.push_str(&line(edit));
        }
        script.push_str("prepare\n");
        if tx.send(&script).is_err() || !tx.expect("start")? || !tx.expect("prepare")? {
            return Ok(Err(tx.finish().1));
        }
        Ok(Ok(tx))
    }

    /// Make the prepared edits visible, all at once.
    pub fn commit(mut self) -> Result<std::result::Result<(), Refused>> {
        if self.send("commit\n").is_err() || !self.expect("commit")? {
            return Ok(Err(self.finish().1));
        }
        match self.finish() {
            (true, _) => Ok(Ok(())),
            (false, refused) => Ok(Err(refused)),
        }
    }

    fn send(&mut self, text: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin closed"))?;
        stdin.write_all(text.as_bytes())?;
        stdin.flush()
    }

    /// Read git's answer to `step`: `<step>: ok`, or end of output when it gave up.
    fn expect(&mut self, step: &str) -> Result<bool> {
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) => Ok(false),
            Ok(_) if answer.trim_end() == format!("{step}: ok") => Ok(true),
            Ok(_) => Err(Error::internal(format!(
                "git update-ref answered {:?} to {step}",
                answer.trim_end()
            ))),
            Err(e) => Err(Error::internal(format!(
                "could not read git update-ref's answer: {e}"
            ))),
        }
    }

    /// Close stdin (git aborts anything not committed and releases the lock), wait for git and
    /// collect what it said: (exited successfully, its words).
    fn finish(&mut self) -> (bool, Refused) {
        self.stdin.take();
        let success = self.child.wait().is_ok_and(|s| s.success());
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (success, Refused { stderr })
    }
}

impl Drop for UpdateRef {
    /// A transaction dropped unfinished is aborted, and the lock is released before `drop`
    /// returns, like a dropped files transaction.
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.finish();
        }
    }
}

/// The `update-ref --stdin` line for one edit.
fn line(edit: &Cas) -> String {
    let name = &edit.name;
    match (edit.expected, edit.new) {
        (Some(old), Some(new)) => format!("update {name} {new} {old}\n"),
        (None, Some(new)) => format!("create {name} {new}\n"),
        (Some(old), None) => format!("delete {name} {old}\n"),
        (None, None) => format!("verify {name}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::{line, Cas};

    #[test]
    fn every_edit_is_one_compare_and_swap_line() {
        let a = gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").expect("hex");
        let b = gix::ObjectId::from_hex(b"2222222222222222222222222222222222222222").expect("hex");
        assert_eq!(
            line(&Cas::update("refs/x", Some(a), b, "m")),
            format!("update refs/x {b} {a}\n")
        );
        assert_eq!(
            line(&Cas::update("refs/x", None, b, "m")),
            format!("create refs/x {b}\n")
        );
        assert_eq!(
            line(&Cas::delete("refs/x", a, "m")),
            format!("delete refs/x {a}\n")
        );
    }
}
