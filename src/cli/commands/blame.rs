//! `blame <path> [<rev>] [--porcelain]`: each line → commit → the run that landed it → actor.

use tabellio::lifecycle::blame;
use tabellio::Result;

use crate::cli::format::{short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct BlameArgs {
    /// The file, as the repository holds it.
    pub path: String,
    /// The commit to blame at (default: HEAD).
    pub rev: Option<String>,
    /// git's `blame --porcelain` format, with `tabellio-run`, `tabellio-actor`,
    /// `tabellio-initiator` and `tabellio-via` after each commit's details.
    #[arg(long)]
    pub porcelain: bool,
}

pub fn cmd_blame(ctx: &Ctx, args: &BlameArgs) -> Result<Output> {
    let o = blame::blame(ctx.store()?, &args.path, args.rev.as_deref())?;
    if args.porcelain && !ctx.json {
        return Ok(Output::new(serde_json::Value::Null, o.porcelain()));
    }
    let width = o.lines.len().to_string().len();
    let mut human = String::new();
    for l in &o.lines {
        let who = match &l.run {
            Some(run) => format!("{} {}:{}", run.run_id, run.actor.kind, run.actor.id),
            None => "-".to_string(),
        };
        human.push_str(&format!(
            "{} ({who} {:>width$}) {}\n",
            short(&l.commit),
            l.line,
            l.text
        ));
    }
    Ok(Output::new(to_json(&o), human))
}
