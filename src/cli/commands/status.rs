//! `status`: a run's state and what to do next.

use serde_json::json;

use tabellio::lifecycle::status::{self, Overview, StatusReport, UnreadableRunStatus};
use tabellio::Result;

use crate::cli::format::{next_line, printable, run_json, short, to_json, unreadable_ref_lines};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
}

pub fn cmd_status(ctx: &Ctx, args: &StatusArgs) -> Result<Output> {
    let o = match status::status(ctx.env()?, args.run.as_deref())? {
        StatusReport::Run(o) => o,
        StatusReport::Unreadable(u) => return Ok(unreadable_status(&u)),
        StatusReport::Overview(o) => return Ok(overview(&o)),
    };
    // A ledger `abandon` rebuilt from an unreadable one knows no base.
    let base = match o.run.base.reference.as_str() {
        "" => "unknown".to_string(),
        reference => format!("{reference} at {}", short(&o.run.base.commit)),
    };
    let mut human = format!(
        "run {}: {}{}\ntask: {}\nbase: {base}\nbranch: {}\n",
        o.run.run_id,
        o.state,
        o.previous_state
            .map_or(String::new(), |p| format!(" (was {p})")),
        printable(&o.run.task.summary),
        o.run.branch
    );
    if let Some(w) = &o.workspace {
        human.push_str(&format!("worktree: {}\n", w.display()));
    }
    if let Some(a) = &o.archived {
        human.push_str(&format!("archived: {a} (read-only)\n"));
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
    if let Some(c) = &o.run.completion {
        human.push_str(&completion_lines(c));
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
    if !o.failures.is_empty() {
        human.push_str(&format!(
            "history: {}\n",
            tabellio::evidence::explain::describe(&o.failures)
        ));
    }
    if let Some(plan) = &o.checks {
        human.push_str(&checks_line(&o.run.base.reference, plan));
    }
    if let Some(paths) = &o.approval_needed {
        human.push_str(&format!("approval needed: {}\n", paths.join(", ")));
    }
    for d in &o.sync_divergence {
        human.push_str(&format!("sync: {}\n", d.describe()));
    }
    human.push_str(&unreadable_ref_lines(&o.unreadable_refs));
    let next = &o.next_action;
    human.push_str(&next_line(
        next.action.as_str(),
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
    // Present while the run is not landed and has work beyond its base.
    if let (Some(plan), Some(map)) = (&o.checks, extra.as_object_mut()) {
        map.insert("checks".into(), to_json(plan));
    }
    if let (false, Some(map)) = (o.unreadable_refs.is_empty(), extra.as_object_mut()) {
        map.insert("unreadable_refs".into(), to_json(&o.unreadable_refs));
    }
    if let (Some(a), Some(map)) = (&o.archived, extra.as_object_mut()) {
        map.insert("archived".into(), json!(a));
    }
    // Present only when a required check fails at the head, so other runs' output is unchanged.
    if let (false, Some(map)) = (o.failures.is_empty(), extra.as_object_mut()) {
        map.insert("failures".into(), to_json(&o.failures));
    }
    Ok(Output::new(
        run_json(&o.run, o.workspace.as_deref(), extra),
        human,
    ))
}

/// The `completion:` line of a promoted run and its plan items, each with the evidence that
/// backs it.
fn completion_lines(c: &tabellio::model::completion::Completion) -> String {
    let mut lines = format!(
        "completion: {}/{} plan items done ({})\n",
        c.done,
        c.done + c.open,
        c.plans.join(", ")
    );
    for item in &c.items {
        let backed = match &item.backed_by {
            Some(b) => format!(
                " (evidence on {}: {})",
                short(&b.commit),
                b.evidence
                    .iter()
                    .map(|e| format!("{} {}", e.check, short(&e.record)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None if item.done => " (no validated commit had it done)".into(),
            None => String::new(),
        };
        let mark = if item.done { "x" } else { " " };
        lines.push_str(&format!("  [{mark}] {}{backed}\n", printable(&item.task)));
    }
    lines
}

/// A run whose ledger cannot be read: reported (exit 0), with the ref and its repairs. `run`
/// and `state` are null: nothing says what they were.
/// No run named and none here: every run by state, and what each that has not ended needs.
fn overview(o: &Overview) -> Output {
    let mut human = if o.by_state.is_empty() {
        "no runs yet; start one with `git tabellio start <run> --task <text>`\n".to_string()
    } else {
        let counts: Vec<String> = o.by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!("runs: {}\n", counts.join(", "))
    };
    let width = o.runs.iter().map(|r| r.run_id.len()).max().unwrap_or(0);
    for r in &o.runs {
        match (&r.next_action, &r.unreadable) {
            (Some(next), _) => human.push_str(&format!(
                "  {:width$}  {:17}  next: {}{}\n",
                r.run_id,
                r.state.map_or("-", |s| s.as_str()),
                next.action.as_str(),
                next.command
                    .as_deref()
                    .map_or(String::new(), |c| format!(" (`{c}`)")),
            )),
            (None, Some(why)) => {
                human.push_str(&format!("  {:width$}  unreadable: {why}\n", r.run_id))
            }
            (None, None) => {}
        }
    }
    if o.runs.is_empty() && !o.by_state.is_empty() {
        human.push_str("nothing needs doing: every run has ended\n");
    }
    human.push_str("`git tabellio status <run>` (or status in a run's worktree) shows one run");
    Output::new(
        json!({"overview": true, "by_state": to_json(&o.by_state), "runs": to_json(&o.runs)}),
        human,
    )
}

fn unreadable_status(u: &UnreadableRunStatus) -> Output {
    let mut human = format!("run {}: unreadable\n", u.run_id);
    if let Some(w) = &u.workspace {
        human.push_str(&format!("worktree: {}\n", w.display()));
    }
    human.push_str(&unreadable_ref_lines(&u.unreadable_refs));
    let next = &u.next_action;
    human.push_str(&next_line(
        next.action.as_str(),
        " (blocking)",
        &next.reason,
        next.command.as_deref(),
    ));
    let extra = json!({
        "run_id": u.run_id, "state": null, "previous_state": null,
        "allowed_actions": u.allowed_actions, "next_action": to_json(&u.next_action),
        "satisfied_evidence": [], "missing_evidence": [], "live": null, "plans": null,
        "sync_divergence": [], "unreadable_refs": to_json(&u.unreadable_refs),
    });
    Output::new(
        run_json(&serde_json::Value::Null, u.workspace.as_deref(), extra),
        human,
    )
}

/// `checks onto main: t_b runs; t_a not_applicable (inputs untouched); t_c reused`.
fn checks_line(target: &str, plan: &tabellio::evidence::applies::ChecksPlan) -> String {
    let mut parts = Vec::new();
    if !plan.run.is_empty() {
        parts.push(format!("{} to run", plan.run.join(", ")));
    }
    if !plan.not_applicable.is_empty() {
        parts.push(format!(
            "{} not_applicable (inputs untouched)",
            plan.not_applicable.join(", ")
        ));
    }
    if !plan.reused.is_empty() {
        parts.push(format!("{} reused", plan.reused.join(", ")));
    }
    if parts.is_empty() {
        return String::new();
    }
    let target = target.strip_prefix("refs/heads/").unwrap_or(target);
    format!("checks onto {target}: {}\n", parts.join("; "))
}
