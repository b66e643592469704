//! `git tabellio enqueue <run>... [--priority] [--target <branch>] [--remote <name>]`.

use tabellio::lifecycle::enqueue::{self, EnqueueOptions, Enqueued};
use tabellio::{Error, Result};

use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct EnqueueArgs {
    /// The completed runs to queue, in this order.
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Place them ahead of every entry enqueued without --priority.
    #[arg(long)]
    pub priority: bool,
    /// Refuse a run that does not target this branch.
    #[arg(long, value_name = "BRANCH")]
    pub target: Option<String>,
    /// Publish the entries on this remote too (created there only if absent).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
}

pub fn cmd_enqueue(ctx: &Ctx, a: &EnqueueArgs) -> Result<Output> {
    let o = enqueue::enqueue(
        ctx.env()?,
        &EnqueueOptions {
            runs: a.runs.clone(),
            priority: a.priority,
            target: a.target.clone(),
            remote: a.remote.clone(),
        },
    )?;
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let mut human = String::new();
    for r in &o.runs {
        let priority = if r.entry.priority { " (priority)" } else { "" };
        human.push_str(&match r.result {
            Enqueued::Queued => format!("queued {} on {}{priority}\n", r.run, r.target),
            Enqueued::AlreadyQueued => format!(
                "{} is already queued on {} (since {})\n",
                r.run, r.target, r.entry.enqueued_at
            ),
        });
    }
    if let Some(remote) = &o.remote {
        human.push_str(&format!("published on {remote}\n"));
    }
    Ok(Output::new(json, human.trim_end().to_string()))
}
