//! `validate [<rev>]`: run checks on any commit in a temporary worktree and record the evidence
//! (CI).

use serde_json::json;

use tabellio::evidence::interrupt;
use tabellio::verify::validate::ValidateOptions;
use tabellio::Result;

use super::finish::ChecksArgs;
use crate::cli::color;
use crate::cli::format::{
    evidence_lines, failure_lines, failure_reason, short, to_json, verdict_word,
};
use crate::cli::{render, Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The commit to validate (default: HEAD).
    pub rev: Option<String>,
    #[command(flatten)]
    pub checks: ChecksArgs,
    /// Take the check definitions from the policy at this revision (default: the commit's own).
    #[arg(long, value_name = "REV")]
    pub policy_from: Option<String>,
}

pub fn cmd_validate(ctx: &Ctx, args: &ValidateArgs) -> Result<Output> {
    let opts = ValidateOptions {
        rev: args.rev.clone(),
        selection: args.checks.selection(),
        policy_from: args.policy_from.clone(),
        stream: ctx.stream,
    };
    let o = match tabellio::verify::validate::validate(ctx.store()?, &opts) {
        Ok(o) => o,
        Err(e) => {
            if let Some(sig) = interrupt::received() {
                // Cleaned up and wrote nothing; end the way an interrupted program ends.
                render::interrupted(&e);
                interrupt::reraise(sig);
            }
            return Err(e);
        }
    };
    let mut human = evidence_lines(&o.evidence);
    let palette = color::stdout();
    human.push_str(&format!(
        "{} {}: evidence noted on the commit and its tree in refs/notes/tabellio/evidence",
        palette.status(if o.passed { "validated" } else { "FAILED" }, 0),
        short(&o.commit)
    ));
    if !o.passed {
        human.push('\n');
        let why = failure_reason(None, &o.evidence);
        human.push_str(&failure_lines(why.as_deref(), None, &o.commit));
    }
    let json = json!({
        "commit": o.commit, "tree": o.tree,
        "verdict": verdict_word(o.passed),
        "evidence": to_json(&o.evidence),
    });
    Ok(Output::new(json, human).verdict(o.passed))
}
