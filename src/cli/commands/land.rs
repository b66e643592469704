//! `git tabellio land [<run>...] [--target <branch>] [--batch <N>] [--remote <name>] [--squash]
//! [--no-reuse] [--dry-run]`.

use tabellio::evidence::reuse::Reuse;
use tabellio::lifecycle::enqueue::{self, EnqueueOptions};
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
    /// Put the named runs in the queue first (as `enqueue` does), then land the target's
    /// queue.
    #[arg(long, requires = "runs")]
    pub enqueue: bool,
    /// Run no check here: publish up to W candidate stacks at a time for workers (`git tabellio
    /// worker`) to validate, and land what their evidence proves.
    #[arg(long, value_name = "W")]
    pub lanes: Option<usize>,
    /// Print the plan and write nothing.
    #[arg(long, conflicts_with_all = ["enqueue", "lanes"])]
    pub dry_run: bool,
    /// Land nothing: how landing on the target has gone, from refs and notes (time in queue,
    /// executions per landed run, reuse, wasted executions, flaky passes).
    #[arg(long, conflicts_with_all = ["enqueue", "lanes", "dry_run", "runs"])]
    pub stats: bool,
    /// Reopen each run refused by a conflict or a failing stack onto the new tip, for its
    /// repair (conflicts written out in its worktree).
    #[arg(long, conflicts_with_all = ["dry_run", "remote"])]
    pub reopen: bool,
    /// Drain the queue: land, reopen what was refused, run each reopened run's agent loop
    /// (runs a loop drove), land again, until nothing is left (implies --reopen).
    #[arg(long, conflicts_with_all = ["dry_run", "remote"])]
    pub until_empty: bool,
}

pub fn cmd_land(ctx: &Ctx, a: &LandArgs) -> Result<Output> {
    if a.stats {
        return stats(ctx, a);
    }
    // `--enqueue`: the runs join the queue (keeping an existing place), and the queue lands.
    let (runs, target) = if a.enqueue {
        let queued = enqueue::enqueue(
            ctx.env()?,
            &EnqueueOptions {
                runs: a.runs.clone(),
                target: a.target.clone(),
                ..Default::default()
            },
        )?;
        let target = queued.runs.first().map(|r| r.entry.target.clone());
        (Vec::new(), a.target.clone().or(target))
    } else {
        (a.runs.clone(), a.target.clone())
    };
    let opts = LandOptions {
        runs,
        target,
        batch: a.batch,
        squash: a.squash,
        remote: a.remote.clone(),
        reuse: Reuse::from_flag(a.records.no_reuse),
        dry_run: a.dry_run,
        stream: ctx.stream,
        sign_key: a.records.sign_key.clone(),
        no_sign: a.records.no_sign,
        lanes: a.lanes,
        reopen: a.reopen || a.until_empty,
        progress: (!ctx.quiet).then_some(say as fn(&str)),
    };
    if a.until_empty {
        return drain(ctx, &opts);
    }
    let o = land::land(ctx.env()?, &opts)?;
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    if let (Some(w), false) = (&o.summary_warning, ctx.json || ctx.quiet) {
        eprintln!("warning: the verification summary was not noted: {w}");
    }
    let mut human = String::new();
    for r in &o.runs {
        human.push_str(&line(r));
        human.push('\n');
    }
    for w in &o.waiting {
        human.push_str(&format!(
            "waiting {}: land refused it ({}) and nothing changed since; `{}`\n",
            w.run_id, w.reason, w.command
        ));
    }
    for r in &o.reopened {
        human.push_str(&reopened_line(r));
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

/// `--until-empty`: the drain, with a progress line per step (on a terminal and off it).
fn drain(ctx: &Ctx, opts: &LandOptions) -> Result<Output> {
    let interrupt = tabellio::harness::interrupt::install()?;
    let show = ctx.shows_progress();
    let mut on_event = |line: String| {
        if show {
            eprintln!("[land] {line}");
        }
    };
    let o = tabellio::harness::drain::drain(ctx.env()?, opts, interrupt, &mut on_event)?;
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let mut human = String::new();
    for r in &o.runs {
        human.push_str(&format!(
            "{} {}: {} repair round(s), {} agent run(s), {} check run(s){}\n",
            r.run_id,
            r.state,
            r.rounds,
            r.agent_invocations,
            r.check_executions,
            r.reason
                .as_deref()
                .map_or(String::new(), |why| format!(" — {why}"))
        ));
    }
    human.push_str(&format!(
        "{} landed of {} in {} round(s); landing checks: {} run, {} reused ({} validations)",
        o.runs
            .iter()
            .filter(|r| r.state == tabellio::model::RunState::Promoted)
            .count(),
        o.runs.len(),
        o.rounds,
        o.checks_run,
        o.checks_reused,
        o.validations
    ));
    Ok(Output::new(json, human).verdict(o.all_landed()))
}

/// One line per reopened run.
fn reopened_line(r: &land::Requeued) -> String {
    let id = &r.run_id;
    match (&r.mode, &r.error) {
        (_, Some(why)) => format!("not reopened {id}: {why}"),
        (Some(tabellio::model::land::ReopenMode::Conflict), _) => format!(
            "reopened {id} onto {}: conflicts in {} written out for its repair",
            r.base.as_deref().map_or("?", short),
            r.conflicts.join(", ")
        ),
        _ => format!(
            "reopened {id} onto {}: `git tabellio finish {id}` validates it there",
            r.base.as_deref().map_or("?", short)
        ),
    }
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
        Landing::Conflict => format!("conflict {id}: {} (now {})", r.paths.join(", "), r.state),
        Landing::ValidationFailed => format!(
            "failed {id}: {} (now {})",
            r.reason.as_deref().unwrap_or(""),
            r.state
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

/// `land --stats`.
fn stats(ctx: &Ctx, a: &LandArgs) -> Result<Output> {
    let env = ctx.env()?;
    let target = match &a.target {
        Some(t) => t.clone(),
        None => tabellio::run::current_branch(&env.store)
            .filter(|h| h.starts_with("refs/heads/"))
            .ok_or_else(|| {
                Error::usage("no --target and HEAD is not on a branch")
                    .hint("name the target: `git tabellio land --stats --target <branch>`")
            })?,
    };
    let s = tabellio::lifecycle::land_stats::land_stats(env, &target)?;
    let json = serde_json::to_value(&s)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
    let wait = s.time_in_queue_s.as_ref().map_or("-".to_string(), |p| {
        format!("p50 {}s, p95 {}s", p.p50, p.p95)
    });
    let human = format!(
        "{}: {} landed; time in queue {wait}\nexecutions {} ({} per landed run), reused {} (ratio {}), wasted {}, flaky passes {}",
        s.target.trim_start_matches("refs/heads/"),
        s.landed,
        s.executions,
        ratio(s.executions_per_landed_run),
        s.reused,
        ratio(s.reuse_ratio),
        s.wasted_executions,
        s.flaky_passes
    );
    Ok(Output::new(json, human))
}

/// A line of `land --lanes` progress, on stderr.
fn say(line: &str) {
    eprintln!("land: {line}");
}
