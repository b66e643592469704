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
    if o.records
        .iter()
        .any(|e| e.raw.as_deref().is_some_and(names_our_schema))
    {
        human.push_str(
            "hint: a tabellio record this version cannot read (a schema or a field it does not know) \
             was written by a newer git-tabellio: upgrade to read it (docs/storage.md, \"Compatibility\")\n",
        );
    }
    Ok(Output::new(to_json(&o), human))
}

/// Whether `line` is JSON naming a `tabellio.*` schema: one of our records, by its own word.
fn names_our_schema(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| {
        v.get("schema")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| s.starts_with("tabellio."))
    })
}
