//! `finish`: run the validation checks and record the evidence.

use serde_json::json;

use tabellio::evidence::produce::CheckSelection;
use tabellio::lifecycle::{finish, status};
use tabellio::Result;

use crate::cli::color;
use crate::cli::format::{
    evidence_lines, failure_lines, failure_reason, next_line, run_json, short, to_json,
    verdict_word,
};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct FinishArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    #[command(flatten)]
    pub checks: ChecksArgs,
}

// Which checks to run: policy checks by name, or one ad-hoc command (`finish` and
// `validate`). A plain comment: a doc comment would become the `about` of every command that
// flattens this in, once their arguments are deferred (see `cli::Command`).
#[derive(Debug, clap::Args)]
pub struct ChecksArgs {
    /// A policy check to run (repeatable), or the name of the ad-hoc check after `--`.
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Timeout in seconds of the ad-hoc check.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    #[command(flatten)]
    pub records: RecordArgs,
    /// An ad-hoc check command, run directly (never through a shell).
    #[arg(last = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

// How the evidence records of the checks are made (`finish`, `validate` and `land`). A plain
// comment, as for `ChecksArgs`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Run every check, even where the commit's tree already has passing evidence for it.
    #[arg(long)]
    pub no_reuse: bool,
    /// Sign the records with this SSH key (a private key file, or a public key whose private
    /// half is in ssh-agent) instead of git's `user.signingKey`.
    #[arg(long, value_name = "FILE", conflicts_with = "no_sign")]
    pub sign_key: Option<std::path::PathBuf>,
    /// Do not sign the records, even when git has an SSH signing key configured.
    #[arg(long)]
    pub no_sign: bool,
}

impl ChecksArgs {
    pub fn selection(&self) -> CheckSelection {
        CheckSelection {
            names: self.checks.clone(),
            argv: self.argv.clone(),
            timeout_s: self.timeout,
            reuse: tabellio::evidence::reuse::Reuse::from_flag(self.records.no_reuse),
            sign_key: self.records.sign_key.clone(),
            no_sign: self.records.no_sign,
        }
    }
}

pub fn cmd_finish(ctx: &Ctx, args: &FinishArgs) -> Result<Output> {
    let sel = args.checks.selection();
    let o = finish::finish(
        ctx.env()?,
        &finish::FinishOptions {
            run: args.run.as_deref(),
            checks: &sel,
            stream: ctx.stream,
        },
    )?;
    let mut human = evidence_lines(&o.evidence);
    let passed = o.passed();
    human.push_str(&format!(
        "run {} is {} (attempt {} on {})",
        o.run.run_id,
        color::stdout().status(o.run.state.as_str(), 0),
        o.attempt.n,
        short(&o.attempt.commit)
    ));
    if passed {
        human.push_str(&format!("\nnext: `git tabellio promote {}`", o.run.run_id));
    } else if !ctx.json {
        human.push('\n');
        let why = failure_reason(o.run.reason.as_deref(), &o.evidence);
        human.push_str(&failure_lines(
            why.as_deref(),
            Some(&o.run.run_id),
            &o.attempt.commit,
        ));
        // From the notes alone: new here, proven flaky, or failing on the target too.
        if !o.failures.is_empty() {
            human.push_str(&format!(
                "history: {}\n",
                tabellio::evidence::explain::describe(&o.failures)
            ));
        }
        // What status would say now (the plan gate's fix, or finish again after a fix). Only
        // advice: the attempt is recorded, so failing to read it back must not fail finish.
        let st = status::status(ctx.env()?, Some(&o.run.run_id));
        if let Some(next) = st.as_ref().ok().and_then(|st| st.next_action()) {
            human.push_str(&next_line(
                next.action.as_str(),
                if next.blocking { " (blocking)" } else { "" },
                &next.reason,
                next.command.as_deref(),
            ));
        }
    }
    let extra = json!({"attempt": to_json(&o.attempt), "evidence": to_json(&o.evidence), "executions": to_json(&o.executions), "failures": to_json(&o.failures), "verdict": verdict_word(passed)});
    Ok(Output::new(run_json(&o.run, Some(&o.workspace), extra), human).verdict(passed))
}
