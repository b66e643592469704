//! The one push of a sync or a remote promotion: `git push --atomic --porcelain` with a
//! `--force-with-lease=<ref>:<expected>` for every ref, so the remote takes all of it or none,
//! and only if every ref is still where we last saw it.
//!
//! A lease that no longer holds ("stale info", "fetch first", or the server's own "cannot lock
//! ref … but expected …" when two pushes cross) is a lost race, not a failure: the caller fetches
//! again and rebuilds. A hook that declines is the server's verdict and is not retried.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::Store;

use crate::store::git_cli as git;

use super::failure::{self, Op};
use super::fetch;

/// One ref to push: `new` onto the remote's `dst`, which must be at `expect` (`None`: must not
/// exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRef {
    pub dst: String,
    pub new: gix::ObjectId,
    pub expect: Option<gix::ObjectId>,
}

impl PushRef {
    /// Delete `dst` on the remote, leased on its being at `expect`. The push carries it as
    /// `:dst`; `new` is the null id, which no object has.
    pub fn deletion(dst: impl Into<String>, expect: gix::ObjectId) -> Self {
        PushRef {
            dst: dst.into(),
            new: gix::ObjectId::null(expect.kind()),
            expect: Some(expect),
        }
    }

    pub fn is_deletion(&self) -> bool {
        self.new.is_null()
    }
}

/// How the remote took one ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefStatus {
    /// Created on the remote.
    Created,
    /// Moved forward.
    Updated,
    /// Already there.
    UpToDate,
    /// The lease did not hold: someone else moved the ref.
    Stale,
    /// Not pushed because another ref of the same atomic push failed.
    AtomicFailed,
    /// The server (a hook) declined it.
    Declined,
    /// Any other rejection.
    Rejected,
}

/// One line of `git push --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushedRef {
    #[serde(rename = "ref")]
    pub name: String,
    pub status: RefStatus,
    /// git's own words: `[new reference]`, `[rejected] (stale info)`, `1234abc..5678def`.
    pub summary: String,
}

/// What came of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushResult {
    /// Every ref is on the remote.
    Pushed(Vec<PushedRef>),
    /// A lease did not hold: nothing was pushed; fetch and try again.
    LostRace(Vec<PushedRef>),
    /// The server declined (a hook said no): nothing was pushed. `messages` are the lines the
    /// remote printed (`remote: …`).
    Declined {
        refs: Vec<PushedRef>,
        messages: Vec<String>,
    },
}

/// How many bytes of refspecs and leases one `git push` gets. Linux allows about 2 MiB of
/// arguments and environment together; a first sync of thousands of runs would exceed it.
const ARGV_BUDGET: usize = 256 * 1024;

/// Push `refs` to `remote` in one atomic push. An empty list pushes nothing.
///
/// Only when the argument list would be too long for one process (thousands of refs) is it split
/// into several atomic pushes, in order (callers put notes first). Each is still all-or-nothing
/// and leased; one that loses stops the rest, and since every pushed value contains the remote's,
/// a partly landed sync is just an earlier state of the same sync.
pub fn push(store: &Store, remote: &str, refs: &[PushRef]) -> Result<PushResult> {
    check_fast_forwards(store, remote, refs)?;
    let mut done = Vec::new();
    for batch in batches(refs) {
        match push_batch(store, remote, batch)? {
            PushResult::Pushed(lines) => done.extend(lines),
            PushResult::LostRace(lines) => {
                done.extend(lines);
                return Ok(PushResult::LostRace(done));
            }
            PushResult::Declined { refs, messages } => {
                done.extend(refs);
                return Ok(PushResult::Declined {
                    refs: done,
                    messages,
                });
            }
        }
    }
    Ok(PushResult::Pushed(done))
}

