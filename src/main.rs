//! `git-tabellio`: parse the command line, run the subcommand, render its result; the renderer
//! decides the exit code (docs/cli.md, "Exit codes").

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    use cli::commands::completions::{complete_checks, complete_runs};
    use cli::commands::completions::{COMPLETE_CHECKS, COMPLETE_RUNS};
    let script_only = match std::env::args().nth(1).as_deref() {
        Some(COMPLETE_RUNS) => Some(complete_runs as fn(&cli::Ctx) -> _),
        Some(COMPLETE_CHECKS) => Some(complete_checks as fn(&cli::Ctx) -> _),
        _ => None,
    };
    if let Some(complete) = script_only {
        let result = cli::Ctx::new(false, false).and_then(|ctx| complete(&ctx));
        return cli::render::render(result, false, false);
    }
    if let Some(args) = cli::commands::hook::shim_call(std::env::args().skip(1)) {
        let result =
            cli::Ctx::new(false, false).and_then(|ctx| cli::commands::hook::cmd_hook(&ctx, &args));
        return cli::render::render(result, false, false);
    }
    // `--json` counts only among our own arguments, not in a check's argv after `--`.
    let json_mode = std::env::args()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli::render::parse_error(&e, json_mode),
    };
    let result =
        cli::Ctx::new(cli.json, cli.quiet).and_then(|ctx| cli::dispatch(&ctx, &cli.command));
    cli::render::render(result, cli.json, cli.quiet)
}
