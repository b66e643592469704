//! Who and when, for the commits and reflog entries tabellio writes.
//!
//! Resolved at each write from the repository's configuration, into which gix has already folded
//! `GIT_COMMITTER_NAME`, `GIT_AUTHOR_EMAIL`, `EMAIL` and the dates, in the order git and gix use:
//! `committer.name` (or `author.*`), then `user.*`, then the fallback identity the open options
//! install (see [`super::repo`]). Not through `gix::Repository::committer()`: its first use also
//! resolves the local time zone, which reads the whole timezone database (a directory walk of
//! `/usr/share/zoneinfo`) even when only a name is wanted. Our times are UTC (offset 0) from the
//! system clock, like every time in our records; a `GIT_COMMITTER_DATE` or `GIT_AUTHOR_DATE` is
//! honoured as given. Nothing here fails: an unset identity is the fallback identity, and an
//! unreadable date is the current time, as gix treats it.

use std::time::{SystemTime, UNIX_EPOCH};

use gix::bstr::{BString, ByteSlice};

use crate::error::Result;

use super::repo::{FALLBACK_EMAIL, FALLBACK_NAME};
use super::Store;

/// Whose signature: the two differ only in their configuration keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Committer,
    Author,
}

impl Role {
    fn section(self) -> &'static str {
        match self {
            Role::Committer => "committer",
            Role::Author => "author",
        }
    }

    fn date_key(self) -> &'static str {
        match self {
            Role::Committer => "gitoxide.commit.committerDate",
            Role::Author => "gitoxide.commit.authorDate",
        }
    }
}

/// `t` as a signature time in UTC: whole seconds, offset 0. No time zone is looked up.
pub fn utc_time(t: SystemTime) -> gix::date::Time {
    let seconds = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    gix::date::Time::new(seconds, 0)
}

/// A configured date (`GIT_COMMITTER_DATE` and friends) as a signature time, `None` when it is
/// not a date. The absolute forms need no clock; only a relative one (`2 hours ago`) is read
/// against the local clock, time zone included, as gix does.
fn parse_date(text: &str) -> Option<gix::date::Time> {
    gix::date::parse(text, None)
        .or_else(|_| gix::date::parse(text, Some(gix::date::Zoned::now())))
        .ok()
}

impl Store {
    fn identity_value(&self, keys: &[&str]) -> Option<BString> {
        let config = self.repo.config_snapshot();
        keys.iter().find_map(|key| config.string(*key))
    }

    /// The signature of `role` for a commit or reflog entry written now.
    pub fn signature(&self, role: Role) -> gix::actor::Signature {
        let section = role.section();
        let name = self
            .identity_value(&[
                &format!("{section}.name"),
                "user.name",
                &format!("gitoxide.{section}.nameFallback"),
            ])
            .unwrap_or_else(|| FALLBACK_NAME.into());
        let email = self
            .identity_value(&[
                &format!("{section}.email"),
                "user.email",
                "gitoxide.user.emailFallback",
                &format!("gitoxide.{section}.emailFallback"),
            ])
            .unwrap_or_else(|| FALLBACK_EMAIL.into());
        let time = self
            .identity_value(&[role.date_key()])
            .and_then(|date| date.to_str().ok().and_then(parse_date))
            .unwrap_or_else(|| utc_time(SystemTime::now()));
        gix::actor::Signature { name, email, time }
    }

    /// Write a commit of `tree` with `parents` (not a ref), signed by the resolved author and
    /// committer.
    pub fn write_commit(
        &self,
        message: &str,
        tree: gix::ObjectId,
        parents: impl IntoIterator<Item = gix::ObjectId>,
    ) -> Result<gix::ObjectId> {
        let commit = gix::objs::Commit {
            message: message.into(),
            tree,
            author: self.signature(Role::Author),
            committer: self.signature(Role::Committer),
            encoding: None,
            parents: parents.into_iter().collect(),
            extra_headers: Vec::new(),
        };
        self.write_object(&commit)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::{parse_date, utc_time, Role};
    use crate::store::repo::{FALLBACK_EMAIL, FALLBACK_NAME};
    use crate::store::Store;

    use crate::store::test_git as git;

    /// The repository without any environment or global configuration: only its own config.
    fn isolated(path: &std::path::Path) -> Store {
        let repo = gix::open_opts(path, gix::open::Options::isolated()).expect("open");
        Store::from_repo(repo).expect("a known ref format")
    }

    #[test]
    fn identities_follow_git_order_and_times_are_utc_unless_configured() {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path().join("r");
        git(dir.path(), dir.path(), &["init", "-q", "r"]);
        let store = isolated(&repo);
        let before = utc_time(SystemTime::now()).seconds;
        let sig = store.signature(Role::Committer);
        assert_eq!(
            (sig.name.to_string(), sig.email.to_string()),
            (FALLBACK_NAME.to_string(), FALLBACK_EMAIL.to_string())
        );
        assert_eq!(sig.time.offset, 0);
        assert!(sig.time.seconds >= before);

        git(dir.path(), &repo, &["config", "user.name", "User"]);
        git(
            dir.path(),
            &repo,
            &["config", "user.email", "user@example.com"],
        );
        git(
            dir.path(),
            &repo,
            &["config", "committer.name", "Committer"],
        );
        let date = "gitoxide.commit.committerDate";
        git(dir.path(), &repo, &["config", date, "1700000000 +0200"]);
        let store = isolated(&repo);
        let committer = store.signature(Role::Committer);
        assert_eq!(
            (committer.name.to_string(), committer.email.to_string()),
            ("Committer".to_string(), "user@example.com".to_string())
        );
        assert_eq!(
            (committer.time.seconds, committer.time.offset),
            (1_700_000_000, 7200)
        );
        let author = store.signature(Role::Author);
        assert_eq!(
            (author.name.to_string(), author.email.to_string()),
            ("User".to_string(), "user@example.com".to_string())
        );
        assert_eq!(author.time.offset, 0);

        let tree = store
            .repo
            .write_object(gix::objs::Tree::empty())
            .expect("empty tree")
            .detach();
        let commit = store.write_commit("m\n", tree, []).expect("commit");
        let commit = store.repo.find_commit(commit).expect("written");
        let written = commit.committer().expect("a committer");
        assert_eq!(written.name, "Committer");
        assert_eq!(written.time, "1700000000 +0200");
    }

    #[test]
    fn utc_time_is_seconds_at_offset_zero() {
        let t = utc_time(UNIX_EPOCH + Duration::from_millis(1_700_000_000_999));
        assert_eq!((t.seconds, t.offset), (1_700_000_000, 0));
        let before = utc_time(UNIX_EPOCH - Duration::from_secs(5));
        assert_eq!((before.seconds, before.offset), (-5, 0));
    }

    #[test]
    fn configured_dates_keep_their_offset() {
        let t = parse_date("2026-01-01T00:00:00Z").expect("an ISO date");
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 0));
        let t = parse_date("1700000000 +0200").expect("a raw date");
        assert_eq!((t.seconds, t.offset), (1_700_000_000, 7200));
        assert!(parse_date("not a date at all").is_none());
    }
}
