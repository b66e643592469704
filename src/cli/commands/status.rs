//! `status`: a run's state and what to do next.

use serde_json::json;

use tabellio::lifecycle::status;
use tabellio::Result;

use crate::cli::format::{next_line, printable, run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
}

pub fn cmd_status(ctx: &Ctx, args: &StatusArgs) -> Result<Output> {
    let o = status::status(ctx.env()?, args.run.as_deref())?;
    let mut human = format!(
        "run {}: {}{}\ntask: {}\nbase: {} at {}\nbranch: {}\n",
        o.run.run_id,
        o.state,
        o.previous_state
            .map_or(String::new(), |p| format!(" (was {p})")),
        printable(&o.run.task.summary),
        o.run.base.reference,
        short(&o.run.base.commit),
        o.run.branch
    );
    if let Some(w) = &o.workspace {
        human.push_str(&format!("worktree: {}\n", w.display()));
    }
    if let Some(p) = &o.run.promotion {
        let to = p
            .remote
            .as_ref()
            .map_or(String::new(), |r| format!(" to {r}"));
        human.push_str(&format!(
            "promoted: {} {} -> {} ({}{to})\n",
            p.target,
            short(&p.old),
            short(&p.new),
            p.mode
        ));
    }
    if let Some(landed) = &o.run.landed {
        human.push_str(&format!("landed as: {}\n", short(landed)));
    }
    if let Some(bar) = o.plans.as_ref().and_then(|p| p["bar"].as_str()) {
        human.push_str(&format!("plans: {bar}\n"));
    }
    if !o.satisfied_evidence.is_empty() {
        human.push_str(&format!("evidence: {}\n", o.satisfied_evidence.join(", ")));
    }
    if !o.missing_evidence.is_empty() {
        human.push_str(&format!(
            "missing evidence: {}\n",
            o.missing_evidence.join(", ")
        ));
    }
    if let Some(paths) = &o.approval_needed {
        human.push_str(&format!("approval needed: {}\n", paths.join(", ")));
    }
    for d in &o.sync_divergence {
        human.push_str(&format!("sync: {}\n", d.describe()));
    }
    let next = &o.next_action;
    human.push_str(&next_line(
        &next.action,
        if next.blocking { " (blocking)" } else { "" },
        &next.reason,
        next.command.as_deref(),
    ));
    let mut extra = json!({
        "state": o.state, "previous_state": o.previous_state,
        "allowed_actions": o.allowed_actions, "next_action": to_json(&o.next_action),
        "satisfied_evidence": o.satisfied_evidence, "missing_evidence": o.missing_evidence,
        "live": to_json(&o.live), "plans": o.plans,
        "sync_divergence": to_json(&o.sync_divergence),
    });
    // Present only when an approval is needed, so other runs' output is unchanged.
    if let (Some(paths), Some(map)) = (&o.approval_needed, extra.as_object_mut()) {
        map.insert("approval_needed".into(), json!({ "paths": paths }));
    }
    Ok(Output::new(
        run_json(&o.run, o.workspace.as_deref(), extra),
        human,
    ))
}
