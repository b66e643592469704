//! The ref backend seam: every ref read above this module goes through [`super::Store`] (or, for
//! another worktree opened by path, through [`head`]), every ref write through [`super::tx`].
//!
//! The backend is chosen once per repository from `extensions.refStorage`:
//!
//! - **files** (the default): gix reads and writes loose and packed refs in-process.
//! - **reftable**: gix 0.90 cannot read a reftable stack and would write loose refs that git
//!   ignores, so refs are read and written by git itself (`for-each-ref`, `symbolic-ref`,
//!   `rev-parse`, `update-ref --stdin`). Objects are the same for both and stay in-process.
//!
//! A ref format this build does not know is refused when the repository is opened, before
//! anything is read or written.

use std::ffi::OsString;

use gix::bstr::ByteSlice;

use crate::error::{Context, Error, Result};

use super::git_cli;

mod snapshot;

pub(super) use snapshot::Snapshot;

/// How the repository stores its refs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefFormat {
    Files,
    Reftable,
}

impl RefFormat {
    /// The ref format of `repo`, from `extensions.refStorage` (absent: files). A reftable
    /// directory without the extension is a repository git itself would not read as reftable
    /// either, so the configuration decides.
    pub fn of(repo: &gix::Repository) -> Result<RefFormat> {
        let Some(value) = repo.config_snapshot().string("extensions.refStorage") else {
            return Ok(RefFormat::Files);
        };
        let value = value.to_str_lossy().to_ascii_lowercase();
        match value.as_str() {
            "files" => Ok(RefFormat::Files),
            "reftable" => Ok(RefFormat::Reftable),
            other => Err(Error::refused(format!(
                "the repository at {} uses the ref storage {other:?}, which this build of \
                 git-tabellio does not know",
                repo.common_dir().display()
            ))
            .hint(
                "use a repository with the files or reftable ref storage, or convert it with \
                 `git refs migrate --ref-format=reftable`",
            )),
        }
    }
}

/// What HEAD of one worktree says: the branch it is on (`None` when detached) and the commit
/// it resolves to (`None` on an unborn branch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    pub branch: Option<String>,
    pub id: Option<gix::ObjectId>,
}

/// HEAD of the worktree `repo` was opened in (its own HEAD: a linked worktree has one of its
/// own, in its administrative directory or, with reftable, in its own stack).
pub fn head(repo: &gix::Repository) -> Result<Head> {
    head_with(repo, None, None)
}

/// [`head`], reading HEAD's commit through `reader` (the store's own worktree) when given, and
/// with reftable taking HEAD's branch from `known_branch` when it was read already.
pub(super) fn head_with(
    repo: &gix::Repository,
    reader: Option<&Reader>,
    known_branch: Option<Option<String>>,
) -> Result<Head> {
    match RefFormat::of(repo)? {
        // HEAD read once, and its branch's value as the ref holds it (as `git rev-parse HEAD`
        // gives it, and the reftable way below): no object is read to peel it.
        RefFormat::Files => Ok(match repo.head() {
            Ok(head) => Head {
                branch: head
                    .referent_name()
                    .map(|n| n.as_bstr().to_str_lossy().into_owned()),
                id: match head.id() {
                    Some(id) => Some(id.detach()),
                    // A branch that is itself symbolic: followed to its end.
                    None if matches!(head.kind, gix::head::Kind::Symbolic(_)) => {
                        repo.head_id().ok().map(|id| id.detach())
                    }
                    None => None,
                },
            },
            // HEAD's branch cannot be read: HEAD itself may still name it.
            Err(_) => Head {
                branch: repo
                    .head_name()
                    .ok()
                    .flatten()
                    .map(|n| n.as_bstr().to_str_lossy().into_owned()),
                id: None,
            },
        }),
        RefFormat::Reftable => {
            let branch = match known_branch {
                Some(branch) => branch,
                None => git_line(repo, &["symbolic-ref", "-q", "HEAD"])?,
            };
            let id = match reader {
                Some(reader) => reader.resolve(repo, "HEAD")?,
                None => git_line(repo, &["rev-parse", "-q", "--verify", "HEAD"])?
                    .map(|hex| parse_oid(repo, &hex))
                    .transpose()?,
            };
            Ok(Head { branch, id })
        }
    }
}

