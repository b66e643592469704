//! `log <run>`: a run's ledger, one line per state transition. `log --graph [<run>…]`: runs as
//! lanes off their base; `log --html <file> [<run>…]`: the same runs as a self-contained page.

use std::path::PathBuf;

use serde_json::{json, Value};

use tabellio::lifecycle::manage;
use tabellio::report::{self, RunTimeline};
use tabellio::{export, Error, Result};

use crate::cli::format::{printable, run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The run id; with --graph or --html any number of runs, every run when none is given.
    #[arg(id = "run", value_name = "RUN")]
    pub runs: Vec<String>,
    /// Draw the runs as lanes off their base, like `git log --graph`: checkpoints, attempts,
    /// restacks, promotion, abandonment.
    #[arg(long)]
    pub graph: bool,
    /// Write a self-contained HTML report of the runs to FILE (replaced if it exists): timeline,
    /// checks with their output, loop iterations.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn cmd_log(ctx: &Ctx, args: &LogArgs) -> Result<Output> {
    if args.graph || args.html.is_some() {
        return picture(ctx, args);
    }
    let [run] = args.runs.as_slice() else {
        return Err(Error::usage(format!(
            "`log` shows one run's ledger, and {} run ids were given",
            args.runs.len()
        ))
        .hint("name one run (`git tabellio log <run>`), or draw several with `--graph`"));
    };
    let (run, entries) = manage::log(ctx.env()?, run)?;
    let executions = manage::executions(ctx.env()?, &run)?;
    let mut human = entries
        .iter()
        .map(|e| {
            // The body (why a landing was refused, where a reopen went) indented under it.
            let mut lines = e.message.lines().filter(|l| !l.trim().is_empty());
            let mut out = format!(
                "{} {} {}",
                short(&e.commit),
                e.at,
                lines.next().unwrap_or_default()
            );
            if let Some(n) = e.checkpoint {
                out.push_str(&format!(" [checkpoint {n}]"));
            }
            if let Some(n) = e.rewound_to {
                out.push_str(&format!(" [to checkpoint {n}]"));
            }
            for line in lines {
                out.push_str(&format!("\n    {line}"));
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n");
    // Every execution when a check ran more than once on a tree: the failures a pass followed.
    if executions.len() > run.attempts.iter().map(|a| a.checks.len()).sum::<usize>() {
        human.push_str("\nexecutions:");
        for e in &executions {
            human.push_str(&format!(
                "\n  {} {} attempt {} {} {}",
                short(&e.commit),
                e.check,
                e.attempt.map_or("-".to_string(), |n| n.to_string()),
                e.status,
                e.started_at
            ));
        }
    }
    Ok(Output::new(
        run_json(
            &run,
            None,
            json!({"log": to_json(&entries), "executions": to_json(&executions)}),
        ),
        human,
    ))
}

/// `--graph` and/or `--html`.
fn picture(ctx: &Ctx, args: &LogArgs) -> Result<Output> {
    let env = ctx.env()?;
    let timelines = report::timelines(env, &args.runs)?;
    let runs: Vec<Value> = timelines.runs.iter().map(run_events).collect();
    let mut out = json!({ "runs": runs, "unreadable": to_json(&timelines.unreadable) });
    let mut human = String::new();
    if args.graph {
        let graph = report::graph::render(&timelines.runs);
        human.push_str(&graph);
        out["graph"] = graph.into();
    }
    for u in &timelines.unreadable {
        human.push_str(&format!(
            "unreadable run {}: {}\n",
            u.run_id,
            printable(&u.message)
        ));
    }
    if let Some(path) = &args.html {
        let count = timelines.runs.len();
        let page = report::html::report(env, timelines)?;
        export::write_file(path, page.as_bytes(), "--html")?;
        human.push_str(&format!(
            "wrote a report of {count} run{} to {}",
            if count == 1 { "" } else { "s" },
            path.display()
        ));
        out["html"] = path.display().to_string().into();
    }
    Ok(Output::new(out, human))
}

/// A run's timeline in `--json`: id, state, base and events (not the whole `run.json`).
fn run_events(t: &RunTimeline) -> Value {
    json!({
        "run_id": t.run.run_id,
        "state": t.run.state,
        "base": to_json(&t.run.base),
        "events": to_json(&t.events),
    })
}
