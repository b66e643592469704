//! `land --reopen` (or the policy's `"land": {"on_refuse": "reopen"}`): after the queue landed
//! what lands, each run it refused for a conflict or a failure of the stacked tree is reopened
//! onto the target's new tip for its repair ([`crate::run::reopen`]). A run that cannot be
//! reopened (its worktree is missing or dirty) stays as refused, with why.

use serde::Serialize;

use crate::error::Result;
use crate::model::land::ReopenMode;
use crate::model::RunState;
use crate::run::Env;

use super::{Landing, RunLanding, Waiting};

/// What became of one refused run's reopen.
#[derive(Debug, Clone, Serialize)]
pub struct Requeued {
    pub run_id: String,
    /// `replay`, `squash` or `conflict`; `None` when it could not be reopened.
    pub mode: Option<ReopenMode>,
    /// The paths holding conflict markers in its worktree.
    pub conflicts: Vec<String>,
    /// Its new base.
    pub base: Option<String>,
    /// Why it could not be reopened.
    pub error: Option<String>,
}

/// Reopen every run of `runs` that was refused by a conflict or as a culprit, and every run
/// `waiting` with a refusal from before; their results' `state` becomes `reopened`.
pub fn reopen_refused(
    env: &Env,
    runs: &mut [RunLanding],
    waiting: &[Waiting],
) -> Result<Vec<Requeued>> {
    let mut out = Vec::new();
    let refused = runs
        .iter_mut()
        .filter(|r| matches!(r.result, Landing::Conflict | Landing::ValidationFailed))
        .map(|r| (r.run_id.clone(), Some(r)));
    let earlier = waiting.iter().map(|w| (w.run_id.clone(), None));
    for (run_id, result) in refused.chain(earlier).collect::<Vec<_>>() {
        let ledger = env.store.find_ledger(&run_id)?;
        match crate::run::reopen::reopen(env, &ledger, "land") {
            Ok(done) => {
                if let Some(r) = result {
                    r.state = RunState::Reopened;
                }
                out.push(Requeued {
                    run_id: run_id.clone(),
                    mode: Some(done.reopen.mode),
                    conflicts: done.reopen.conflicts,
                    base: Some(done.reopen.base_after),
                    error: None,
                });
            }
            Err(e) => out.push(Requeued {
                run_id: run_id.clone(),
                mode: None,
                conflicts: Vec::new(),
                base: None,
                error: Some(match e.hint {
                    Some(h) => format!("{} ({h})", e.message),
                    None => e.message,
                }),
            }),
        }
    }
    Ok(out)
}