/// The value of the direct ref `name`, `None` when absent (or symbolic).
pub(super) fn find(
    repo: &gix::Repository,
    format: RefFormat,
    reader: Option<&Reader>,
    name: &str,
) -> Result<Option<gix::ObjectId>> {
    match format {
        RefFormat::Files => {
            let reference = exactly(repo, name).context(|| format!("could not read {name}"))?;
            Ok(reference.and_then(|r| r.target().try_id().map(ToOwned::to_owned)))
        }
        RefFormat::Reftable if name.starts_with("refs/") => {
            if let Some(reader) = reader {
                if let Some(id) = reader.resolve(repo, name)? {
                    return Ok(Some(id));
                }
            }
            // Absent, at an object that is missing (which the reader cannot tell apart, and
            // which callers report as a corrupt ref), or with a look-alike that the reader's
            // revision lookup could have answered for it: `for-each-ref` matches whole path
            // components, so only `name` itself (or refs below it, which cannot coexist with
            // it) can come back.
            Ok(list_reftable(repo, &[name])?
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, id)| id))
        }
        RefFormat::Reftable => {
            let hex = git_line(
                repo,
                &["rev-parse", "-q", "--verify", "--end-of-options", name],
            )?;
            hex.map(|hex| parse_oid(repo, &hex)).transpose()
        }
    }
}

/// The ref `name` (files backend), `None` when absent; a full `refs/…` name means exactly
/// that ref.
///
/// gix's lookup is git's revision lookup: a name it does not find is tried again under
/// `tags/`, `heads/` and `remotes/`, and for a full `refs/…` name those tries are paths
/// outside `refs/` (`<git dir>/tags/refs/notes/…`), which no ref transaction writes. A ref the
/// tool reads (a ledger, a notes ref, a target) is a full name and means that ref only: what
/// such a try finds in its place is not it. Other names (`HEAD`) are looked up as gix does,
/// as the reftable backend hands them to `git rev-parse`.
pub(super) fn exactly<'r>(
    repo: &'r gix::Repository,
    name: &str,
) -> gix::Result<Option<gix::Reference<'r>>> {
    Ok(repo
        .try_find_reference(name)?
        .filter(|r| !name.starts_with("refs/") || r.name().as_bstr() == name.as_bytes()))
}

/// Names and targets of the direct refs under `prefix` (which ends in `/`), sorted by name.
pub(super) fn list(
    repo: &gix::Repository,
    format: RefFormat,
    prefix: &str,
) -> Result<Vec<(String, gix::ObjectId)>> {
    let mut out = match format {
        RefFormat::Files => {
            let platform = repo
                .references()
                .context(|| "could not list references".into())?;
            let iter = platform
                .prefixed(prefix)
                .context(|| format!("could not list references under {prefix}"))?;
            let mut out = Vec::new();
            for r in iter {
                let r = r.map_err(|e| {
                    Error::internal(format!("could not read a reference under {prefix}: {e}"))
                })?;
                if let Some(id) = r.target().try_id() {
                    out.push((
                        r.name().as_bstr().to_str_lossy().into_owned(),
                        id.to_owned(),
                    ));
                }
            }
            out
        }
        RefFormat::Reftable => list_reftable(repo, &[prefix])?,
    };
    out.sort();
    Ok(out)
}

/// The ref `name` points to when it is symbolic (one hop), `None` when it is direct or absent.
pub(super) fn symbolic_target(
    repo: &gix::Repository,
    format: RefFormat,
    name: &str,
) -> Result<Option<String>> {
    match format {
        RefFormat::Files => {
            let reference = exactly(repo, name).context(|| format!("could not read {name}"))?;
            Ok(match reference.as_ref().map(|r| r.target()) {
                Some(gix::refs::TargetRef::Symbolic(next)) => Some(next.as_bstr().to_string()),
                _ => None,
            })
        }
        RefFormat::Reftable => git_line(repo, &["symbolic-ref", "-q", "--no-recurse", name]),
    }
}

/// The first of the values the ref `name` had, newest first, as its reflog records them (each
/// entry's new value, then its old one; null values skipped), that `pick` accepts; `pick` sees
/// at most `limit` values. `None` when there is no reflog or nothing in it is picked.
///
/// gix reads a files-backend reflog (`logs/<name>`, from its end). A reftable stack keeps the
/// reflogs in its tables, which gix cannot read: there git resolves `name@{n}` (the `n`th
/// entry's new value), one entry at a time, so a caller that picks the first value asks once.
pub(super) fn find_in_reflog(
    repo: &gix::Repository,
    format: RefFormat,
    name: &str,
    limit: usize,
    mut pick: impl FnMut(gix::ObjectId) -> bool,
) -> Option<gix::ObjectId> {
    match format {
        RefFormat::Files => {
            let reference = exactly(repo, name).ok()??;
            let mut log = reference.log_iter();
            let lines = log.rev().ok()??;
            lines
                .filter_map(|line| line.ok())
                .flat_map(|line| [line.new_oid, line.previous_oid])
                .filter(|id| !id.is_null())
                .take(limit)
                .find(|id| pick(*id))
        }
        RefFormat::Reftable => (0..)
            .map_while(|n| rev_parse(repo, &format!("{name}@{{{n}}}")).ok().flatten())
            .filter(|id| !id.is_null())
            .take(limit)
            .find(|id| pick(*id)),
    }
}

