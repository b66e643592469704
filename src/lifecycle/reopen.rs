//! `reopen`: move a run `land` refused onto its target's current tip for its repair (see
//! [`crate::run::reopen`] for what moves and how). The run becomes `reopened`, with its new
//! base frozen; its previous base and attempts stay in its record. Every precondition is
//! checked before anything is written.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::model::land::Reopen;
use crate::model::RunRecord;
use crate::run::{resolve_run, Env};

#[derive(Debug, Serialize)]
pub struct ReopenOutcome {
    pub run: RunRecord,
    pub workspace: PathBuf,
    /// The move just recorded (`run.reopens`' last entry).
    pub reopen: Reopen,
}

/// Reopen `run` (or the run whose worktree the command runs in).
pub fn reopen(env: &Env, run: Option<&str>) -> Result<ReopenOutcome> {
    let ledger = resolve_run(env, run)?;
    let done = crate::run::reopen::reopen(env, &ledger, "reopen")?;
    Ok(ReopenOutcome {
        run: done.ledger.record,
        workspace: done.workspace,
        reopen: done.reopen,
    })
}
