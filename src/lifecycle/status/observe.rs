//! Observing a run: what its ledger says and what the live repository says, read once into
//! the plain values ([`LiveState`], [`Conditions`]) that the next-action table decides on.
//!
//! Evidence and the plan gate are judged live, from the notes and the committed plans at the
//! head: the ledger's word is never enough. A policy that cannot be read is observed, not
//! fatal: status is where a person learns that it must be fixed.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::evidence::applies::{plan_now, ChecksPlan};
use crate::evidence::judge::{evaluate, CheckVerdict, Verdict};
use crate::evidence::requirements::{required_at, under_trust, Claim};
use crate::model::{RunRecord, RunState};
use crate::plans::{PlanClass, PlanReport};
use crate::run::run_workspace;
use crate::store::ledger::Ledger;
use crate::store::worktree::{self, WorkspaceState};
use crate::store::Store;

use super::next_action::{Conditions, LiveState, PlanFaults};

/// Whether the evidence notes can be read. When they cannot (the ref points at a blob or a
/// tree), every required check is missing: nothing is judged on notes nobody can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceNotes {
    Readable,
    Unreadable,
}

/// Everything observed about one run.
pub struct Observed {
    pub workspace: Option<PathBuf>,
    /// The run worktree, when it exists and is usable.
    pub worktree: Option<WorkspaceState>,
    pub live: LiveState,
    pub satisfied: Vec<String>,
    /// The failing checks at the run head, explained from the evidence.
    pub failures: Vec<crate::evidence::explain::FailureExplanation>,
    pub conditions: Conditions,
    /// How the required checks stand for the run's change landing on its target now, while
    /// it is not landed: as `land --dry-run` judges them.
    pub checks: Option<ChecksPlan>,
}

/// The evidence verdicts at the run head: (satisfied, missing, plan faults, policy error).
struct HeadEvidence {
    satisfied: Vec<String>,
    missing: Vec<String>,
    /// Checks failing (or flaky) at the head: name and definition digest.
    failing: Vec<(String, String)>,
    /// The records that decided the failures at the head (their failing tests name what a
    /// baseline does not cover).
    failed_records: Vec<crate::model::EvidenceRecord>,
    plan_faults: Option<PlanReport>,
    policy_error: Option<String>,
}

fn head_evidence(
    store: &Store,
    run: &RunRecord,
    head: Option<gix::ObjectId>,
    notes: EvidenceNotes,
) -> Result<HeadEvidence> {
    let mut out = HeadEvidence {
        satisfied: Vec::new(),
        missing: Vec::new(),
        failing: Vec::new(),
        failed_records: Vec::new(),
        plan_faults: None,
        policy_error: None,
    };
    // An empty base is a ledger `abandon` rebuilt from nothing: no base, nothing to judge.
    let Some(h) = head.filter(|h| *h != run.base.commit && !run.base.commit.is_empty()) else {
        return Ok(out);
    };
    match required_at(store, h, Claim::RunHead(run)) {
        Ok(reqs) if notes == EvidenceNotes::Unreadable => {
            out.missing.extend(reqs.into_iter().map(|r| r.name));
        }
        Ok(reqs) => {
            // Signatures are judged as promotion judges them: by the target tip's signers.
            let trust = crate::store::policy::trust_at_tip(store, &run.base.reference)?;
            let reqs = under_trust(reqs, trust.as_ref());
            // A check whose `when` the records prove does not hold has no verdict.
            let verdicts = evaluate(store, h, &reqs)?;
            out.failed_records = deciding_failures(store, h, &verdicts)?;
            for v in verdicts {
                let req = reqs.iter().find(|r| r.name == v.name);
                if matches!(v.verdict, Verdict::Failed | Verdict::FlakyPass) {
                    if let Some(digest) = req.and_then(|r| r.digest.as_ref()) {
                        out.failing.push((v.name.clone(), digest.clone()));
                    }
                }
                match v.verdict {
                    _ if v.satisfies() => out.satisfied.push(v.name),
                    // Shown, so a flaky pass is never mistaken for a pass.
                    Verdict::FlakyPass => out.missing.push(v.describe()),
                    // A record that passed but does not count for its signature says why.
                    Verdict::Unsigned
                    | Verdict::BadSignature
                    | Verdict::UnknownSigner
                    | Verdict::SignerExpired
                    | Verdict::ForgedActor => {
                        out.missing
                            .push(format!("{} ({})", v.name, v.verdict.as_str()))
                    }
                    _ => out.missing.push(v.name),
                }
            }
            if let Some(report) = crate::plans::gate::gate_report(store, h)? {
                out.missing.push("plan-hygiene".into());
                out.plan_faults = Some(report);
            }
        }
        Err(e) => {
            out.missing.push("policy".into());
            out.policy_error = Some(Error::from(e).message);
        }
    }
    Ok(out)
}