/// Every value we push must contain the remote's: the lease only says the remote did not move
/// since we looked, not that we built on what we saw. A push that would replace the remote's
/// history (its ledger of a run moved past ours — a landing or promotion whose answer never came
/// back, another machine — or notes we did not merge) is refused before anything is sent.
fn check_fast_forwards(store: &Store, remote: &str, refs: &[PushRef]) -> Result<()> {
    for r in refs.iter().filter(|r| !r.is_deletion()) {
        let Some(theirs) = r.expect.filter(|e| *e != r.new) else {
            continue;
        };
        // A value we do not hold cannot be checked here; the lease still guards it.
        if !store.repo.has_object(theirs) || store.is_ancestor(theirs, r.new)? {
            continue;
        }
        let fix = if r.dst.starts_with(fetch::NOTES_PREFIX) {
            format!("run `git tabellio sync {remote}` (merges the notes) and push again")
        } else if r.dst.starts_with(crate::store::ledger::PREFIX) {
            format!(
                "`git tabellio sync {remote}` brings the remote's ledger here (or reports both, if they diverged); then run the same command again"
            )
        } else {
            format!("fetch what {remote} has (`git fetch {remote}`) and start from there")
        };
        return Err(Error::conflict(format!(
            "{} on {remote} is at {theirs}, which the {} we would push does not contain: pushing would drop {remote}'s history; nothing was pushed",
            r.dst, r.new
        ))
        .hint(fix));
    }
    Ok(())
}

fn batches(refs: &[PushRef]) -> Vec<&[PushRef]> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, r) in refs.iter().enumerate() {
        // `--force-with-lease=<dst>:<oid>` and `<oid>:<dst>`.
        let cost = 2 * r.dst.len() + 2 * r.new.kind().len_in_hex() + 24;
        if i > start && size + cost > ARGV_BUDGET {
            out.push(&refs[start..i]);
            (start, size) = (i, 0);
        }
        size += cost;
    }
    if start < refs.len() {
        out.push(&refs[start..]);
    }
    out
}

fn push_batch(store: &Store, remote: &str, refs: &[PushRef]) -> Result<PushResult> {
    let mut args = git::argv([
        "push",
        "--atomic",
        "--porcelain",
        "--no-follow-tags",
        "--recurse-submodules=no",
    ]);
    for r in refs {
        let expect = r.expect.map_or_else(String::new, |e| e.to_string());
        args.push(format!("--force-with-lease={}:{expect}", r.dst).into());
    }
    args.push(remote.into());
    for r in refs {
        if r.is_deletion() {
            args.push(format!(":{}", r.dst).into());
        } else {
            args.push(format!("{}:{}", r.new, r.dst).into());
        }
    }
    let out = git::run(store, &args)?;
    let lines = parse_porcelain(&out.stdout);
    let messages: Vec<String> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if out.success() && lines.iter().all(|l| l.status.is_ok()) {
        return Ok(PushResult::Pushed(lines));
    }
    if lines.iter().any(|l| l.status == RefStatus::Declined) {
        return Ok(PushResult::Declined {
            refs: lines,
            messages,
        });
    }
    // The server's own compare-and-swap lost to a concurrent push: it says so on stderr and
    // reports every ref of the atomic transaction as failed.
    let server_race = messages
        .iter()
        .any(|m| m.contains("cannot lock ref") || m.contains("but expected"));
    if lines.iter().any(|l| l.status == RefStatus::Stale)
        || (server_race && lines.iter().all(|l| l.status == RefStatus::AtomicFailed))
    {
        return Ok(PushResult::LostRace(lines));
    }
    // A ref the server would not take for a reason of its own (not a hook: that is `Declined`).
    let refused: Vec<String> = lines
        .iter()
        .filter(|l| l.status == RefStatus::Rejected)
        .map(|l| format!("{} {}", l.name, l.summary))
        .collect();
    if !refused.is_empty() {
        let said = if messages.is_empty() {
            String::new()
        } else {
            format!(" ({})", messages.join("; "))
        };
        return Err(Error::refused(format!(
            "{remote} refused the push of {}{said}",
            refused.join(", ")
        ))
        .hint(format!(
            "nothing was pushed (the push is atomic); what {remote} refuses is its own rule: see its words, \
             then run the same command again"
        )));
    }
    if out.stderr.contains("does not support --atomic") {
        return Err(Error::internal(format!("git push to {remote} failed: {}", out.stderr_tail()))
            .hint("the remote does not support atomic pushes (git ≥ 2.4 with receive.advertiseAtomic); sync needs them to never push half a change"));
    }
    if let Some(err) = failure::error(remote, Op::Push, &out.stderr, &out.stderr_tail()) {
        return Err(err);
    }
    Err(Error::internal(format!(
        "git push to {remote} failed: {}",
        out.stderr_tail()
    ))
    .hint(format!(
        "check that you can push to {remote} (`git push --dry-run {remote}`), then try again"
    )))
}

