//! The next action: a pure decision from the run's recorded state and what was observed live.
//!
//! Nothing here reads the repository: [`super::observe`] gathers every condition first, so the
//! table can be read (and tested) as a table. Rules are tried in order, the first that applies
//! decides: a finished run is cleaned up; then what blocks any work (the branch is elsewhere,
//! the worktree is missing, switched or dirty); then a stopped loop; then a broken policy; then
//! the run's state.

use serde::Serialize;

use crate::model::loop_state::HarnessStop;
use crate::model::{RunRecord, RunState};

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

/// What to do next: the `action` of a [`NextAction`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Abandon,
    Approve,
    Cleanup,
    Commit,
    Edit,
    Elsewhere,
    #[serde(rename = "fix-policy")]
    FixPolicy,
    Finish,
    Land,
    Loop,
    None,
    Plans,
    Promote,
    Repair,
    Restart,
    Review,
    #[serde(rename = "unblock-promote")]
    UnblockPromote,
    Start,
    #[serde(rename = "switch-branch")]
    SwitchBranch,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Abandon => "abandon",
            Action::Approve => "approve",
            Action::Cleanup => "cleanup",
            Action::Commit => "commit",
            Action::Edit => "edit",
            Action::Elsewhere => "elsewhere",
            Action::FixPolicy => "fix-policy",
            Action::Finish => "finish",
            Action::Land => "land",
            Action::Loop => "loop",
            Action::None => "none",
            Action::Plans => "plans",
            Action::Promote => "promote",
            Action::Repair => "repair",
            Action::Restart => "restart",
            Action::Review => "review",
            Action::UnblockPromote => "unblock-promote",
            Action::Start => "start",
            Action::SwitchBranch => "switch-branch",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Action {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct NextAction {
    pub action: Action,
    /// True when something must be fixed before the action can succeed.
    pub blocking: bool,
    pub reason: String,
    pub command: Option<String>,
}

/// The plans at the run head that block completion.
#[derive(Debug, Clone)]
pub struct PlanFaults {
    /// The plans at fault, in a line.
    pub summary: String,
    /// A plan sits in the wrong folder (`plans reconcile` moves it).
    pub misplaced: bool,
}

/// What was observed beside [`LiveState`], as far as the decision needs it.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// The run branch exists in this repository.
    pub branch_exists: bool,
    /// A policy is committed at the run head (else `finish` needs a check command).
    pub has_policy: bool,
    /// The checks (and `plan-hygiene`, `policy`) the head has no valid evidence for.
    pub missing: Vec<String>,
    pub plan_faults: Option<PlanFaults>,
    /// Why promote would refuse right now (asked only of a completed run).
    pub promote_refused: Option<String>,
    /// The target moved and the run replays cleanly onto its new tip (asked only of a
    /// completed run whose target moved): `land` restacks it.
    pub lands_cleanly: bool,
    /// The run worktree as one shell word, for commands to copy.
    pub workspace: String,
    /// Where `cleanup` must run from (`git -C <dir>`) because the command runs inside the run
    /// worktree, which cleanup removes; `None` when the plain command works where it runs.
    pub cleanup_from: Option<String>,
    /// The run's start was killed inside its ref transaction: the stale lock on its branch
    /// (see [`crate::run::workspace::torn_start_lock`]).
    pub torn_start_lock: Option<String>,
    /// The guarded paths the run changes without an approval of its head's tree.
    pub approval_needed: Option<Vec<String>>,
    /// A reopened run's conflict markers are still in its worktree or head.
    pub conflicts_open: bool,
}

fn next(action: Action, blocking: bool, reason: String, command: Option<String>) -> NextAction {
    NextAction {
        action,
        blocking,
        reason,
        command,
    }
}

