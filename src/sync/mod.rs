//! Sharing runs and evidence through any git remote: `init`, `sync`, and remote promotion.
//!
//! A sync round is: fetch the remote's ledgers and notes into tracking namespaces
//! ([`fetch`]); union-merge its notes into ours ([`notes_merge`]); create, fast-forward, leave or
//! report each ledger ([`ledgers`]); write all of our own ref changes in one compare-and-swap
//! transaction; then push everything the remote lacks in one atomic push whose every ref carries
//! a lease on the value we fetched ([`push`]).
//!
//! Failure model: our refs only ever move forward to commits that contain theirs, so a round
//! that stops anywhere leaves a state the next round continues from. A push whose lease no
//! longer holds changed nothing on the remote (atomic); the round starts again, up to
//! [`MAX_ROUNDS`] times. The remote's history is never rewritten and no record is dropped: a
//! ledger two machines moved apart is reported and left alone on both sides.

pub mod archives;
pub mod chunks;
pub mod init;
pub mod ledgers;
pub mod remote_promote;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::store::backoff::REMOTE_ROUNDS;
use crate::store::tx::{self, Cas, TxError};
use crate::store::Store;

pub use crate::store::remote::{
    fetch, notes_merge, plan_notes, push, record_pushed_in_tracking, ser_oid, ser_opt_oid,
};
use archives::{ArchiveAction, ArchiveStep};
use fetch::Tracking;
use ledgers::{LedgerAction, LedgerStep};
use notes_merge::{NotesAction, NotesStep};
use push::{PushRef, PushResult, PushedRef};

/// How many fetch–merge–push rounds sync tries before it gives up on a remote that keeps moving.
pub const MAX_ROUNDS: u32 = 8;

/// How a sync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncOutcome {
    /// Both sides hold everything.
    Complete,
    /// Everything else is shared, but some runs' ledgers diverged (exit 4).
    Diverged,
    /// The remote kept moving for [`MAX_ROUNDS`] rounds (exit 4).
    GaveUp,
    /// The remote's hooks declined the push (exit 1).
    Declined,
}

/// A tracking ref the fetch moved.
#[derive(Debug, Clone, Serialize)]
pub struct FetchedRef {
    #[serde(rename = "ref")]
    pub name: String,
    #[serde(serialize_with = "ser_opt_oid")]
    pub old: Option<gix::ObjectId>,
    #[serde(serialize_with = "ser_opt_oid")]
    pub new: Option<gix::ObjectId>,
}

/// What happened to the ledgers, by run id.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LedgersReport {
    pub created: Vec<String>,
    pub fast_forwarded: Vec<String>,
    /// Ours was ahead of the remote's: left as it is, and pushed.
    pub left: Vec<String>,
    /// Only we had the run: pushed.
    pub published: Vec<String>,
    pub diverged: Vec<LedgerStep>,
    pub ignored: Vec<LedgerStep>,
    pub up_to_date: usize,
}

/// Everything a sync did.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    pub remote: String,
    pub outcome: SyncOutcome,
    pub rounds: u32,
    pub fetched: Vec<FetchedRef>,
    /// Each notes ref that changed on either side.
    pub notes: Vec<NotesStep>,
    pub ledgers: LedgersReport,
    /// Each archive month that changed on either side.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<ArchiveStep>,
    /// Runs one side archived that the other still has as a live ledger at the same (or an
    /// earlier) tip: neither created here nor pushed back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archived_runs: Vec<String>,
    /// The refs of the last round's pushes (successful or not).
    pub pushed: Vec<PushedRef>,
    /// How many `git push` processes the sync made: a round pushes in chunks of at most
    /// `tabellio.syncPushBytes` of new objects ([`chunks`]).
    pub pushes: u32,
    /// What the remote said when it declined.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remote_messages: Vec<String>,
    /// How long it took, in milliseconds, over every round.
    pub took: SyncTimes,
}

/// Where the time of a sync went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SyncTimes {
    /// `git fetch` of the tracking namespaces.
    pub fetch_ms: u64,
    /// Planning and the local compare-and-swap transaction (merges, ledgers, archive).
    pub merge_ms: u64,
    /// `git push` (every batch).
    pub push_ms: u64,
    pub total_ms: u64,
}

/// The milliseconds since `since`, added to `total`.
fn add_ms(total: &mut u64, since: std::time::Instant) {
    *total += since.elapsed().as_millis() as u64;
}

impl SyncReport {
    fn new(remote: &str) -> Self {
        SyncReport {
            remote: remote.to_string(),
            outcome: SyncOutcome::Complete,
            rounds: 0,
            fetched: Vec::new(),
            notes: Vec::new(),
            ledgers: LedgersReport::default(),
            archives: Vec::new(),
            archived_runs: Vec::new(),
            pushed: Vec::new(),
            pushes: 0,
            remote_messages: Vec::new(),
            took: SyncTimes::default(),
        }
    }

