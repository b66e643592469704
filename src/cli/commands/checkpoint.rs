//! `checkpoint`: record progress on the run branch's head commit.

use serde_json::json;

use tabellio::lifecycle::checkpoint;
use tabellio::Result;

use crate::cli::format::{run_json, short};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    /// A summary (default: the commit's subject).
    #[arg(short, long)]
    pub message: Option<String>,
}

pub fn cmd_checkpoint(ctx: &Ctx, args: &CheckpointArgs) -> Result<Output> {
    let o = checkpoint::checkpoint(ctx.env()?, args.run.as_deref(), args.message.as_deref())?;
    let human = if o.recorded {
        format!(
            "checkpoint {} on run {} ({} so far)",
            short(&o.commit),
            o.run.run_id,
            o.run.checkpoints.len()
        )
    } else {
        format!(
            "{} is already checkpointed on run {}; nothing to do",
            short(&o.commit),
            o.run.run_id
        )
    };
    Ok(Output::new(
        run_json(
            &o.run,
            o.workspace.as_deref(),
            json!({"commit": o.commit, "recorded": o.recorded}),
        ),
        human,
    ))
}
