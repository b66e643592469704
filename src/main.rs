//! `git-tabellio`: parse the command line, run the subcommand, render its result; the renderer
//! decides the exit code (docs/cli.md, "Exit codes").

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    use cli::commands::completions::{complete_checks, complete_runs};
    use cli::commands::completions::{COMPLETE_CHECKS, COMPLETE_RUNS};
    // Lossy: these looks only compare with ASCII words, and clap reads the real arguments (a
    // check's argv may hold bytes that are not UTF-8, which `std::env::args` panics on).
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let script_only = match args.get(1).map(String::as_str) {
        Some(COMPLETE_RUNS) => Some(complete_runs as fn(&cli::Ctx) -> _),
        Some(COMPLETE_CHECKS) => Some(complete_checks as fn(&cli::Ctx) -> _),
        _ => None,
    };
    if let Some(complete) = script_only {
        let result = cli::Ctx::new(false, false).and_then(|ctx| complete(&ctx));
        return cli::render::render(result, false, false);
    }
    if let Some(args) = cli::commands::hook::shim_call(args.iter().skip(1).cloned()) {
        let result =
            cli::Ctx::new(false, false).and_then(|ctx| cli::commands::hook::cmd_hook(&ctx, &args));
        return cli::render::render(result, false, false);
    }
    // `--json` counts only among our own arguments, not in a check's argv after `--`.
    let json_mode = args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--json");
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli::render::parse_error(&e, json_mode),
    };
    let result =
        cli::Ctx::new(cli.json, cli.quiet).and_then(|ctx| cli::dispatch(&ctx, &cli.command));
    cli::render::render(result, cli.json, cli.quiet)
}
