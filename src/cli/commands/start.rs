//! `start`: freeze a base commit, create the run branch and its worktree.

use std::io::Read;
use std::path::PathBuf;

use serde_json::json;

use tabellio::lifecycle::start::{self, StartOptions};
use tabellio::{Error, Result};

use crate::cli::format::{run_json, short};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The run id (generated when omitted).
    pub run: Option<String>,
    /// The task, verbatim.
    #[arg(
        long,
        conflicts_with_all = ["task_file", "task_from"],
        required_unless_present_any = ["task_file", "task_from"]
    )]
    pub task: Option<String>,
    /// Read the task from a file (`-` for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "task_from")]
    pub task_file: Option<PathBuf>,
    /// Take the task of an existing run, verbatim (to start it again from a new base).
    #[arg(long, value_name = "RUN")]
    pub task_from: Option<String>,
    /// The branch to start from and promote into (default: the current branch).
    #[arg(long)]
    pub base: Option<String>,
    /// The run branch (default: tabellio/<run>).
    #[arg(long)]
    pub branch: Option<String>,
    /// Who runs it: <human|agent|ci|system>:<id> (default: human:<your canonical id>, the
    /// principal your signing key is allowed as, else your git email).
    #[arg(long)]
    pub actor: Option<String>,
    /// The agent's name (claude-code, codex, …), stored on the run's actor.
    #[arg(long, value_name = "NAME")]
    pub agent_name: Option<String>,
    /// The agent's model, stored on the run's actor.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The version of the harness driving the agent, stored on the run's actor.
    #[arg(long, value_name = "VERSION")]
    pub harness_version: Option<String>,
    /// A link to the agent's session; only its SHA-256 is stored, never the link.
    #[arg(long, value_name = "LINK")]
    pub session: Option<String>,
    /// Who asked for the run (default: you, by your canonical id).
    #[arg(long, value_name = "ID")]
    pub initiator: Option<String>,
}

pub fn cmd_start(ctx: &Ctx, args: &StartArgs) -> Result<Output> {
    let task = match &args.task_from {
        Some(run) => start::task_of(ctx.env()?, run)?,
        None => read_task(args)?,
    };
    let o = start::start(
        ctx.env()?,
        StartOptions {
            run_id: args.run.clone(),
            task,
            base: args.base.clone(),
            branch: args.branch.clone(),
            actor: args.actor.clone(),
            agent: tabellio::run::actor::AgentDetails {
                name: args.agent_name.clone(),
                model: args.model.clone(),
                harness_version: args.harness_version.clone(),
                session: args.session.clone(),
            },
            initiator: args.initiator.clone(),
            carry_from: args.task_from.clone(),
        },
    )?;
    if !ctx.json && !ctx.quiet {
        for w in &o.warnings {
            eprintln!("warning: {w}");
        }
    }
    let via = o
        .base_via
        .as_ref()
        .map_or_else(String::new, |v| format!(" (named as {v}, a symbolic ref)"));
    let mut human = format!(
        "started run {} from {}{via} ({})\nworktree: {}\nbranch:   {}\n",
        o.run.run_id,
        o.run.base.reference,
        short(&o.run.base.commit),
        o.workspace.display(),
        o.run.branch,
    );
    let conflicts = o.run.open_conflicts();
    match &o.superseded {
        Some(old) if !conflicts.is_empty() => human.push_str(&format!(
            "carries {old}'s change (now superseded); it conflicts in {}: resolve the conflict markers there, commit, then `git tabellio finish {}`",
            conflicts.join(", "),
            o.run.run_id
        )),
        Some(old) => human.push_str(&format!(
            "carries {old}'s change (now superseded), committed on the new base; `git tabellio finish {}` validates it",
            o.run.run_id
        )),
        None => human.push_str(&format!(
            "next: commit your work there, then `git tabellio finish {}`",
            o.run.run_id
        )),
    }
    Ok(Output::new(
        run_json(
            &o.run,
            Some(&o.workspace),
            match &o.base_via {
                Some(via) => {
                    json!({ "base_via": via, "warnings": o.warnings, "superseded": o.superseded })
                }
                None => json!({ "warnings": o.warnings, "superseded": o.superseded }),
            },
        ),
        human,
    ))
}

/// The task from `--task`, `--task-file <file>` or `--task-file -` (standard input);
/// `--task-from` is read from the repository.
fn read_task(args: &StartArgs) -> Result<String> {
    match (&args.task, &args.task_file) {
        (Some(t), _) => Ok(t.clone()),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| {
                Error::usage(format!("could not read the task from standard input: {e}"))
            })?;
            Ok(s)
        }
        (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| {
            Error::usage(format!("could not read the task file {}: {e}", f.display()))
                .hint("give a readable UTF-8 text file")
        }),
        (None, None) => Err(Error::usage("a task is required")
            .hint("--task <text>, --task-file <file> or --task-from <run>")),
    }
}
