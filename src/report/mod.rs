//! Pictures of runs for people: `log --graph` draws runs as lanes off their base in the style of
//! `git log --graph` ([`graph`]), `log --html` writes a self-contained page with the timeline,
//! each attempt's checks and output excerpts and the loop's iterations ([`html`]).
//!
//! Everything is read from the ledgers (each run's commit chain, oldest transition first) and,
//! for the page, the evidence notes; nothing is written to the repository. A timeline is derived
//! by comparing consecutive `run.json` copies, so it shows exactly the transitions the ledger
//! recorded, in the ledger's order (never re-sorted by clocks that two machines disagree on).

pub mod graph;
pub mod html;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::land::LandAttempt;
use crate::model::run::{Attempt, CheckpointEntry};
use crate::model::{RunRecord, RunState};
use crate::run::views::UnreadableRun;
use crate::run::{valid_run_id, Env};
use crate::store::ledger::Transition;

/// What happened to a run at one point of its ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// `start`: the base was frozen (the event's commit is the base commit).
    Start,
    Checkpoint,
    /// A `finish` (or loop) attempt; its `status` says passed or failed.
    Attempt,
    /// A landing `land` refused (a conflict, a failing stack).
    LandRefused,
    /// The run was moved onto its target's newer tip after a refusal (`reopen`).
    Reopened,
    /// `rewind`: the run went back to a checkpoint (the event's commit is the checkpoint's).
    Rewind,
    /// `land` replayed or squashed the run onto the target's tip.
    Restack,
    /// The target moved to the run's commit (`promote`, or `land` for a restacked run).
    Promoted,
    Abandoned,
    Blocked,
    LoopStarted,
    LoopStopped,
    /// Any other change of state (the ledger commit's message says which command).
    State,
}

/// One point on a run's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub kind: EventKind,
    /// The commit the event is about (base, checkpointed, attempted, landed), when there is one.
    pub commit: Option<String>,
    /// `passed`/`failed` for attempts, `null` otherwise.
    pub status: Option<String>,
    /// When, as recorded (RFC 3339 UTC).
    pub at: String,
    /// One line for a person: `attempt 2 passed: test passed`.
    pub text: String,
}

/// A run and its timeline, oldest event first.
#[derive(Debug, Clone, Serialize)]
pub struct RunTimeline {
    /// `run.json` at the ledger tip.
    pub run: RunRecord,
    pub events: Vec<Event>,
}

/// The runs to draw, and the ledgers that could not be read when every run was asked for.
#[derive(Debug)]
pub struct Timelines {
    pub runs: Vec<RunTimeline>,
    /// Ledgers of every-run requests that could not be read (an unknown `run.json` schema from
    /// a newer teammate, a hand-edited ledger): reported, not fatal, as `list` does.
    pub unreadable: Vec<UnreadableRun>,
}

/// The timelines of `runs` in the order given, or of every run (newest first, then by id) when
/// `runs` is empty. A named run that is missing or unreadable fails (exit 5, or the ledger's
/// own error) before anything is drawn.
pub fn timelines(env: &Env, runs: &[String]) -> Result<Timelines> {
    let mut out = Timelines {
        runs: Vec::new(),
        unreadable: Vec::new(),
    };
    if runs.is_empty() {
        for (id, _) in env.store.list_ledgers()? {
            match timeline(env, &id) {
                Ok(t) => out.runs.push(t),
                Err(e) => out
                    .unreadable
                    .push(UnreadableRun::of(&env.store, id, e.message)),
            }
        }
        out.runs.sort_by(|a, b| {
            b.run
                .created_at
                .cmp(&a.run.created_at)
                .then_with(|| a.run.run_id.cmp(&b.run.run_id))
        });
        return Ok(out);
    }
    for id in runs {
        valid_run_id(id)?;
    }
    for id in runs {
        out.runs.push(timeline(env, id)?);
    }
    Ok(out)
}

/// The timeline of run `id` from its ledger.
fn timeline(env: &Env, id: &str) -> Result<RunTimeline> {
    let found = crate::run::find_readable(&env.store, id)?;
    let history = env.store.ledger_history_from(found.ledger.tip)?;
    timeline_of(&history).ok_or_else(|| {
        Error::not_found(format!("no run {id:?} in this repository"))
            .hint("`git tabellio list` shows the runs there are")
    })
}

