//! `git tabellio land [<run>...] [--target <branch>] [--batch <N>] [--remote <name>] [--squash]
//! [--no-reuse] [--dry-run]`.

use tabellio::evidence::reuse::Reuse;
use tabellio::lifecycle::land::{self, LandOptions, Landing, RunLanding};
use tabellio::{Error, Result};

use crate::cli::format::short;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct LandArgs {
    /// The runs to land, in this order (default: every completed run of the target, oldest
    /// completion first).
    pub runs: Vec<String>,
    /// The branch to land on (default: the named runs' base branch, else the current branch).
    #[arg(long, value_name = "BRANCH")]
    pub target: Option<String>,
    /// Stack and validate at most this many runs together.
    #[arg(long, value_name = "N", default_value_t = land::DEFAULT_BATCH)]
    pub batch: usize,
    /// Land each run as one commit instead of replaying its commits.
    #[arg(long)]
    pub squash: bool,
    /// Land on this remote's target: fetch, stack and validate here, one atomic push.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    #[command(flatten)]
    pub records: super::finish::RecordArgs,
    /// Print the plan and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn cmd_land(ctx: &Ctx, a: &LandArgs) -> Result<Output> {
    let opts = LandOptions {
        runs: a.runs.clone(),
        target: a.target.clone(),
        batch: a.batch,
        squash: a.squash,
        remote: a.remote.clone(),
        reuse: Reuse::from_flag(a.records.no_reuse),
        dry_run: a.dry_run,
        stream: ctx.stream,
        sign_key: a.records.sign_key.clone(),
        no_sign: a.records.no_sign,
    };
    let o = land::land(ctx.env()?, &opts)?;
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let mut human = String::new();
    for r in &o.runs {
        human.push_str(&line(r));
        human.push('\n');
    }
    if o.runs.is_empty() {
        human.push_str(&format!("nothing to land on {}\n", o.target));
    }
    if !o.dry_run {
        match (&o.old, &o.new) {
            (Some(old), Some(new)) if old != new => human.push_str(&format!(
                "{} {} -> {} ({})\n",
                o.target,
                short(old),
                short(new),
                o.mode
            )),
            _ => {}
        }
        // A verdict other than a plain pass is said: a flaky pass, inherited failures.
        for v in o
            .verdicts
            .iter()
            .filter(|v| v.verdict.as_str() != "satisfied")
        {
            human.push_str(&format!("verdict: {}\n", v.describe()));
        }
        let failed = o
            .executions
            .iter()
            .filter(|e| e.status.as_str() != "passed")
            .count();
        human.push_str(&format!(
            "checks: {} run ({failed} failed), {} reused ({} validations)",
            o.checks_run, o.checks_reused, o.validations
        ));
    }
    Ok(Output::new(json, human).verdict(o.all_landed()))
}

/// One line per run.
fn line(r: &RunLanding) -> String {
    let id = &r.run_id;
    let restack = match r.restack.map(|m| m.as_str()) {
        Some("replay") => " (replayed)",
        Some("squash") => " (squashed)",
        _ => "",
    };
    match r.result {
        Landing::Landed => format!(
            "landed {id} as {}{restack}",
            r.landed.as_deref().map_or("?", short)
        ),
        Landing::AlreadyLanded => {
            format!("{id}: {}", r.reason.as_deref().unwrap_or("already landed"))
        }
        Landing::Conflict => format!("conflict {id}: {} (left completed)", r.paths.join(", ")),
        Landing::ValidationFailed => format!(
            "failed {id}: {} (now validation_failed)",
            r.reason.as_deref().unwrap_or("")
        ),
        Landing::Refused => format!("refused {id}: {}", r.reason.as_deref().unwrap_or("")),
        Landing::WouldLand => format!(
            "would land {id}{}{}",
            match r.restack.map(|m| m.as_str()) {
                Some("none") => " as it is",
                Some("squash") => " squashed",
                _ => " replayed",
            },
            match r.satisfied {
                Some(true) => " (its checks already have passing evidence)",
                _ => " (validation needed)",
            }
        ),
    }
}
