//! `gc [--archive-after <age>] [--dry-run]`: retention. Runs that ended (any terminal state)
//! longer ago than the age are archived: their ledgers folded into
//! `refs/tabellio/archive/<month>` ([`crate::store::ledger::archive`]), their run branches and
//! worktrees removed. Notes of commits nothing reaches any more are kept or pruned, as the
//! policy's `retention.notes` says.
//!
//! Failure model. Worktrees go first, each by a rename and then a delete
//! ([`crate::run::workspace::retire_worktree`]); then one compare-and-swap transaction moves
//! every archive ref and deletes the archived runs' branches and ledgers. With reftable that
//! transaction is all or nothing. With the files backend git's order holds (updates before
//! deletions), so a `gc` killed inside it leaves archive refs that already hold runs whose
//! ledger or branch still exists: the next `gc` finds each such ledger at exactly the tip its
//! entry names (and such a branch at exactly the recorded head) and deletes it. A renamed
//! worktree left behind is removed by the next `gc` too. Nothing is ever lost: a ledger ref
//! is deleted only in a transaction that also holds (or after one that did hold) its tip in an
//! archive commit's parents. Notes are pruned last, in their own transaction per notes ref,
//! retried like every notes write.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::archive::ArchivedRun;
use crate::model::policy::NotesRetention;
use crate::model::{time, RunState};
use crate::run::workspace::{retire_worktree, sweep_retired_worktrees};
use crate::run::Env;
use crate::store::ledger::{self, archive};
use crate::store::notes::{APPROVALS, CHECKPOINTS, EVIDENCE};
use crate::store::tx::{self, Cas, TxError};
use crate::store::{backoff, Store};

/// The age after which a run that ended is archived when neither `--archive-after` nor the
/// policy names one.
pub const DEFAULT_ARCHIVE_AFTER: &str = "90d";

/// What `gc` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// Overrides the policy's `retention.archive_after`.
    pub archive_after: Option<String>,
    /// Say what would be done; write nothing.
    pub dry_run: bool,
}

/// One run `gc` archived (or, with `--dry-run`, would archive).
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedByGc {
    pub run_id: String,
    pub state: RunState,
    pub ended_at: String,
    pub archive_ref: String,
    pub removed_worktree: Option<PathBuf>,
    pub deleted_branch: Option<String>,
}

/// A run that ended long enough ago and stays, and why.
#[derive(Debug, Clone, Serialize)]
pub struct KeptRun {
    pub run_id: String,
    pub reason: String,
}

/// What a killed `gc` had left and this one finished.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Finished {
    /// Ledger refs of runs already in the archive, deleted now.
    pub ledgers: Vec<String>,
    /// Branches of archived runs, deleted now.
    pub branches: Vec<String>,
    /// Worktrees whose removal was interrupted, removed now.
    pub worktrees: Vec<PathBuf>,
}

/// What happened to the notes of commits nothing reaches.
#[derive(Debug, Clone, Serialize)]
pub struct NotesOutcome {
    pub retention: NotesRetention,
    /// Notes removed (or, with `--dry-run`, that would be), per notes ref.
    pub pruned: BTreeMap<String, usize>,
    /// Why pruning was skipped, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GcOutcome {
    pub dry_run: bool,
    pub archive_after: String,
    /// Runs that ended at or before this time are archived.
    pub cutoff: String,
    pub archived: Vec<ArchivedByGc>,
    pub kept: Vec<KeptRun>,
    pub finished: Finished,
    pub notes: NotesOutcome,
    /// The multi-pack index over the repository's packs, kept current by every `gc` (`null`
    /// with `--dry-run`, without packs, or where git's own maintenance keeps it).
    pub multi_pack_index: Option<crate::store::multi_pack_index::Refreshed>,
}

/// A run chosen for the archive, with everything its transaction needs.
struct Chosen {
    entry: ArchivedRun,
    tip: gix::ObjectId,
    month: String,
    head: Option<gix::ObjectId>,
    worktree: Option<Worktree>,
}

enum Worktree {
    /// Clean, on the run branch: renamed, then removed.
    Clean(PathBuf),
    /// Unusable (an interrupted start): forgotten and removed.
    Broken(PathBuf),
}