/// What to do next with `run`, given what was observed.
pub fn next_action(run: &RunRecord, live: &LiveState, c: &Conditions) -> NextAction {
    let id = &run.run_id;
    let wt = &c.workspace;
    if run.state.is_terminal() {
        return if live.worktree_exists || c.branch_exists || live.worktree_broken.is_some() {
            next(
                Action::Cleanup,
                false,
                format!("the run is {}; its worktree and branch can go", run.state),
                Some(crate::run::workspace::cleanup_command(
                    c.cleanup_from.as_deref(),
                    id,
                    live.worktree_broken.is_some(),
                )),
            )
        } else {
            next(
                Action::None,
                false,
                format!("the run is {} and cleaned up", run.state),
                None,
            )
        };
    }
    if let Some(lock) = &c.torn_start_lock {
        return next(
            Action::Start,
            true,
            format!(
                "the start of {id} was interrupted inside its ref transaction: the ledger was written, the branch {} was not, and its lock {lock} is left behind; starting the run again removes the stale lock and starts it afresh",
                run.branch
            ),
            Some(format!("git tabellio start {id} --task-from {id}")),
        );
    }
    if !c.branch_exists {
        // Runs travel with `sync`, run branches do not: a missing branch may live on another
        // machine. Nothing destructive is suggested.
        return next(
            Action::Elsewhere,
            true,
            format!(
                "the run branch {} is not in this repository: the run lives on another machine (runs travel with sync, branches do not), or the branch was deleted",
                run.branch
            ),
            None,
        );
    }
    if !live.worktree_exists && run.state != RunState::Completed {
        return next(
            Action::Abandon,
            true,
            match &live.worktree_broken {
                Some(why) => format!(
                    "the run worktree is unusable ({why}); abandon the run, then `git tabellio cleanup {id} --force` removes it"
                ),
                None => "the run worktree is missing".into(),
            },
            Some(format!("git tabellio abandon {id}")),
        );
    }
    if let Some(other) = &live.branch_switched {
        return next(
            Action::SwitchBranch,
            true,
            format!(
                "the run worktree has {other} checked out instead of {}",
                run.branch
            ),
            Some(format!(
                "git -C {wt} switch {}",
                run.branch.trim_start_matches("refs/heads/")
            )),
        );
    }
    if let Some(action) = reopened_with_conflicts(run, c) {
        // The conflicts a reopen wrote out are uncommitted on purpose: resolving them is the
        // repair, not a stray change to commit as it is.
        return action;
    }
    if !loop_pending(run) && (!live.dirty.is_empty() || !live.untracked.is_empty()) {
        // A loop killed or interrupted mid-iteration leaves the agent's changes uncommitted on
        // purpose: its `collect` phase commits them on resume, so resuming is the next action.
        return next(
            Action::Commit,
            true,
            "the run worktree has uncommitted changes".into(),
            Some(format!("git -C {wt} add -A && git -C {wt} commit")),
        );
    }
    if let Some(action) = loop_next_action(run) {
        return action;
    }
    if let Some(err) = &live.policy_error {
        return next(
            Action::FixPolicy,
            true,
            format!("the policy at the run head cannot be used: {err}"),
            None,
        );
    }
    by_state(run, live, c)
}

/// The command that validates the run head.
fn finish_command(run: &RunRecord, c: &Conditions) -> String {
    if c.has_policy {
        format!("git tabellio finish {}", run.run_id)
    } else {
        format!("git tabellio finish {} -- <check command>", run.run_id)
    }
}

/// The command that starts a reopened run's repair: its agent's loop when a loop drove it,
/// else `finish` once a person repaired it.
fn repair_command(run: &RunRecord, c: &Conditions) -> String {
    if run.loop_state.is_some() {
        format!("git tabellio loop {}", run.run_id)
    } else {
        finish_command(run, c)
    }
}

/// A reopened run whose worktree holds the conflicts the reopen wrote out.
fn reopened_with_conflicts(run: &RunRecord, c: &Conditions) -> Option<NextAction> {
    if run.state != RunState::Reopened || run.open_conflicts().is_empty() || !c.conflicts_open {
        return None;
    }
    Some(next(
        Action::Repair,
        true,
        format!(
            "reopened onto {} of {}: the run's change conflicts in {}; resolve the conflict markers in the run worktree, commit, then validate",
            short_oid(&run.base.commit),
            run.base.reference,
            run.open_conflicts().join(", ")
        ),
        Some(repair_command(run, c)),
    ))
}

