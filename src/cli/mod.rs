//! The command line: parsing (clap), one file per subcommand under `commands/`, and the one
//! renderer that prints human text or one JSON object and decides the exit code.

pub mod color;
pub mod commands;
pub mod ctx;
pub mod examples;
pub mod format;
pub mod progress;
pub mod render;

use clap::{Parser, Subcommand};

use tabellio::Result;

use commands::*;
pub use ctx::Ctx;
pub use render::Output;

/// Keep every agent run, checkpoint and piece of validation evidence inside git.
#[derive(Debug, Parser)]
#[command(
    name = "git tabellio",
    bin_name = "git tabellio",
    version,
    about,
    long_about = None,
    after_long_help = examples::TOOL
)]
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

/// Each subcommand's arguments are defined when it is the one invoked (`defer`): a process
/// runs one command, and defining every command's arguments cost about 0.15 ms at every start
/// (a tenth of `--version`). [`full_command`] defines them all, for what lists them.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Start a run: freeze a base commit, create the run branch and its worktree.
    #[command(after_long_help = examples::START)]
    Start(start::StartArgs),
    /// Record progress on the run branch's head commit.
    #[command(after_long_help = examples::CHECKPOINT)]
    Checkpoint(checkpoint::CheckpointArgs),
    /// Put the run's worktree and branch back to a checkpoint (untracked files too).
    #[command(after_long_help = examples::REWIND)]
    Rewind(rewind::RewindArgs),
    /// Run the validation checks and record the evidence.
    #[command(after_long_help = examples::FINISH)]
    Finish(finish::FinishArgs),
    /// Move the target branch to exactly the validated commit (fast-forward, compare-and-swap).
    #[command(after_long_help = examples::PROMOTE)]
    Promote(promote::PromoteArgs),
    /// Land completed runs: restack onto the moved target, validate, move it (a merge queue).
    #[command(after_long_help = examples::LAND)]
    Land(land::LandArgs),
    /// Put completed runs in their target's landing queue (refs/tabellio/queue/…).
    #[command(after_long_help = examples::ENQUEUE)]
    Enqueue(enqueue::EnqueueArgs),
    /// List the landing queue: position, state, estimated wait.
    #[command(after_long_help = examples::QUEUE)]
    Queue(queue::QueueArgs),
    /// Validate the candidate stacks `land --lanes` publishes (claims, checks, evidence).
    #[command(after_long_help = examples::WORKER)]
    Worker(worker::WorkerArgs),
    /// Move a run land refused onto the target's tip for its repair (conflicts written out).
    #[command(after_long_help = examples::REOPEN)]
    Reopen(reopen::ReopenArgs),
    /// Approve a run's change to guarded paths (a person's signed word, noted on its head).
    #[command(after_long_help = examples::APPROVE)]
    Approve(approve::ApproveArgs),
    /// Show a run's state and what to do next.
    #[command(after_long_help = examples::STATUS)]
    Status(status::StatusArgs),
    /// List runs.
    #[command(after_long_help = examples::LIST)]
    List(list::ListArgs),
    /// Show a run's ledger, or draw runs as lanes (--graph) or an HTML page (--html).
    #[command(after_long_help = examples::LOG)]
    Log(log::LogArgs),
    /// Abandon a run.
    #[command(after_long_help = examples::ABANDON)]
    Abandon(abandon::AbandonArgs),
    /// Remove the worktree and branch of a promoted or abandoned run.
    #[command(after_long_help = examples::CLEANUP)]
    Cleanup(cleanup::CleanupArgs),
    /// Archive runs that ended long ago, removing their branches and worktrees.
    #[command(after_long_help = examples::GC)]
    Gc(gc::GcArgs),
    /// Each line of a file with the commit, the run that landed it, its actor and initiator.
    #[command(after_long_help = examples::BLAME)]
    Blame(blame::BlameArgs),
    /// Show the evidence records on a commit (and its tree), or on a tree.
    #[command(after_long_help = examples::EVIDENCE)]
    Evidence(evidence::EvidenceArgs),
    /// Each check's recorded executions, flake rate and mean duration, from the evidence.
    #[command(after_long_help = examples::CHECKS)]
    Checks(checks::ChecksArgs),
    /// Show the whole life of a run in a throwaway repository.
    #[command(after_long_help = examples::DEMO)]
    Demo(demo::DemoArgs),
    /// Plan hygiene: where a run's checklist plans stand, and moving misplaced ones.
    #[command(after_long_help = examples::PLANS)]
    Plans(plans::PlansArgs),
    /// Run checks on any commit in a temporary worktree and record the evidence (CI).
    #[command(after_long_help = examples::VALIDATE)]
    Validate(validate::ValidateArgs),
    /// Check that commits have passing, untampered evidence for the required checks.
    #[command(after_long_help = examples::VERIFY)]
    Verify(verify::VerifyArgs),
    /// Install the hooks that gate protected refs.
    #[command(after_long_help = examples::HOOKS)]
    Hooks(hooks::HooksArgs),
    /// Run a hook (called by the installed shims).
    #[command(after_long_help = examples::HOOK)]
    Hook(hook::HookArgs),
    /// Set up tracking of a remote's runs and notes, the exclude line, and hooks (idempotent).
    #[command(after_long_help = examples::INIT)]
    Init(init::InitArgs),
    /// Share runs and evidence with a remote: fetch, union-merge notes, reconcile ledgers, push.
    #[command(after_long_help = examples::SYNC)]
    Sync(sync::SyncArgs),
    /// Drive an agent command and the checks until the run validates or stops converging.
    #[command(after_long_help = examples::LOOP)]
    Loop(r#loop::LoopArgs),
    /// The packet an agent (or a reviewer) reads: task, commits, attempts, failures, next action.
    #[command(after_long_help = examples::CONTEXT)]
    Context(context::ContextArgs),
    /// Export a run: the whole run (tabellio.export/v1) or an in-toto statement.
    #[command(after_long_help = examples::EXPORT)]
    Export(export::ExportArgs),
    /// Print the manual page, or install one page per command where `man` finds them.
    #[command(after_long_help = examples::MAN)]
    Man(man::ManArgs),
    /// Print a completion script for bash, zsh or fish.
    #[command(after_long_help = examples::COMPLETIONS)]
    Completions(completions::CompletionsArgs),
}

