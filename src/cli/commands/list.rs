//! `list [--state <state>]`: the runs, one line each.

use serde_json::json;

use tabellio::lifecycle::manage;
use tabellio::Result;

use crate::cli::format::{printable, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only runs in this state.
    #[arg(long)]
    pub state: Option<String>,
}

pub fn cmd_list(ctx: &Ctx, args: &ListArgs) -> Result<Output> {
    let o = manage::list(ctx.env()?, args.state.as_deref())?;
    let human = o
        .runs
        .iter()
        .map(|r| {
            format!(
                "{:<24} {:<18} {}{}{}",
                r.run.run_id,
                r.run.state.as_str(),
                printable(&r.run.summary),
                r.run
                    .landed
                    .as_deref()
                    .map_or(String::new(), |c| format!(" (landed as {})", short(c))),
                r.archived
                    .as_deref()
                    .map_or(String::new(), |a| format!(" (archived in {a})"))
            )
        })
        .chain(o.unreadable.iter().map(|u| {
            format!(
                "{:<24} {:<18} {}; `git tabellio status {}` shows how to repair it",
                u.run_id, "unreadable", u.message, u.run_id
            )
        }))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Output::new(
        json!({"runs": to_json(&o.runs), "unreadable": to_json(&o.unreadable)}),
        human,
    ))
}
