//! The execute phase: run the agent in the run worktree with its context packet, and record
//! how it stopped and what it printed (redacted).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Context, Result};
use crate::evidence::produce::output_record;
use crate::model::loop_state::{AgentRun, AgentStop, Phase};
use crate::model::time;
use crate::runner::{self, CheckCommand, CommandStop, RunOptions};
use crate::store::ledger::Ledger;

use super::{
    commit, context, done, loop_of, next_phase, Driver, AGENT_EXCERPT_BYTES, DONE_TAIL_BYTES,
};

impl Driver<'_> {
    pub(super) fn execute(&mut self, ledger: Ledger) -> Result<Ledger> {
        let env = self.env;
        let store = &env.store;
        let rec = &ledger.record;
        let state = loop_of(&ledger)?;
        let n = state.iteration;
        if self.interrupt.load(Ordering::SeqCst) {
            // Interrupted before the agent started: do not start it.
            return Ok(ledger);
        }
        let path = self.workspace(&ledger)?;
        let context_file = context::write_agent_context(
            store,
            &ledger,
            context::Audience::LoopAgent {
                iteration: n,
                max_loops: state.max_loops,
            },
        )?;
        let cmd = CheckCommand {
            name: "agent".into(),
            argv: self.argv.clone(),
            timeout: Duration::from_secs(state.agent.timeout_s),
        };
        let paths = crate::store::paths::LocalPaths::new(store, Some(&path));
        let opts = RunOptions {
            cwd: path,
            excerpt_cap: AGENT_EXCERPT_BYTES,
            stream: self.opts.stream,
            env_add: vec![
                ("TABELLIO_RUN_ID".into(), rec.run_id.clone()),
                ("TABELLIO_ITERATION".into(), n.to_string()),
                ("TABELLIO_MAX_LOOPS".into(), state.max_loops.to_string()),
                (
                    "TABELLIO_CONTEXT".into(),
                    context_file.display().to_string(),
                ),
            ],
            keep_stdout_tail: DONE_TAIL_BYTES,
            // The agent must not sign evidence or approvals with the user's key.
            signing_env: crate::runner::SigningEnv::Withheld,
            ..RunOptions::default()
        };
        self.say(
            n,
            Phase::Execute,
            format!("running the agent: {}", state.agent.argv.join(" ")),
        );
        let outcome =
            runner::run_command(&cmd, &opts).context(|| "could not run the agent".to_string())?;
        if self.interrupt.load(Ordering::SeqCst) {
            // We stopped the agent ourselves: not its failure. Execute runs again on resume.
            self.agent_interrupted = true;
            return Ok(ledger);
        }
        let stopped = match (outcome.stop, outcome.exit_code) {
            (CommandStop::Exited, Some(0)) => AgentStop::Exited,
            (CommandStop::Exited, _) => AgentStop::Nonzero,
            (CommandStop::Signaled, _) => AgentStop::Signaled,
            (CommandStop::TimedOut, _) => AgentStop::TimedOut,
            (CommandStop::NotFound | CommandStop::SpawnFailed, _) => AgentStop::NotFound,
        };
        let run = AgentRun {
            stopped,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            started_at: time::rfc3339(outcome.started_at),
            finished_at: time::rfc3339(outcome.finished_at),
            duration_ms: outcome.duration_ms,
            claimed_done: done::claims_done(&outcome.stdout_tail),
            // What the agent printed of the secrets its command line carries is redacted too.
            output: output_record(&outcome.output, &self.argv, &paths),
        };
        self.say(
            n,
            Phase::Execute,
            format!(
                "agent {}{} in {} ms{}",
                stopped.as_str(),
                run.exit_code
                    .map_or(String::new(), |c| format!(" (exit {c})")),
                run.duration_ms,
                if run.claimed_done {
                    ", claims DONE"
                } else {
                    ""
                }
            ),
        );
        let (next, command) = next_phase(rec, Phase::Collect, |l| {
            l.why_agent_stopped = Some(stopped);
            if let Some(cur) = l.current.as_mut() {
                cur.agent = Some(run);
                cur.why_agent_stopped = Some(stopped);
            }
        });
        commit(store, &ledger, next, &command)
    }
}