/// The timeline of one ledger history (oldest transition first); `None` when it is empty.
pub fn timeline_of(history: &[Transition]) -> Option<RunTimeline> {
    let run = history.last()?.record.clone();
    let mut events = Vec::new();
    let mut previous: Option<&RunRecord> = None;
    for t in history {
        events_between(previous, &t.record, &t.message, &mut events);
        previous = Some(&t.record);
    }
    Some(RunTimeline { run, events })
}

/// The events that turned `before` (nothing, for the first ledger commit) into `after`.
fn events_between(
    before: Option<&RunRecord>,
    after: &RunRecord,
    message: &str,
    out: &mut Vec<Event>,
) {
    let first = out.len();
    if before.is_none() {
        out.push(start_event(after));
    }
    let count = |f: fn(&RunRecord) -> usize| before.map_or(0, f);
    for (i, c) in after
        .checkpoints
        .iter()
        .enumerate()
        .skip(count(|r| r.checkpoints.len()))
    {
        out.push(checkpoint_event(i + 1, c));
    }
    out.extend(rewind_event(before, after));
    for a in after.attempts.iter().skip(count(|r| r.attempts.len())) {
        out.push(attempt_event(a));
    }
    for l in after
        .land_attempts
        .iter()
        .skip(count(|r| r.land_attempts.len()))
    {
        out.push(land_refused_event(l));
    }
    for r in after.reopens.iter().skip(count(|r| r.reopens.len())) {
        out.push(reopen_event(r));
    }
    loop_events(before, after, out);
    out.extend(restack_event(before, after));
    out.extend(promotion_event(before, after));
    let quiet = out.len() == first;
    out.extend(state_event(before, after, message, quiet));
}

/// An event without an attempt status.
fn event(kind: EventKind, commit: Option<&str>, at: &str, text: String) -> Event {
    Event {
        kind,
        commit: commit.map(str::to_string),
        status: None,
        at: at.to_string(),
        text,
    }
}

/// The first ledger commit: the run started from its frozen base.
fn start_event(after: &RunRecord) -> Event {
    event(
        EventKind::Start,
        Some(&after.base.commit),
        &after.created_at,
        format!(
            "start from {}: {} ({}:{})",
            short_ref(&after.base.reference),
            after.task.summary,
            after.actor.kind,
            after.actor.id
        ),
    )
}

fn land_refused_event(l: &LandAttempt) -> Event {
    event(
        EventKind::LandRefused,
        (!l.commit.is_empty()).then_some(l.commit.as_str()),
        &l.at,
        format!(
            "land onto {} {} refused: {}",
            short_ref(&l.target),
            oneline(&l.onto),
            l.what()
        ),
    )
}

fn reopen_event(r: &crate::model::land::Reopen) -> Event {
    let how = match r.mode {
        crate::model::land::ReopenMode::Conflict => {
            format!("conflicts in {} written out", r.conflicts.join(", "))
        }
        mode => format!("{} {}", mode.as_str(), oneline(&r.head_after)),
    };
    event(
        EventKind::Reopened,
        Some(&r.head_after),
        &r.at,
        format!(
            "reopened ({}) onto {} (base was {}): {how}",
            r.by,
            oneline(&r.base_after),
            oneline(&r.base_before)
        ),
    )
}

/// A loop that started, and a loop that stopped, between `before` and `after`.
fn loop_events(before: Option<&RunRecord>, after: &RunRecord, out: &mut Vec<Event>) {
    let Some(l) = &after.loop_state else {
        return;
    };
    let loop_before = before.and_then(|b| b.loop_state.as_ref());
    if loop_before.is_none_or(|b| b.started_at != l.started_at) {
        out.push(event(
            EventKind::LoopStarted,
            None,
            &l.started_at,
            format!("loop started (at most {} iterations)", l.max_loops),
        ));
    }
    let stopped_before = loop_before.is_some_and(|b| {
        b.started_at == l.started_at && b.why_harness_stopped == l.why_harness_stopped
    });
    if let (Some(why), false) = (l.why_harness_stopped, stopped_before) {
        let iterations = l.history.len();
        out.push(event(
            EventKind::LoopStopped,
            None,
            l.stopped_at.as_deref().unwrap_or(&after.updated_at),
            format!(
                "loop stopped after {iterations} iteration{}: {} ({})",
                if iterations == 1 { "" } else { "s" },
                why.as_str(),
                l.status
            ),
        ));
    }
}

