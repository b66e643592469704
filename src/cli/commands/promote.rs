//! `promote [--dry-run] [--remote <name>]`: move the target branch to exactly the validated
//! commit, here or on a remote.

use serde_json::json;

use tabellio::sync::remote_promote;
use tabellio::{Error, Result};

use crate::cli::format::{already_promoted, promote_prefix, run_json, short, to_json};
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    /// The run id (default: the run whose worktree you are in).
    pub run: Option<String>,
    /// Check everything and say what would happen, without writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Promote on this remote: one atomic push of target, ledger and evidence notes.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
}

pub fn cmd_promote(ctx: &Ctx, args: &PromoteArgs) -> Result<Output> {
    if let Some(remote) = &args.remote {
        return promote_remote(ctx, args, remote);
    }
    let o = tabellio::lifecycle::promote::promote(
        ctx.env()?,
        &tabellio::lifecycle::promote::PromoteOptions {
            run: args.run.as_deref(),
            dry_run: args.dry_run,
        },
    )?;
    if let (Some(w), false) = (&o.summary_warning, ctx.json || ctx.quiet) {
        eprintln!("warning: the verification summary was not noted: {w}");
    }
    let human = if o.already_promoted {
        already_promoted(&o.run.run_id, &o.target, &o.new)
    } else {
        format!(
            "{}{} {} -> {} ({}{}) for run {}",
            promote_prefix(o.dry_run),
            o.target,
            short(&o.old),
            short(&o.new),
            o.mode.as_str(),
            o.target_worktree
                .as_ref()
                .map_or(String::new(), |p| format!(
                    ": the files of {} {} too",
                    p.display(),
                    if o.dry_run { "would move" } else { "moved" }
                )),
            o.run.run_id
        )
    };
    let extra = json!({
        "target": o.target, "old": o.old, "new": o.new, "mode": o.mode.as_str(),
        "target_worktree": o.target_worktree.as_ref().map(|p| p.display().to_string()),
        "dry_run": o.dry_run, "already_promoted": o.already_promoted,
    });
    Ok(Output::new(
        run_json(&o.run, o.workspace.as_deref(), extra),
        human,
    ))
}

/// `promote <run> --remote <name> [--dry-run]`.
fn promote_remote(ctx: &Ctx, args: &PromoteArgs, remote: &str) -> Result<Output> {
    let o = remote_promote::promote_remote(ctx.env()?, args.run.as_deref(), remote, args.dry_run)?;
    if let (Some(w), false) = (&o.summary_warning, ctx.json || ctx.quiet) {
        eprintln!("warning: the verification summary was not noted: {w}");
    }
    let extra = json!({
        "target": o.target, "old": o.old, "new": o.new, "mode": "remote", "remote": o.remote,
        "dry_run": o.dry_run, "already_promoted": o.already_promoted, "rounds": o.rounds,
        "pushed": to_json(&o.pushed), "local_notes_behind": o.local_notes_behind,
    });
    let body = run_json(&o.run, o.workspace.as_deref(), extra);
    if let Some(messages) = &o.declined {
        let err = Error::refused(format!(
            "{remote} declined the promotion of run {}: {}",
            o.run.run_id,
            if messages.is_empty() {
                "its hook said no".to_string()
            } else {
                messages.join("; ")
            }
        ))
        .hint(format!(
            "nothing moved, here or on {remote}; the run is still {}",
            o.run.state
        ));
        return Ok(Output::new(body, String::new()).declined(err));
    }
    let human = if o.already_promoted {
        already_promoted(&o.run.run_id, &o.target, &o.new)
    } else {
        let mut h = format!(
            "{}{} {} -> {} on {} for run {}",
            promote_prefix(o.dry_run),
            o.target,
            short(&o.old),
            short(&o.new),
            o.remote,
            o.run.run_id
        );
        if o.local_notes_behind {
            h.push_str(&format!(
                "\nnote: local notes changed meanwhile; `git tabellio sync {}` merges them",
                o.remote
            ));
        }
        h
    };
    Ok(Output::new(body, human))
}
