//! `status`: what state a run is in, what the live repository says about it, and what to do
//! next. It is the one place a person, an agent or CI learns the next action.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::model::{RunRecord, RunState};
use crate::store::ledger::Ledger;
use crate::store::{worktree, Store};

use super::evidence::{attempt_requirements, evaluate, policy_requirements, Requirement, Verdict};
use super::{resolve_run, run_workspace, Env};

#[derive(Debug, Clone, Serialize)]
pub struct NextAction {
    pub action: String,
    /// True when something must be fixed before the action can succeed.
    pub blocking: bool,
    pub reason: String,
    pub command: Option<String>,
}

/// What the live repository says, beside what the ledger says.
#[derive(Debug, Clone, Serialize)]
pub struct LiveState {
    pub worktree_exists: bool,
    pub head: Option<String>,
    /// The branch checked out in the run worktree, when it is not the run branch.
    pub branch_switched: Option<String>,
    pub dirty: Vec<String>,
    pub untracked: Vec<String>,
    /// The run branch moved after the validated commit.
    pub head_changed_since_validation: bool,
    /// The target's current tip, when it moved since the run started.
    pub target_moved: Option<String>,
    /// The target branch no longer exists.
    pub target_deleted: bool,
    /// When the target moved: would the run merge cleanly onto its new tip?
    pub merge_preview: Option<crate::store::merge::MergePreview>,
    /// The policy at the head cannot be read (the run cannot be validated until it is fixed).
    pub policy_error: Option<String>,
    /// The run worktree exists but cannot be used (an interrupted start, a damaged `.git`).
    pub worktree_broken: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StatusOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub state: RunState,
    pub previous_state: Option<RunState>,
    pub allowed_actions: Vec<String>,
    pub next_action: NextAction,
    pub satisfied_evidence: Vec<String>,
    pub missing_evidence: Vec<String>,
    pub live: LiveState,
    /// The run worktree's plans, when it has a plan folder.
    pub plans: Option<serde_json::Value>,
}

/// The checks a run's head must have evidence for: the policy's required checks at `commit`,
/// else the checks the run was last finished with (ad-hoc), else none known.
pub fn requirements_for(
    store: &Store,
    run: &RunRecord,
    commit: gix::ObjectId,
) -> Result<Vec<Requirement>> {
    Ok(match policy_requirements(store, commit)? {
        Some(reqs) => reqs,
        None => run
            .last_attempt()
            .map(attempt_requirements)
            .unwrap_or_default(),
    })
}

/// What the run's state allows, narrowed by the live repository: nothing that would be
/// refused right now is offered.
fn allowed_actions(
    run: &RunRecord,
    live: &LiveState,
    branch_exists: bool,
    missing: &[String],
) -> Vec<String> {
    let mut v: Vec<&str> = match run.state {
        RunState::Active | RunState::ValidationFailed | RunState::Blocked => {
            vec!["checkpoint", "finish", "loop", "abandon"]
        }
        RunState::Completed => vec!["promote", "checkpoint", "finish", "abandon"],
        RunState::Looping => vec!["loop --resume", "abandon"],
        RunState::Promoted | RunState::Abandoned => {
            if live.worktree_exists || branch_exists {
                vec!["cleanup"]
            } else {
                vec![]
            }
        }
    };
    if !run.state.is_terminal() {
        let no_work = live.head.as_deref() == Some(run.base.commit.as_str());
        let workspace_ok = live.worktree_exists
            && live.branch_switched.is_none()
            && live.dirty.is_empty()
            && live.untracked.is_empty();
        v.retain(|a| match *a {
            "checkpoint" | "finish" => workspace_ok && !no_work,
            "loop" => workspace_ok,
            // Promote moves the target to the validated commit; it needs the run branch, not
            // the run worktree.
            "promote" => {
                branch_exists
                    && !live.head_changed_since_validation
                    && (live.target_moved.is_none() || interrupted_promotion(run, live))
                    && !live.target_deleted
                    && missing.is_empty()
            }
            _ => true,
        });
    }
    v.into_iter().map(str::to_string).collect()
}

/// The target already points at the validated commit while the ledger says `completed`: a
/// promotion killed between its target and ledger writes.
fn interrupted_promotion(run: &RunRecord, live: &LiveState) -> bool {
    run.state == RunState::Completed
        && live.target_moved.is_some()
        && live.target_moved.as_deref() == run.validated.as_ref().map(|v| v.commit.as_str())
}