fn short_oid(oid: &str) -> &str {
    oid.get(..7).unwrap_or(oid)
}

/// A land refusal that stands (nothing moved since): the repair starts with a reopen.
fn refused(run: &RunRecord, live: &LiveState) -> Option<NextAction> {
    if !matches!(run.state, RunState::Completed | RunState::ValidationFailed) {
        return None;
    }
    let refusal = run.standing_refusal(live.head.as_deref())?;
    Some(next(
        Action::Repair,
        true,
        format!(
            "land refused the run: {}; finishing again would change nothing, reopen moves it onto the target's tip for its repair",
            refusal.describe()
        ),
        Some(format!("git tabellio reopen {}", run.run_id)),
    ))
}

/// The last rule: by the run's state, once nothing else blocks.
fn by_state(run: &RunRecord, live: &LiveState, c: &Conditions) -> NextAction {
    let id = &run.run_id;
    if let Some(action) = refused(run, live) {
        return action;
    }
    match run.state {
        RunState::Looping => next(
            Action::Loop,
            false,
            "a loop was interrupted; resume it".into(),
            Some(format!("git tabellio loop {id} --resume")),
        ),
        RunState::Completed => completed(run, live, c),
        _ if live.head.as_deref() == Some(run.base.commit.as_str()) => next(
            Action::Commit,
            false,
            "no commits on the run branch yet; do the work in the run worktree".into(),
            None,
        ),
        RunState::ValidationFailed => match &c.plan_faults {
            Some(faults) => next(
                Action::Plans,
                true,
                format!("the plans block completion: {}", faults.summary),
                if faults.misplaced {
                    Some(format!("git tabellio plans reconcile {id} --commit"))
                } else {
                    Some(format!("git tabellio plans status {id}"))
                },
            ),
            None => next(
                Action::Finish,
                false,
                "the last validation failed; fix, commit, then finish again".into(),
                Some(finish_command(run, c)),
            ),
        },
        RunState::Reopened => next(
            Action::Repair,
            false,
            format!(
                "reopened onto {} of {}; validate the run on its new base",
                short_oid(&run.base.commit),
                run.base.reference
            ),
            Some(repair_command(run, c)),
        ),
        RunState::Blocked => next(
            Action::Finish,
            true,
            format!(
                "the run is blocked: {}",
                run.reason.clone().unwrap_or_else(|| "see the log".into())
            ),
            Some(finish_command(run, c)),
        ),
        _ => next(
            Action::Finish,
            false,
            "validate the run head".into(),
            Some(finish_command(run, c)),
        ),
    }
}

