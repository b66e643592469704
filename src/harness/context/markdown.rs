//! The markdown form of the context packet, for a prompt: the same content as the JSON, with
//! the verbatim task and every excerpt in fences that cannot be closed early.

use super::{ContextPacket, LandRefusalSummary, LastFailure, LoopSummary, ReopenSummary};

/// The markdown form of a packet: the same content, for a prompt.
pub fn to_markdown(p: &ContextPacket) -> String {
    let mut md = String::new();
    md.push_str(&format!(
        "# Run {} ({})\n\nrepository: {}  \nstate: {}{}\n\n",
        p.run_id,
        p.schema,
        p.repository,
        p.state,
        p.previous_state
            .as_ref()
            .map_or(String::new(), |s| format!(" (was {s})"))
    ));
    md.push_str(&format!(
        "## Task\n\nsha256: {}\n\n{}\n",
        p.task.sha256,
        fenced(&p.task.text, "text")
    ));
    md.push_str(&format!(
        "## Commits\n\n- base: {} at {}\n- branch: {}\n- head: {}\n- target: {} at {}\n- merge base: {}\n",
        p.base.reference,
        p.base.commit,
        p.branch,
        dash(p.head.as_ref()),
        p.target.reference,
        dash(p.target.tip.as_ref()),
        dash(p.merge_base.as_ref()),
    ));
    match &p.merge_preview {
        None => md.push_str("- merge preview: none (the head is the target's tip)\n"),
        Some(mp) if mp.clean => md.push_str(&format!(
            "- merge preview: merges cleanly onto {}\n",
            mp.onto
        )),
        Some(mp) => md.push_str(&format!(
            "- merge preview: conflicts onto {} in {}\n",
            mp.onto,
            list(&mp.conflicts)
        )),
    }
    md_history(&mut md, p);
    md_last_failure(&mut md, p.last_failure.as_ref());
    md_land_refusal(&mut md, p.land_refusal.as_ref());
    md_reopened(&mut md, p.reopened.as_ref());
    md_loop(&mut md, p.loop_summary.as_ref());
    md.push_str(&format!(
        "\n## Next\n\n- allowed actions: {}\n- next action: {}{} — {}\n- command: {}\n- satisfied evidence: {}\n- missing evidence: {}\n",
        list(&p.allowed_actions),
        p.next_action.action,
        if p.next_action.blocking {
            " (blocking)"
        } else {
            ""
        },
        p.next_action.reason,
        dash(p.next_action.command.as_ref()),
        list(&p.satisfied_evidence),
        list(&p.missing_evidence),
    ));
    if let Some(paths) = &p.needs_approval {
        md.push_str(&format!(
            "- needs a person's approval (guarded paths): {} — a person runs `git tabellio approve {}`\n",
            list(paths),
            p.run_id
        ));
    }
    md.push_str(&format!("\n---\nintegrity: sha256:{}\n", p.integrity));
    md
}

/// The changes, checkpoints and attempts sections.
fn md_history(md: &mut String, p: &ContextPacket) {
    md.push_str("\n## Changes since the base\n\n");
    if p.changes.is_empty() {
        md.push_str("none\n");
    }
    for c in &p.changes {
        match &c.previous_path {
            None => md.push_str(&format!("- {} {}\n", c.status, c.path)),
            Some(prev) => md.push_str(&format!("- {} {} (from {})\n", c.status, c.path, prev)),
        }
    }
    md.push_str("\n## Checkpoints\n\n");
    if p.checkpoints.is_empty() {
        md.push_str("none\n");
    }
    for (i, c) in p.checkpoints.iter().enumerate() {
        md.push_str(&format!(
            "{}. {} {} ({})\n",
            i + 1,
            c.commit,
            c.summary,
            c.at
        ));
    }
    md.push_str("\n## Attempts\n\n");
    if p.attempts.is_empty() {
        md.push_str("none\n");
    }
    for a in &p.attempts {
        let checks: Vec<String> = a
            .checks
            .iter()
            .map(|c| format!("{} {} (exit {})", c.name, c.status, dash(c.exit_code)))
            .collect();
        md.push_str(&format!(
            "- attempt {} on {}: {} — {} ({})\n",
            a.n,
            a.commit,
            a.status,
            checks.join(", "),
            a.at
        ));
    }
}

