//! The next action, end to end in-process: every run state and every live condition that
//! changes the decision, observed by `status_of` on real repositories (the pure table has its
//! own unit tests beside it).

use tabellio::lifecycle::status::StatusOutcome;
use tabellio::model::loop_state::{
    AgentSpec, AgentStop, DoneReason, HarnessStop, LoopState, LoopStatus, Phase,
};
use tabellio::model::RunState;

use crate::util::*;

/// (action, blocking, command) of the status.
fn decision(s: &StatusOutcome) -> (&str, bool, Option<&str>) {
    (
        s.next_action.action.as_str(),
        s.next_action.blocking,
        s.next_action.command.as_deref(),
    )
}

/// The status's next action is `action` (blocking or not); returns the status for more.
#[track_caller]
fn expect(t: &TestEnv, id: &str, action: &str, blocking: bool) -> StatusOutcome {
    let s = t.lib_status(id);
    assert_eq!(
        (s.next_action.action.as_str(), s.next_action.blocking),
        (action, blocking),
        "{:#?}",
        s.next_action
    );
    s
}

/// A loop state as a loop stopped by `stop` leaves it.
fn loop_stopped(stop: Option<HarnessStop>) -> LoopState {
    LoopState {
        iteration: 1,
        phase: Phase::Finalize,
        max_loops: 3,
        no_progress_limit: 2,
        status: LoopStatus::Error,
        why_agent_stopped: Some(AgentStop::Exited),
        why_harness_stopped: stop,
        done_reason: Some(DoneReason::NoClaim),
        agent: AgentSpec {
            argv: vec!["agent".into()],
            argv_sha256: "0".repeat(64),
            redacted: false,
            timeout_s: 60,
        },
        task_sha256: "0".repeat(64),
        checks: Vec::new(),
        promote: false,
        repair: false,
        started_at: "2026-01-01T00:00:00Z".into(),
        stopped_at: None,
        resumes: 0,
        current: None,
        history: Vec::new(),
    }
}

#[test]
fn an_active_run_commits_then_finishes() {
    let t = TestEnv::for_lib();
    let wt = t.lib_start("r1");
    let s = expect(&t, "r1", "commit", false);
    assert_eq!(s.state, RunState::Active);
    // No work yet: nothing to validate.
    assert!(!s.allowed_actions.contains(&"finish".to_string()));
    t.commit_file_in(&wt, "a.txt", "a\n");
    let s = expect(&t, "r1", "finish", false);
    // No policy: finish needs a check command.
    assert_eq!(
        s.next_action.command.as_deref(),
        Some("git tabellio finish r1 -- <check command>")
    );
    assert_eq!(
        s.allowed_actions,
        ["checkpoint", "finish", "loop", "abandon"]
    );
    assert!(s.satisfied_evidence.is_empty() && s.missing_evidence.is_empty());
}

#[test]
fn a_policy_at_the_head_names_the_finish_command() {
    let t = TestEnv::for_lib();
    t.commit_policy(&policy(&[("ok", &["true"])]));
    t.lib_started("r1");
    let s = expect(&t, "r1", "finish", false);
    assert_eq!(
        s.next_action.command.as_deref(),
        Some("git tabellio finish r1")
    );
    assert_eq!(s.missing_evidence, ["ok"]);
}

#[test]
fn a_dirty_or_switched_worktree_blocks_every_working_state() {
    for state in ["active", "validation_failed", "completed", "blocked"] {
        let t = TestEnv::for_lib();
        let wt = t.lib_started("r1");
        match state {
            "validation_failed" => assert!(!t.lib_finish("r1", &["false"]).passed()),
            "completed" => assert!(t.lib_finish("r1", &["true"]).passed()),
            "blocked" => t.set_run("r1", RunState::Blocked, |r| r.reason = Some("stuck".into())),
            _ => {}
        }
        // Untracked, then changed: either is uncommitted work.
        write_file(&wt.join("new.txt"), "new\n");
        let s = expect(&t, "r1", "commit", true);
        assert_eq!(s.live.untracked, ["new.txt"], "{state}");
        assert!(
            !s.allowed_actions
                .iter()
                .any(|a| a == "finish" || a == "checkpoint"),
            "{state}: {:?}",
            s.allowed_actions
        );
        std::fs::remove_file(wt.join("new.txt")).unwrap();
        write_file(&wt.join("r1.txt"), "changed\n");
        let s = expect(&t, "r1", "commit", true);
        assert_eq!(s.live.dirty, ["r1.txt"], "{state}");
        t.git_in(&wt, &["checkout", "--", "r1.txt"]).ok();
        // The branch switched away in the run worktree comes before everything else.
        t.git_in(&wt, &["switch", "-q", "-c", "elsewhere"]).ok();
        write_file(&wt.join("new.txt"), "new\n");
        let s = expect(&t, "r1", "switch-branch", true);
        assert_eq!(
            s.live.branch_switched.as_deref(),
            Some("refs/heads/elsewhere")
        );
        let command = s.next_action.command.unwrap();
        assert!(
            command.ends_with("switch tabellio/r1"),
            "{state}: {command}"
        );
    }
}

