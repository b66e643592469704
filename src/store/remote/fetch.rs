//! Step 1 of sync: bring the remote's ledgers and notes into the tracking namespaces.
//!
//! The remote's `refs/tabellio/runs/*` land in `refs/tabellio/remotes/<remote>/runs/*` and its
//! `refs/notes/tabellio/*` in `refs/notes/tabellio/remotes/<remote>/*`. Only tracking refs are
//! ever written by a fetch (forced, like `refs/remotes/*`: they mirror the remote); our own
//! ledgers and notes change only through the compare-and-swap merges that follow.

use std::collections::BTreeMap;

use gix::bstr::ByteSlice;

use crate::error::{Context, Error, Result};
use crate::store::ledger;
use crate::store::queue;
use crate::store::Store;

use crate::store::git_cli as git;

use super::failure::{self, Op};

/// Where our own notes live; every notes ref under it (but the tracking ones) is shared.
pub const NOTES_PREFIX: &str = "refs/notes/tabellio/";
/// The part of [`NOTES_PREFIX`] that holds the tracking namespaces of all remotes.
pub const NOTES_REMOTES: &str = "refs/notes/tabellio/remotes/";

/// `refs/tabellio/remotes/<remote>/runs/`
pub fn tracking_runs_prefix(remote: &str) -> String {
    format!("refs/tabellio/remotes/{remote}/runs/")
}

/// `refs/tabellio/remotes/<remote>/archive/`
pub fn tracking_archive_prefix(remote: &str) -> String {
    format!("refs/tabellio/remotes/{remote}/archive/")
}

/// `refs/notes/tabellio/remotes/<remote>/`
pub fn tracking_notes_prefix(remote: &str) -> String {
    format!("{NOTES_REMOTES}{remote}/")
}

/// The fetch refspecs of the tracking namespaces, as `init` configures them and `sync` passes
/// them. The negative refspec keeps a remote's own tracking notes (a mirror, a clone used as a
/// remote) from nesting into ours.
pub fn fetch_refspecs(remote: &str) -> Vec<String> {
    let mut out = vec![
        format!("+{}*:{}*", ledger::PREFIX, tracking_runs_prefix(remote)),
        format!(
            "+{}*:{}*",
            ledger::archive::PREFIX,
            tracking_archive_prefix(remote)
        ),
    ];
    out.extend(notes_refspecs(remote));
    out.push(format!(
        "+{}*:{}*",
        queue::PREFIX,
        queue::tracking_prefix(remote)
    ));
    out
}

/// The fetch refspecs of the remote's notes alone (into their tracking namespace), for a
/// reader that needs the evidence and none of the ledgers (a worker).
pub fn notes_refspecs(remote: &str) -> Vec<String> {
    vec![
        format!("+{NOTES_PREFIX}*:{}*", tracking_notes_prefix(remote)),
        format!("^{NOTES_REMOTES}*"),
    ]
}

/// Check that `remote` names a configured remote whose name can be part of a ref name.
pub fn check_remote(store: &Store, remote: &str) -> Result<()> {
    let valid = !remote.is_empty()
        && !remote.contains(['/', '\\', ':', '*', '?', '[', ' ', '~', '^'])
        && gix::refs::FullName::try_from(tracking_runs_prefix(remote) + "x").is_ok();
    if !valid {
        return Err(Error::usage(format!(
            "{remote:?} cannot be used as a remote name here"
        ))
        .hint("name a remote configured with `git remote add <name> <url>` (a URL is not enough: its refs are tracked under its name)"));
    }
    let snapshot = store.repo.config_snapshot();
    let has_url = snapshot
        .plumbing()
        .string_by("remote", Some(remote.as_bytes().as_bstr()), "url")
        .is_some();
    if !has_url {
        let known = remote_names(store);
        return Err(
            Error::not_found(format!("no remote named {remote:?}")).hint(if known.is_empty() {
                "this repository has no remotes: add one with `git remote add origin <url>`"
                    .to_string()
            } else {
                format!("configured remotes: {}", known.join(", "))
            }),
        );
    }
    Ok(())
}

/// The names of the configured remotes, sorted.
pub fn remote_names(store: &Store) -> Vec<String> {
    store
        .repo
        .remote_names()
        .into_iter()
        .map(|n| n.to_str_lossy().into_owned())
        .collect()
}

