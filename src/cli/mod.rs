//! The command line: parsing (clap), one file per subcommand under `commands/`, and the one
//! renderer that prints human text or one JSON object and decides the exit code.

pub mod commands;
pub mod ctx;
pub mod format;
pub mod render;

use clap::{Parser, Subcommand};

use tabellio::Result;

use commands::*;
pub use ctx::Ctx;
pub use render::Output;

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
    Start(start::StartArgs),
    /// Record progress on the run branch's head commit.
    Checkpoint(checkpoint::CheckpointArgs),
    /// Run the validation checks and record the evidence.
    Finish(finish::FinishArgs),
    /// Move the target branch to exactly the validated commit (fast-forward, compare-and-swap).
    Promote(promote::PromoteArgs),
    /// Land completed runs: restack onto the moved target, validate, move it (a merge queue).
    Land(land::LandArgs),
    /// Approve a run's change to guarded paths (a person's signed word, noted on its head).
    Approve(approve::ApproveArgs),
    /// Show a run's state and what to do next.
    Status(status::StatusArgs),
    /// List runs.
    List(list::ListArgs),
    /// Show a run's ledger: one line per state transition.
    Log(log::LogArgs),
    /// Abandon a run.
    Abandon(abandon::AbandonArgs),
    /// Remove the worktree and branch of a promoted or abandoned run.
    Cleanup(cleanup::CleanupArgs),
    /// Show the evidence records on a commit (and its tree), or on a tree.
    Evidence(evidence::EvidenceArgs),
    /// Show the whole life of a run in a throwaway repository.
    Demo(demo::DemoArgs),
    /// Plan hygiene: where a run's checklist plans stand, and moving misplaced ones.
    Plans(plans::PlansArgs),
    /// Run checks on any commit in a temporary worktree and record the evidence (CI).
    Validate(validate::ValidateArgs),
    /// Check that commits have passing, untampered evidence for the required checks.
    Verify(verify::VerifyArgs),
    /// Install the hooks that gate protected refs.
    Hooks(hooks::HooksArgs),
    /// Run a hook (called by the installed shims).
    Hook(hook::HookArgs),
    /// Set up tracking of a remote's runs and notes, the exclude line, and hooks (idempotent).
    Init(init::InitArgs),
    /// Share runs and evidence with a remote: fetch, union-merge notes, reconcile ledgers, push.
    Sync(sync::SyncArgs),
    /// Drive an agent command and the checks until the run validates or stops converging.
    Loop(r#loop::LoopArgs),
    /// The packet an agent (or a reviewer) reads: task, commits, attempts, failures, next action.
    Context(context::ContextArgs),
    /// Export a run: the whole run (tabellio.export/v1) or an in-toto statement.
    Export(export::ExportArgs),
}

/// Run one subcommand.
pub fn dispatch(ctx: &Ctx, command: &Command) -> Result<Output> {
    match command {
        Command::Start(a) => start::cmd_start(ctx, a),
        Command::Checkpoint(a) => checkpoint::cmd_checkpoint(ctx, a),
        Command::Finish(a) => finish::cmd_finish(ctx, a),
        Command::Promote(a) => promote::cmd_promote(ctx, a),
        Command::Land(a) => land::cmd_land(ctx, a),
        Command::Approve(a) => approve::cmd_approve(ctx, a),
        Command::Status(a) => status::cmd_status(ctx, a),
        Command::List(a) => list::cmd_list(ctx, a),
        Command::Log(a) => log::cmd_log(ctx, a),
        Command::Abandon(a) => abandon::cmd_abandon(ctx, a),
        Command::Cleanup(a) => cleanup::cmd_cleanup(ctx, a),
        Command::Evidence(a) => evidence::cmd_evidence(ctx, a),
        Command::Demo(a) => demo::cmd_demo(ctx, a),
        Command::Plans(a) => plans::cmd_plans(ctx, a),
        Command::Validate(a) => validate::cmd_validate(ctx, a),
        Command::Verify(a) => verify::cmd_verify(ctx, a),
        Command::Hooks(a) => hooks::cmd_hooks(ctx, a),
        Command::Hook(a) => hook::cmd_hook(ctx, a),
        Command::Init(a) => init::cmd_init(ctx, a),
        Command::Sync(a) => sync::cmd_sync(ctx, a),
        Command::Loop(a) => r#loop::cmd_loop(ctx, a),
        Command::Context(a) => context::cmd_context(ctx, a),
        Command::Export(a) => export::cmd_export(ctx, a),
    }
}
