//! Command-line parsing (clap) and rendering: human text or one JSON object.

pub mod evidence_cmds;
pub mod export_cmd;
pub mod harness_cmds;
pub mod land_cmd;
pub mod plans_cmd;
pub mod render;
pub mod run;
pub mod sync_cmds;

use clap::{Parser, Subcommand};

/// Keep every agent run, checkpoint and piece of validation evidence inside git.
#[derive(Debug, Parser)]
#[command(name = "git tabellio", bin_name = "git tabellio", version, about, long_about = None)]
pub struct Cli {
    /// One JSON object on stdout, success or error.
    #[arg(long, global = true)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a run: freeze a base commit, create the run branch and its worktree.
    Start(StartArgs),
    /// Record progress on the run branch's head commit.
    Checkpoint(CheckpointArgs),
    /// Run the validation checks and record the evidence.
    Finish(FinishArgs),
    /// Move the target branch to exactly the validated commit (fast-forward, compare-and-swap).
    Promote(PromoteArgs),
    /// Land completed runs: restack onto the moved target, validate, move it (a merge queue).
    Land(land_cmd::LandArgs),
    /// Show a run's state and what to do next.
    Status(RunArg),
    /// List runs.
    List(ListArgs),
    /// Show a run's ledger: one line per state transition.
    Log(RequiredRunArg),
    /// Abandon a run.
    Abandon(AbandonArgs),
    /// Remove the worktree and branch of a promoted or abandoned run.
    Cleanup(CleanupArgs),
    /// Show the evidence records on a commit (and its tree), or on a tree.
    Evidence(EvidenceArgs),
    /// Show the whole life of a run in a throwaway repository.
    Demo(DemoArgs),
    /// Plan hygiene: where a run's checklist plans stand, and moving misplaced ones.
    Plans(plans_cmd::PlansArgs),
    /// Run checks on any commit in a temporary worktree and record the evidence (CI).
    Validate(evidence_cmds::ValidateArgs),
    /// Check that commits have passing, untampered evidence for the required checks.
    Verify(evidence_cmds::VerifyArgs),
    /// Install the hooks that gate protected refs.
    Hooks(evidence_cmds::HooksArgs),
    /// Run a hook (called by the installed shims).
    Hook(evidence_cmds::HookArgs),
    /// Set up tracking of a remote's runs and notes, the exclude line, and hooks (idempotent).
    Init(sync_cmds::InitArgs),
    /// Share runs and evidence with a remote: fetch, union-merge notes, reconcile ledgers, push.
    Sync(sync_cmds::SyncArgs),
    /// Drive an agent command and the checks until the run validates or stops converging.
    Loop(harness_cmds::LoopArgs),
    /// The packet an agent (or a reviewer) reads: task, commits, attempts, failures, next action.
    Context(harness_cmds::ContextArgs),
    /// Export a run: the whole run (tabellio.export/v1) or an in-toto statement.
    Export(export_cmd::ExportArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArg {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RequiredRunArg {
    pub run: String,
}

#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The run id (generated when omitted).
    pub run: Option<String>,
    /// The task, verbatim.
    #[arg(
        long,
        conflicts_with = "task_file",
        required_unless_present = "task_file"
    )]
    pub task: Option<String>,
    /// Read the task from a file (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<std::path::PathBuf>,
    /// The branch to start from and promote into (default: the current branch).
    #[arg(long)]
    pub base: Option<String>,
    /// The run branch (default: tabellio/<run>).
    #[arg(long)]
    pub branch: Option<String>,
    /// Who runs it: <human|agent|ci|system>:<id>.
    #[arg(long)]
    pub actor: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    pub run: Option<String>,
    /// A summary (default: the commit's subject).
    #[arg(short, long)]
    pub message: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct FinishArgs {
    pub run: Option<String>,
    /// A policy check to run (repeatable), or the name of the ad-hoc check after `--`.
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Timeout in seconds of the ad-hoc check.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Run every check, even where the commit's tree already has passing evidence for it.
    #[arg(long)]
    pub no_reuse: bool,
    /// An ad-hoc check command, run directly (never through a shell).
    #[arg(last = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    pub run: Option<String>,
    /// Check everything and say what would happen, without writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Promote on this remote: one atomic push of target, ledger and evidence notes.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only runs in this state.
    #[arg(long)]
    pub state: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct AbandonArgs {
    pub run: String,
    /// Why.
    #[arg(short, long)]
    pub message: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    pub run: String,
    /// Discard uncommitted changes and unmerged commits of an abandoned run.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the demo repository and print where it is.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Debug, clap::Args)]
pub struct EvidenceArgs {
    /// A commit or a tree (default: HEAD).
    #[arg(default_value = "HEAD")]
    pub rev: String,
}