#[test]
fn a_missing_worktree_or_branch_is_said() {
    let t = TestEnv::for_lib();
    let wt = t.lib_started("r1");
    let wt_s = wt.to_str().unwrap();
    t.git(&["worktree", "remove", "--force", wt_s]).ok();
    let s = expect(&t, "r1", "abandon", true);
    assert_eq!(s.next_action.reason, "the run worktree is missing");
    assert!(!s.live.worktree_exists);
    t.git(&["branch", "-q", "-D", "tabellio/r1"]).ok();
    let s = expect(&t, "r1", "elsewhere", true);
    assert_eq!(s.next_action.command, None);
}

#[test]
fn a_failed_validation_is_finished_again() {
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    assert!(!t.lib_finish("r1", &["false"]).passed());
    let s = expect(&t, "r1", "finish", false);
    assert_eq!(s.state, RunState::ValidationFailed);
    assert!(s.next_action.reason.contains("the last validation failed"));
    // The failed check is not satisfied at the head.
    assert_eq!(s.missing_evidence, ["adhoc"]);
}

#[test]
fn a_completed_run_is_promoted() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let s = expect(&t, "r1", "promote", false);
    assert_eq!(decision(&s).2, Some("git tabellio promote r1"));
    assert_eq!(
        s.allowed_actions,
        ["promote", "checkpoint", "finish", "abandon"]
    );
    assert_eq!(s.satisfied_evidence, ["adhoc"]);
    assert!(s.missing_evidence.is_empty());
}

#[test]
fn a_head_moved_after_validation_is_validated_again() {
    let t = TestEnv::for_lib();
    let wt = t.lib_completed("r1");
    t.commit_file_in(&wt, "more.txt", "more\n");
    let s = expect(&t, "r1", "finish", true);
    assert!(s.live.head_changed_since_validation);
    assert!(!s.allowed_actions.contains(&"promote".to_string()));
}

#[test]
fn a_moved_or_deleted_target_restarts_the_run() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    t.commit_file_in(&t.repo, "main.txt", "moved\n");
    let tip = t.rev("main");
    let s = expect(&t, "r1", "restart", true);
    assert_eq!(s.live.target_moved.as_deref(), Some(tip.as_str()));
    assert!(
        s.next_action.reason.contains("moved to"),
        "{}",
        s.next_action.reason
    );
    assert_eq!(
        s.next_action.command.as_deref(),
        Some("git tabellio start --base main --task-from r1")
    );
    assert!(!s.allowed_actions.contains(&"promote".to_string()));
    t.git(&["update-ref", "-d", "refs/heads/main"]).ok();
    let s = expect(&t, "r1", "restart", true);
    assert!(s.live.target_deleted);
    assert_eq!(
        s.next_action.reason,
        "the target refs/heads/main no longer exists"
    );
}

#[test]
fn a_target_at_the_validated_commit_finishes_an_interrupted_promotion() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let validated = t.rev("tabellio/r1");
    t.git(&["update-ref", "refs/heads/main", &validated]).ok();
    let s = expect(&t, "r1", "promote", false);
    assert!(
        s.next_action.reason.contains("interrupted"),
        "{}",
        s.next_action.reason
    );
    assert!(s.allowed_actions.contains(&"promote".to_string()));
}

#[test]
fn a_held_lock_on_the_target_unblocks_promote_first() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let lock = t.repo.join(".git/refs/heads/main.lock");
    write_file(&lock, "");
    let s = expect(&t, "r1", "unblock-promote", true);
    assert!(
        s.next_action.reason.contains("main.lock"),
        "{}",
        s.next_action.reason
    );
    assert!(!s.allowed_actions.contains(&"promote".to_string()));
    std::fs::remove_file(&lock).unwrap();
    expect(&t, "r1", "promote", false);
}