/// The remote to use when none is named: the only one, else `origin` (as `git fetch` does).
pub fn default_remote(store: &Store) -> Result<String> {
    store
        .repo
        .remote_default_name(gix::remote::Direction::Fetch)
        .map(|n| n.to_str_lossy().into_owned())
        .ok_or_else(|| {
            let known = remote_names(store);
            if known.is_empty() {
                Error::not_found("this repository has no remote to sync with")
                    .hint("add one with `git remote add origin <url>`")
            } else {
                Error::usage("several remotes and none is `origin`: which one?")
                    .hint(format!("name it: one of {}", known.join(", ")))
            }
        })
}

/// Run `git <args>`, the operation `op` with `remote`. When git fails, the error says what the
/// remote did ([`failure::error`]: refused, not there, unreachable), or else that `failed`, with
/// what git printed and the hint to try the command by hand.
fn talk_to_remote(
    store: &Store,
    args: &[std::ffi::OsString],
    remote: &str,
    op: Op,
    failed: &str,
) -> Result<git::GitOutput> {
    let out = git::run(store, args)?;
    if !out.success() {
        let said = out.stderr_tail();
        if let Some(err) = failure::error(remote, op, &out.stderr, &said) {
            return Err(err);
        }
        if let Some(locked) = local_lock_in_the_way(store, &out.stderr) {
            return Err(locked.into_error());
        }
        let command = match op {
            Op::LsRemote => "ls-remote",
            Op::Fetch | Op::Push => "fetch",
        };
        return Err(Error::internal(format!("{failed}: {said}")).hint(format!(
            "check that `git {command} {remote}` works (URL, network, credentials), then try again"
        )));
    }
    Ok(out)
}

/// The lock file in this repository that git said it could not create (`Unable to create
/// '<path>.lock': File exists`), when it is still there: another git process holds it, or a
/// killed one left it. Named with the way out, as every ref write of ours names its locks.
fn local_lock_in_the_way(store: &Store, said: &str) -> Option<crate::store::tx::TxError> {
    let (_, rest) = said.split_once("Unable to create '")?;
    let (path, _) = rest.split_once("': File exists")?;
    let lock = std::path::PathBuf::from(path);
    let common = std::fs::canonicalize(store.repo.common_dir()).ok()?;
    let held = std::fs::canonicalize(&lock).ok()?;
    let inside = held.strip_prefix(&common).ok()?;
    let name = inside.to_str()?.strip_suffix(".lock")?.to_string();
    Some(crate::store::tx::TxError::Locked { name, lock: held })
}

/// Fetch the remote's ledgers and notes into the tracking namespaces (the refspecs are passed
/// on the command line, so this works whether or not `init` configured them).
pub fn fetch(store: &Store, remote: &str) -> Result<()> {
    fetch_with(store, remote, &[])
}

/// [`fetch`], with `extra` refspecs fetched in the same round trip.
pub fn fetch_with(store: &Store, remote: &str, extra: &[String]) -> Result<()> {
    let mut refspecs = fetch_refspecs(remote);
    refspecs.extend(extra.iter().cloned());
    fetch_exactly(store, remote, &refspecs)
}

/// Fetch exactly `refspecs` from `remote` (pruning what they map that the remote no longer
/// has), retried on [`transient`] failures.
pub fn fetch_exactly(store: &Store, remote: &str, refspecs: &[String]) -> Result<()> {
    let mut args = git::argv([
        "fetch",
        "--quiet",
        "--no-tags",
        "--prune",
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        remote,
    ]);
    args.extend(git::argv(refspecs));
    let failed = format!("git fetch from {remote} failed");
    const ATTEMPTS: u32 = FETCH_ATTEMPTS;
    for attempt in 1..=ATTEMPTS {
        match talk_to_remote(store, &args, remote, Op::Fetch, &failed) {
            Ok(_) => break,
            Err(e) if attempt < ATTEMPTS && transient(&e.message) => {
                crate::store::backoff::REMOTE_ROUNDS.sleep(attempt);
            }
            Err(e) => return Err(e),
        }
    }
    // git may have rewritten packed-refs within the same clock tick as our last read; make
    // sure the next ref read sees what it wrote. A repository without a packed-refs file (a
    // fresh clone of an empty repository, `git init` + `git fetch`) has nothing to re-read.
    if store.repo.common_dir().join("packed-refs").exists() {
        store
            .repo
            .refs
            .force_refresh_packed_buffer()
            .context(|| "could not re-read packed-refs after the fetch".into())?;
    }
    Ok(())
}