pub fn gc(env: &Env, opts: &GcOptions) -> Result<GcOutcome> {
    let store = &env.store;
    let policy = head_policy(store)?;
    let retention = policy.and_then(|p| p.retention).unwrap_or_default();
    let archive_after = opts
        .archive_after
        .clone()
        .or(retention.archive_after.clone())
        .unwrap_or_else(|| DEFAULT_ARCHIVE_AFTER.to_string());
    let age = time::parse_age(&archive_after).map_err(|why| {
        Error::usage(format!("--archive-after: {why}"))
            .hint("e.g. `git tabellio gc --archive-after 90d` (s, h, d or w)")
    })?;
    let now = std::time::SystemTime::now();
    let now_text = time::rfc3339(now);
    let cutoff_secs = time::seconds_of(&now_text).expect("rfc3339 reads back") - age as i64;
    let cutoff = time::rfc3339(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(cutoff_secs.max(0) as u64),
    );

    let mut outcome = GcOutcome {
        dry_run: opts.dry_run,
        archive_after,
        cutoff,
        archived: Vec::new(),
        kept: Vec::new(),
        finished: Finished::default(),
        notes: NotesOutcome {
            retention: retention.notes,
            pruned: BTreeMap::new(),
            skipped: None,
        },
        multi_pack_index: None,
    };
    let live: Vec<(String, gix::ObjectId)> = store.list_ledgers()?;
    let (leftovers, chosen) = choose(env, &live, cutoff_secs, &now_text, &mut outcome)?;
    if opts.dry_run {
        outcome.archived = chosen.iter().map(reported).collect();
        outcome.notes.pruned = prune_notes(store, retention.notes, true, &mut outcome.notes)?;
        return Ok(outcome);
    }

    outcome.finished.worktrees = sweep_retired_worktrees(store)?;
    let mut ready = Vec::new();
    for c in chosen {
        match &c.worktree {
            Some(Worktree::Clean(path)) => retire_worktree(store, path, &c.entry.run_id)?,
            Some(Worktree::Broken(path)) => store.forget_broken_worktree(path)?,
            None => {}
        }
        ready.push(c);
    }
    for c in &ready {
        // A registration whose directory was deleted by hand still holds the branch.
        for stale in store.worktrees_of_branch(&c.entry.branch)? {
            store.prune_missing_worktree(&stale)?;
        }
    }
    let edits = transaction(store, &ready, &leftovers)?;
    refuse_held_locks(store, &edits)?;
    if !edits.is_empty() {
        tx::apply(store, &edits).map_err(TxError::into_error)?;
    }
    outcome.finished.ledgers = leftovers.ledgers.iter().map(|e| e.name.clone()).collect();
    outcome.finished.branches = leftovers.branches.iter().map(|e| e.name.clone()).collect();
    outcome.archived = ready.iter().map(reported).collect();
    outcome.notes.pruned = prune_notes(store, retention.notes, false, &mut outcome.notes)?;
    outcome.multi_pack_index = crate::store::multi_pack_index::refresh(store);
    Ok(outcome)
}

fn reported(c: &Chosen) -> ArchivedByGc {
    ArchivedByGc {
        run_id: c.entry.run_id.clone(),
        state: c.entry.state,
        ended_at: c.entry.updated_at.clone(),
        archive_ref: archive::ref_name(&c.month),
        removed_worktree: c.worktree.as_ref().map(|w| match w {
            Worktree::Clean(p) | Worktree::Broken(p) => p.clone(),
        }),
        deleted_branch: c.head.map(|_| c.entry.branch.clone()),
    }
}

/// The policy at the commit HEAD points at (a server's default branch), `None` without one.
fn head_policy(store: &Store) -> Result<Option<crate::model::Policy>> {
    let Ok(head) = store.head() else {
        return Ok(None);
    };
    match head.id {
        Some(id) => Ok(crate::store::policy::policy_at(store, id)?),
        None => Ok(None),
    }
}

/// The deletions a killed `gc` left undone.
#[derive(Default)]
struct Leftovers {
    ledgers: Vec<Cas>,
    branches: Vec<Cas>,
}

