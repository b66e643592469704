//! `loop [<run>] -- <agent…>`: drive an agent command and the checks until the run validates or
//! stops converging.

use std::time::Duration;

use serde_json::json;

use tabellio::harness::{self, LoopOptions};
use tabellio::{Error, Result};

use crate::cli::format::{failure_lines, next_line, run_json, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct LoopArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    /// Iterations at most (default 5).
    #[arg(long, value_name = "N")]
    pub max_loops: Option<u32>,
    /// Stop after this many iterations in a row in which the agent changed nothing (default 2).
    #[arg(long, value_name = "K")]
    pub no_progress_limit: Option<u32>,
    /// The agent's time limit per iteration: 90, 90s, 15m, 2h, 1h30m (default 30m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub agent_timeout: Option<Duration>,
    /// A policy check to validate with (repeatable; default: the policy's required checks).
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Promote the run when it validates.
    #[arg(long)]
    pub promote: bool,
    /// Continue an interrupted loop where its ledger says it stopped.
    #[arg(long)]
    pub resume: bool,
    /// The agent command, run directly (never through a shell) in the run worktree. A relative
    /// path (`../agent.sh`) is resolved against the directory you run `loop` in; a program that
    /// is not there or not executable is refused before the run changes.
    #[arg(last = true, value_name = "AGENT")]
    pub argv: Vec<String>,
}

/// `90`, `90s`, `15m`, `2h`, `1h30m`: a whole number of seconds, at least one.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration like 90, 90s, 15m, 2h or 1h30m");
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

pub fn cmd_loop(ctx: &Ctx, args: &LoopArgs) -> Result<Output> {
    let env = ctx.env()?;
    let opts = LoopOptions {
        run: args.run.clone(),
        agent_argv: args.argv.clone(),
        max_loops: args.max_loops,
        no_progress_limit: args.no_progress_limit,
        agent_timeout: args.agent_timeout,
        checks: args.checks.clone(),
        promote: args.promote,
        resume: args.resume,
        stream: ctx.stream,
    };
    let interrupt = harness::interrupt::install()?;
    let show = ctx.shows_progress();
    let mut on_event = |e: &harness::LoopEvent| {
        if show {
            eprintln!("[loop {} {}] {}", e.iteration, e.phase, e.message);
        }
    };
    let o = harness::run_loop(env, &opts, interrupt, &mut on_event)?;
    let l = o
        .loop_state()
        .ok_or_else(|| Error::internal("the loop left no loop state behind"))?;
    let mut human = format!(
        "run {} is {} after {} iteration(s): {} (agent: {}, harness: {}, done: {})",
        o.run.run_id,
        o.run.state,
        l.history.len(),
        l.status.as_str(),
        l.why_agent_stopped.map_or("-", |w| w.as_str()),
        l.why_harness_stopped.map_or("-", |w| w.as_str()),
        l.done_reason.map_or("-", |d| d.as_str()),
    );
    if o.invocation == harness::Invocation::Replayed {
        human.push_str("\n(the loop had already stopped; nothing ran)");
    }
    if let Some(reason) = &o.run.reason {
        human.push_str(&format!("\n{reason}"));
    }
    // The run's last attempt failed: where its output is.
    if let Some(attempt) = o
        .run
        .attempts
        .last()
        .filter(|a| a.status != tabellio::model::run::AttemptStatus::Passed)
    {
        human.push('\n');
        human.push_str(failure_lines(None, Some(&o.run.run_id), &attempt.commit).trim_end());
    }
    let next = &o.next_action;
    human.push('\n');
    human.push_str(&next_line(
        next.action.as_str(),
        "",
        &next.reason,
        next.command.as_deref(),
    ));
    // The loop's verdict: the run validated (and was promoted when asked) and the loop ended.
    let validated = o.validated();
    let extra = json!({
        "invocation": o.invocation,
        "promoted": o.promoted,
        "status": l.status.as_str(),
        "why_agent_stopped": l.why_agent_stopped.map(|w| w.as_str()),
        "why_harness_stopped": l.why_harness_stopped.map(|w| w.as_str()),
        "done_reason": l.done_reason.map(|d| d.as_str()),
        "iterations": l.history.len(),
        "next_action": to_json(&o.next_action),
    });
    Ok(Output::new(run_json(&o.run, o.workspace.as_deref(), extra), human).verdict(validated))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("10m5").is_err());
    }
}
