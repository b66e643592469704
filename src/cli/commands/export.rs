//! `export <run> [--format tabellio|in-toto] [--out <file>]`.

use std::path::PathBuf;

use serde_json::json;

use tabellio::export::{self, Format};
use tabellio::{Error, Result};

use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The run id.
    #[arg(required_unless_present = "vsa")]
    pub run: Option<String>,
    /// Print the verification summary (an in-toto Statement in a DSSE envelope) noted on this
    /// commit by promote or land.
    #[arg(long, value_name = "COMMIT", conflicts_with_all = ["run", "out"])]
    pub vsa: Option<String>,
    /// `tabellio`: the whole run (tabellio.export/v1); `in-toto`: a Statement about the
    /// validated commit.
    #[arg(long, value_enum, default_value_t = ExportFormat::Tabellio)]
    pub format: ExportFormat,
    /// Write the document to this file (replaced atomically if it exists) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Tabellio,
    InToto,
}

impl From<ExportFormat> for Format {
    fn from(f: ExportFormat) -> Format {
        match f {
            ExportFormat::Tabellio => Format::Tabellio,
            ExportFormat::InToto => Format::InToto,
        }
    }
}

pub fn cmd_export(ctx: &Ctx, args: &ExportArgs) -> Result<Output> {
    let run = match (&args.vsa, &args.run) {
        (Some(rev), _) => {
            let summaries = export::vsa(ctx.store()?, rev)?;
            let document = match summaries.as_slice() {
                [one] => one.clone(),
                _ => serde_json::Value::Array(summaries),
            };
            let human = serde_json::to_string_pretty(&document)
                .map_err(|e| Error::internal(format!("could not render the summary: {e}")))?;
            return Ok(Output::new(
                json!({"format": "vsa", "document": document}),
                human,
            ));
        }
        (None, Some(run)) => run,
        (None, None) => return Err(Error::usage("export needs a run id or --vsa <commit>")),
    };
    let o = export::export(ctx.env()?, run, args.format.into())?;
    let format = o.format.as_str();
    match &args.out {
        // Without --out the document is the output: pretty for a person, wrapped with --json.
        None => {
            let human = serde_json::to_string_pretty(&o.document)
                .map_err(|e| Error::internal(format!("could not render the document: {e}")))?;
            Ok(Output::new(
                json!({"format": format, "document": o.document}),
                human,
            ))
        }
        Some(out) => {
            export::write_document(out, &o.document)?;
            let human = format!(
                "exported run {} ({format}) to {}\nintegrity: {}",
                o.run_id,
                out.display(),
                o.integrity
            );
            Ok(Output::new(
                json!({"format": format, "out": out.display().to_string(), "integrity": o.integrity}),
                human,
            ))
        }
    }
}