/// Every live run: a leftover of an earlier `gc` (its ledger already archived at this very
/// tip), one to archive now, one kept (and why), or one that is not due.
fn choose(
    env: &Env,
    live: &[(String, gix::ObjectId)],
    cutoff: i64,
    now: &str,
    outcome: &mut GcOutcome,
) -> Result<(Leftovers, Vec<Chosen>)> {
    let store = &env.store;
    let message = "tabellio: gc";
    let mut leftovers = Leftovers::default();
    let mut chosen = Vec::new();
    let live_ids: std::collections::HashSet<&str> =
        live.iter().map(|(id, _)| id.as_str()).collect();
    // Where each branch is checked out, read once (a repository may hold hundreds of runs).
    let mut checked_out: HashMap<String, Vec<PathBuf>> = HashMap::new();
    for (path, branch) in store.worktrees_with_branches()? {
        if let Some(branch) = branch {
            checked_out.entry(branch).or_default().push(path);
        }
    }
    let root = store.worktree_root()?;
    let ended: Vec<(&String, &gix::ObjectId, crate::model::RunRecord)> = live
        .iter()
        .filter_map(|(id, tip)| {
            let record = store.read_ledger_record(id, *tip).ok()?;
            record.state.is_terminal().then_some((id, tip, record))
        })
        .collect();
    // Which of them a killed gc archived already: looked up all at once.
    let ids: Vec<&str> = ended.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut archived = store.find_archived_among_under(archive::PREFIX, &ids)?;
    for (id, tip, record) in ended {
        if let Some(found) = archived.remove(id.as_str()) {
            if found.ledger_tip()? == *tip {
                if let Some(head) = recorded_head(store, &found.entry)? {
                    leftovers
                        .branches
                        .push(Cas::delete(&found.entry.branch, head, message));
                }
                leftovers
                    .ledgers
                    .push(Cas::delete(ledger::ref_name(id), *tip, message));
                continue;
            }
        }
        let Some(ended) = time::seconds_of(&record.updated_at) else {
            outcome.kept.push(KeptRun {
                run_id: id.clone(),
                reason: format!("its end time {:?} cannot be read", record.updated_at),
            });
            continue;
        };
        if ended > cutoff {
            continue;
        }
        let month = time::month_of(&record.updated_at)
            .expect("read above")
            .to_string();
        let usual = root.join(id);
        let mut worktree = None;
        let mut keep = |reason: String| {
            outcome.kept.push(KeptRun {
                run_id: id.clone(),
                reason,
            })
        };
        if let Some(other) = checked_out
            .get(&record.branch)
            .and_then(|paths| paths.iter().find(|p| p.as_path() != usual.as_path()))
        {
            keep(format!(
                "its branch {} is checked out in {}",
                record.branch,
                other.display()
            ));
            continue;
        }
        if std::fs::symlink_metadata(&usual).is_ok() {
            match worktree_to_remove(env, &usual, &record.branch) {
                Ok(w) => worktree = Some(w),
                Err(reason) => {
                    keep(reason);
                    continue;
                }
            }
        }
        let head = store.ref_target(&record.branch)?;
        let entry = ArchivedRun::of(&record, &tip.to_string(), head.map(|h| h.to_string()), now);
        chosen.push(Chosen {
            entry,
            tip: *tip,
            month,
            head,
            worktree,
        });
    }
    leftovers
        .branches
        .extend(orphaned_branches(store, &live_ids, message)?);
    Ok((leftovers, chosen))
}

/// The deletions of the branches of archived runs whose ledger is gone already (the deletions
/// of a killed gc ran in another order), each only at exactly the head the archive recorded.
fn orphaned_branches(
    store: &Store,
    live_ids: &std::collections::HashSet<&str>,
    message: &str,
) -> Result<Vec<Cas>> {
    let mut out = Vec::new();
    let branches: Vec<(String, gix::ObjectId)> = store
        .refs_under("refs/heads/tabellio/")?
        .into_iter()
        .filter(|(name, _)| {
            let id = &name["refs/heads/tabellio/".len()..];
            !live_ids.contains(id) && crate::model::ids::check_run_id(id).is_ok()
        })
        .collect();
    let ids: Vec<&str> = branches
        .iter()
        .map(|(name, _)| &name["refs/heads/tabellio/".len()..])
        .collect();
    let mut archived = store.find_archived_among_under(archive::PREFIX, &ids)?;
    for (name, head) in &branches {
        let (name, head) = (name.clone(), *head);
        let id = &name["refs/heads/tabellio/".len()..];
        if let Some(found) = archived.remove(id) {
            if found.entry.branch == name && recorded_head(store, &found.entry)? == Some(head) {
                out.push(Cas::delete(&name, head, message));
            }
        }
    }
    Ok(out)
}