/// A completed run: promote it, unless the live repository says otherwise.
fn completed(run: &RunRecord, live: &LiveState, c: &Conditions) -> NextAction {
    let id = &run.run_id;
    if live.head_changed_since_validation {
        return next(
            Action::Finish,
            true,
            "the run branch changed after validation; validate the new head".into(),
            Some(finish_command(run, c)),
        );
    }
    if live.target_deleted {
        return next(
            Action::Restart,
            true,
            format!("the target {} no longer exists", run.base.reference),
            None,
        );
    }
    if interrupted_promotion(run, live) {
        if let Some(why) = &c.promote_refused {
            return next(
                Action::UnblockPromote,
                true,
                format!("a promotion was interrupted, and completing it would be refused: {why}"),
                None,
            );
        }
        return next(
            Action::Promote,
            false,
            format!(
                "{} already points at the validated commit: a promotion was interrupted before it recorded itself; promote completes it",
                run.base.reference
            ),
            Some(format!("git tabellio promote {id}")),
        );
    }
    if let Some(tip) = live.target_moved.as_ref().filter(|_| c.lands_cleanly) {
        return next(
            Action::Land,
            false,
            format!(
                "the target {} moved to {tip} since the run started; the run replays cleanly onto it: land restacks it, validates the result and moves the target",
                run.base.reference,
            ),
            Some(format!("git tabellio land {id}")),
        );
    }
    if let Some(tip) = &live.target_moved {
        return next(
            Action::Restart,
            true,
            format!(
                "the target {} moved to {tip} since the run started and the run does not replay cleanly onto it ({}); the change goes on in a new run from the new tip",
                run.base.reference,
                live.merge_preview
                    .as_ref()
                    .map_or_else(String::new, |p| p.describe())
            ),
            Some(format!(
                "git tabellio start --base {} --task-from {id}",
                run.base.reference.trim_start_matches("refs/heads/")
            )),
        );
    }
    if !c.missing.is_empty() {
        return next(
            Action::Finish,
            true,
            format!(
                "evidence is missing or invalid for: {}",
                c.missing.join(", ")
            ),
            Some(finish_command(run, c)),
        );
    }
    if let Some(paths) = &c.approval_needed {
        return next(
            Action::Approve,
            true,
            format!(
                "the run changes guarded paths, which a person must approve: {}",
                paths.join(", ")
            ),
            Some(format!("git tabellio approve {id}")),
        );
    }
    // Everything promote itself checks (the target's worktree, locks, a rebase in progress):
    // status never says "promote" when promote would refuse.
    match &c.promote_refused {
        None => next(
            Action::Promote,
            false,
            format!("validated; promote moves {} to it", run.base.reference),
            Some(format!("git tabellio promote {id}")),
        ),
        Some(why) => next(
            Action::UnblockPromote,
            true,
            format!("promote would be refused: {why}"),
            None,
        ),
    }
}

/// What the run's state allows, narrowed by the live repository: nothing that would be
/// refused right now is offered.
pub fn allowed_actions(run: &RunRecord, live: &LiveState, c: &Conditions) -> Vec<String> {
    let mut v: Vec<&str> = match run.state {
        RunState::Active | RunState::ValidationFailed | RunState::Blocked | RunState::Reopened => {
            vec!["checkpoint", "finish", "loop", "abandon"]
        }
        RunState::Completed => vec!["promote", "checkpoint", "finish", "abandon"],
        RunState::Looping => vec!["loop --resume", "abandon"],
        RunState::Promoted | RunState::Abandoned | RunState::Superseded => {
            if live.worktree_exists || c.branch_exists {
                vec!["cleanup"]
            } else {
                vec![]
            }
        }
    };
    if run.standing_refusal(live.head.as_deref()).is_some() {
        // Finishing again would change nothing: the refusal stands until the run moves.
        v.retain(|a| *a != "finish");
        v.insert(0, "reopen");
    }
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
                c.branch_exists
                    && !live.head_changed_since_validation
                    && (live.target_moved.is_none() || interrupted_promotion(run, live))
                    && !live.target_deleted
                    && c.missing.is_empty()
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
            && run
                .loop_state
                .as_ref()
                .is_some_and(|l| l.why_harness_stopped == Some(HarnessStop::Interrupted)))
}

/// The blocked-loop table: what to do with a run a loop left blocked, by why the harness
/// stopped (`None`: it did not say). Returns the action and the command to run.
pub fn blocked_loop_step(run_id: &str, stop: Option<HarnessStop>) -> (Action, String) {
    match stop {
        Some(HarnessStop::Interrupted) => {
            (Action::Loop, format!("git tabellio loop {run_id} --resume"))
        }
        Some(HarnessStop::ExecutorFailure) => (
            Action::Loop,
            format!("git tabellio loop {run_id} -- <a working agent command>"),
        ),
        // The harness could not go on (e.g. the agent broke the policy): fix the run head in
        // the worktree, commit, and validate it.
        Some(HarnessStop::Error) => (Action::Finish, format!("git tabellio finish {run_id}")),
        _ => (Action::Review, format!("git tabellio context {run_id}")),
    }
}

