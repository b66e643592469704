//! `git tabellio queue [--target <branch>] [--batch <N>]`.

use tabellio::lifecycle::land::DEFAULT_BATCH;
use tabellio::lifecycle::queue::{self, EntryState, QueueOptions};
use tabellio::{Error, Result};

use crate::cli::format::short;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    /// Only this branch's queue (default: every target's).
    #[arg(long, value_name = "BRANCH")]
    pub target: Option<String>,
    /// How many runs `land` validates together, for the estimated wait.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH)]
    pub batch: usize,
}

pub fn cmd_queue(ctx: &Ctx, a: &QueueArgs) -> Result<Output> {
    let o = queue::queue(
        ctx.env()?,
        &QueueOptions {
            target: a.target.clone(),
            batch: a.batch,
        },
    )?;
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let mut human = String::new();
    for r in &o.entries {
        let state = match r.state {
            EntryState::Waiting => "waiting".to_string(),
            EntryState::Blocked => format!(
                "blocked ({})",
                r.run_state.map_or("no ledger here", |s| s.as_str())
            ),
            EntryState::Done => format!(
                "done ({}), removed by the next land",
                r.run_state.map_or("gone", |s| s.as_str())
            ),
        };
        let wait = match r.estimated_wait_s {
            Some(s) => format!(", ~{s}s"),
            None => String::new(),
        };
        let priority = if r.entry.priority { " priority" } else { "" };
        human.push_str(&format!(
            "{:>3}. {} {} at {}{priority}: {state}{wait}\n",
            r.position,
            r.target,
            r.run,
            short(&r.entry.head)
        ));
    }
    for u in &o.unreadable {
        human.push_str(&format!("unreadable {}: {}\n", u.name, u.reason));
    }
    if o.entries.is_empty() && o.unreadable.is_empty() {
        human.push_str("the queue is empty");
    }
    Ok(Output::new(json, human.trim_end().to_string()))
}