    fn record_fetch(
        &mut self,
        before: &BTreeMap<String, gix::ObjectId>,
        after: &BTreeMap<String, gix::ObjectId>,
    ) {
        for name in before.keys().chain(after.keys()) {
            let (old, new) = (before.get(name).copied(), after.get(name).copied());
            if old == new {
                continue;
            }
            match self.fetched.iter_mut().find(|f| &f.name == name) {
                Some(f) => f.new = new,
                None => self.fetched.push(FetchedRef {
                    name: name.clone(),
                    old,
                    new,
                }),
            }
        }
        self.fetched.retain(|f| f.old != f.new);
    }

    /// What a round wrote locally (it stays written whatever the push does).
    fn record_local(&mut self, notes: &[NotesStep], ledgers: &[LedgerStep]) {
        for step in notes.iter().filter(|s| {
            matches!(
                s.action,
                NotesAction::Created | NotesAction::FastForwarded | NotesAction::Merged
            )
        }) {
            self.notes.push(step.clone());
        }
        for step in ledgers {
            let list = match step.action {
                LedgerAction::Created => &mut self.ledgers.created,
                LedgerAction::FastForwarded => &mut self.ledgers.fast_forwarded,
                _ => continue,
            };
            if !list.contains(&step.run) {
                list.push(step.run.clone());
            }
        }
    }

    /// The final round: what was pushed, what is left diverged.
    fn record_final(&mut self, notes: &[NotesStep], ledgers: &[LedgerStep], pushed: bool) {
        if pushed {
            for step in notes
                .iter()
                .filter(|s| matches!(s.action, NotesAction::Ahead | NotesAction::LocalOnly))
            {
                self.notes.push(step.clone());
            }
        }
        for step in ledgers {
            match step.action {
                LedgerAction::Left if pushed => self.ledgers.left.push(step.run.clone()),
                LedgerAction::LocalOnly if pushed => self.ledgers.published.push(step.run.clone()),
                LedgerAction::Diverged => self.ledgers.diverged.push(step.clone()),
                LedgerAction::Ignored => self.ledgers.ignored.push(step.clone()),
                LedgerAction::UpToDate => self.ledgers.up_to_date += 1,
                _ => {}
            }
        }
    }
}

/// The plan of one round: every notes ref, every ledger and every archive month, from our refs
/// and the tracking refs.
pub struct RoundPlan {
    pub notes: Vec<NotesStep>,
    pub ledgers: Vec<LedgerStep>,
    pub archives: Vec<ArchiveStep>,
    /// The archive index brought up to date with the months as the round leaves them.
    pub archive_index: Option<Cas>,
    /// Runs left out of the ledger plan because one side archived them.
    pub archived_runs: Vec<String>,
}

pub fn plan_round(store: &Store, tracking: &Tracking, remote: &str) -> Result<RoundPlan> {
    let notes = plan_notes(store, tracking, remote)?;
    let mut local_runs: BTreeMap<String, gix::ObjectId> =
        store.list_ledgers()?.into_iter().collect();
    let mut remote_runs = tracking.runs.clone();
    // A run archived on one side and live on the other at the same or an earlier tip is not
    // brought back to life: not created here, not pushed there. Its archive travels instead.
    let mut archived_runs = Vec::new();
    let only_remote: Vec<(String, gix::ObjectId)> = remote_runs
        .iter()
        .filter(|(id, _)| !local_runs.contains_key(*id))
        .map(|(id, tip)| (id.clone(), *tip))
        .collect();
    for id in archived_at_or_after(store, crate::store::ledger::archive::PREFIX, &only_remote)? {
        remote_runs.remove(&id);
        archived_runs.push(id);
    }
    let tracking_archive = fetch::tracking_archive_prefix(remote);
    let only_local: Vec<(String, gix::ObjectId)> = local_runs
        .iter()
        .filter(|(id, _)| !remote_runs.contains_key(*id) && !tracking.runs.contains_key(*id))
        .map(|(id, tip)| (id.clone(), *tip))
        .collect();
    for id in archived_at_or_after(store, &tracking_archive, &only_local)? {
        local_runs.remove(&id);
        archived_runs.push(id);
    }
    let ledgers = ledgers::plan(store, &local_runs, &remote_runs)?;
    let mut months = store.archive_months()?;
    let archives = archives::plan(store, remote, &months, &tracking.archives)?;
    for step in &archives {
        if let Some(new) = step.new {
            months.insert(step.month.clone(), new);
        }
    }
    let archive_index = store.archive_index_update(
        &months,
        &format!("tabellio: sync with {remote}: archive index"),
    )?;
    archived_runs.sort();
    Ok(RoundPlan {
        notes,
        ledgers,
        archives,
        archive_index,
        archived_runs,
    })
}