/// Resolve a revision expression with git (reftable only: gix resolves through its own ref
/// store, which cannot see a reftable stack). `None` when git cannot resolve it.
pub(super) fn rev_parse(repo: &gix::Repository, rev: &str) -> Result<Option<gix::ObjectId>> {
    git_line(
        repo,
        &["rev-parse", "-q", "--verify", "--end-of-options", rev],
    )?
    .map(|hex| parse_oid(repo, &hex))
    .transpose()
}

/// One long-lived `git cat-file --batch-check` per store, started on the first single-ref read
/// of a reftable repository: a command reads a handful of refs, and one process for all of them
/// costs one start instead of one each. git reloads the stack on every lookup when it changed,
/// so the reader sees writes made after it started (ours and anyone's).
#[derive(Default)]
pub struct Reader {
    process: std::sync::Mutex<Option<ReaderProcess>>,
    /// `refs/…` names found with no look-alike: asked again, they are asked alone.
    confirmed: std::sync::Mutex<std::collections::HashSet<String>>,
}

struct ReaderProcess {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

/// What git's revision lookup tries after a full name `%s` it does not find (its
/// `ref_rev_parse_rules`, less the name itself).
const LOOK_ALIKES: [&str; 5] = [
    "refs/%s",
    "refs/tags/%s",
    "refs/heads/%s",
    "refs/remotes/%s",
    "refs/remotes/%s/HEAD",
];

impl Reader {
    /// The value of the ref `name` (a full name under `refs/`, or `HEAD` of the reader's
    /// worktree): `None` when git answers `missing` (absent, unborn, or at a missing object),
    /// and for a `refs/…` name also when git could have found a look-alike in its place.
    ///
    /// `cat-file` resolves a revision, so a `refs/…` name that is absent is tried again as
    /// `refs/tags/<name>`, `refs/heads/<name>` and so on: a tag called `refs/notes/…`, which
    /// any remote can hand out, would be read as our notes. Those names are asked in the same
    /// round trip, and only when git finds none of them is the answer `name`'s own; otherwise
    /// `None` sends the caller to the exact `for-each-ref`. A name found with no look-alike is
    /// asked alone for the rest of the command: while it exists, git's lookup finds it first.
    fn resolve(&self, repo: &gix::Repository, name: &str) -> Result<Option<gix::ObjectId>> {
        if !name.starts_with("refs/") || self.confirmed().contains(name) {
            return Ok(self.ask(repo, &[name])?[0]);
        }
        let mut names = vec![name.to_string()];
        names.extend(LOOK_ALIKES.iter().map(|rule| rule.replace("%s", name)));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let answers = self.ask(repo, &names)?;
        Ok(match answers.split_first() {
            Some((Some(own), others)) if others.iter().all(Option::is_none) => {
                self.confirmed().insert(name.to_string());
                Some(*own)
            }
            _ => None,
        })
    }

