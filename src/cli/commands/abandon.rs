//! `abandon <run> [-m <why>]`.

use serde_json::json;

use tabellio::lifecycle::abandon;
use tabellio::Result;

use crate::cli::format::{run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct AbandonArgs {
    /// The run id.
    pub run: String,
    /// Why the run is abandoned (kept as the run's reason).
    #[arg(short, long)]
    pub message: Option<String>,
}

pub fn cmd_abandon(ctx: &Ctx, args: &AbandonArgs) -> Result<Output> {
    let env = ctx.env()?;
    let o = abandon::abandon(env, Some(&args.run), args.message.as_deref())?;
    let from = tabellio::run::workspace::cleanup_from(&env.store, &env.cwd, o.workspace.as_deref());
    let id = &o.run.run_id;
    let (was, extra) = match &o.replaced_ledger {
        Some(r) => (
            format!(
                "its unreadable ledger {} (a {} {}) is replaced by a fresh one",
                r.name,
                r.object,
                short(&r.target)
            ),
            json!({ "replaced_ledger": to_json(r) }),
        ),
        None => (
            format!("was {}", o.run.previous_state.map_or("-", |s| s.as_str())),
            json!({}),
        ),
    };
    let human = format!(
        "run {id} abandoned ({was}); `{}` removes its worktree and branch",
        tabellio::run::workspace::cleanup_command(from.as_deref(), id, false)
    );
    Ok(Output::new(
        run_json(&o.run, o.workspace.as_deref(), extra),
        human,
    ))
}
