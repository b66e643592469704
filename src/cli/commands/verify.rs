//! `verify [<rev>|<a..b>]…`: check that commits have passing, untampered evidence for the
//! required checks.

use tabellio::verify::VerifyOptions;
use tabellio::Result;

use crate::cli::format::{short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Commits and ranges `a..b` to verify (default: HEAD).
    #[arg(value_name = "REV|A..B")]
    pub revs: Vec<String>,
    /// Also require evidence for this check (repeatable).
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Apply the policy at this revision to every commit (default: each commit's own).
    #[arg(long, value_name = "REV")]
    pub policy_from: Option<String>,
    /// Walk ranges along first parents only: the commits a protected branch pointed at when
    /// runs landed on it, not the replayed commits inside each landing.
    #[arg(long)]
    pub first_parent: bool,
    /// Every commit judged must resolve to the run that landed it, with its actor (through
    /// promote, land, squashes and restacks, from the ledgers).
    #[arg(long)]
    pub require_provenance: bool,
}

pub fn cmd_verify(ctx: &Ctx, args: &VerifyArgs) -> Result<Output> {
    let (o, caches) = tabellio::verify::verify_keeping_caches(
        ctx.store()?,
        &VerifyOptions {
            revs: args.revs.clone(),
            checks: args.checks.clone(),
            policy_from: args.policy_from.clone(),
            first_parent: args.first_parent,
            require_provenance: args.require_provenance,
            executions: ctx.json,
        },
    )?;
    // The process exits after printing: freeing a range's notes, policies and judged trees
    // record by record is work nobody waits for.
    std::mem::forget(caches);
    // A range of thousands of commits makes a large document: build only the one printed.
    let (json, human) = if ctx.json {
        (to_json(&o), String::new())
    } else {
        (serde_json::Value::Null, human_text(&o))
    };
    Ok(Output::new(json, human).verdict(o.verified))
}

/// What a person reads: one line per commit, then how many are not verified.
fn human_text(o: &tabellio::verify::VerifyOutcome) -> String {
    let mut human = String::new();
    for c in &o.commits {
        let mut checks: Vec<String> = c
            .checks
            .iter()
            .map(|v| match &v.signer {
                Some(s) => format!("{}: {} by {}", v.name, v.verdict.as_str(), s.principal),
                None => format!("{}: {}", v.name, v.verdict.as_str()),
            })
            .collect();
        if let Some(a) = &c.approval {
            checks.push(format!("{}: {}", a.verdict, a.paths.join(" ")));
        }
        match c.provenance.as_ref().map(|p| &p.run) {
            Some(Some(run)) => checks.push(format!(
                "landed by run {} ({}:{})",
                run.run_id, run.actor.kind, run.actor.id
            )),
            Some(None) => checks.push("provenance: no run landed it".into()),
            None => {}
        }
        human.push_str(&format!(
            "{:<12} {} ({})\n",
            if c.verified {
                "verified"
            } else {
                "NOT VERIFIED"
            },
            short(&c.commit),
            checks.join(", ")
        ));
    }
    for limit in &o.limits {
        human.push_str(&format!("note: {limit}\n"));
    }
    if o.commits.is_empty() {
        human.push_str("no commits to verify\n");
    } else if !o.verified {
        let bad = o.commits.iter().filter(|c| !c.verified).count();
        human.push_str(&format!(
            "{bad} of {} commit(s) not verified; {}",
            o.commits.len(),
            o.advice
                .as_deref()
                .unwrap_or("make evidence with `git tabellio validate <commit>`")
        ));
    }
    human
}