fn md_last_failure(md: &mut String, failure: Option<&LastFailure>) {
    md.push_str("\n## Last failure\n\n");
    let Some(f) = failure else {
        md.push_str("none\n");
        return;
    };
    md.push_str(&format!("attempt {} on {}\n", f.attempt, f.commit));
    for c in &f.checks {
        md.push_str(&format!(
            "\n### {} ({}, exit {}){}\n\n{}",
            c.name,
            c.status,
            dash(c.exit_code),
            if c.truncated == Some(true) {
                " — excerpt truncated"
            } else {
                ""
            },
            fenced(c.excerpt.as_deref().unwrap_or("-"), "text")
        ));
    }
}

fn md_land_refusal(md: &mut String, refusal: Option<&LandRefusalSummary>) {
    let Some(l) = refusal else {
        return;
    };
    md.push_str(&format!(
        "\n## Land refusal\n\n{} onto {} of {} at {}{}\n",
        l.result,
        l.onto,
        l.target,
        l.at,
        match l.isolated {
            Some(true) => " (isolated to this run: the stack without it passed)",
            Some(false) => " (not isolated)",
            None => "",
        }
    ));
    if let Some(reason) = &l.reason {
        md.push_str(&format!("\nreason: {reason}\n"));
    }
    if !l.paths.is_empty() {
        md.push_str(&format!("\nconflicting paths: {}\n", list(&l.paths)));
    }
    for h in &l.hunks {
        md.push_str(&format!(
            "\n### {}{}\n\n{}",
            h.path,
            if h.truncated {
                " — hunk truncated"
            } else {
                ""
            },
            fenced(&h.text, "diff")
        ));
    }
    for f in &l.failed {
        md.push_str(&format!(
            "\n### {} (evidence {}){}\n\n{}",
            f.check,
            f.evidence,
            if f.truncated == Some(true) {
                " — excerpt truncated"
            } else {
                ""
            },
            fenced(f.excerpt.as_deref().unwrap_or("-"), "text")
        ));
    }
}

fn md_reopened(md: &mut String, reopened: Option<&ReopenSummary>) {
    let Some(r) = reopened else {
        return;
    };
    md.push_str(&format!(
        "\n## Reopened\n\nreopen {} ({}): base {} -> {}; repair rounds {} of {}\n",
        r.n, r.mode, r.base_before, r.base_after, r.repair_rounds, r.repair_rounds_allowed
    ));
    if !r.conflicts.is_empty() {
        md.push_str(&format!(
            "\nconflict markers to resolve in: {}\n",
            list(&r.conflicts)
        ));
    }
    md.push_str("\nlanded on the target since the old base:\n\n");
    if r.landed_since.is_empty() {
        md.push_str("- nothing\n");
    }
    for l in &r.landed_since {
        md.push_str(&format!("- {l}\n"));
    }
}

fn md_loop(md: &mut String, summary: Option<&LoopSummary>) {
    md.push_str("\n## Loop\n\n");
    let Some(l) = summary else {
        md.push_str("no loop\n");
        return;
    };
    md.push_str(&format!(
        "iteration {} of {}, phase {}, status {}; agent stopped: {}; harness stopped: {}; done: {}\n",
        l.iteration,
        l.max_loops,
        l.phase,
        l.status,
        dash(l.why_agent_stopped.as_ref()),
        dash(l.why_harness_stopped.as_ref()),
        dash(l.done_reason.as_ref()),
    ));
    for h in &l.history {
        md.push_str(&format!(
            "- iteration {}: {} (changed: {}, checks: {}, failing: {}, claimed DONE: {}, fingerprint {})\n",
            h.n,
            dash(h.status.as_ref()),
            dash(h.changed),
            dash(h.verdict.as_ref()),
            list(h.failing.as_deref().unwrap_or_default()),
            dash(h.claimed_done),
            dash(h.fingerprint.as_ref()),
        ));
    }
}

/// A value, or `-` when there is none.
fn dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The items joined with `, `, or `none`.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// `text` in a code fence longer than any backtick run inside it, so it cannot be closed early.
fn fenced(text: &str, info: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    let mut body = text.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    format!("{fence}{info}\n{body}{fence}\n")
}