/// How many times a fetch that failed for [`transient`] reasons is tried.
pub const FETCH_ATTEMPTS: u32 = 6;

/// Whether git's words say a fetch failed only because another of our processes worked in the
/// same clone at the same moment (a lander and a worker): a tracking ref the other just moved
/// could not be locked, or a temporary worktree the other was making or removing named an
/// object git could not see yet. That is no failure of the remote: fetch again.
pub fn transient(said: &str) -> bool {
    said.contains("cannot lock ref") || said.contains("did not send all necessary objects")
}

/// The current values of `refs` on the remote, by asking it (`git ls-remote`); absent refs are
/// missing from the map. Nothing is written.
pub fn ls_remote(store: &Store, remote: &str, refs: &[&str]) -> Result<BTreeMap<String, String>> {
    let mut args = git::argv(["ls-remote", "--quiet", remote]);
    args.extend(git::argv(refs.iter().copied()));
    let failed = format!("git ls-remote {remote} failed");
    let out = talk_to_remote(store, &args, remote, Op::LsRemote, &failed)?;
    let mut found = BTreeMap::new();
    for line in out.stdout.lines() {
        if let Some((oid, name)) = line.split_once('\t') {
            // ls-remote patterns match ref name tails; keep exact names only.
            if refs.contains(&name) {
                found.insert(name.to_string(), oid.to_string());
            }
        }
    }
    Ok(found)
}

/// The remote's ledgers and notes as the last fetch left them in the tracking namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracking {
    /// run id → the remote's ledger tip.
    pub runs: BTreeMap<String, gix::ObjectId>,
    /// Our notes ref (`refs/notes/tabellio/<name>`) → the remote's value of it.
    pub notes: BTreeMap<String, gix::ObjectId>,
    /// Archive month (`YYYY-MM`) → the remote's archive commit.
    pub archives: BTreeMap<String, gix::ObjectId>,
}

impl Tracking {
    pub fn read(store: &Store, remote: &str) -> Result<Tracking> {
        let runs_prefix = tracking_runs_prefix(remote);
        let runs = store
            .refs_under(&runs_prefix)?
            .into_iter()
            .map(|(name, id)| (name[runs_prefix.len()..].to_string(), id))
            .collect();
        let notes_prefix = tracking_notes_prefix(remote);
        let notes = store
            .refs_under(&notes_prefix)?
            .into_iter()
            .map(|(name, id)| (format!("{NOTES_PREFIX}{}", &name[notes_prefix.len()..]), id))
            .collect();
        let archive_prefix = tracking_archive_prefix(remote);
        let archives = store
            .refs_under(&archive_prefix)?
            .into_iter()
            .map(|(name, id)| (name[archive_prefix.len()..].to_string(), id))
            .collect();
        Ok(Tracking {
            runs,
            notes,
            archives,
        })
    }

    /// Every tracking ref with its value, by full name (for the report of what a fetch moved).
    pub fn by_ref_name(&self, remote: &str) -> BTreeMap<String, gix::ObjectId> {
        let mut out = BTreeMap::new();
        for (run, id) in &self.runs {
            out.insert(format!("{}{run}", tracking_runs_prefix(remote)), *id);
        }
        for (month, id) in &self.archives {
            out.insert(format!("{}{month}", tracking_archive_prefix(remote)), *id);
        }
        for (notes_ref, id) in &self.notes {
            let name = &notes_ref[NOTES_PREFIX.len()..];
            out.insert(format!("{}{name}", tracking_notes_prefix(remote)), *id);
        }
        out
    }
}

/// Our own notes refs: everything under `refs/notes/tabellio/` but the tracking namespaces.
pub fn local_notes(store: &Store) -> Result<BTreeMap<String, gix::ObjectId>> {
    Ok(store
        .refs_under(NOTES_PREFIX)?
        .into_iter()
        .filter(|(name, _)| !name.starts_with(NOTES_REMOTES))
        .collect())
}
