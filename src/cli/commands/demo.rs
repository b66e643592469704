//! `demo [--keep]`: the whole life of a run in a throwaway repository. It needs no repository
//! of its own and prints as it goes: a line per step, or one JSON object per step with `--json`.

use serde_json::json;

use tabellio::{Error, Result};

use crate::cli::render::print_stdout;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the demo repository and print where it is.
    #[arg(long)]
    pub keep: bool,
}

pub fn cmd_demo(ctx: &Ctx, args: &DemoArgs) -> Result<Output> {
    let dir = tempfile::Builder::new()
        .prefix("tabellio-demo-")
        .tempdir()
        .map_err(|e| Error::internal(format!("could not make a temporary directory: {e}")))?;
    let mut n = 0;
    let result = tabellio::demo::run(dir.path(), &mut |step| {
        n += 1;
        // Not `println!`: it panics when the reader went away (`demo | head -1`).
        if ctx.json {
            print_stdout(&format!(
                "{}\n",
                json!({"ok": true, "n": n, "step": step.step, "say": step.say, "data": step.data})
            ));
        } else if !ctx.quiet {
            print_stdout(&format!("{n}. {:<10} {}\n", step.step, step.say));
        }
    });
    let repo = result?;
    if args.keep {
        // Dropping `dir` removes the repository; keeping it hands it to the user.
        let _ = dir.keep();
    }
    let human = if args.keep {
        format!("kept the demo repository at {}", repo.display())
    } else {
        "done; the demo repository was removed (--keep keeps it)".into()
    };
    // The steps were the output; with --json a closing object says where the repository is.
    Ok(Output::new(
        json!({"step": "done", "kept": args.keep, "repository": args.keep.then(|| repo.display().to_string())}),
        human,
    ))
}