/// Run one subcommand.
pub fn dispatch(ctx: &Ctx, command: &Command) -> Result<Output> {
    match command {
        Command::Start(a) => start::cmd_start(ctx, a),
        Command::Checkpoint(a) => checkpoint::cmd_checkpoint(ctx, a),
        Command::Rewind(a) => rewind::cmd_rewind(ctx, a),
        Command::Finish(a) => finish::cmd_finish(ctx, a),
        Command::Promote(a) => promote::cmd_promote(ctx, a),
        Command::Land(a) => land::cmd_land(ctx, a),
        Command::Enqueue(a) => enqueue::cmd_enqueue(ctx, a),
        Command::Queue(a) => queue::cmd_queue(ctx, a),
        Command::Worker(a) => worker::cmd_worker(ctx, a),
        Command::Reopen(a) => reopen::cmd_reopen(ctx, a),
        Command::Approve(a) => approve::cmd_approve(ctx, a),
        Command::Status(a) => status::cmd_status(ctx, a),
        Command::List(a) => list::cmd_list(ctx, a),
        Command::Log(a) => log::cmd_log(ctx, a),
        Command::Abandon(a) => abandon::cmd_abandon(ctx, a),
        Command::Cleanup(a) => cleanup::cmd_cleanup(ctx, a),
        Command::Gc(a) => gc::cmd_gc(ctx, a),
        Command::Blame(a) => blame::cmd_blame(ctx, a),
        Command::Evidence(a) => evidence::cmd_evidence(ctx, a),
        Command::Checks(a) => checks::cmd_checks(ctx, a),
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
        Command::Man(a) => man::cmd_man(ctx, a),
        Command::Completions(a) => completions::cmd_completions(ctx, a),
    }
}

/// The whole command tree, built: every subcommand's arguments defined, for the completion
/// scripts and the manual pages, which list them all. (Built this way a deferred subcommand
/// has the global options ahead of its own, which only orders them in those lists.)
pub fn full_command(mut root: clap::Command) -> clap::Command {
    root.build();
    root
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// What `cmd` (named `path`) and its visible subcommands lack: a one-line description of
    /// each command and visible argument, and an `Examples:` block in each command's long help.
    fn missing_help(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            if help.trim().is_empty() {
                missing.push(format!("{path} {}: no description", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{path} {}", sub.get_name());
            // clap's own `help` subcommand lists the commands; its help is clap's.
            if sub.get_name() == "help" {
                continue;
            }
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            if about.trim().is_empty() {
                missing.push(format!("{name}: no description"));
            }
            let examples = sub
                .get_after_long_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            if !examples.contains("Examples:\n  git tabellio ") {
                missing.push(format!("{name}: no `Examples:` in the long help"));
            }
            missing_help(sub, &name, missing);
        }
    }

    /// A subcommand's arguments are defined only when it runs (deferred): its own help must
    /// still say what the command list says it does, not what a struct it flattens in says.
    #[test]
    fn every_command_s_help_starts_with_its_line_in_the_command_list() {
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            let shown = Cli::command()
                .try_get_matches_from(["git-tabellio", name, "-h"])
                .expect_err("-h prints the help")
                .render()
                .to_string();
            assert_eq!(shown.lines().next(), Some(about.as_str()), "{name}");
        }
    }

    #[test]
    fn every_command_and_flag_has_a_description_and_every_command_an_example() {
        let cmd = super::full_command(Cli::command());
        let mut missing = Vec::new();
        missing_help(&cmd, "git tabellio", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
