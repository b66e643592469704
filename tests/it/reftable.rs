//! The reftable pass: the same tests again, on repositories with reftable ref storage. Each
//! module below is the very file of the files pass, compiled a second time under
//! `reftable::`; the test helper sees that path in the name of the test's thread and creates
//! its repositories with `--ref-format=reftable` ([`crate::util::ref_format`]).
//!
//! Not here: modules that build a torn files-backend state by hand (lock files under
//! `.git/refs/`, a loose ref written directly: `recovery`, `refusals`), which a reftable
//! repository cannot be in.

// Loading each file twice is the point: one body, two ref formats.
#![allow(clippy::duplicate_mod)]

#[path = "approvals.rs"]
mod approvals;
#[path = "blame.rs"]
mod blame;
#[path = "corruption.rs"]
mod corruption;
#[path = "crash.rs"]
mod crash;
#[path = "drain.rs"]
mod drain;
#[path = "export.rs"]
mod export;
#[path = "fleet.rs"]
mod fleet;
#[path = "gc.rs"]
mod gc;
#[path = "git_environment.rs"]
mod git_environment;
#[path = "harness.rs"]
mod harness;
#[path = "hooks.rs"]
mod hooks;
#[path = "inputs.rs"]
mod inputs;
#[path = "land.rs"]
mod land;
#[path = "lanes.rs"]
mod lanes;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "plan_completion.rs"]
mod plan_completion;
#[path = "plans.rs"]
mod plans;
#[path = "promote.rs"]
mod promote;
#[path = "provenance.rs"]
mod provenance;
#[path = "pull.rs"]
mod pull;
#[path = "queue.rs"]
mod queue;
#[path = "reopen.rs"]
mod reopen;
#[path = "replacements.rs"]
mod replacements;
#[path = "rewind.rs"]
mod rewind;
#[path = "sync.rs"]
mod sync;
#[path = "trust.rs"]
mod trust;
#[path = "unreadable_refs.rs"]
mod unreadable_refs;
#[path = "verdicts.rs"]
mod verdicts;
#[path = "verify.rs"]
mod verify;
#[path = "worktrees.rs"]
mod worktrees;

/// The pass itself: a test under `reftable::` is told reftable, and every way the tests make a
/// repository (a plain one, a bare server, a clone of it, a bare clone) makes a reftable one.
/// The helper checks each repository it makes too ([`crate::util::TestEnv::assert_ref_storage`]);
/// this test fails when the switch itself stops working, which would make every check there a
/// check of nothing.
#[test]
fn the_pass_makes_reftable_repositories() {
    use crate::util::{ref_format, TestEnv};
    assert_eq!(
        ref_format(),
        "reftable",
        "a test of the pass is not told reftable: the pass would test the files backend again"
    );
    let t = TestEnv::new();
    let server = TestEnv::bare_server();
    let clone = TestEnv::clone_of(&server);
    let bare = t.bare_clone();
    for (env, repo) in [
        (&t, &t.repo),
        (&server, &server.repo),
        (&clone, &clone.repo),
        (&t, &bare),
    ] {
        assert_eq!(
            env.git_out_in(repo, &["rev-parse", "--show-ref-format"]),
            "reftable",
            "{}",
            repo.display()
        );
        assert_eq!(
            env.git_out_in(
                repo,
                &["config", "--default", "files", "extensions.refStorage"]
            ),
            "reftable",
            "{}",
            repo.display()
        );
    }
}
