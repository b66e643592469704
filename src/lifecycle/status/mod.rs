//! `status`: what state a run is in, what the live repository says about it, and what to do
//! next. It is the one place a person, an agent or CI learns the next action.
//!
//! [`observe`] reads the ledger and the live repository into plain values; [`next_action`]
//! decides on them without reading anything. A ref of ours that cannot be read (a ledger or a
//! notes ref at a blob or a tree) is reported by [`crate::run::unreadable`] with its repair, never a reason
//! for status to fail.

pub mod next_action;
pub mod observe;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Result;
use crate::model::{RunRecord, RunState};
use crate::run::{resolve_run, Env};
use crate::store::ledger::Ledger;
use crate::store::remote::fetch::NOTES_PREFIX;
use crate::store::Store;

pub use crate::run::unreadable::UnreadableRef;
pub use next_action::{loop_next_action, LiveState, NextAction};

use observe::EvidenceNotes;

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
    /// Each failing (or flaky) required check at the run head, explained from the evidence:
    /// new on this tree, proven flaky, or also failing on the target.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<crate::evidence::explain::FailureExplanation>,
    /// Before landing: which required checks of the target apply to the run's change, which
    /// are `not_applicable` and which are reused (as `land --dry-run` shows them).
    pub checks: Option<crate::evidence::applies::ChecksPlan>,
    pub live: LiveState,
    /// The run worktree's plans, when it has a plan folder.
    pub plans: Option<serde_json::Value>,
    /// The guarded paths the run changes that still need a person's approval.
    pub approval_needed: Option<Vec<String>>,
    /// Where the run's ledger, the shared notes or the target differ from a remote's copy, as
    /// far as the last fetch knows, each with its fix.
    pub sync_divergence: Vec<crate::store::divergence::Divergence>,
    /// Notes refs that cannot be read, each with its repair; empty when all read.
    pub unreadable_refs: Vec<UnreadableRef>,
    /// The archive ref holding the run, when `gc` archived it (it is read-only then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<String>,
}

/// A run whose ledger cannot be read: what status can still say about it.
#[derive(Debug, Serialize)]
pub struct UnreadableRunStatus {
    pub run_id: String,
    /// The run's worktree at its usual place, when there is one.
    pub workspace: Option<PathBuf>,
    pub allowed_actions: Vec<String>,
    /// Always `repair`, blocking, with the first repair as its command.
    pub next_action: NextAction,
    /// The ledger ref first, then any notes ref that cannot be read either.
    pub unreadable_refs: Vec<UnreadableRef>,
}

