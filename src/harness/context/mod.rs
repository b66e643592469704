//! The context packet (`tabellio.context/v1`): what an agent reads at the start of an
//! iteration and a person reads in a review — the task verbatim with its SHA-256, base, head and
//! merge-base, the files changed since the base, checkpoints, attempts and their verdicts, the
//! last failure excerpt, a merge preview against the target's current tip, the loop so far, and
//! what to do next.
//!
//! Guarantees: the packet holds no local path (every string but the verbatim task is scrubbed
//! of the worktree, repository and home directories), and `integrity` is the SHA-256 of the
//! canonical JSON of the packet without `integrity`, so anyone can check it. The markdown form
//! is rendered from the same packet and ends with the same digest.
//!
//! The packet's JSON has its keys in alphabetical order at every level (it has since its first
//! version), so the fields of every record (`packet`) are declared alphabetically.

use std::path::PathBuf;

use gix::bstr::ByteSlice;
use serde_json::Value;

use crate::error::{Context, Error, Result};
use crate::evidence::read::records_for;
use crate::lifecycle::status::{status_of, NextAction};
use crate::model::canonical;
use crate::model::loop_state::LoopIteration;
use crate::model::run::Attempt;
use crate::model::RunRecord;
use crate::run::{resolve_run, run_workspace, Env};
use crate::store::ledger::Ledger;
use crate::store::merge::merge_preview;
use crate::store::Store;

mod markdown;
mod packet;

pub use markdown::to_markdown;
pub use packet::{
    AttemptSummary, Change, CheckSummary, CheckpointSummary, ContextPacket, FailingCheck,
    FailingRecord, IterationSummary, LandRefusalSummary, LastFailure, LoopSummary,
    MergePreviewSummary, NextActionSummary, RefAt, ReopenSummary, Target, TaskText,
};

pub const SCHEMA: &str = "tabellio.context/v1";

/// Who the packet is for; it changes only `next_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// A person or a tool looking at the run: `next_action` is `status`'s.
    Review,
    /// The agent of loop iteration `iteration` of `max_loops`.
    LoopAgent { iteration: u32, max_loops: u32 },
}

#[derive(Debug)]
pub struct ContextOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    /// The packet, `integrity` included.
    pub packet: ContextPacket,
}

/// `git tabellio context`.
pub fn context(env: &Env, run: Option<&str>) -> Result<ContextOutcome> {
    let ledger = resolve_run(env, run)?;
    let workspace = run_workspace(&env.store, &ledger)?;
    let packet = build(&env.store, &ledger, Audience::Review)?;
    Ok(ContextOutcome {
        run: ledger.record,
        workspace,
        packet,
    })
}

/// SHA-256 of the canonical JSON of `packet` without its `integrity` field.
pub fn integrity_of(packet: &ContextPacket) -> Result<String> {
    let mut v = to_json(packet)?;
    if let Value::Object(m) = &mut v {
        m.remove("integrity");
    }
    Ok(canonical::digest_of(&v).expect("a context packet holds no floats"))
}

fn to_json(packet: &ContextPacket) -> Result<Value> {
    serde_json::to_value(packet).context(|| "could not serialize the context packet".to_string())
}

