//! `checks [--check <name>]... [--at <rev>]`: each check's recorded executions, flake rate and
//! mean duration, from the evidence notes.

use tabellio::lifecycle::checks;
use tabellio::Result;

use crate::cli::format::{short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ChecksArgs {
    /// Only this check (repeatable).
    #[arg(long = "check", value_name = "name")]
    pub checks: Vec<String>,
    /// Read the policy (which definition is current, its `max_flake_rate`) at this commit.
    #[arg(long, value_name = "rev", default_value = "HEAD")]
    pub at: String,
}

pub fn cmd_checks(ctx: &Ctx, args: &ChecksArgs) -> Result<Output> {
    let o = checks::checks(ctx.env()?, &args.at, &args.checks)?;
    let mut human = String::new();
    if o.checks.is_empty() {
        human.push_str("no check execution is recorded yet\n");
    }
    for c in &o.checks {
        let s = &c.stats;
        let rate = if s.measured {
            format!("{:.1} %", s.flake_rate * 100.0)
        } else {
            format!("{:.1} % (not yet measured)", s.flake_rate * 100.0)
        };
        let budget = match c.max_flake_rate {
            Some(max) if c.over_budget => {
                format!("  OVER max_flake_rate {:.1} %", max * 100.0)
            }
            Some(max) => format!("  max_flake_rate {:.1} %", max * 100.0),
            None => String::new(),
        };
        human.push_str(&format!(
            "{:<16} {}{}  {} executions, {} failed, flake rate {rate} over the last {} ({} flakes), mean {} ms{budget}\n",
            s.name,
            short(&s.digest),
            if c.in_policy { "" } else { " (not in the policy)" },
            s.executions,
            s.failures,
            s.window,
            s.flakes,
            s.mean_duration_ms,
        ));
        if let Some(since) = &s.flaky_since {
            human.push_str(&format!(
                "{:<16} proven flaky since {since} on {} tree(s)\n",
                "", s.flaky_trees
            ));
        }
    }
    Ok(Output::new(to_json(&o), human))
}