/// A new restack that moved the run's head.
fn restack_event(before: Option<&RunRecord>, after: &RunRecord) -> Option<Event> {
    let r = after.restack.as_ref()?;
    // `none`: the target had not moved and the run's own commits landed; nothing to draw.
    let moved = r.mode != crate::model::land::RestackMode::None && r.head_before != r.head_after;
    if !moved || before.is_some_and(|b| b.restack.as_ref() == Some(r)) {
        return None;
    }
    Some(event(
        EventKind::Restack,
        Some(&r.head_after),
        &after.updated_at,
        format!(
            "restacked ({}) onto {}: {} -> {}",
            r.mode,
            oneline(&r.base_after),
            oneline(&r.head_before),
            oneline(&r.head_after)
        ),
    ))
}

/// A new promotion (or landing) of the run.
fn promotion_event(before: Option<&RunRecord>, after: &RunRecord) -> Option<Event> {
    let p = after.promotion.as_ref()?;
    if before.is_some_and(|b| b.promotion.as_ref() == Some(p)) {
        return None;
    }
    let how = match &p.remote {
        Some(remote) => format!("{}, {remote}", p.mode),
        None => p.mode.to_string(),
    };
    let verb = if after.landed.is_some() {
        "landed on"
    } else {
        "promoted"
    };
    // A landed run's own commit; the target moved to the top of its batch (`p.new`).
    Some(event(
        EventKind::Promoted,
        Some(after.landed.as_deref().unwrap_or(&p.new)),
        &p.at,
        format!(
            "{verb} {} {}..{} ({how})",
            short_ref(&p.target),
            oneline(&p.old),
            oneline(&p.new)
        ),
    ))
}

/// A change of state: abandoned and blocked always, any other only when the transition drew
/// nothing else (`quiet`), named by the ledger commit's command.
fn state_event(
    before: Option<&RunRecord>,
    after: &RunRecord,
    message: &str,
    quiet: bool,
) -> Option<Event> {
    let changed = before.is_some_and(|b| b.state != after.state);
    if !changed {
        return None;
    }
    let reason = after
        .reason
        .as_deref()
        .map_or(String::new(), |r| format!(": {r}"));
    let (kind, text) = match after.state {
        RunState::Abandoned => (EventKind::Abandoned, format!("abandoned{reason}")),
        RunState::Blocked => (EventKind::Blocked, format!("blocked{reason}")),
        RunState::Superseded => (EventKind::State, format!("superseded{reason}")),
        state if quiet => (
            EventKind::State,
            format!(
                "{} -> {state}{}",
                before.map_or("(none)", |b| b.state.as_str()),
                command_of(message).map_or(String::new(), |c| format!(" ({c})"))
            ),
        ),
        _ => return None,
    };
    Some(event(kind, None, &after.updated_at, text))
}

/// Checkpoint `n` (1-based: the number `rewind` takes).
fn checkpoint_event(n: usize, c: &CheckpointEntry) -> Event {
    Event {
        kind: EventKind::Checkpoint,
        commit: Some(c.commit.clone()),
        status: None,
        at: c.at.clone(),
        text: format!("checkpoint {n}: {}", c.summary),
    }
}

/// A new rewind of the run.
fn rewind_event(before: Option<&RunRecord>, after: &RunRecord) -> Option<Event> {
    let r = after.rewound.as_ref()?;
    if before.is_some_and(|b| b.rewound.as_ref() == Some(r)) {
        return None;
    }
    let saved = r.saved.map_or(String::new(), |n| {
        format!("; uncommitted work saved as checkpoint {n}")
    });
    Some(event(
        EventKind::Rewind,
        Some(&r.commit),
        &r.at,
        format!(
            "rewound to checkpoint {} from {}{saved}",
            r.checkpoint,
            oneline(&r.from)
        ),
    ))
}

