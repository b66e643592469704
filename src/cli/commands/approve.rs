//! `approve <run> [-m <why>] [--actor <type>:<id>] [--sign-key <file>] [--no-sign]`.

use std::path::PathBuf;

use serde_json::json;

use tabellio::lifecycle::approve::{approve, ApproveOptions};
use tabellio::Result;

use crate::cli::format::{run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The run whose change to guarded paths is approved (default: the run of this worktree).
    pub run: Option<String>,
    /// Why the change is fine, recorded in the approval.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Who approves, as <type>:<id> (default: human:<your git email>).
    #[arg(long, value_name = "TYPE:ID")]
    pub actor: Option<String>,
    /// Sign the approval with this SSH key file (default: git's user.signingKey with gpg.format=ssh).
    #[arg(long, value_name = "FILE", conflicts_with = "no_sign")]
    pub sign_key: Option<PathBuf>,
    /// Do not sign the approval, even when a signing key is configured.
    #[arg(long)]
    pub no_sign: bool,
}

pub fn cmd_approve(ctx: &Ctx, args: &ApproveArgs) -> Result<Output> {
    let o = approve(
        ctx.env()?,
        &ApproveOptions {
            run: args.run.clone(),
            reason: args.message.clone(),
            actor: args.actor.clone(),
            sign_key: args.sign_key.clone(),
            no_sign: args.no_sign,
        },
    )?;
    let a = &o.approval;
    let human = format!(
        "approved run {} at {} for {}:{}{}: {}",
        o.run.run_id,
        short(&a.commit),
        a.approver.kind,
        a.approver.id,
        a.signature.as_ref().map_or(String::new(), |s| format!(
            " (signed by {})",
            s.key_fingerprint
        )),
        a.paths.join(", ")
    );
    Ok(Output::new(
        run_json(
            &o.run,
            o.workspace.as_deref(),
            json!({"approval": to_json(a)}),
        ),
        human,
    ))
}
