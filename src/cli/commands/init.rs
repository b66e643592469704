//! `init [--remote <name>] [--hooks]`: set up tracking of a remote's runs and notes, the
//! exclude line, and hooks (idempotent).

use tabellio::sync::init::{self, InitOptions};
use tabellio::Result;

use crate::cli::format::to_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Set up only this remote (default: every configured remote).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Install the hook shims too (the server's pre-receive in a bare repository).
    #[arg(long)]
    pub hooks: bool,
}

pub fn cmd_init(ctx: &Ctx, args: &InitArgs) -> Result<Output> {
    let o = init::init(
        ctx.store()?,
        &InitOptions {
            remote: args.remote.clone(),
            hooks: args.hooks,
        },
    )?;
    let mut human = Vec::new();
    if o.remotes.is_empty() && o.side == "client" {
        human.push(
            "no remote configured: nothing to track yet (`git remote add origin <url>`, then init again)"
                .to_string(),
        );
    }
    for r in &o.remotes {
        if r.added.is_empty() {
            human.push(format!(
                "{}: tracking refspecs already configured",
                r.remote
            ));
        } else {
            human.push(format!(
                "{}: added fetch refspecs {}",
                r.remote,
                r.added.join(" ")
            ));
        }
    }
    if o.exclude_added {
        human.push("added /.tabellio/worktrees/ to info/exclude".into());
    }
    for w in &o.warnings {
        human.push(format!("warning: {w}"));
    }
    if let Some(h) = &o.hooks {
        for hook in &h.hooks {
            human.push(format!(
                "hook {}: {}",
                hook.name,
                to_json(&hook.action).as_str().unwrap_or_default()
            ));
        }
    }
    human.push(if o.changed {
        format!("initialized ({})", o.side)
    } else {
        format!("already initialized ({}); nothing changed", o.side)
    });
    Ok(Output::new(to_json(&o), human.join("\n")))
}