fn attempt_event(a: &Attempt) -> Event {
    let checks: Vec<String> = a
        .checks
        .iter()
        .map(|c| match (c.status.as_str(), c.exit_code) {
            ("passed", _) | (_, None) => format!("{} {}", c.name, c.status),
            (status, Some(code)) => format!("{} {status} (exit {code})", c.name),
        })
        .collect();
    let checks = if checks.is_empty() {
        "no checks".to_string()
    } else {
        checks.join(", ")
    };
    Event {
        kind: EventKind::Attempt,
        commit: Some(a.commit.clone()),
        status: Some(a.status.to_string()),
        at: a.at.clone(),
        text: format!("attempt {} {}: {checks}", a.n, a.status),
    }
}

/// The command of a ledger commit message (`tabellio: finish r1: active -> completed`).
fn command_of(message: &str) -> Option<&str> {
    message
        .strip_prefix("tabellio: ")?
        .split_whitespace()
        .next()
}

/// A commit id as `git log --oneline` shortens it: the pictures of `log` read like git's.
pub fn oneline(hex: &str) -> &str {
    &hex[..hex.len().min(7)]
}

/// `refs/heads/main` as `main`; other refs in full.
pub fn short_ref(name: &str) -> &str {
    name.strip_prefix("refs/heads/").unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run::tests::sample;
    use crate::model::run::AttemptCheck;

    fn transition(record: RunRecord, message: &str) -> Transition {
        Transition {
            commit: gix::ObjectId::null(gix::hash::Kind::Sha1),
            message: message.into(),
            record,
        }
    }

    #[test]
    fn events_follow_the_ledger() {
        let start = sample(RunState::Active);
        let mut checkpointed = start.clone();
        checkpointed.checkpoints.push(CheckpointEntry {
            commit: "a".repeat(40),
            tree: "b".repeat(40),
            summary: "wip".into(),
            at: "2026-01-01T00:01:00Z".into(),
            snapshot: None,
        });
        let mut failed = checkpointed.clone();
        failed.state = RunState::ValidationFailed;
        failed.attempts.push(Attempt {
            n: 1,
            commit: "a".repeat(40),
            tree: "b".repeat(40),
            checks: vec![AttemptCheck {
                name: "test".into(),
                digest: "d".repeat(64),
                status: crate::model::evidence::CheckStatus::Failed,
                exit_code: Some(1),
            }],
            status: crate::model::run::AttemptStatus::Failed,
            evidence_digest: "e".repeat(64),
            at: "2026-01-01T00:02:00Z".into(),
        });
        let mut abandoned = failed.clone();
        abandoned.state = RunState::Abandoned;
        abandoned.reason = Some("superseded".into());
        let history = [
            transition(start, "tabellio: start r1: (none) -> active"),
            transition(checkpointed, "tabellio: checkpoint r1: active -> active"),
            transition(failed, "tabellio: finish r1: active -> validation_failed"),
            transition(
                abandoned,
                "tabellio: abandon r1: validation_failed -> abandoned",
            ),
        ];
        let t = timeline_of(&history).expect("a timeline");
        let texts: Vec<&str> = t.events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "start from main: t (human:me)",
                "checkpoint 1: wip",
                "attempt 1 failed: test failed (exit 1)",
                "abandoned: superseded",
            ]
        );
        assert_eq!(t.events[2].status.as_deref(), Some("failed"));
        assert_eq!(t.run.state, RunState::Abandoned);
    }

    #[test]
    fn a_bare_change_of_state_names_its_command() {
        let start = sample(RunState::Active);
        let mut done = start.clone();
        done.state = RunState::Completed;
        let history = [
            transition(start, "tabellio: start r1: (none) -> active"),
            transition(done, "tabellio: restore r1: active -> completed"),
        ];
        let t = timeline_of(&history).expect("a timeline");
        assert_eq!(t.events[1].kind, EventKind::State);
        assert_eq!(t.events[1].text, "active -> completed (restore)");
        assert!(timeline_of(&[]).is_none());
    }
}
