//! `git-tabellio`: parse the command line, call the library, render, exit with the contract's
//! code (DESIGN.md section 4).

// Doc comments on clap arguments are the `--help` text, where `<run>` is a placeholder, not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod cli;

use clap::Parser;

fn main() {
    // `--json` counts only among our own arguments, not in a check's argv after `--`.
    let json_mode = std::env::args()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            let help = matches!(e.kind(), K::DisplayHelp | K::DisplayVersion);
            if help || (!json_mode && e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand) {
                let _ = e.print();
                std::process::exit(if help { 0 } else { 2 });
            }
            if json_mode {
                let err =
                    tabellio::Error::usage(clap_message(&e)).hint("see `git tabellio --help`");
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

/// clap's error as one line: the message and its details (a missing argument's name), without
/// the usage block.
fn clap_message(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "a subcommand is required".into();
    }
    let text = e.render().to_string();
    let body = text.split("\n\nUsage:").next().unwrap_or(&text);
    let joined = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let joined = joined.trim_start_matches("error: ").to_string();
    if joined.is_empty() {
        "invalid usage".into()
    } else {
        joined
    }
}
