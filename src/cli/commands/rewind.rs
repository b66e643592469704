//! `rewind [<run>] <checkpoint> [--force]`: the run's worktree and branch back to a checkpoint.

use serde_json::json;

use tabellio::error::ErrorKind;
use tabellio::lifecycle::rewind::{self, RewindOptions, Uncommitted};
use tabellio::{Error, Result};

use crate::cli::format::{run_json, short};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
#[command(override_usage = "git tabellio rewind [OPTIONS] [RUN] <CHECKPOINT>")]
pub struct RewindArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    /// The checkpoint: its number as `log` shows it (1, 2, …), its commit, or a unique prefix.
    pub checkpoint: Option<String>,
    /// Save uncommitted work (tracked and untracked, not ignored) as a checkpoint first,
    /// instead of refusing.
    #[arg(short, long)]
    pub force: bool,
}

pub fn cmd_rewind(ctx: &Ctx, args: &RewindArgs) -> Result<Output> {
    let (run, checkpoint) = match (&args.run, &args.checkpoint) {
        (Some(r), Some(c)) => (Some(r.as_str()), c.as_str()),
        (Some(c), None) => (None, c.as_str()),
        (None, _) => {
            return Err(Error::usage("rewind needs the checkpoint to go back to")
                .hint("`git tabellio rewind [<run>] <checkpoint>`; `git tabellio log <run>` numbers the checkpoints"))
        }
    };
    let o = rewind::rewind(
        ctx.env()?,
        &RewindOptions {
            run,
            checkpoint,
            uncommitted: if args.force {
                Uncommitted::Save
            } else {
                Uncommitted::Refuse
            },
        },
    )
    .map_err(|e| match (run, e.kind) {
        // `rewind fix-1` outside a run worktree: a run named, its checkpoint forgotten.
        (None, ErrorKind::Usage) if e.message.starts_with("no run given") => Error::usage(format!(
            "{}; `{checkpoint}` was taken as the checkpoint",
            e.message
        ))
        .hint(format!(
            "name the run and the checkpoint: `git tabellio rewind {checkpoint} <checkpoint>`"
        )),
        _ => e,
    })?;
    let id = &o.run.run_id;
    let mut human = if o.rewound {
        format!(
            "run {id} rewound to checkpoint {} ({}), from {}",
            o.checkpoint,
            short(&o.commit),
            short(&o.from)
        )
    } else {
        format!(
            "run {id} is at checkpoint {} ({}) already; nothing to do",
            o.checkpoint,
            short(&o.commit)
        )
    };
    if let Some(n) = o.saved {
        human.push_str(&format!(
            "\nuncommitted work saved as checkpoint {n}: `git tabellio rewind {id} {n}` brings it back"
        ));
    }
    if !o.left_out.is_empty() {
        human.push_str(&format!(
            "\nnot saved and left in place (secret names): {}",
            o.left_out.join(", ")
        ));
    }
    Ok(Output::new(
        run_json(
            &o.run,
            o.workspace.as_deref(),
            json!({
                "checkpoint": o.checkpoint,
                "commit": o.commit,
                "from": o.from,
                "saved": o.saved,
                "left_out": o.left_out,
                "rewound": o.rewound,
            }),
        ),
        human,
    ))
}