/// The runs of `runs` (id, tip) that the archive refs under `prefix` hold with a ledger that
/// contains their tip (all looked up at once: a thousand new runs read each bucket once).
fn archived_at_or_after(
    store: &Store,
    prefix: &str,
    runs: &[(String, gix::ObjectId)],
) -> Result<Vec<String>> {
    let ids: Vec<&str> = runs.iter().map(|(id, _)| id.as_str()).collect();
    let found = store.find_archived_among_under(prefix, &ids)?;
    let mut out = Vec::new();
    for (id, tip) in runs {
        let Some(archived) = found.get(id) else {
            continue;
        };
        let archived = archived.ledger_tip()?;
        if archived == *tip || store.is_ancestor(*tip, archived).unwrap_or(false) {
            out.push(id.clone());
        }
    }
    Ok(out)
}

pub fn sync(store: &Store, remote: Option<&str>) -> Result<SyncReport> {
    let started = std::time::Instant::now();
    let mut report = sync_rounds(store, remote)?;
    report.took.total_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

fn sync_rounds(store: &Store, remote: Option<&str>) -> Result<SyncReport> {
    let remote = match remote {
        Some(r) => r.to_string(),
        None => fetch::default_remote(store)?,
    };
    fetch::check_remote(store, &remote)?;
    let mut report = SyncReport::new(&remote);
    let message = format!("tabellio: sync with {remote}");
    for round in 1..=MAX_ROUNDS {
        report.rounds = round;
        let before = Tracking::read(store, &remote)?.by_ref_name(&remote);
        let fetching = std::time::Instant::now();
        fetch::fetch(store, &remote)?;
        add_ms(&mut report.took.fetch_ms, fetching);
        let merging = std::time::Instant::now();
        let tracking = Tracking::read(store, &remote)?;
        report.record_fetch(&before, &tracking.by_ref_name(&remote));

        let RoundPlan {
            notes,
            ledgers,
            archives,
            archive_index,
            archived_runs,
        } = plan_round(store, &tracking, &remote)?;
        // The queue's entries travel too (created only; removed where their run landed).
        let (queue_edits, queue_pushes) =
            crate::store::queue::plan_sync(store, &remote, &tracking.runs, &message)?;
        let edits: Vec<Cas> = notes
            .iter()
            .filter_map(|s| s.local_update(&message))
            .chain(archives.iter().filter_map(|s| s.local_update(&message)))
            .chain(archive_index)
            .chain(ledgers.iter().filter_map(|s| s.local_update(&message)))
            .chain(queue_edits)
            .collect();
        if !edits.is_empty() {
            match tx::apply(store, &edits) {
                Ok(()) => {}
                // A local command wrote a ledger or notes meanwhile: plan again from there.
                Err(TxError::Moved { .. } | TxError::Locked { .. }) if round < MAX_ROUNDS => {
                    add_ms(&mut report.took.merge_ms, merging);
                    REMOTE_ROUNDS.sleep(round);
                    continue;
                }
                Err(e) => return Err(e.into_error()),
            }
        }
        report.record_local(&notes, &ledgers);
        report.archives = archives
            .iter()
            .filter(|s| s.action != ArchiveAction::UpToDate)
            .cloned()
            .collect();
        report.archived_runs = archived_runs;

        let pushes: Vec<PushRef> = notes
            .iter()
            .filter_map(NotesStep::push)
            .chain(archives.iter().filter_map(ArchiveStep::push))
            .chain(ledgers.iter().filter_map(LedgerStep::push))
            .chain(queue_pushes)
            .collect();
        add_ms(&mut report.took.merge_ms, merging);
        let pushing = std::time::Instant::now();
        let (pushed, chunks) = chunks::push_in_chunks(store, &remote, &pushes)?;
        add_ms(&mut report.took.push_ms, pushing);
        report.pushes += chunks;
        match pushed {
            PushResult::Pushed(refs) => {
                report.pushed = refs;
                report.record_final(&notes, &ledgers, true);
                report.outcome = if report.ledgers.diverged.is_empty() {
                    SyncOutcome::Complete
                } else {
                    SyncOutcome::Diverged
                };
                return Ok(report);
            }
            PushResult::LostRace(refs) => {
                report.pushed = refs;
                if round == MAX_ROUNDS {
                    report.record_final(&notes, &ledgers, false);
                } else {
                    REMOTE_ROUNDS.sleep(round);
                }
            }
            PushResult::Declined { refs, messages } => {
                report.pushed = refs;
                report.remote_messages = messages;
                report.record_final(&notes, &ledgers, false);
                report.outcome = SyncOutcome::Declined;
                return Ok(report);
            }
        }
    }
    report.outcome = SyncOutcome::GaveUp;
    Ok(report)
}
