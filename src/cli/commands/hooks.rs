//! `hooks install [--server] [--force]`: write the hook shims that gate protected refs.

use tabellio::hooks::install::{self, InstallOptions};
use tabellio::Result;

use crate::cli::format::to_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub action: HooksAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum HooksAction {
    /// Write the hook shims into the hooks directory (honours core.hooksPath).
    #[command(after_long_help = crate::cli::examples::HOOKS_INSTALL)]
    Install(HooksInstallArgs),
}

#[derive(Debug, clap::Args)]
pub struct HooksInstallArgs {
    /// Install the server hook (pre-receive) instead of the client hooks.
    #[arg(long)]
    pub server: bool,
    /// Replace hooks git-tabellio did not install, moving each aside to NAME.pre-tabellio.
    #[arg(long)]
    pub force: bool,
}

pub fn cmd_hooks(ctx: &Ctx, args: &HooksArgs) -> Result<Output> {
    let HooksAction::Install(a) = &args.action;
    let o = install::install(
        ctx.store()?,
        &InstallOptions {
            server: a.server,
            force: a.force,
        },
    )?;
    let mut human = String::new();
    for h in &o.hooks {
        human.push_str(&format!(
            "{:<9} {}{}\n",
            to_json(&h.action).as_str().unwrap_or("?"),
            h.path.display(),
            h.backup.as_ref().map_or(String::new(), |b| format!(
                " (previous hook moved to {})",
                b.display()
            ))
        ));
    }
    if a.server {
        // The server keeps every ledger pushed to it: the same archiving runs there.
        human.push_str(&format!(
            "archive finished runs here too, from cron: `git -C {} tabellio gc` (docs/hooks.md)\n",
            tabellio::error::shell_path(ctx.store()?.repo.common_dir())
        ));
    }
    Ok(Output::new(to_json(&o), human.trim_end().to_string()))
}