impl RefStatus {
    pub fn is_ok(self) -> bool {
        matches!(
            self,
            RefStatus::Created | RefStatus::Updated | RefStatus::UpToDate
        )
    }
}

/// Parse the ref lines of `git push --porcelain`:
/// `<flag> TAB <from>:<to> TAB <summary>`, between `To <url>` and `Done`.
pub fn parse_porcelain(stdout: &str) -> Vec<PushedRef> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(refs), Some(summary)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some((_, to)) = refs.split_once(':') else {
            continue;
        };
        let status = match flag {
            "*" => RefStatus::Created,
            " " | "+" => RefStatus::Updated,
            "=" => RefStatus::UpToDate,
            "!" => classify_rejection(summary),
            "-" => RefStatus::Updated,
            _ => continue,
        };
        out.push(PushedRef {
            name: to.to_string(),
            status,
            summary: summary.to_string(),
        });
    }
    out
}

fn classify_rejection(summary: &str) -> RefStatus {
    let reason = summary
        .rsplit_once('(')
        .map_or("", |(_, r)| r.trim_end_matches(')'));
    if summary.starts_with("[remote rejected]") {
        if reason.contains("hook declined") || reason.contains("declined") {
            return RefStatus::Declined;
        }
        if reason.contains("atomic transaction failed") {
            return RefStatus::AtomicFailed;
        }
        if reason.contains("failed to update ref")
            || reason.contains("cannot lock ref")
            || reason.contains("incorrect old value")
        {
            return RefStatus::Stale;
        }
        return RefStatus::Rejected;
    }
    match reason {
        "stale info" | "fetch first" | "non-fast-forward" | "already exists" => RefStatus::Stale,
        "atomic push failed" => RefStatus::AtomicFailed,
        _ => RefStatus::Rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_only_long_argument_lists() {
        let r = |i: usize| PushRef {
            dst: format!("refs/tabellio/runs/run-{i:05}"),
            new: gix::ObjectId::null(gix::hash::Kind::Sha1),
            expect: None,
        };
        let few: Vec<PushRef> = (0..3).map(r).collect();
        assert_eq!(batches(&few).len(), 1);
        let many: Vec<PushRef> = (0..10_000).map(r).collect();
        let split = batches(&many);
        assert!(split.len() > 1);
        assert_eq!(split.iter().map(|b| b.len()).sum::<usize>(), 10_000);
        assert!(batches(&[]).is_empty());
    }

    #[test]
    fn porcelain_lines() {
        let out = "To ../srv.git\n\
            !\t4651b69:refs/heads/main\t[rejected] (stale info)\n\
            !\t4651b69:refs/tabellio/runs/x\t[rejected] (atomic push failed)\n\
            *\tabc:refs/notes/tabellio/evidence\t[new reference]\n\
            \x20\tabc:refs/heads/b\tfa0f5fd..4651b69\n\
            =\tabc:refs/heads/c\t[up to date]\n\
            !\tabc:refs/heads/d\t[remote rejected] (pre-receive hook declined)\n\
            !\tabc:refs/heads/e\t[remote rejected] (atomic transaction failed)\n\
            Done\n";
        let got: Vec<(String, RefStatus)> = parse_porcelain(out)
            .into_iter()
            .map(|l| (l.name, l.status))
            .collect();
        assert_eq!(
            got,
            [
                ("refs/heads/main".to_string(), RefStatus::Stale),
                ("refs/tabellio/runs/x".into(), RefStatus::AtomicFailed),
                ("refs/notes/tabellio/evidence".into(), RefStatus::Created),
                ("refs/heads/b".into(), RefStatus::Updated),
                ("refs/heads/c".into(), RefStatus::UpToDate),
                ("refs/heads/d".into(), RefStatus::Declined),
                ("refs/heads/e".into(), RefStatus::AtomicFailed),
            ]
        );
    }
}
