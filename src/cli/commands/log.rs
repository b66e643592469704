//! `log <run>`: a run's ledger, one line per state transition.

use serde_json::json;

use tabellio::lifecycle::manage;
use tabellio::Result;

use crate::cli::format::{run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The run id.
    pub run: String,
}

pub fn cmd_log(ctx: &Ctx, args: &LogArgs) -> Result<Output> {
    let (run, entries) = manage::log(ctx.env()?, &args.run)?;
    let human = entries
        .iter()
        .map(|e| format!("{} {} {}", short(&e.commit), e.at, e.message))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Output::new(
        run_json(&run, None, json!({"log": to_json(&entries)})),
        human,
    ))
}
