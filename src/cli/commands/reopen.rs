//! `reopen [<run>]`.

use serde_json::json;

use tabellio::lifecycle::reopen;
use tabellio::model::land::ReopenMode;
use tabellio::Result;

use crate::cli::format::{run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ReopenArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
}

pub fn cmd_reopen(ctx: &Ctx, args: &ReopenArgs) -> Result<Output> {
    let env = ctx.env()?;
    let o = reopen::reopen(env, args.run.as_deref())?;
    let r = &o.reopen;
    let id = &o.run.run_id;
    let moved = format!(
        "run {id} reopened onto {} of {} (base was {})",
        short(&r.base_after),
        o.run.base.reference.trim_start_matches("refs/heads/"),
        short(&r.base_before)
    );
    let then = match r.mode {
        ReopenMode::Conflict => format!(
            "its change conflicts in {}: the conflict markers are in {}; resolve them, commit, then `git tabellio finish {id}`",
            r.conflicts.join(", "),
            o.workspace.display()
        ),
        ReopenMode::Replay | ReopenMode::Squash => format!(
            "its commits were {} onto the new base ({}); validate it: `git tabellio finish {id}`",
            if r.mode == ReopenMode::Replay { "replayed" } else { "squashed" },
            short(&r.head_after)
        ),
    };
    Ok(Output::new(
        run_json(
            &o.run,
            Some(o.workspace.as_path()),
            json!({ "reopen": to_json(&o.reopen) }),
        ),
        format!("{moved}\n{then}"),
    ))
}