/// A loop that `loop --resume` continues: looping (killed), or blocked by an interrupt.
fn loop_pending(run: &RunRecord) -> bool {
    run.state == RunState::Looping
        || (run.state == RunState::Blocked
            && run.loop_state.as_ref().is_some_and(|l| {
                l.why_harness_stopped == Some(crate::model::loop_state::HarnessStop::Interrupted)
            }))
}

pub fn status(env: &Env, run: Option<&str>) -> Result<StatusOutcome> {
    let ledger = resolve_run(env, run)?;
    status_of(&env.store, &ledger)
}

pub fn status_of(store: &Store, ledger: &Ledger) -> Result<StatusOutcome> {
    let run = &ledger.record;
    let id = &run.run_id;
    let workspace = run_workspace(store, ledger)?;
    // A worktree left unusable (an interrupted start) is reported, not fatal.
    let mut worktree_broken = None;
    let ws = match &workspace {
        Some(p) if p.exists() => match worktree::broken_reason(p) {
            Some(why) => {
                worktree_broken = Some(why);
                None
            }
            None => Some(worktree::inspect(p)?),
        },
        _ => None,
    };
    let branch_tip = store.ref_target(&run.branch)?;
    let head = ws.as_ref().and_then(|w| w.head).or(branch_tip);
    let target_tip = store.ref_target(&run.base.reference)?;
    let target_moved = match (target_tip, run.state) {
        (_, RunState::Promoted) => None,
        (Some(t), _) if t != run.base.commit => Some(t),
        _ => None,
    };
    let target_deleted = target_tip.is_none() && run.state != RunState::Promoted;
    let head_changed = match (&run.validated, head) {
        (Some(v), Some(h)) => v.commit != h,
        _ => false,
    };
    let merge_preview = match (target_moved, head) {
        (Some(tip), Some(h)) if !run.state.is_terminal() => {
            Some(crate::store::merge::merge_preview(store, tip, h)?)
        }
        _ => None,
    };

    // Evidence and the plan gate are judged live, from the notes and the committed plans at
    // the head: the ledger's word is never enough. A policy that cannot be read is reported,
    // not fatal: status is where a person learns that it must be fixed.
    let (mut satisfied, mut missing) = (Vec::new(), Vec::new());
    let mut policy_error = None;
    let mut plan_faults = None;
    if let Some(h) = head.filter(|h| *h != run.base.commit) {
        match requirements_for(store, run, h) {
            Ok(reqs) => {
                for v in evaluate(store, h, &reqs)? {
                    if v.verdict == Verdict::Satisfied {
                        satisfied.push(v.name);
                    } else {
                        missing.push(v.name);
                    }
                }
                if let Some(report) = super::plans::gate_report(store, h)? {
                    missing.push("plan-hygiene".into());
                    plan_faults = Some(report);
                }
            }
            Err(e) => {
                missing.push("policy".into());
                policy_error = Some(e.message);
            }
        }
    }
    let live = LiveState {
        worktree_exists: ws.is_some(),
        head: head.map(|h| h.to_string()),
        branch_switched: ws.as_ref().and_then(|w| {
            (w.branch.as_deref() != Some(run.branch.as_str()))
                .then(|| w.branch.clone().unwrap_or_else(|| "(detached HEAD)".into()))
        }),
        dirty: ws.as_ref().map(|w| w.changed.clone()).unwrap_or_default(),
        untracked: ws.as_ref().map(|w| w.untracked.clone()).unwrap_or_default(),
        head_changed_since_validation: head_changed,
        target_moved: target_moved.map(|t| t.to_string()),
        target_deleted,
        merge_preview,
        policy_error,
        worktree_broken,
    };

    // Without a policy at the head, `finish` needs the check on its command line.
    let has_policy =
        head.is_some_and(|h| matches!(super::finish::policy_at(store, h), Ok(Some(_))));
    let finish_cmd = if has_policy {
        format!("git tabellio finish {id}")
    } else {
        format!("git tabellio finish {id} -- <check command>")
    };
    // Commands for a person to copy: the path is one shell word.
    let wt = workspace
        .as_ref()
        .map(|p| crate::error::shell_path(p))
        .unwrap_or_default();
    let next = |action: &str, blocking: bool, reason: String, command: Option<String>| NextAction {
        action: action.into(),
        blocking,
        reason,
        command,
    };
    let next_action = if run.state.is_terminal() {
        if ws.is_some() || branch_tip.is_some() || live.worktree_broken.is_some() {
            let force = if live.worktree_broken.is_some() {
                " --force"
            } else {
                ""
            };
            next(
                "cleanup",
                false,
                format!("the run is {}; its worktree and branch can go", run.state),
                Some(format!("git tabellio cleanup {id}{force}")),
            )
        } else {
            next(
                "none",
                false,
                format!("the run is {} and cleaned up", run.state),
                None,
            )
        }
    } else if branch_tip.is_none() {
        // Runs travel with `sync`, run branches do not: a missing branch may live on another
        // machine. Nothing destructive is suggested.
        next(
            "elsewhere",
            true,
            format!(
                "the run branch {} is not in this repository: the run lives on another machine (runs travel with sync, branches do not), or the branch was deleted",
                run.branch
            ),
            None,
        )
    } else if ws.is_none() && run.state != RunState::Completed {
        next(
            "abandon",
            true,
            match &live.worktree_broken {
                Some(why) => format!(
                    "the run worktree is unusable ({why}); abandon the run, then `git tabellio cleanup {id} --force` removes it"
                ),
                None => "the run worktree is missing".into(),
            },
            Some(format!("git tabellio abandon {id}")),
        )
    } else if let Some(other) = &live.branch_switched {
        next(
            "switch-branch",
            true,
            format!(
                "the run worktree has {other} checked out instead of {}",
                run.branch
            ),
            Some(format!(
                "git -C {wt} switch {}",
                run.branch.trim_start_matches("refs/heads/")
            )),
        )
    } else if !loop_pending(run) && (!live.dirty.is_empty() || !live.untracked.is_empty()) {
        // A loop killed or interrupted mid-iteration leaves the agent's changes uncommitted on
        // purpose: its `collect` phase commits them on resume, so resuming is the next action.
        next(
            "commit",
            true,
            "the run worktree has uncommitted changes".into(),
            Some(format!("git -C {wt} add -A && git -C {wt} commit")),
        )
    } else if let Some(action) = loop_next_action(run) {
        action
    } else if let Some(err) = &live.policy_error {
        next(
            "fix-policy",
            true,
            format!("the policy at the run head cannot be used: {err}"),
            None,
        )
    } else {
        match run.state {
            RunState::Looping => next(
                "loop",
                false,
                "a loop was interrupted; resume it".into(),
                Some(format!("git tabellio loop {id} --resume")),
            ),
            RunState::Completed if head_changed => next(
                "finish",
                true,
                "the run branch changed after validation; validate the new head".into(),
                Some(finish_cmd.clone()),
            ),
            RunState::Completed if live.target_deleted => next(
                "restart",
                true,
                format!("the target {} no longer exists", run.base.reference),
                None,
            ),
            RunState::Completed if interrupted_promotion(run, &live) => next(
                "promote",
                false,
                format!(
                    "{} already points at the validated commit: a promotion was interrupted before it recorded itself; promote completes it",
                    run.base.reference
                ),
                Some(format!("git tabellio promote {id}")),
            ),
            RunState::Completed
                if live.target_moved.is_some()
                    && super::land::would_land(store, run).unwrap_or(false) =>
            {
                next(
                    "land",
                    false,
                    format!(
                        "the target {} moved to {} since the run started; the run replays cleanly onto it: land restacks it, validates the result and moves the target",
                        run.base.reference,
                        live.target_moved.clone().unwrap_or_default(),
                    ),
                    Some(format!("git tabellio land {id}")),
                )
            }
            RunState::Completed if live.target_moved.is_some() => next(
                "restart",
                true,
                format!(
                    "the target {} moved to {} since the run started; {}; a run's base is frozen, so the change goes on in a new run from the new tip (carry it over, e.g. with `git cherry-pick`)",
                    run.base.reference,
                    live.target_moved.clone().unwrap_or_default(),
                    live.merge_preview
                        .as_ref()
                        .map_or_else(String::new, |p| p.describe())
                ),
                Some(format!(
                    "git tabellio start --base {} --task-file <the task>",
                    run.base.reference.trim_start_matches("refs/heads/")
                )),
            ),
            RunState::Completed if !missing.is_empty() => next(
                "finish",
                true,
                format!("evidence is missing or invalid for: {}", missing.join(", ")),
                Some(finish_cmd.clone()),
            ),
            // Everything promote itself checks (the target's worktree, locks, a rebase in
            // progress): status never says "promote" when promote would refuse.
            RunState::Completed => match crate::promote::plan(store, ledger.clone()) {
                Ok(_) => next(
                    "promote",
                    false,
                    format!("validated; promote moves {} to it", run.base.reference),
                    Some(format!("git tabellio promote {id}")),
                ),
                Err(e) => next(
                    "unblock-promote",
                    true,
                    match &e.hint {
                        Some(h) => format!("promote would be refused: {} ({h})", e.message),
                        None => format!("promote would be refused: {}", e.message),
                    },
                    None,
                ),
            },
            _ if head.map(|h| h.to_string()) == Some(run.base.commit.clone()) => next(
                "commit",
                false,
                "no commits on the run branch yet; do the work in the run worktree".into(),
                None,
            ),
            RunState::ValidationFailed if plan_faults.is_some() => {
                let report = plan_faults.as_ref().expect("guarded");
                let misplaced = report
                    .with_class(crate::plans::PlanClass::Misplaced)
                    .next()
                    .is_some();
                next(
                    "plans",
                    true,
                    format!(
                        "the plans block completion: {}",
                        super::plans::fault_summary(report)
                    ),
                    if misplaced {
                        Some(format!("git tabellio plans reconcile {id} --commit"))
                    } else {
                        Some(format!("git tabellio plans status {id}"))
                    },
                )
            }
            RunState::ValidationFailed => next(
                "finish",
                false,
                "the last validation failed; fix, commit, then finish again".into(),
                Some(finish_cmd.clone()),
            ),
            RunState::Blocked => next(
                "finish",
                true,
                format!(
                    "the run is blocked: {}",
                    run.reason.clone().unwrap_or_else(|| "see the log".into())
                ),
                Some(finish_cmd.clone()),
            ),
            _ => next(
                "finish",
                false,
                "validate the run head".into(),
                Some(finish_cmd.clone()),
            ),
        }
    };
    Ok(StatusOutcome {
        run: run.clone(),
        workspace,
        state: run.state,
        previous_state: run.previous_state,
        allowed_actions: {
            let mut allowed = allowed_actions(run, &live, branch_tip.is_some(), &missing);
            // The next action already asked promote's own preconditions: agree with it.
            if next_action.action == "unblock-promote" {
                allowed.retain(|a| a != "promote");
            }
            if next_action.action == "land" {
                allowed.insert(0, "land".into());
            }
            allowed
        },
        next_action,
        satisfied_evidence: satisfied,
        missing_evidence: missing,
        plans: ws
            .as_ref()
            .and_then(|w| super::plans::report_if_any(&w.path))
            .map(|r| r.to_json()),
        live,
    })
}

/// What a person should do after a loop stopped blocked.
pub fn loop_next_action(rec: &RunRecord) -> Option<NextAction> {
    let l = rec.loop_state.as_ref()?;
    if rec.state != RunState::Blocked {
        return None;
    }
    let id = &rec.run_id;
    let reason = rec
        .reason
        .clone()
        .unwrap_or_else(|| "the loop stopped".into());
    let (action, command) = match l.why_harness_stopped? {
        crate::model::loop_state::HarnessStop::Interrupted => {
            ("loop", format!("git tabellio loop {id} --resume"))
        }
        crate::model::loop_state::HarnessStop::ExecutorFailure => (
            "loop",
            format!("git tabellio loop {id} -- <a working agent command>"),
        ),
        // The harness could not go on (e.g. the agent broke the policy): fix the run head in
        // the worktree, commit, and validate it.
        crate::model::loop_state::HarnessStop::Error => {
            ("finish", format!("git tabellio finish {id}"))
        }
        _ => ("review", format!("git tabellio context {id}")),
    };
    Some(NextAction {
        action: action.into(),
        blocking: true,
        reason,
        command: Some(command),
    })
}