/// Build the packet of a run.
pub fn build(store: &Store, ledger: &Ledger, audience: Audience) -> Result<ContextPacket> {
    let run = &ledger.record;
    let status = status_of(store, ledger)?;
    let head_hex = status.live.head.clone();
    let head = head_hex
        .as_deref()
        .map(|h| store.parse_oid(h))
        .transpose()?;
    // `abandon` of a ledger that was not a ledger records no base: nothing to tell an agent.
    if run.base.commit.is_empty() {
        return Err(Error::refused(format!(
            "run {} has no base: it was abandoned with an unreadable ledger",
            run.run_id
        ))
        .hint(format!(
            "`git tabellio cleanup {}` removes its worktree and branch",
            run.run_id
        )));
    }
    let base = store.parse_oid(&run.base.commit)?;
    let target_tip = store.ref_target(&run.base.reference)?;

    let merge_base = match (head, target_tip) {
        (Some(h), Some(t)) => store
            .repo
            .merge_base(h, t)
            .context(|| format!("could not compute the merge base of {h} and {t}"))?
            .map(|id| id.detach().to_string()),
        _ => None,
    };
    let changes = match head {
        Some(h) if h != base => changes_between(store, base, h)?,
        _ => Vec::new(),
    };
    let preview = match (head, target_tip) {
        (Some(h), Some(t)) if h != t => Some(merge_preview(store, t, h)?),
        _ => None,
    };

    let packet = ContextPacket {
        allowed_actions: status.allowed_actions.clone(),
        attempts: run
            .attempts
            .iter()
            .map(|a| attempt_summary(run, a))
            .collect(),
        base: RefAt {
            commit: run.base.commit.clone(),
            reference: run.base.reference.clone(),
        },
        branch: run.branch.clone(),
        changes,
        checkpoints: run
            .checkpoints
            .iter()
            .map(|c| CheckpointSummary {
                at: c.at.clone(),
                commit: c.commit.clone(),
                summary: c.summary.clone(),
            })
            .collect(),
        head: head_hex,
        integrity: String::new(),
        land_refusal: land_refusal(store, run)?,
        last_failure: last_failure(store, run)?,
        loop_summary: loop_summary(run),
        merge_base,
        merge_preview: preview.map(|p| MergePreviewSummary {
            clean: p.clean,
            conflicts: p.conflicts,
            onto: p.onto,
        }),
        missing_evidence: status.missing_evidence.clone(),
        needs_approval: status.approval_needed.clone(),
        next_action: next_action_for(audience, &status.next_action),
        previous_state: run.previous_state.map(|s| s.as_str().to_string()),
        reopened: reopen_summary(store, run, status.workspace.as_deref(), head)?,
        repository: run.repository.clone(),
        run_id: run.run_id.clone(),
        satisfied_evidence: status.satisfied_evidence.clone(),
        schema: SCHEMA.into(),
        state: run.state.as_str().into(),
        target: Target {
            reference: run.base.reference.clone(),
            tip: target_tip.map(|t| t.to_string()),
        },
        task: TaskText {
            sha256: run.task.sha256.clone(),
            summary: run.task.summary.clone(),
            text: run.task.text.clone(),
        },
    };
    // Scrubbed as JSON, so every string of the packet is covered, whatever field it is in.
    let mut json = to_json(&packet)?;
    crate::store::paths::LocalPaths::new(store, status.workspace.as_deref())
        .apply_json(&mut json, "task");
    let mut packet: ContextPacket = serde_json::from_value(json)
        .context(|| "could not read the scrubbed packet back".to_string())?;
    packet.integrity = integrity_of(&packet)?;
    Ok(packet)
}

/// `status`'s next action for a reviewer; for a loop's agent, always "edit".
fn next_action_for(audience: Audience, status: &NextAction) -> NextActionSummary {
    match audience {
        Audience::Review => NextActionSummary {
            action: status.action.to_string(),
            blocking: status.blocking,
            command: status.command.clone(),
            reason: status.reason.clone(),
        },
        Audience::LoopAgent {
            iteration,
            max_loops,
        } => NextActionSummary {
            action: "edit".into(),
            blocking: false,
            command: None,
            reason: format!(
                "iteration {iteration} of {max_loops}: change the worktree so that the checks pass \
                 (and the plan-hygiene gate, when the last failure names it); \
                 the harness commits what you leave behind and runs the checks after you exit. \
                 Print DONE as the last line when you believe the task is done (a claim the \
                 checks still decide)."
            ),
        },
    }
}