/// The records that decided the `failed` verdicts among `verdicts` on `head`.
fn deciding_failures(
    store: &Store,
    head: gix::ObjectId,
    verdicts: &[CheckVerdict],
) -> Result<Vec<crate::model::EvidenceRecord>> {
    let deciding: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Failed)
        .filter_map(|v| v.record.as_deref())
        .collect();
    if deciding.is_empty() {
        return Ok(Vec::new());
    }
    let lines = crate::evidence::read::records_for(store, head, store.tree_of(head)?)?;
    Ok(lines
        .into_iter()
        .filter_map(|(_, rec)| rec)
        .filter(|rec| deciding.contains(&rec.digest.as_str()))
        .collect())
}

/// Read the run's worktree, branch, target and evidence. `cwd` is where the commands to copy
/// will be typed (`None`: unknown, the plain commands).
pub fn observe(
    store: &Store,
    ledger: &Ledger,
    cwd: Option<&Path>,
    notes: EvidenceNotes,
) -> Result<Observed> {
    let run = &ledger.record;
    let workspace = run_workspace(store, ledger)?;
    // A worktree left unusable (an interrupted start) is reported, not fatal.
    let mut worktree_broken = None;
    let ws = match &workspace {
        Some(p) if p.exists() => match worktree::broken_reason(p) {
            Some(why) => {
                worktree_broken = Some(why);
                None
            }
            None => Some(store.inspect(p)?),
        },
        _ => None,
    };
    let branch_tip = store.ref_target(&run.branch)?;
    let head = ws.as_ref().and_then(|w| w.head).or(branch_tip);
    let target_tip = match run.base.reference.as_str() {
        "" => None,
        reference => store.ref_target(reference)?,
    };
    let target_moved = match (target_tip, run.state) {
        (_, RunState::Promoted) => None,
        (Some(t), _) if t != run.base.commit => Some(t),
        _ => None,
    };
    let merge_preview = match (target_moved, head) {
        (Some(tip), Some(h)) if !run.state.is_terminal() => {
            Some(crate::store::merge::merge_preview(store, tip, h)?)
        }
        _ => None,
    };
    let evidence = head_evidence(store, run, head, notes)?;
    let live = LiveState {
        worktree_exists: ws.is_some(),
        head: head.map(|h| h.to_string()),
        branch_switched: ws.as_ref().and_then(|w| {
            (w.branch.as_deref() != Some(run.branch.as_str()))
                .then(|| w.branch.clone().unwrap_or_else(|| "(detached HEAD)".into()))
        }),
        dirty: ws.as_ref().map(|w| w.changed.clone()).unwrap_or_default(),
        untracked: ws.as_ref().map(|w| w.untracked.clone()).unwrap_or_default(),
        head_changed_since_validation: match (&run.validated, head) {
            (Some(v), Some(h)) => v.commit != h,
            _ => false,
        },
        target_moved: target_moved.map(|t| t.to_string()),
        target_deleted: target_tip.is_none()
            && run.state != RunState::Promoted
            && !run.base.reference.is_empty(),
        merge_preview,
        policy_error: evidence.policy_error,
        worktree_broken,
    };
    let torn_start_lock = match branch_tip {
        None => crate::run::workspace::torn_start_lock(store, ledger)?
            .map(|lock| crate::error::shell_path(&lock)),
        Some(_) => None,
    };
    let conflicts_open = !crate::run::reopen::conflicts_remaining(
        store,
        run,
        ws.as_ref().and(workspace.as_deref()),
        head,
    )?
    .is_empty();
    let conditions = Conditions {
        conflicts_open,
        torn_start_lock,
        branch_exists: branch_tip.is_some(),
        has_policy: head
            .is_some_and(|h| matches!(crate::store::policy::policy_at(store, h), Ok(Some(_)))),
        missing: evidence.missing,
        plan_faults: evidence.plan_faults.map(|report| PlanFaults {
            summary: crate::plans::gate::fault_summary(&report),
            misplaced: report.with_class(PlanClass::Misplaced).next().is_some(),
        }),
        approval_needed: approval_needed(store, run, head, target_tip),
        promote_refused: promote_refused(store, ledger),
        lands_cleanly: run.state == RunState::Completed
            && live.target_moved.is_some()
            && crate::store::replay::would_land(store, run).unwrap_or(false),
        cleanup_from: cwd
            .and_then(|cwd| crate::run::workspace::cleanup_from(store, cwd, workspace.as_deref())),
        // Commands for a person to copy: the path is one shell word.
        workspace: workspace
            .as_ref()
            .map(|p| crate::error::shell_path(p))
            .unwrap_or_default(),
    };
    let checks = landing_plan(store, run, head, target_tip);
    // As `finish` and `land` explain them: under a baseline, by the tests the target does not
    // fail.
    let mut failures = crate::evidence::explain::explain(store, target_tip, &evidence.failing)?;
    crate::evidence::explain::name_new_failures(
        store,
        target_tip,
        &evidence.failed_records,
        &mut failures,
    )?;
    Ok(Observed {
        failures,
        workspace,
        worktree: ws,
        live,
        satisfied: evidence.satisfied,
        conditions,
        checks,
    })
}

