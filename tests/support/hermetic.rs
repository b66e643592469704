//! The one hermetic environment for every git and git-tabellio process that tests and benches
//! start: its own HOME, no global or system git config, a fixed author, committer and dates, the
//! C locale, and none of the `GIT_*` variables of the environment the tests run in (a hook or
//! `git rebase --exec` would otherwise point every child at the outer repository).
//!
//! Plain std, no dependencies, so the integration tests (`tests/it`), the benches and the
//! library's unit tests all include this one file with `#[path]`.

// Each includer uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

pub const AUTHOR_NAME: &str = "Test Author";
pub const AUTHOR_EMAIL: &str = "author@example.com";
pub const COMMITTER_NAME: &str = "Test Committer";
pub const COMMITTER_EMAIL: &str = "committer@example.com";
/// Author and committer date of every commit made through this environment.
pub const DATE: &str = "2026-01-01T00:00:00Z";

/// Make `cmd` hermetic, with `home` as its HOME.
pub fn apply(cmd: &mut Command, home: &Path) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", AUTHOR_NAME)
        .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
        .env("GIT_COMMITTER_NAME", COMMITTER_NAME)
        .env("GIT_COMMITTER_EMAIL", COMMITTER_EMAIL)
        .env("GIT_AUTHOR_DATE", DATE)
        .env("GIT_COMMITTER_DATE", DATE)
        .env("LC_ALL", "C");
}

/// `git` in `cwd`, hermetic with `home` as its HOME.
pub fn git(home: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd);
    apply(&mut cmd, home);
    cmd
}