#[test]
fn missing_or_tampered_evidence_is_finished_again() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let head = t.rev("tabellio/r1");
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    t.forge_evidence(&head, &note.replace("\"exit_code\":0", "\"exit_code\":1"));
    let s = expect(&t, "r1", "finish", true);
    assert_eq!(s.missing_evidence, ["adhoc"]);
    assert!(s.satisfied_evidence.is_empty());
    assert!(!s.allowed_actions.contains(&"promote".to_string()));
    t.git(&["update-ref", "-d", "refs/notes/tabellio/evidence"])
        .ok();
    let s = expect(&t, "r1", "finish", true);
    assert_eq!(
        s.next_action.reason,
        "evidence is missing or invalid for: adhoc"
    );
}

#[test]
fn a_broken_policy_at_the_head_is_fixed_first() {
    let t = TestEnv::for_lib();
    let wt = t.lib_start("r1");
    t.commit_file_in(&wt, ".tabellio/policy.json", "{not json");
    let s = expect(&t, "r1", "fix-policy", true);
    assert!(s.live.policy_error.is_some());
    assert_eq!(s.missing_evidence, ["policy"]);
}

#[test]
fn a_blocked_loop_says_what_its_stop_needs() {
    let cases = [
        (
            Some(HarnessStop::Interrupted),
            "loop",
            "git tabellio loop r1 --resume",
        ),
        (
            Some(HarnessStop::ExecutorFailure),
            "loop",
            "git tabellio loop r1 -- <a working agent command>",
        ),
        (Some(HarnessStop::Error), "finish", "git tabellio finish r1"),
        (
            Some(HarnessStop::NoProgress),
            "review",
            "git tabellio context r1",
        ),
        (
            Some(HarnessStop::MaxLoops),
            "review",
            "git tabellio context r1",
        ),
        (
            Some(HarnessStop::RepeatedState),
            "review",
            "git tabellio context r1",
        ),
    ];
    for (stop, action, command) in cases {
        let t = TestEnv::for_lib();
        let wt = t.lib_started("r1");
        t.set_run("r1", RunState::Blocked, |r| {
            r.reason = Some("the loop stopped here".into());
            r.loop_state = Some(loop_stopped(stop));
        });
        let s = expect(&t, "r1", action, true);
        assert_eq!(s.next_action.command.as_deref(), Some(command), "{stop:?}");
        assert_eq!(s.next_action.reason, "the loop stopped here");
        // Uncommitted changes: only an interrupted loop commits them itself on resume.
        write_file(&wt.join("half-done.txt"), "x\n");
        let want = if stop == Some(HarnessStop::Interrupted) {
            "loop"
        } else {
            "commit"
        };
        expect(&t, "r1", want, true);
    }
    // Blocked with no loop's word on why: the reason, and validate again.
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    t.set_run("r1", RunState::Blocked, |r| {
        r.reason = Some("a person must look".into())
    });
    let s = expect(&t, "r1", "finish", true);
    assert_eq!(
        s.next_action.reason,
        "the run is blocked: a person must look"
    );
}

#[test]
fn a_looping_run_is_resumed_even_with_uncommitted_changes() {
    let t = TestEnv::for_lib();
    let wt = t.lib_started("r1");
    t.set_run("r1", RunState::Looping, |r| {
        r.loop_state = Some(loop_stopped(None))
    });
    let s = expect(&t, "r1", "loop", false);
    assert_eq!(decision(&s).2, Some("git tabellio loop r1 --resume"));
    assert_eq!(s.allowed_actions, ["loop --resume", "abandon"]);
    write_file(&wt.join("agent-work.txt"), "x\n");
    expect(&t, "r1", "loop", false);
}

#[test]
fn a_finished_run_is_cleaned_up_then_done() {
    for state in ["promoted", "abandoned"] {
        let t = TestEnv::for_lib();
        t.lib_completed("r1");
        let env = t.env();
        if state == "promoted" {
            tabellio::lifecycle::promote::promote(
                &env,
                &tabellio::lifecycle::promote::PromoteOptions {
                    run: Some("r1"),
                    dry_run: false,
                },
            )
            .expect("promote");
        } else {
            tabellio::lifecycle::abandon::abandon(&env, Some("r1"), Some("no")).expect("abandon");
        }
        let s = expect(&t, "r1", "cleanup", false);
        assert_eq!(s.state.to_string(), state);
        assert_eq!(decision(&s).2, Some("git tabellio cleanup r1"));
        assert_eq!(s.allowed_actions, ["cleanup"]);
        // An abandoned run's commits are on no other branch: deleting them takes --force.
        let force = state == "abandoned";
        tabellio::lifecycle::manage::cleanup(
            &env,
            &tabellio::lifecycle::manage::CleanupOptions { run: "r1", force },
        )
        .expect("cleanup");
        let s = expect(&t, "r1", "none", false);
        assert!(s.allowed_actions.is_empty());
    }
}
