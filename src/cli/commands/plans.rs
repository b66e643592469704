//! `plans [status|reconcile]`: where a run's checklist plans stand, and moving misplaced ones.

use std::path::PathBuf;

use serde_json::json;

use tabellio::lifecycle::plans::{self as run_plans, PlanTarget};
use tabellio::Result;

use crate::cli::format::short;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PlansArgs {
    #[command(subcommand)]
    pub action: Option<PlansAction>,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlansAction {
    /// Classify the plans and show how far they are (the default).
    #[command(after_long_help = crate::cli::examples::PLANS_STATUS)]
    Status(TargetArgs),
    /// Move misplaced plans: finished ones to plans_completed/, reopened ones back to plans/.
    #[command(after_long_help = crate::cli::examples::PLANS_RECONCILE)]
    Reconcile(ReconcileArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// The run whose worktree holds the plans (default: the run you are in, else this worktree).
    #[arg(conflicts_with = "dir")]
    pub run: Option<String>,
    /// A directory with plans/ and plans_completed/ instead.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Commit the moves on the worktree's branch.
    #[arg(long)]
    pub commit: bool,
}

fn target(t: &TargetArgs) -> PlanTarget<'_> {
    match (&t.run, &t.dir) {
        (Some(r), _) => PlanTarget::Run(r),
        (None, Some(d)) => PlanTarget::Dir(d),
        (None, None) => PlanTarget::Here,
    }
}

pub fn cmd_plans(ctx: &Ctx, args: &PlansArgs) -> Result<Output> {
    match &args.action {
        None => status(ctx, &args.target),
        Some(PlansAction::Status(t)) => status(ctx, t),
        Some(PlansAction::Reconcile(r)) => reconcile(ctx, r),
    }
}

fn reconcile(ctx: &Ctx, r: &ReconcileArgs) -> Result<Output> {
    let done = run_plans::reconcile(
        ctx.env()?,
        run_plans::ReconcileOptions {
            target: target(&r.target),
            commit: r.commit,
        },
    )?;
    let mut human = String::new();
    for m in &done.staged {
        human.push_str(&format!("staged earlier {} -> {}\n", m.from, m.to));
    }
    for m in &done.outcome.moved {
        human.push_str(&format!("moved {} -> {}\n", m.from, m.to));
    }
    for e in &done.outcome.errors {
        human.push_str(&format!("error: {}: {}\n", e.path(), e.message()));
    }
    if done.outcome.moved.is_empty() && done.outcome.errors.is_empty() && done.staged.is_empty() {
        human.push_str("nothing to move: every plan is where it belongs\n");
    }
    if let Some(c) = &done.commit {
        human.push_str(&format!("committed the moves as {}\n", short(c)));
    }
    let mut j = done.outcome.to_json();
    j["commit"] = json!(done.commit);
    j["staged"] = json!(done.staged);
    j["path"] = json!(done.path.display().to_string());
    let clean = done.outcome.errors.is_empty();
    Ok(Output::new(j, human.trim_end().to_string()).verdict(clean))
}

fn status(ctx: &Ctx, t: &TargetArgs) -> Result<Output> {
    // Scanning a named directory reads files only: it works outside any repository.
    let (path, run) = match (&t.run, &t.dir) {
        (None, Some(dir)) => (run_plans::locate_dir(dir)?, None),
        _ => run_plans::locate(ctx.env()?, target(t))?,
    };
    let report = tabellio::plans::scan_dir(&path);
    let mut human = format!("{}\n", report.bar());
    for p in &report.plans {
        human.push_str(&format!(
            "{:<13} {} ({} open, {} done)\n",
            p.class.as_str(),
            p.path,
            p.open,
            p.done
        ));
    }
    for e in &report.errors {
        human.push_str(&format!("error         {}: {}\n", e.path(), e.message()));
    }
    human.push_str(&format!(
        "placement clean: {}, hygiene clean: {}",
        report.placement_clean(),
        report.hygiene_clean()
    ));
    let mut j = report.to_json();
    j["run"] = json!(run);
    j["path"] = json!(path.display().to_string());
    Ok(Output::new(j, human))
}