/// The checks the run's change needs on its target's tip (its base when the target is gone),
/// for a run not landed yet with work beyond its base. A policy that cannot be read or
/// requires a check it does not define gives no plan: status reports the policy itself.
fn landing_plan(
    store: &Store,
    run: &RunRecord,
    head: Option<gix::ObjectId>,
    target_tip: Option<gix::ObjectId>,
) -> Option<ChecksPlan> {
    if run.state.is_terminal() {
        return None;
    }
    let base = store.parse_oid(&run.base.commit).ok()?;
    let head = head.filter(|h| *h != base)?;
    plan_now(store, target_tip.unwrap_or(base), (base, head)).ok()
}

/// Why promote would refuse a completed run now (everything promote itself checks: the
/// target's worktree, locks, a rebase in progress), `None` when it would go ahead or the run
/// is not completed.
fn promote_refused(store: &Store, ledger: &Ledger) -> Option<String> {
    if ledger.record.state != RunState::Completed {
        return None;
    }
    let e = Error::from(crate::run::promotion::plan(store, ledger.clone()).err()?);
    Some(match &e.hint {
        Some(h) => format!("{} ({h})", e.message),
        None => e.message,
    })
}

/// The guarded paths the run's head changes from its base without an approval of its tree,
/// judged as promote judges (the target tip's guarded list plus the run's own). A policy that
/// cannot be read is reported elsewhere, not here.
fn approval_needed(
    store: &Store,
    run: &RunRecord,
    head: Option<gix::ObjectId>,
    target_tip: Option<gix::ObjectId>,
) -> Option<Vec<String>> {
    if run.state.is_terminal() {
        return None;
    }
    let base = store.parse_oid(&run.base.commit).ok()?;
    let head = head.filter(|h| *h != base)?;
    let gating = target_tip.unwrap_or(base);
    let check =
        crate::trust::approval::judge_run_step(store, Some(gating), base, head, Some(&run.actor))
            .ok()?;
    check.is_needed().then_some(check.paths)
}
