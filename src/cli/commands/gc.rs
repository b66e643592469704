//! `gc [--archive-after <age>] [--dry-run]`: archive runs that ended long ago.

use tabellio::lifecycle::gc;
use tabellio::Result;

use crate::cli::format::to_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Archive runs that ended longer ago than this (90d, 12w, 36h, 0); default: the policy's
    /// retention.archive_after, else 90d.
    #[arg(long, value_name = "AGE")]
    pub archive_after: Option<String>,
    /// Say what would be archived and pruned; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn cmd_gc(ctx: &Ctx, args: &GcArgs) -> Result<Output> {
    let o = gc::gc(
        ctx.env()?,
        &gc::GcOptions {
            archive_after: args.archive_after.clone(),
            dry_run: args.dry_run,
        },
    )?;
    let verb = if o.dry_run {
        "would archive"
    } else {
        "archived"
    };
    let mut lines = vec![format!(
        "{verb} {} run{} that ended before {} (--archive-after {})",
        o.archived.len(),
        if o.archived.len() == 1 { "" } else { "s" },
        o.cutoff,
        o.archive_after
    )];
    for a in &o.archived {
        lines.push(format!(
            "  {:<24} {:<12} ended {} -> {}",
            a.run_id,
            a.state.as_str(),
            a.ended_at,
            a.archive_ref
        ));
    }
    for k in &o.kept {
        lines.push(format!("kept {}: {}", k.run_id, k.reason));
    }
    let f = &o.finished;
    let finished = f.ledgers.len() + f.branches.len() + f.worktrees.len();
    if finished > 0 {
        lines.push(format!(
            "already in the archive (archived by an interrupted gc, or by a clone and synced), now removed: {} ledger ref(s), {} branch(es), {} worktree(s)",
            f.ledgers.len(),
            f.branches.len(),
            f.worktrees.len()
        ));
    }
    for (notes_ref, n) in &o.notes.pruned {
        let verb = if o.dry_run { "would prune" } else { "pruned" };
        lines.push(format!(
            "{verb} {n} note(s) of unreachable commits from {notes_ref}"
        ));
    }
    if let Some(why) = &o.notes.skipped {
        lines.push(format!("notes not pruned: {why}"));
    }
    if let Some(m) = &o.multi_pack_index {
        match &m.warning {
            Some(why) => lines.push(format!("warning: {why}")),
            None if m.written => lines.push(format!(
                "wrote the multi-pack index over {} pack(s)",
                m.packs
            )),
            None => {}
        }
    }
    Ok(Output::new(to_json(&o), lines.join("\n")))
}
