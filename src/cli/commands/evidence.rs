//! `evidence [<rev>]`: the evidence records on a commit (and its tree), or on a tree.

use tabellio::lifecycle::manage;
use tabellio::Result;

use crate::cli::color;
use crate::cli::format::{short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct EvidenceArgs {
    /// A commit or a tree (default: HEAD).
    #[arg(default_value = "HEAD")]
    pub rev: String,
}

pub fn cmd_evidence(ctx: &Ctx, args: &EvidenceArgs) -> Result<Output> {
    let o = manage::evidence(ctx.env()?, &args.rev)?;
    let mut human = match &o.commit {
        Some(commit) => format!(
            "commit {} (tree {}): {} record(s)\n",
            commit,
            short(&o.tree),
            o.records.len()
        ),
        None => format!("tree {}: {} record(s)\n", o.tree, o.records.len()),
    };
    for e in &o.records {
        match &e.record {
            Some(r) => human.push_str(&format!(
                "{} {:<16} {} {}{}\n",
                color::stdout().status(r.status.as_str(), 9),
                r.check.name,
                r.finished_at,
                r.run_id.as_deref().unwrap_or("-"),
                if e.valid {
                    ""
                } else {
                    "  TAMPERED (digest mismatch)"
                }
            )),
            None => human.push_str(&format!(
                "unreadable record: {}\n",
                e.problem.as_deref().unwrap_or("not a record")
            )),
        }
    }
    Ok(Output::new(to_json(&o), human))
}
