//! Git-native storage: the repository handle, ref transactions, run ledgers and notes.
//!
//! Everything durable is a git object reachable from a ref. Every ref write is compare-and-swap
//! and writes that belong together go through one [`tx::apply`] call: every ref is locked and
//! its expected value checked before any changes, so a refused transaction changes nothing.
//! Committing is atomic with reftable; with the files backend the loose refs are renamed into
//! place one after another, so a process killed in the middle can leave some edits done (see
//! [`tx`]; the operations that write several refs recognise and finish such a state). Objects
//! written before a failed transaction are unreachable garbage that `git gc` removes; they are
//! never visible through a ref.

pub mod ancestry;
pub mod backoff;
pub mod candidates;
pub mod cas;
pub mod checkout;
pub mod diff;
pub mod divergence;
pub mod git_cli;
pub mod identity;
pub mod ledger;
pub mod merge;
pub mod multi_pack_index;
pub mod notes;
pub mod notes_index;
pub mod notes_view;
pub mod objects;
pub mod paths;
pub mod policy;
pub mod publish;
pub mod queue;
pub mod refs;
pub mod remote;
pub mod replay;
pub mod repo;
pub mod scoped;
pub mod scratch;
pub mod trees;
pub mod tx;
pub mod update_ref;
pub mod worktree;

pub use repo::Store;

/// The one hermetic environment of every git the tests start (the integration tests and the
/// benches include the same file): its own HOME, no global or system configuration, none of the
/// caller's `GIT_*` variables, a fixed identity and dates, the C locale.
#[cfg(test)]
#[path = "../../tests/support/hermetic.rs"]
pub(crate) mod hermetic;

/// `git args` in `dir` for unit tests, in the [`hermetic`] environment with `home` as HOME.
#[cfg(test)]
pub(crate) fn test_git(home: &std::path::Path, dir: &std::path::Path, args: &[&str]) {
    let status = test_git_command(home, dir, args)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// The command [`test_git`] runs, for a test that reads its output or expects it to fail.
#[cfg(test)]
pub(crate) fn test_git_command(
    home: &std::path::Path,
    dir: &std::path::Path,
    args: &[&str],
) -> std::process::Command {
    let mut cmd = hermetic::git(home, dir);
    cmd.args(args);
    cmd
}

/// Write `text` to the file `name` (a path relative to `dir`), making its directories.
#[cfg(test)]
pub(crate) fn test_write(dir: &std::path::Path, name: &str, text: &str) {
    let file = dir.join(name);
    std::fs::create_dir_all(file.parent().expect("parent")).expect("dir");
    std::fs::write(file, text).expect("write");
}

/// The object `spec` names in the repository at `dir`, as `git rev-parse` resolves it.
#[cfg(test)]
pub(crate) fn test_rev(home: &std::path::Path, dir: &std::path::Path, spec: &str) -> gix::ObjectId {
    let out = test_git_command(home, dir, &["rev-parse", spec])
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git rev-parse {spec}");
    let hex = String::from_utf8(out.stdout).expect("hex");
    gix::ObjectId::from_hex(hex.trim().as_bytes()).expect("an object id")
}

/// A repository `home/name` on `main` with one empty commit, for unit tests.
#[cfg(test)]
pub(crate) fn test_repo(home: &std::path::Path, name: &str) -> std::path::PathBuf {
    test_repo_in_format(home, name, "files")
}

/// [`test_repo`] with the ref storage `format` (`files` or `reftable`).
#[cfg(test)]
pub(crate) fn test_repo_in_format(
    home: &std::path::Path,
    name: &str,
    format: &str,
) -> std::path::PathBuf {
    let format = format!("--ref-format={format}");
    test_git(home, home, &["init", "-q", "-b", "main", &format, name]);
    let repo = home.join(name);
    test_git(
        home,
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "init"],
    );
    repo
}