/// One run in the overview: its state and, unless it ended, what it needs next.
#[derive(Debug, Serialize)]
pub struct RunOverview {
    pub run_id: String,
    /// `None` for a run whose ledger cannot be read.
    pub state: Option<RunState>,
    pub target: String,
    pub task: String,
    /// `None` for a run that ended (promoted, abandoned) and for one whose ledger cannot be read.
    pub next_action: Option<NextAction>,
    /// Why the ledger cannot be read, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// `status` outside every run's worktree with no run named: every run by state, like `git
/// status` for the runs of the repository.
#[derive(Debug, Serialize)]
pub struct Overview {
    /// How many runs are in each state.
    pub by_state: std::collections::BTreeMap<String, usize>,
    /// The runs that have not ended, oldest first, and the unreadable ones.
    pub runs: Vec<RunOverview>,
}

/// What `status` reports: a run, a run whose ledger cannot be read, or, with no run named or
/// found here, the overview of every run.
#[derive(Debug)]
pub enum StatusReport {
    Run(Box<StatusOutcome>),
    Unreadable(UnreadableRunStatus),
    Overview(Overview),
}

impl StatusReport {
    /// What to do next, for a run or for one whose ledger cannot be read.
    pub fn next_action(&self) -> Option<&NextAction> {
        match self {
            StatusReport::Run(o) => Some(&o.next_action),
            StatusReport::Unreadable(u) => Some(&u.next_action),
            StatusReport::Overview(_) => None,
        }
    }
}

/// Every run of the repository by state; the ones that have not ended with what each needs next.
fn overview(env: &Env) -> Result<Overview> {
    let store = &env.store;
    let mut by_state = std::collections::BTreeMap::new();
    let mut runs = Vec::new();
    for (id, tip) in store.list_ledgers()? {
        match store.read_ledger_record(&id, tip) {
            Ok(record) => {
                let ledger = crate::store::ledger::Ledger { tip, record };
                let rec = &ledger.record;
                *by_state.entry(rec.state.to_string()).or_insert(0) += 1;
                if rec.state.is_terminal() {
                    continue;
                }
                let next = status_at(store, &ledger, Some(&env.cwd))?.next_action;
                runs.push((
                    rec.created_at.clone(),
                    RunOverview {
                        run_id: id,
                        state: Some(rec.state),
                        target: rec.base.reference.clone(),
                        task: rec.task.summary.clone(),
                        next_action: Some(next),
                        unreadable: None,
                    },
                ));
            }
            Err(e) => {
                *by_state.entry("unreadable".into()).or_insert(0) += 1;
                runs.push((
                    String::new(),
                    RunOverview {
                        state: None,
                        target: String::new(),
                        task: String::new(),
                        next_action: None,
                        unreadable: Some(format!(
                            "{}; `git tabellio status {id}` says how to repair it",
                            e.message
                        )),
                        run_id: id,
                    },
                ));
            }
        }
    }
    runs.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.run_id.cmp(&b.1.run_id)));
    Ok(Overview {
        by_state,
        runs: runs.into_iter().map(|(_, r)| r).collect(),
    })
}

/// The status of `run` (or of the run whose worktree the command runs in). A ledger that cannot
/// be read is reported, not refused: status is where a person learns how to repair it.
pub fn status(env: &Env, run: Option<&str>) -> Result<StatusReport> {
    // Only reads: each ref once (the preconditions and the evidence ask for the same ones).
    env.store.snapshot_refs(|| status_now(env, run))
}

fn status_now(env: &Env, run: Option<&str>) -> Result<StatusReport> {
    // The notes refs (checkpoints, evidence, approvals, what sync fetched) in one read.
    env.store.snapshot_refs_under(NOTES_PREFIX)?;
    let ledger = match resolve_run(env, run) {
        Ok(ledger) => ledger,
        Err(e) => {
            let Some(id) = run.map(str::to_string).or_else(|| run_here(env)) else {
                // No run named and none here: the overview of every run, as `git status`
                // describes the whole worktree.
                return Ok(StatusReport::Overview(overview(env)?));
            };
            if crate::run::valid_run_id(&id).is_err() {
                return Err(e);
            }
            // An archived run (no live ledger of that id): its status as it ended.
            if env
                .store
                .ref_target(&crate::store::ledger::ref_name(&id))?
                .is_none()
            {
                if let Some((ledger, archived)) = env.store.try_find_archived_ledger(&id)? {
                    let mut outcome = status_at(&env.store, &ledger, Some(&env.cwd))?;
                    outcome.archived = Some(archived.archive_ref);
                    return Ok(StatusReport::Run(Box::new(outcome)));
                }
            }
            return match crate::run::unreadable::diagnose_ledger(&env.store, &id)? {
                Some(bad) => Ok(StatusReport::Unreadable(unreadable_run(env, &bad)?)),
                None => Err(e),
            };
        }
    };
    Ok(StatusReport::Run(Box::new(status_at(
        &env.store,
        &ledger,
        Some(&env.cwd),
    )?)))
}

/// The run the current directory belongs to by its path or its branch, whether or not its
/// ledger reads (the run id [`resolve_run`] would have tried).
fn run_here(env: &Env) -> Option<String> {
    crate::run::run_id_from_path(env).or_else(|| {
        crate::run::current_branch(&env.store)?
            .strip_prefix("refs/heads/tabellio/")
            .map(str::to_string)
    })
}