/// An attempt as the packet shows it; one the plan gate held back did not pass, whatever its
/// checks did.
fn attempt_summary(run: &RunRecord, a: &Attempt) -> AttemptSummary {
    let gate = plan_gate_of(run, a);
    let mut checks: Vec<CheckSummary> = a
        .checks
        .iter()
        .map(|c| CheckSummary {
            exit_code: c.exit_code,
            name: c.name.clone(),
            status: c.status.to_string(),
        })
        .collect();
    if gate.is_some() {
        checks.push(CheckSummary {
            exit_code: None,
            name: PLAN_GATE.into(),
            status: "failed".into(),
        });
    }
    let status = if gate.is_some() {
        "failed"
    } else {
        a.status.as_str()
    };
    AttemptSummary {
        at: a.at.clone(),
        checks,
        commit: a.commit.clone(),
        n: a.n,
        status: status.into(),
    }
}

/// Files changed from `base` to `head`: status, path, previous path for renames.
fn changes_between(store: &Store, base: gix::ObjectId, head: gix::ObjectId) -> Result<Vec<Change>> {
    let repo = &store.repo;
    let tree = |c: gix::ObjectId| -> Result<gix::Tree<'_>> {
        repo.find_commit(c)
            .context(|| format!("could not read commit {c}"))?
            .tree()
            .context(|| format!("could not read the tree of {c}"))
    };
    let (old, new) = (tree(base)?, tree(head)?);
    let changes = repo
        .diff_tree_to_tree(&old, &new, None)
        .context(|| format!("could not diff {base} and {head}"))?;
    use gix::object::tree::diff::ChangeDetached as C;
    let mut out: Vec<Change> = Vec::new();
    for change in changes {
        let (status, path, previous, mode) = match &change {
            C::Addition {
                location,
                entry_mode,
                ..
            } => ("added", location, None, entry_mode),
            C::Deletion {
                location,
                entry_mode,
                ..
            } => ("deleted", location, None, entry_mode),
            C::Modification {
                location,
                entry_mode,
                previous_entry_mode,
                ..
            } => (
                if entry_mode.kind() == previous_entry_mode.kind() {
                    "modified"
                } else {
                    "type_changed"
                },
                location,
                None,
                entry_mode,
            ),
            C::Rewrite {
                source_location,
                location,
                entry_mode,
                copy,
                ..
            } => (
                if *copy { "copied" } else { "renamed" },
                location,
                Some(source_location),
                entry_mode,
            ),
        };
        if mode.is_tree() {
            continue;
        }
        out.push(Change {
            path: path.to_str_lossy().into_owned(),
            previous_path: previous.map(|p| p.to_str_lossy().into_owned()),
            status: status.into(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The name the plan-hygiene gate goes by among the checks of an attempt in the packet.
pub const PLAN_GATE: &str = "plan-hygiene";

/// The plan-hygiene gate's reason when it kept `attempt` from completing the run, else `None`.
///
/// Known from the loop's evaluate record of that attempt, or — for the last attempt — from the
/// run's `reason` (a gated `finish` sets it to `plan-hygiene: …`). An attempt recorded as
/// failed whose checks all passed was held back by the gate too, its reason no longer known.
fn plan_gate_of(run: &RunRecord, attempt: &Attempt) -> Option<String> {
    if let Some(l) = &run.loop_state {
        let evaluated = l
            .history
            .iter()
            .chain(l.current.as_ref())
            .filter_map(|i| i.evaluate.as_ref())
            .find(|e| e.attempt == Some(attempt.n));
        if let Some(e) = evaluated {
            if let Some(gate) = &e.plan_gate {
                return Some(gate.clone());
            }
            if e.missing_evidence.iter().any(|m| m == PLAN_GATE) {
                // Recorded before the reason was kept: its masked form is in the signature.
                return Some(
                    e.failure_signature
                        .iter()
                        .find(|s| s.starts_with(PLAN_GATE))
                        .cloned()
                        .unwrap_or_else(|| format!("{PLAN_GATE}: the plans block completion")),
                );
            }
        }
    }
    if run.last_attempt().is_some_and(|last| last.n == attempt.n) {
        if let Some(reason) = run
            .reason
            .as_deref()
            .filter(|r| r.starts_with(&format!("{PLAN_GATE}:")))
        {
            return Some(reason.to_string());
        }
    }
    (attempt.status != crate::model::run::AttemptStatus::Passed
        && !attempt.checks.is_empty()
        && attempt
            .checks
            .iter()
            .all(|c| c.status == crate::model::evidence::CheckStatus::Passed))
    .then(|| format!("{PLAN_GATE}: the plans blocked completion (`git tabellio plans` names them)"))
}

/// The most recent attempt that did not pass — a failing check, or the plan-hygiene gate —
/// with the failing checks' excerpts, and the gate's reason as the excerpt of a `plan-hygiene`
/// entry when the gate held it back.
fn last_failure(store: &Store, run: &RunRecord) -> Result<Option<LastFailure>> {
    let Some((attempt, gate)) = run.attempts.iter().rev().find_map(|a| {
        let gate = plan_gate_of(run, a);
        (a.status != crate::model::run::AttemptStatus::Passed || gate.is_some())
            .then_some((a, gate))
    }) else {
        return Ok(None);
    };
    let mut checks = failing_excerpts(store, &run.run_id, attempt)?;
    if let Some(gate) = gate {
        checks.push(FailingCheck {
            excerpt: Some(gate),
            exit_code: None,
            name: PLAN_GATE.into(),
            status: "failed".into(),
            truncated: Some(false),
        });
    }
    Ok(Some(LastFailure {
        attempt: attempt.n,
        checks,
        commit: attempt.commit.clone(),
    }))
}

/// The newest land refusal, with the excerpts of its failing records from the notes.
fn land_refusal(store: &Store, run: &RunRecord) -> Result<Option<LandRefusalSummary>> {
    let Some(l) = run.land_attempts.last() else {
        return Ok(None);
    };
    let mut failed = Vec::new();
    if !l.failed.is_empty() {
        let commit = store.parse_oid(&l.commit)?;
        let tree = store.tree_of(commit)?;
        let records = records_for(store, commit, tree)?;
        for f in &l.failed {
            let record = records
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .find(|r| r.digest == f.evidence && r.digest_is_valid());
            failed.push(FailingRecord {
                check: f.check.clone(),
                evidence: f.evidence.clone(),
                excerpt: record.map(|r| r.output.excerpt.clone()),
                truncated: record.map(|r| r.output.truncated),
            });
        }
    }
    Ok(Some(LandRefusalSummary {
        at: l.at.clone(),
        commit: l.commit.clone(),
        failed,
        hunks: l.hunks.clone(),
        isolated: l.isolated,
        onto: l.onto.clone(),
        paths: l.paths.clone(),
        reason: l.reason.clone(),
        result: l.refusal().as_str().into(),
        target: l.target.clone(),
    }))
}

/// The newest reopen, with what landed between its bases and the conflicts still open.
fn reopen_summary(
    store: &Store,
    run: &RunRecord,
    workspace: Option<&std::path::Path>,
    head: Option<gix::ObjectId>,
) -> Result<Option<ReopenSummary>> {
    let Some(r) = run.reopens.last() else {
        return Ok(None);
    };
    let before = store.parse_oid(&r.base_before)?;
    let after = store.parse_oid(&r.base_after)?;
    let mut landed_since = Vec::new();
    if store.is_ancestor(before, after)? {
        for c in crate::store::ancestry::first_parent_chain(store, before, after)?
            .into_iter()
            .take(50)
        {
            landed_since.push(format!(
                "{} {}",
                &c.to_string()[..7],
                store.commit_subject(c)
            ));
        }
    }
    let workspace = workspace.filter(|p| p.exists());
    Ok(Some(ReopenSummary {
        base_after: r.base_after.clone(),
        base_before: r.base_before.clone(),
        conflicts: crate::run::reopen::conflicts_remaining(store, run, workspace, head)?,
        landed_since,
        mode: r.mode.as_str().into(),
        n: r.n,
        repair_rounds: run.repair.as_ref().map_or(0, |p| p.rounds),
        repair_rounds_allowed: crate::store::policy::land_at(store, &run.base.reference)?
            .repair_rounds(),
    }))
}

/// The failing checks of `attempt` with their excerpts, read from the evidence notes (the
/// record of that attempt: same run, check and status, latest by then).
pub fn failing_excerpts(
    store: &Store,
    run_id: &str,
    attempt: &Attempt,
) -> Result<Vec<FailingCheck>> {
    let commit = store.parse_oid(&attempt.commit)?;
    let tree = store.parse_oid(&attempt.tree)?;
    let records = records_for(store, commit, tree)?;
    let mut out = Vec::new();
    for check in attempt
        .checks
        .iter()
        .filter(|c| c.status != crate::model::evidence::CheckStatus::Passed)
    {
        let record = records
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .filter(|r| {
                r.digest_is_valid()
                    && r.run_id.as_deref() == Some(run_id)
                    && r.check.name == check.name
                    && r.status == check.status
                    && r.finished_at <= attempt.at
            })
            .max_by(|a, b| a.finished_at.cmp(&b.finished_at));
        out.push(FailingCheck {
            excerpt: record.map(|r| r.output.excerpt.clone()),
            exit_code: check.exit_code,
            name: check.name.clone(),
            status: check.status.to_string(),
            truncated: record.map(|r| r.output.truncated),
        });
    }
    Ok(out)
}

fn loop_summary(run: &RunRecord) -> Option<LoopSummary> {
    let l = run.loop_state.as_ref()?;
    Some(LoopSummary {
        done_reason: l.done_reason.map(|d| d.as_str().into()),
        history: l.history.iter().map(iteration_summary).collect(),
        iteration: l.iteration,
        max_loops: l.max_loops,
        phase: l.phase.as_str().into(),
        status: l.status.as_str().into(),
        why_agent_stopped: l.why_agent_stopped.map(|w| w.as_str().into()),
        why_harness_stopped: l.why_harness_stopped.map(|w| w.as_str().into()),
    })
}

fn iteration_summary(h: &LoopIteration) -> IterationSummary {
    IterationSummary {
        changed: h.collect.as_ref().map(|c| c.changed),
        claimed_done: h.agent.as_ref().map(|a| a.claimed_done),
        failing: h.evaluate.as_ref().map(|e| {
            let mut failing: Vec<String> = e
                .checks
                .iter()
                .filter(|c| c.status != crate::model::evidence::CheckStatus::Passed)
                .map(|c| c.name.clone())
                .collect();
            if e.plan_gate.is_some() || e.missing_evidence.iter().any(|m| m == PLAN_GATE) {
                failing.push(PLAN_GATE.to_string());
            }
            failing
        }),
        fingerprint: h.fingerprint.clone(),
        n: h.n,
        status: h.status.map(|s| s.as_str().into()),
        verdict: h.evaluate.as_ref().map(|e| e.verdict.clone()),
    }
}

/// Write the markdown packet for the agent of a loop iteration; returns its path, which is
/// outside every worktree (a file inside the run worktree would be collected as a change).
pub fn write_agent_context(store: &Store, ledger: &Ledger, audience: Audience) -> Result<PathBuf> {
    let packet = build(store, ledger, audience)?;
    let dir = store.repo.common_dir().join("tabellio").join("context");
    std::fs::create_dir_all(&dir)
        .map_err(|e| crate::Error::internal(format!("could not create {}: {e}", dir.display())))?;
    // The agent gets a plain absolute path: with GIT_DIR in a linked worktree the common dir
    // reads `.git/worktrees/<name>/../..`.
    let dir = std::fs::canonicalize(&dir)
        .map_err(|e| crate::Error::internal(format!("could not resolve {}: {e}", dir.display())))?;
    let path = dir.join(format!("{}.md", ledger.record.run_id));
    let tmp = dir.join(format!("{}.md.tmp", ledger.record.run_id));
    std::fs::write(&tmp, to_markdown(&packet))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| crate::Error::internal(format!("could not write {}: {e}", path.display())))?;
    Ok(path)
}
