//! `cleanup <run> [--force]`: remove the worktree and branch of a finished run.

use serde_json::json;

use tabellio::lifecycle::manage;
use tabellio::Result;

use crate::cli::format::run_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// The run id.
    pub run: String,
    /// Discard uncommitted changes and unmerged commits of an abandoned run.
    #[arg(long)]
    pub force: bool,
}

pub fn cmd_cleanup(ctx: &Ctx, args: &CleanupArgs) -> Result<Output> {
    let o = manage::cleanup(
        ctx.env()?,
        &manage::CleanupOptions {
            run: &args.run,
            force: args.force,
        },
    )?;
    let human = format!(
        "cleaned up run {}: {}{}{}",
        args.run,
        o.removed_worktree
            .as_ref()
            .map_or("no worktree to remove".into(), |p| format!(
                "removed worktree {}",
                p.display()
            )),
        o.deleted_branch
            .as_ref()
            .map_or(String::new(), |b| format!(", deleted branch {b}")),
        o.ledger_left.as_ref().map_or(String::new(), |c| format!(
            "\nthe unreadable ledger is left as it was; delete it with `{c}`"
        ))
    );
    let removed = o.removed_worktree.as_ref().map(|p| p.display().to_string());
    Ok(Output::new(
        run_json(
            &o.run,
            None,
            match &o.ledger_left {
                None => json!({"removed_worktree": removed, "deleted_branch": o.deleted_branch}),
                Some(c) => json!({
                    "removed_worktree": removed,
                    "deleted_branch": o.deleted_branch,
                    "ledger_left": c,
                }),
            },
        ),
        human,
    ))
}