/// What a person should do after a loop stopped blocked, when the loop said why.
pub fn loop_next_action(rec: &RunRecord) -> Option<NextAction> {
    let l = rec.loop_state.as_ref()?;
    if rec.state != RunState::Blocked {
        return None;
    }
    let stop = l.why_harness_stopped?;
    let reason = rec
        .reason
        .clone()
        .unwrap_or_else(|| "the loop stopped".into());
    let (action, command) = blocked_loop_step(&rec.run_id, Some(stop));
    Some(next(action, true, reason, Some(command)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The base and validated commits of [`crate::model::run::tests::sample`].
    const BASE: &str = "1111111111111111111111111111111111111111";
    const VALIDATED: &str = "2222222222222222222222222222222222222222";

    fn run(state: RunState) -> RunRecord {
        crate::model::run::tests::sample(state)
    }

    /// A blocked run whose loop stopped because of `stop`.
    fn blocked_loop(stop: HarnessStop) -> RunRecord {
        let mut rec = run(RunState::Blocked);
        rec.reason = Some("the loop stopped here".into());
        rec.loop_state = Some(crate::model::loop_state::tests::stopped(stop));
        rec
    }

    /// A healthy live state: worktree present and clean, head at the validated commit.
    fn live() -> LiveState {
        LiveState {
            worktree_exists: true,
            head: Some(VALIDATED.into()),
            branch_switched: None,
            dirty: Vec::new(),
            untracked: Vec::new(),
            head_changed_since_validation: false,
            target_moved: None,
            target_deleted: false,
            merge_preview: None,
            policy_error: None,
            worktree_broken: None,
        }
    }

    fn cond() -> Conditions {
        Conditions {
            branch_exists: true,
            has_policy: true,
            workspace: "/wt/r1".into(),
            ..Conditions::default()
        }
    }

    fn decide(rec: &RunRecord, live: &LiveState, c: &Conditions) -> (String, bool, Option<String>) {
        let a = next_action(rec, live, c);
        (a.action.to_string(), a.blocking, a.command)
    }

    #[test]
    fn a_finished_run_is_cleaned_up_then_done() {
        for state in [RunState::Promoted, RunState::Abandoned] {
            let rec = run(state);
            let (a, blocking, cmd) = decide(&rec, &live(), &cond());
            assert_eq!((a.as_str(), blocking), ("cleanup", false));
            assert_eq!(cmd.as_deref(), Some("git tabellio cleanup r1"));
            let mut broken = live();
            broken.worktree_exists = false;
            broken.worktree_broken = Some("no .git".into());
            let (_, _, cmd) = decide(&rec, &broken, &cond());
            assert_eq!(cmd.as_deref(), Some("git tabellio cleanup r1 --force"));
            // From inside the run worktree, which cleanup removes: from the main worktree.
            let inside = Conditions {
                cleanup_from: Some("'/r e'".into()),
                ..cond()
            };
            let (_, _, cmd) = decide(&rec, &live(), &inside);
            assert_eq!(cmd.as_deref(), Some("git -C '/r e' tabellio cleanup r1"));
            let mut gone = live();
            gone.worktree_exists = false;
            let c = Conditions {
                branch_exists: false,
                ..cond()
            };
            assert_eq!(decide(&rec, &gone, &c).0, "none");
        }
    }

    #[test]
    fn a_torn_start_is_started_again_not_sent_elsewhere() {
        let rec = run(RunState::Active);
        let c = Conditions {
            branch_exists: false,
            torn_start_lock: Some("/r/.git/refs/heads/tabellio/r1.lock".into()),
            ..cond()
        };
        let mut gone = live();
        gone.worktree_exists = false;
        let a = next_action(&rec, &gone, &c);
        assert_eq!((a.action.as_str(), a.blocking), ("start", true));
        assert!(a.reason.contains("r1.lock"), "{}", a.reason);
    }

    #[test]
    fn a_missing_branch_means_the_run_lives_elsewhere() {
        for state in [RunState::Active, RunState::Completed, RunState::Blocked] {
            let c = Conditions {
                branch_exists: false,
                ..cond()
            };
            assert_eq!(
                decide(&run(state), &live(), &c),
                ("elsewhere".into(), true, None)
            );
        }
    }

    #[test]
    fn a_missing_worktree_is_abandoned_unless_the_run_is_completed() {
        let mut gone = live();
        gone.worktree_exists = false;
        let (a, blocking, _) = decide(&run(RunState::Active), &gone, &cond());
        assert_eq!((a.as_str(), blocking), ("abandon", true));
        gone.worktree_broken = Some("no .git".into());
        let reason = next_action(&run(RunState::Active), &gone, &cond()).reason;
        assert!(reason.contains("unusable (no .git)"), "{reason}");
        // Promotion needs the branch, not the worktree.
        gone.worktree_broken = None;
        assert_eq!(
            decide(&run(RunState::Completed), &gone, &cond()).0,
            "promote"
        );
    }

    #[test]
    fn a_switched_or_dirty_worktree_blocks() {
        let mut switched = live();
        switched.branch_switched = Some("refs/heads/other".into());
        let (a, blocking, cmd) = decide(&run(RunState::Active), &switched, &cond());
        assert_eq!((a.as_str(), blocking), ("switch-branch", true));
        assert_eq!(cmd.as_deref(), Some("git -C /wt/r1 switch tabellio/r1"));
        let mut dirty = live();
        dirty.untracked = vec!["new.txt".into()];
        let (a, blocking, _) = decide(&run(RunState::Completed), &dirty, &cond());
        assert_eq!((a.as_str(), blocking), ("commit", true));
        // A killed or interrupted loop commits the agent's changes itself on resume.
        let (a, _, cmd) = decide(&run(RunState::Looping), &dirty, &cond());
        assert_eq!(a, "loop");
        assert_eq!(cmd.as_deref(), Some("git tabellio loop r1 --resume"));
        let (a, _, _) = decide(&blocked_loop(HarnessStop::Interrupted), &dirty, &cond());
        assert_eq!(a, "loop");
        let (a, _, _) = decide(&blocked_loop(HarnessStop::Error), &dirty, &cond());
        assert_eq!(a, "commit");
    }

    #[test]
    fn a_blocked_loop_says_what_stopped_it() {
        let table = [
            (
                HarnessStop::Interrupted,
                "loop",
                "git tabellio loop r1 --resume",
            ),
            (
                HarnessStop::ExecutorFailure,
                "loop",
                "git tabellio loop r1 -- <a working agent command>",
            ),
            (HarnessStop::Error, "finish", "git tabellio finish r1"),
            (
                HarnessStop::RepeatedState,
                "review",
                "git tabellio context r1",
            ),
            (HarnessStop::NoProgress, "review", "git tabellio context r1"),
            (HarnessStop::MaxLoops, "review", "git tabellio context r1"),
        ];
        for (stop, action, command) in table {
            let a = next_action(&blocked_loop(stop), &live(), &cond());
            assert_eq!(a.action, action, "{stop:?}");
            assert!(a.blocking);
            assert_eq!(a.command.as_deref(), Some(command));
            assert_eq!(a.reason, "the loop stopped here");
            let (step, step_command) = blocked_loop_step("r1", Some(stop));
            assert_eq!((step.as_str(), step_command.as_str()), (action, command));
        }
        assert_eq!(blocked_loop_step("r1", None).0, "review");
        // Blocked without a loop: validate again.
        let mut rec = run(RunState::Blocked);
        rec.reason = Some("required checks not passed".into());
        let a = next_action(&rec, &live(), &cond());
        assert_eq!((a.action.as_str(), a.blocking), ("finish", true));
        assert_eq!(a.reason, "the run is blocked: required checks not passed");
        assert!(loop_next_action(&rec).is_none());
    }

    #[test]
    fn a_broken_policy_is_fixed_first() {
        let mut l = live();
        l.policy_error = Some("not valid JSON".into());
        for state in [
            RunState::Active,
            RunState::Completed,
            RunState::ValidationFailed,
        ] {
            let (a, blocking, cmd) = decide(&run(state), &l, &cond());
            assert_eq!((a.as_str(), blocking, cmd), ("fix-policy", true, None));
        }
    }

    #[test]
    fn a_completed_run_is_promoted_unless_the_repository_moved() {
        let rec = run(RunState::Completed);
        assert_eq!(
            decide(&rec, &live(), &cond()),
            (
                "promote".into(),
                false,
                Some("git tabellio promote r1".into())
            )
        );
        let mut l = live();
        l.head_changed_since_validation = true;
        assert_eq!(decide(&rec, &l, &cond()).0, "finish");
        let mut l = live();
        l.target_deleted = true;
        assert_eq!(decide(&rec, &l, &cond()), ("restart".into(), true, None));
        let mut l = live();
        l.target_moved = Some(VALIDATED.into());
        let (a, blocking, _) = decide(&rec, &l, &cond());
        assert_eq!(
            (a.as_str(), blocking),
            ("promote", false),
            "an interrupted promotion"
        );
        l.target_moved = Some("5".repeat(40));
        let (a, blocking, cmd) = decide(&rec, &l, &cond());
        assert_eq!((a.as_str(), blocking), ("restart", true));
        assert_eq!(
            cmd.as_deref(),
            Some("git tabellio start --base main --task-from r1")
        );
        let c = Conditions {
            missing: vec!["test".into()],
            ..cond()
        };
        let a = next_action(&rec, &live(), &c);
        assert_eq!((a.action.as_str(), a.blocking), ("finish", true));
        assert_eq!(a.reason, "evidence is missing or invalid for: test");
        let c = Conditions {
            approval_needed: Some(vec!["tests/a.rs".into()]),
            promote_refused: Some("approval".into()),
            ..cond()
        };
        let a = next_action(&rec, &live(), &c);
        assert_eq!((a.action.as_str(), a.blocking), ("approve", true));
        assert_eq!(a.command.as_deref(), Some("git tabellio approve r1"));
        let c = Conditions {
            promote_refused: Some("locked".into()),
            ..cond()
        };
        let a = next_action(&rec, &live(), &c);
        assert_eq!((a.action.as_str(), a.blocking), ("unblock-promote", true));
        assert_eq!(a.reason, "promote would be refused: locked");
    }

    #[test]
    fn an_open_run_is_worked_on_then_finished() {
        let mut at_base = live();
        at_base.head = Some(BASE.into());
        for state in [
            RunState::Active,
            RunState::ValidationFailed,
            RunState::Blocked,
        ] {
            let (a, blocking, cmd) = decide(&run(state), &at_base, &cond());
            assert_eq!((a.as_str(), blocking, cmd), ("commit", false, None));
        }
        assert_eq!(
            decide(&run(RunState::Active), &live(), &cond()),
            (
                "finish".into(),
                false,
                Some("git tabellio finish r1".into())
            )
        );
        let c = Conditions {
            has_policy: false,
            ..cond()
        };
        assert_eq!(
            decide(&run(RunState::ValidationFailed), &live(), &c)
                .2
                .as_deref(),
            Some("git tabellio finish r1 -- <check command>")
        );
        let (a, blocking, _) = decide(&run(RunState::Looping), &live(), &cond());
        assert_eq!((a.as_str(), blocking), ("loop", false));
    }

    #[test]
    fn faulty_plans_block_a_failed_run() {
        let rec = run(RunState::ValidationFailed);
        let mut c = Conditions {
            plan_faults: Some(PlanFaults {
                summary: "open tasks".into(),
                misplaced: true,
            }),
            ..cond()
        };
        let (a, blocking, cmd) = decide(&rec, &live(), &c);
        assert_eq!((a.as_str(), blocking), ("plans", true));
        assert_eq!(
            cmd.as_deref(),
            Some("git tabellio plans reconcile r1 --commit")
        );
        c.plan_faults = Some(PlanFaults {
            summary: "open tasks".into(),
            misplaced: false,
        });
        assert_eq!(
            decide(&rec, &live(), &c).2.as_deref(),
            Some("git tabellio plans status r1")
        );
    }

    /// A land attempt refused at `head` (the validated commit of the sample run).
    fn refused(mut rec: RunRecord) -> RunRecord {
        rec.land_attempts.push(crate::model::land::LandAttempt {
            target: "refs/heads/main".into(),
            onto: "5".repeat(40),
            commit: VALIDATED.into(),
            paths: vec!["a.txt".into()],
            at: "2026-01-01T00:00:00Z".into(),
            result: Some(crate::model::land::Refusal::Conflict),
            head: Some(VALIDATED.into()),
            hunks: Vec::new(),
            failed: Vec::new(),
            isolated: None,
            reason: None,
        });
        rec
    }

    #[test]
    fn a_standing_refusal_is_repaired_by_a_reopen_not_finished_again() {
        for state in [RunState::Completed, RunState::ValidationFailed] {
            let rec = refused(run(state));
            let mut l = live();
            l.target_moved = Some("5".repeat(40));
            let a = next_action(&rec, &l, &cond());
            assert_eq!((a.action.as_str(), a.blocking), ("repair", true), "{state}");
            assert_eq!(a.command.as_deref(), Some("git tabellio reopen r1"));
            assert!(a.reason.contains("conflict in a.txt"), "{}", a.reason);
            let allowed = allowed_actions(&rec, &l, &cond());
            assert!(allowed.contains(&"reopen".to_string()));
            assert!(!allowed.contains(&"finish".to_string()));
            // A new commit since the refusal is new work: the refusal no longer stands.
            let mut moved = l.clone();
            moved.head = Some("6".repeat(40));
            moved.head_changed_since_validation = true;
            assert_ne!(next_action(&rec, &moved, &cond()).action, "repair");
        }
        // Reopened: repaired by its loop when a loop drove it, else validated by hand.
        let mut rec = refused(run(RunState::Reopened));
        rec.reopens.push(crate::model::land::Reopen {
            n: 1,
            base_before: BASE.into(),
            base_after: "5".repeat(40),
            head_before: VALIDATED.into(),
            head_after: "5".repeat(40),
            mode: crate::model::land::ReopenMode::Conflict,
            conflicts: vec!["a.txt".into()],
            after_attempts: 1,
            by: "reopen".into(),
            at: "2026-01-01T00:00:00Z".into(),
        });
        let mut dirty = live();
        dirty.dirty = vec!["a.txt".into()];
        let open = Conditions {
            conflicts_open: true,
            ..cond()
        };
        let a = next_action(&rec, &dirty, &open);
        assert_eq!((a.action.as_str(), a.blocking), ("repair", true));
        assert_eq!(a.command.as_deref(), Some("git tabellio finish r1"));
        rec.loop_state = Some(crate::model::loop_state::tests::stopped(
            HarnessStop::Validated,
        ));
        assert_eq!(
            next_action(&rec, &dirty, &open).command.as_deref(),
            Some("git tabellio loop r1")
        );
        // Resolved and committed: validate it on its new base.
        let a = next_action(&rec, &live(), &cond());
        assert_eq!((a.action.as_str(), a.blocking), ("repair", false));
    }

    #[test]
    fn allowed_actions_offer_nothing_that_would_be_refused() {
        let rec = run(RunState::Completed);
        assert_eq!(
            allowed_actions(&rec, &live(), &cond()),
            ["promote", "checkpoint", "finish", "abandon"]
        );
        let c = Conditions {
            missing: vec!["test".into()],
            ..cond()
        };
        assert!(!allowed_actions(&rec, &live(), &c).contains(&"promote".to_string()));
        let mut dirty = live();
        dirty.dirty = vec!["a".into()];
        assert_eq!(
            allowed_actions(&run(RunState::Active), &dirty, &cond()),
            ["abandon"]
        );
        let mut gone = live();
        gone.worktree_exists = false;
        let c = Conditions {
            branch_exists: false,
            ..cond()
        };
        assert!(allowed_actions(&run(RunState::Promoted), &gone, &c).is_empty());
        assert_eq!(
            allowed_actions(&run(RunState::Abandoned), &live(), &cond()),
            ["cleanup"]
        );
    }
}