/// The branch of an archived run, when it is still at the head the archive recorded.
fn recorded_head(store: &Store, entry: &ArchivedRun) -> Result<Option<gix::ObjectId>> {
    let Some(recorded) = &entry.head else {
        return Ok(None);
    };
    let now = store.ref_target(&entry.branch)?;
    let recorded = gix::ObjectId::from_hex(recorded.as_bytes()).ok();
    Ok(now.filter(|h| Some(*h) == recorded))
}

/// The run worktree at its usual place `path`, if `gc` may remove it; else why not.
fn worktree_to_remove(env: &Env, path: &Path, branch: &str) -> Result<Worktree, String> {
    let store = &env.store;
    if env.cwd.starts_with(path) {
        return Err(format!(
            "its worktree {} is where gc runs; run gc from the main worktree",
            path.display()
        ));
    }
    if crate::run::workspace::refuse_root_link(store).is_err() {
        return Err("the worktree root is reached through a symbolic link".into());
    }
    if crate::store::worktree::broken_reason(path).is_some() {
        return Ok(Worktree::Broken(path.to_path_buf()));
    }
    let state = store.inspect_own(path).map_err(|e| {
        format!(
            "its worktree {} cannot be read: {}",
            path.display(),
            e.message
        )
    })?;
    if state.branch.as_deref() != Some(branch) {
        return Err(format!(
            "its worktree {} has {} checked out, not the run branch",
            path.display(),
            state.branch.as_deref().unwrap_or("a detached HEAD")
        ));
    }
    if !state.is_clean() {
        return Err(format!(
            "its worktree {} has uncommitted changes; commit or remove them, or `git tabellio cleanup <run> --force`",
            path.display()
        ));
    }
    if let Some(admin) = crate::store::worktree::admin_dir(path) {
        if admin.join("locked").exists() {
            return Err(format!(
                "its worktree {} is locked (`git worktree unlock` it first)",
                path.display()
            ));
        }
    }
    Ok(Worktree::Clean(path.to_path_buf()))
}

/// The one transaction: each month's archive ref (compare-and-swap on the tip read), then the
/// branches, then the ledgers (so a files-backend commit killed half-way deletes ledgers last).
fn transaction(store: &Store, ready: &[Chosen], leftovers: &Leftovers) -> Result<Vec<Cas>> {
    let mut by_month: BTreeMap<&str, Vec<(ArchivedRun, gix::ObjectId)>> = BTreeMap::new();
    for c in ready {
        by_month
            .entry(c.month.as_str())
            .or_default()
            .push((c.entry.clone(), c.tip));
    }
    let mut edits = Vec::new();
    // Every month as the transaction leaves it: the index covers exactly those.
    let mut months = store.archive_months()?;
    for (month, runs) in by_month {
        let name = archive::ref_name(month);
        let old = store.ref_target(&name)?;
        let new = store.write_archive(month, old, &runs)?;
        months.insert(month.to_string(), new);
        edits.push(Cas::update(
            name,
            old,
            new,
            format!("tabellio: gc: archive {} runs", runs.len()),
        ));
    }
    // In the same transaction (an index left behind, by an older version or a cut transaction,
    // is brought up to date even when nothing else is archived).
    edits.extend(store.archive_index_update(&months, "tabellio: gc: archive index")?);
    edits.extend(leftovers.branches.iter().cloned());
    for c in ready {
        if let Some(head) = c.head {
            edits.push(Cas::delete(
                &c.entry.branch,
                head,
                format!("tabellio: gc {}", c.entry.run_id),
            ));
        }
    }
    edits.extend(leftovers.ledgers.iter().cloned());
    for c in ready {
        edits.push(Cas::delete(
            ledger::ref_name(&c.entry.run_id),
            c.tip,
            format!("tabellio: gc {}", c.entry.run_id),
        ));
    }
    Ok(edits)
}

