//! Evidence that is on the remote a refused commit came from.
//!
//! `git pull <remote> <branch>` (and `git fetch <remote> <branch>`) fetch only what the command
//! line names: the configured refspecs that bring the evidence notes into the tracking
//! namespace are skipped, and only the remote-tracking branch is updated along ("opportunistic
//! update"). When the merge then moves a protected branch, `reference-transaction` would find
//! no evidence and refuse — after git has already moved the index and the files. So before
//! refusing an update to a commit that a remote-tracking ref of `<remote>` points at, the hook
//! fetches `<remote>`'s evidence notes into their tracking ref
//! (`refs/notes/tabellio/remotes/<remote>/evidence`, which the gate reads) and judges again.
//!
//! The fetch is git's (transports and credentials are the user's set-up), bounded in time
//! ([`FETCH_LIMIT`]), never prompts, and writes only that tracking ref: not `FETCH_HEAD`, which
//! the `git pull` around us is reading.
//!
//! With reftable ref storage no ref can be written here: the update being judged holds the
//! lock of the whole stack. There the hook asks the remote for its notes tip (`ls-remote`),
//! fetches the objects without writing any ref (no destination, `--refmap=` so no
//! opportunistic update either), and judges with that notes commit read beside the others.

use std::time::Duration;

use super::{FromRemote, HookOutcome, RefUpdate};
use crate::run::current_branch as head_ref;
use crate::store::git_cli as git;
use crate::store::notes::EVIDENCE;
use crate::store::refs::RefFormat;
use crate::store::remote::fetch::{remote_names, tracking_notes_prefix};
use crate::store::Store;

/// How long the hook waits for one remote's evidence notes.
pub const FETCH_LIMIT: Duration = Duration::from_secs(10);

/// What fetching for the refused updates did.
#[derive(Debug, Default)]
pub(super) struct Fetched {
    /// The remotes whose evidence notes were fetched.
    pub remotes: Vec<String>,
    /// Notes commits fetched without a ref to hold them (reftable): `(what, tip)`, to be read
    /// beside the evidence notes.
    pub notes: Vec<(String, gix::ObjectId)>,
    pub warnings: Vec<String>,
}

/// Fetch the evidence notes of every remote that a refused commit came from, and mark the
/// refusals with their remote. `pending` is the whole transaction: a remote-tracking branch
/// it updates counts as already holding its new value.
pub(super) fn fetch_for_refused(
    store: &Store,
    out: &mut HookOutcome,
    pending: &[RefUpdate],
) -> Fetched {
    let mut fetched = Fetched::default();
    let mut tried = Vec::new();
    for remote in origins(store, out, pending) {
        if tried.contains(&remote) {
            continue;
        }
        tried.push(remote.clone());
        match fetch_evidence(store, &remote) {
            Ok(tip) => {
                fetched.notes.extend(tip);
                fetched.remotes.push(remote);
            }
            Err(why) => fetched.warnings.push(format!(
                "could not fetch the evidence notes from {remote}: {why}"
            )),
        }
    }
    mark_origins(store, out, pending, &fetched.remotes);
    fetched
}

/// Name, on each refusal for missing evidence, the remote its commit came from.
pub(super) fn mark_origins(
    store: &Store,
    out: &mut HookOutcome,
    pending: &[RefUpdate],
    fetched: &[String],
) {
    let head = head_ref(store);
    for refusal in out.refused.iter_mut().filter(|r| !r.missing.is_empty()) {
        refusal.from_remote = origin_of(store, &refusal.commit, pending).map(|remote| FromRemote {
            fetched: fetched.contains(&remote),
            checked_out: head.as_deref() == Some(refusal.refname.as_str()),
            remote,
        });
    }
}

/// The remotes the commits refused for missing evidence came from.
fn origins(store: &Store, out: &HookOutcome, pending: &[RefUpdate]) -> Vec<String> {
    out.refused
        .iter()
        .filter(|r| !r.missing.is_empty())
        .filter_map(|r| origin_of(store, &r.commit, pending))
        .collect()
}

/// The first remote (by name) with a remote-tracking branch at `commit`, as it is or as
/// `pending` sets it. Only the tip counts: what a pull or a fetch brings is the tip it names,
/// and finding a refused local commit in the history of every remote-tracking branch could
/// walk all of it.
fn origin_of(store: &Store, commit: &str, pending: &[RefUpdate]) -> Option<String> {
    let commit = gix::ObjectId::from_hex(commit.as_bytes()).ok()?;
    remote_names(store).into_iter().find(|remote| {
        let prefix = format!("refs/remotes/{remote}/");
        let updated = pending
            .iter()
            .filter(|u| u.name.starts_with(&prefix))
            .filter_map(|u| u.new);
        let present = store.refs_under(&prefix).unwrap_or_default();
        updated
            .chain(present.into_iter().map(|(_, tip)| tip))
            .any(|tip| tip == commit)
    })
}

/// `git fetch <remote> +<evidence>:<tracking evidence>`, bounded by [`FETCH_LIMIT`]. With
/// reftable, the objects only, and the fetched tip to read beside the evidence notes.
fn fetch_evidence(store: &Store, remote: &str) -> Result<Option<(String, gix::ObjectId)>, String> {
    if store.ref_format() == RefFormat::Reftable {
        return fetch_evidence_objects(store, remote).map(Some);
    }
    let refspec = format!("+{EVIDENCE}:{}evidence", tracking_notes_prefix(remote));
    bounded(store, &[FETCH, &[remote, &refspec]].concat()).map(|_| None)
}

/// `git fetch` as the hook runs it: quiet, no tags, no `FETCH_HEAD` (the `git pull` around us
/// reads it), no maintenance.
const FETCH: &[&str] = &[
    "fetch",
    "--quiet",
    "--no-tags",
    "--no-write-fetch-head",
    "--no-auto-maintenance",
];

/// The remote's evidence notes tip and its objects, without writing a ref.
fn fetch_evidence_objects(store: &Store, remote: &str) -> Result<(String, gix::ObjectId), String> {
    let listed = bounded(store, &["ls-remote", "--refs", remote, EVIDENCE])?;
    let tip = listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(_, name)| *name == EVIDENCE)
        .and_then(|(id, _)| gix::ObjectId::from_hex(id.as_bytes()).ok())
        .ok_or_else(|| format!("{remote} has no {EVIDENCE}"))?;
    bounded(store, &[FETCH, &["--refmap=", remote, EVIDENCE]].concat())?;
    // What the remote named must be what arrived, and a notes commit: otherwise it is a
    // warning, not a failure of the whole hook.
    if store.repo.find_commit(tip).is_err() {
        return Err(format!(
            "{remote}'s {EVIDENCE} at {tip} is not a commit that arrived"
        ));
    }
    Ok((format!("{EVIDENCE} of {remote}"), tip))
}

/// `git <args>` bounded by [`FETCH_LIMIT`]: its stdout, or why it failed.
fn bounded(store: &Store, args: &[&str]) -> Result<String, String> {
    match git::run_bounded(store, &git::argv(args.iter().copied()), FETCH_LIMIT) {
        Ok(run) if run.success() => Ok(run.stdout),
        Ok(run) if run.code.is_none() => {
            Err(format!("no answer within {} s", FETCH_LIMIT.as_secs()))
        }
        Ok(run) => Err(run.stderr_tail()),
        Err(e) => Err(e.message),
    }
}
