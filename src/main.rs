//! `git-tabellio`: parse the command line, call the library, render, exit with the contract's
//! code (DESIGN.md section 4).

// Doc comments on clap arguments are the `--help` text, where `<run>` is a placeholder, not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod cli;

use clap::Parser;

fn main() {
    let json_mode = std::env::args().any(|a| a == "--json");
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(
                e.kind(),
                K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(if e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand {
                    2
                } else {
                    0
                });
            }
            if json_mode {
                let first = e
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid usage")
                    .trim_start_matches("error: ")
                    .to_string();
                let err = tabellio::Error::usage(first).hint("see `git tabellio --help`");
                std::process::exit(cli::render::failure(&err, true));
            }
            let _ = e.print();
            std::process::exit(2);
        }
    };
    let code = match cli::run::dispatch(&cli) {
        Ok(out) => cli::render::success(out, cli.json, cli.quiet),
        Err(err) => cli::render::failure(&err, cli.json),
    };
    std::process::exit(code);
}