/// Refuse (exit 4) when lock files are in the way of `edits`, naming them all at once: a `gc`
/// killed inside its transaction leaves one per ref it locked, and the repair is one `rm`.
fn refuse_held_locks(store: &Store, edits: &[Cas]) -> Result<()> {
    let mut locks: Vec<PathBuf> = Vec::new();
    for edit in edits {
        if let Some((_, lock)) = tx::held_lock(store, &[edit.name.as_str()]) {
            if !locks.contains(&lock) {
                locks.push(lock);
            }
        }
    }
    if locks.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = locks
        .iter()
        .map(|l| crate::error::shell_path(&std::fs::canonicalize(l).unwrap_or_else(|_| l.clone())))
        .collect();
    Err(Error::conflict(format!(
        "{} lock file{} in the way of gc: {}",
        locks.len(),
        if locks.len() == 1 { " is" } else { "s are" },
        shown.join(" ")
    ))
    .hint(format!(
        "another git process may be running; if none is, they were left by a killed process (an \
         interrupted gc): remove them with `rm {}` and run gc again",
        shown.join(" ")
    )))
}

/// How many times a lost race on a notes ref is re-read and pruned again.
const NOTES_RETRIES: u32 = 12;

/// Remove (or count, for a dry run) the notes of objects no ref reaches: neither a commit
/// reachable from a ref outside `refs/notes/` and `refs/tabellio/`, nor the tree of one.
fn prune_notes(
    store: &Store,
    retention: NotesRetention,
    dry_run: bool,
    out: &mut NotesOutcome,
) -> Result<BTreeMap<String, usize>> {
    let mut pruned = BTreeMap::new();
    if retention == NotesRetention::Keep {
        return Ok(pruned);
    }
    let mut tips: Vec<gix::ObjectId> = store
        .refs_under("refs/")?
        .into_iter()
        .filter(|(name, _)| !name.starts_with("refs/notes/") && !name.starts_with("refs/tabellio/"))
        .map(|(_, id)| id)
        .collect();
    if let Ok(head) = store.head() {
        tips.extend(head.id);
    }
    // Only commits (a tag is peeled; a ref at a tree or blob reaches no commit).
    let mut commits = Vec::new();
    for tip in tips {
        if let Ok(object) = store.repo.find_object(tip) {
            if let Ok(commit) = object.peel_to_commit() {
                commits.push(commit.id);
            }
        }
    }
    let reachable = match crate::store::ancestry::reachable_commits_and_trees(store, commits) {
        Ok(r) => r,
        Err(e) => {
            out.skipped = Some(format!(
                "the history could not be walked ({}); no note was pruned",
                e.message
            ));
            return Ok(pruned);
        }
    };
    for notes_ref in [EVIDENCE, CHECKPOINTS, APPROVALS] {
        let unreached: BTreeMap<gix::ObjectId, gix::ObjectId> = store
            .all_notes(notes_ref)?
            .into_iter()
            .filter(|(object, _)| !reachable.contains(object))
            .collect();
        if unreached.is_empty() {
            continue;
        }
        if dry_run {
            pruned.insert(notes_ref.to_string(), unreached.len());
            continue;
        }
        let message = "tabellio: gc: prune the notes of unreachable commits";
        let mut attempt = 0;
        loop {
            let (prepared, removed) =
                store.prepare_notes_removal(notes_ref, &unreached, message)?;
            if !prepared.changed {
                break;
            }
            let edit = Cas::update(notes_ref, prepared.previous, prepared.commit, message);
            match tx::apply(store, &[edit]) {
                Ok(()) => {
                    pruned.insert(notes_ref.to_string(), removed);
                    break;
                }
                Err(TxError::Moved { .. } | TxError::Locked { .. }) if attempt < NOTES_RETRIES => {
                    attempt += 1;
                    backoff::LOCAL_REFS.sleep(attempt);
                }
                Err(e) => return Err(e.into_error()),
            }
        }
    }
    Ok(pruned)
}
