//! The library, in-process: what the `lib_*` tests share. They set repositories up with git
//! through the hermetic environment ([`crate::util`]) and then call the `tabellio` API directly,
//! no `git-tabellio` process, so they are the quick suite (`cargo test --test it lib_`).
//!
//! The library runs in this test process, whose environment every test thread shares: the
//! identity it commits with is set per repository (local `git config`), never through the
//! process environment or the global config.

use std::path::PathBuf;

use tabellio::evidence::produce::CheckSelection;
use tabellio::lifecycle::finish::FinishOutcome;
use tabellio::lifecycle::start::{start, StartOptions};
use tabellio::lifecycle::status::{status_of, StatusOutcome};
use tabellio::model::{RunRecord, RunState};
use tabellio::run::Env;
use tabellio::runner::Stream;
use tabellio::store::ledger::{transition, Ledger};

use crate::util::*;

impl TestEnv {
    /// [`TestEnv::new`] with a repository-local identity for the in-process library.
    pub fn for_lib() -> TestEnv {
        let t = TestEnv::new();
        t.git(&["config", "user.name", "Library Test"]).ok();
        t.git(&["config", "user.email", "lib@example.com"]).ok();
        t
    }

    /// The library's view of the repository, as a command started in its main worktree has.
    pub fn env(&self) -> Env {
        Env::discover(&self.repo).expect("the test repository is discoverable")
    }

    /// Start run `id` from `main` in-process; its worktree.
    pub fn lib_start(&self, id: &str) -> PathBuf {
        let opts = StartOptions {
            run_id: Some(id.into()),
            task: format!("task of {id}"),
            base: Some("main".into()),
            branch: None,
            actor: Some("agent:lib-test".into()),
            carry_from: None,
        };
        start(&self.env(), opts).expect("start").workspace
    }

    /// [`TestEnv::lib_start`], then commit `<id>.txt` in the run worktree; its worktree.
    pub fn lib_started(&self, id: &str) -> PathBuf {
        let wt = self.lib_start(id);
        self.commit_file_in(&wt, &format!("{id}.txt"), &format!("{id}\n"));
        wt
    }

    /// Finish run `id` in-process with the ad-hoc check `argv` (none: the policy's checks).
    pub fn lib_finish(&self, id: &str, argv: &[&str]) -> FinishOutcome {
        let sel = CheckSelection {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            ..CheckSelection::default()
        };
        tabellio::lifecycle::finish::finish(
            &self.env(),
            &tabellio::lifecycle::finish::FinishOptions {
                run: Some(id),
                checks: &sel,
                stream: Stream::Quiet,
            },
        )
        .expect("finish")
    }

    /// A run started, worked on and finished with a passing `true`: completed.
    pub fn lib_completed(&self, id: &str) -> PathBuf {
        let wt = self.lib_started(id);
        assert!(self.lib_finish(id, &["true"]).passed());
        wt
    }

    /// The run's ledger as it is now.
    pub fn ledger(&self, id: &str) -> Ledger {
        self.env().store.find_ledger(id).expect("the run exists")
    }

    /// `status` of run `id`, in-process.
    pub fn lib_status(&self, id: &str) -> StatusOutcome {
        let env = self.env();
        let ledger = env.store.find_ledger(id).expect("the run exists");
        status_of(&env.store, &ledger).expect("status")
    }

    /// Move run `id` to `state` with its record changed by `edit`, through the library's own
    /// ledger advance (as the loop or a hand-edited ledger leaves a run).
    pub fn set_run(&self, id: &str, state: RunState, edit: impl FnOnce(&mut RunRecord)) {
        let env = self.env();
        let ledger = env.store.find_ledger(id).expect("the run exists");
        let mut next = transition(&ledger.record, state);
        edit(&mut next);
        tabellio::run::advance(&env.store, &ledger, next, "test", &[]).expect("advance");
    }

    /// Every ref and its value: what a refused operation must leave as it was.
    pub fn refs(&self) -> String {
        self.git_out(&["for-each-ref", "--format=%(objectname) %(refname)"])
    }

    /// The commit `rev` names, as hex.
    pub fn rev(&self, rev: &str) -> String {
        self.git_out(&["rev-parse", rev])
    }
}
