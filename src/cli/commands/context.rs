//! `context [<run>] [--format json|markdown]`: the packet an agent (or a reviewer) reads.

use serde_json::json;

use tabellio::harness::context;
use tabellio::{Error, Result};

use crate::cli::format::run_json;
use crate::cli::{Ctx, Output};
use tabellio::runner::strip_escapes;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ContextFormat {
    Json,
    Markdown,
}

#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    /// The packet as JSON or as markdown for a prompt.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: ContextFormat,
}

pub fn cmd_context(ctx: &Ctx, args: &ContextArgs) -> Result<Output> {
    let o = context::context(ctx.env()?, args.run.as_deref())?;
    let markdown = context::to_markdown(&o.packet);
    let human = match args.format {
        // Excerpts hold whatever the checks printed: no escape sequence reaches the terminal.
        ContextFormat::Markdown => strip_escapes(&markdown),
        ContextFormat::Json => serde_json::to_string_pretty(&o.packet)
            .map_err(|e| Error::internal(format!("could not render the packet: {e}")))?,
    };
    let mut extra = json!({"context": o.packet});
    if args.format == ContextFormat::Markdown && ctx.json {
        extra["markdown"] = markdown.into();
    }
    Ok(Output::new(
        run_json(&o.run, o.workspace.as_deref(), extra),
        human,
    ))
}