    fn confirmed(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.confirmed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `cat-file`'s answer for each of `names`, in one round trip.
    fn ask(&self, repo: &gix::Repository, names: &[&str]) -> Result<Vec<Option<gix::ObjectId>>> {
        use std::io::{BufRead, Write};
        let mut guard = self
            .process
            .lock()
            .map_err(|_| Error::internal("the ref reader was poisoned by a panic"))?;
        if guard.is_none() {
            let args = git_cli::argv(["cat-file", "--batch-check=%(objectname)"]);
            let mut child = git_cli::spawn_git_dir(repo, &args)?;
            let stdin = child.stdin.take();
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| Error::internal("git cat-file has no stdout"))?;
            *guard = Some(ReaderProcess {
                child,
                stdin,
                stdout: std::io::BufReader::new(stdout),
            });
        }
        let process = guard.as_mut().expect("started above");
        let failed = |e: std::io::Error| Error::internal(format!("git cat-file failed: {e}"));
        let stdin = process
            .stdin
            .as_mut()
            .ok_or_else(|| Error::internal("git cat-file was closed"))?;
        let lines: String = names.iter().map(|name| format!("{name}\n")).collect();
        stdin
            .write_all(lines.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(failed)?;
        // Every answer is read before any is parsed, so the next ask starts at its own.
        let mut answers = Vec::with_capacity(names.len());
        for name in names {
            let mut answer = String::new();
            if process.stdout.read_line(&mut answer).map_err(failed)? == 0 {
                // git went away: forget it, the next read starts another.
                *guard = None;
                return Err(Error::internal(format!(
                    "git cat-file ended while reading {name}"
                )));
            }
            answers.push(answer);
        }
        answers
            .iter()
            .map(|answer| {
                let answer = answer.trim_end();
                match answer.ends_with(" missing") {
                    true => Ok(None),
                    false => parse_oid(repo, answer).map(Some),
                }
            })
            .collect()
    }
}

impl Drop for ReaderProcess {
    fn drop(&mut self) {
        // End of input: git exits.
        self.stdin.take();
        let _ = self.child.wait();
    }
}

/// Direct refs matching any of the `for-each-ref` patterns `patterns` (each matches a ref of
/// that name and the refs below it, whole path components only), unsorted, from one `git`.
pub(super) fn list_reftable(
    repo: &gix::Repository,
    patterns: &[&str],
) -> Result<Vec<(String, gix::ObjectId)>> {
    Ok(for_each_ref(repo, patterns)?
        .into_iter()
        .filter_map(|(name, id)| Some((name, id?)))
        .collect())
}

/// Every ref matching `patterns` as [`list_reftable`] lists them, symbolic ones too (`None`).
pub(super) fn for_each_ref(
    repo: &gix::Repository,
    patterns: &[&str],
) -> Result<Vec<(String, Option<gix::ObjectId>)>> {
    let mut args = vec![
        "for-each-ref",
        "--format=%(objectname) %(symref) %(refname)",
    ];
    args.extend_from_slice(patterns);
    let out = git(repo, &args)?;
    if !out.success() {
        return Err(Error::internal(format!(
            "git for-each-ref {} failed: {}",
            patterns.join(" "),
            out.stderr_tail()
        )));
    }
    let mut refs = Vec::new();
    for line in out.stdout.lines() {
        // `<oid> <symref> <name>`: a direct ref has an empty symref, so two spaces.
        let Some((hex, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((symref, name)) = rest.split_once(' ') else {
            continue;
        };
        let id = match symref {
            "" => Some(parse_oid(repo, hex)?),
            _ => None,
        };
        refs.push((name.to_string(), id));
    }
    Ok(refs)
}

/// Run git on `repo` and return its trimmed first line of output when it succeeded, `None` when
/// it exited 1 or 128 without output (`-q` lookups of something absent).
fn git_line(repo: &gix::Repository, args: &[&str]) -> Result<Option<String>> {
    let out = git(repo, args)?;
    if out.success() {
        return Ok(out
            .stdout
            .lines()
            .next()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty()));
    }
    if out.stderr.trim().is_empty() || args.first() == Some(&"rev-parse") {
        return Ok(None);
    }
    Err(Error::internal(format!(
        "git {} failed: {}",
        args.join(" "),
        out.stderr_tail()
    )))
}

fn git(repo: &gix::Repository, args: &[&str]) -> Result<git_cli::GitOutput> {
    let args: Vec<OsString> = git_cli::argv(args.iter().copied());
    git_cli::run_git_dir(repo, &args)
}

fn parse_oid(repo: &gix::Repository, hex: &str) -> Result<gix::ObjectId> {
    let id = gix::ObjectId::from_hex(hex.trim().as_bytes())
        .context(|| format!("git printed {hex:?}, not an object id"))?;
    if id.kind() != repo.object_hash() {
        return Err(Error::internal(format!(
            "git printed the {} id {id} in a {} repository",
            id.kind(),
            repo.object_hash()
        )));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::head;
    use crate::store::{test_git as git, test_git_command, test_repo as repo};

    /// HEAD's branch and value, read once each: what `git symbolic-ref HEAD` and
    /// `git rev-parse HEAD` say, on a branch, detached, unborn, and through a symbolic branch.
    #[test]
    fn head_is_what_git_says_it_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let git_says = |args: &[&str]| {
            let out = test_git_command(home, &path, args).output().expect("git");
            let text = String::from_utf8(out.stdout).expect("utf-8");
            Some(text.trim().to_string()).filter(|t| out.status.success() && !t.is_empty())
        };
        git(
            home,
            &path,
            &["symbolic-ref", "refs/heads/alias", "refs/heads/main"],
        );
        let cases: [&[&str]; 4] = [
            &["symbolic-ref", "HEAD", "refs/heads/main"],
            &["checkout", "-q", "--detach"],
            &["symbolic-ref", "HEAD", "refs/heads/unborn"],
            &["symbolic-ref", "HEAD", "refs/heads/alias"],
        ];
        for case in cases {
            git(home, &path, case);
            let repo = gix::open_opts(&path, gix::open::Options::isolated()).expect("open");
            let got = head(&repo).expect("head");
            assert_eq!(
                got.branch,
                git_says(&["symbolic-ref", "-q", "--no-recurse", "HEAD"]),
                "{case:?}"
            );
            assert_eq!(
                got.id.map(|id| id.to_string()),
                git_says(&["rev-parse", "-q", "--verify", "HEAD"]),
                "{case:?}"
            );
        }
    }
}
