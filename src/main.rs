//! `git-tabellio`: parse the command line, run the subcommand, render its result; the renderer
//! decides the exit code (docs/cli.md, "Exit codes").

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(cli::commands::completions::COMPLETE_RUNS) {
        let result = cli::Ctx::new(false, false)
            .and_then(|ctx| cli::commands::completions::complete_runs(&ctx));
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