fn unreadable_run(
    env: &Env,
    bad: &crate::run::unreadable::UnreadableLedger,
) -> Result<UnreadableRunStatus> {
    let store = &env.store;
    let ledger_ref = bad.report(store);
    let next_action = NextAction {
        action: next_action::Action::Repair,
        blocking: true,
        reason: match bad.damage {
            crate::run::unreadable::LedgerDamage::NotALedger => format!(
                "{}; nothing in it says what the run was: restore the ledger, or give the run up (`abandon` records it as abandoned in a fresh ledger, `cleanup --force` removes its worktree and branch)",
                bad.error_message
            ),
            crate::run::unreadable::LedgerDamage::UnusableRecord => format!(
                "{}; restore the ledger, or remove the run (`cleanup --force` removes its worktree and branch, `git update-ref -d` its ledger)",
                bad.error_message
            ),
        },
        command: ledger_ref.repair.first().cloned(),
    };
    let allowed_actions = match bad.damage {
        crate::run::unreadable::LedgerDamage::NotALedger => {
            vec!["abandon".into(), "cleanup".into()]
        }
        crate::run::unreadable::LedgerDamage::UnusableRecord => vec!["cleanup".into()],
    };
    let usual = store.worktree_root()?.join(&bad.run_id);
    let mut refs = vec![ledger_ref];
    refs.extend(crate::run::unreadable::notes_refs(store)?);
    Ok(UnreadableRunStatus {
        run_id: bad.run_id.clone(),
        workspace: std::fs::symlink_metadata(&usual).is_ok().then_some(usual),
        allowed_actions,
        next_action,
        unreadable_refs: refs,
    })
}

/// The status of a run, its commands as typed anywhere outside the run worktree.
pub fn status_of(store: &Store, ledger: &Ledger) -> Result<StatusOutcome> {
    status_at(store, ledger, None)
}

/// The status of a run, its commands runnable from `cwd` (`None`: from outside the run
/// worktree).
fn status_at(store: &Store, ledger: &Ledger, cwd: Option<&Path>) -> Result<StatusOutcome> {
    let run = &ledger.record;
    let broken_notes = crate::run::unreadable::notes_refs(store)?;
    let evidence_notes = if broken_notes
        .iter()
        .any(|r| r.name == crate::store::notes::EVIDENCE)
    {
        EvidenceNotes::Unreadable
    } else {
        EvidenceNotes::Readable
    };
    let seen = observe::observe(store, ledger, cwd, evidence_notes)?;
    let mut next_action = next_action::next_action(run, &seen.live, &seen.conditions);
    let mut allowed = next_action::allowed_actions(run, &seen.live, &seen.conditions);
    if let Some(first) = broken_notes.first() {
        // Every command that reads or writes notes refuses until the ref is repaired: that
        // comes first, and only what needs no notes is offered meanwhile.
        allowed.retain(|a| a == "abandon" || a == "cleanup");
        next_action = NextAction {
            action: next_action::Action::Repair,
            blocking: true,
            reason: format!(
                "{}; the commands that read or write {} refuse until it is repaired",
                first.message, first.name
            ),
            command: first.repair.first().cloned(),
        };
    }
    // The next action already asked promote's own preconditions: agree with it.
    if next_action.action == "unblock-promote" || next_action.action == "approve" {
        allowed.retain(|a| a != "promote");
    }
    if next_action.action == "approve" {
        allowed.insert(0, "approve".into());
    }
    if next_action.action == "land" {
        allowed.insert(0, "land".into());
    }
    Ok(StatusOutcome {
        run: run.clone(),
        workspace: seen.workspace,
        state: run.state,
        previous_state: run.previous_state,
        allowed_actions: allowed,
        next_action,
        satisfied_evidence: seen.satisfied,
        approval_needed: seen.conditions.approval_needed.clone(),
        missing_evidence: seen.conditions.missing,
        failures: seen.failures,
        checks: seen.checks,
        plans: seen
            .worktree
            .as_ref()
            .and_then(|w| crate::plans::gate::report_if_any(&w.path))
            .map(|r| r.to_json()),
        live: seen.live,
        sync_divergence: crate::store::divergence::divergences(store, run)?,
        unreadable_refs: broken_notes,
        archived: None,
    })
}
