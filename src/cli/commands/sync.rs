//! `sync [<remote>]`: share runs and evidence with a remote.
//!
//! Sync is a report even when it ends in a conflict: with `--json` a diverged or given-up sync is
//! `{"ok": false, "error": {…}}` *plus* the report's fields, so a script sees what was shared.

use tabellio::sync::ledgers::LedgerStep;
use tabellio::sync::notes_merge::NotesAction;
use tabellio::sync::push::PushedRef;
use tabellio::sync::{self as sync_lib, SyncOutcome, SyncReport};
use tabellio::{Error, Result};

use crate::cli::format::to_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// The remote (default: the only one, or `origin`).
    pub remote: Option<String>,
}

pub fn cmd_sync(ctx: &Ctx, args: &SyncArgs) -> Result<Output> {
    let report = sync_lib::sync(ctx.store()?, args.remote.as_deref())?;
    let out = Output::new(to_json(&report), describe_sync(&report));
    Ok(match report.outcome {
        SyncOutcome::Complete => out,
        SyncOutcome::Diverged => out.failed(Error::conflict(format!(
            "the ledgers of {} run(s) diverged from {}: {}; nothing was overwritten",
            report.ledgers.diverged.len(),
            report.remote,
            report
                .ledgers
                .diverged
                .iter()
                .map(describe_diverged)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint("both sides keep their ledger; decide which one stands (`git tabellio log <run>` here, the remote's in refs/tabellio/remotes/<remote>/runs/<run>) and keep it with the compare-and-swap commands in docs/sync.md (\"Conflicts\")")),
        SyncOutcome::GaveUp => out.failed(Error::conflict(format!(
            "{} kept changing: {} rounds of fetch, merge and push each lost the race; what was fetched is merged here, but the push did not land",
            report.remote, report.rounds
        ))
        .hint("other machines are pushing right now; run `git tabellio sync` again in a moment")),
        SyncOutcome::Declined => out.declined(Error::refused(format!(
            "{} declined the push: {}",
            report.remote,
            if report.remote_messages.is_empty() {
                "its hook said no".to_string()
            } else {
                report.remote_messages.join("; ")
            }
        ))
        .hint("nothing was pushed; see what the remote's hook requires")),
    })
}

fn describe_diverged(s: &LedgerStep) -> String {
    format!(
        "{} ({} here, {} there)",
        s.run,
        s.local_state.as_deref().unwrap_or("?"),
        s.remote_state.as_deref().unwrap_or("?")
    )
}

fn describe_sync(r: &SyncReport) -> String {
    let mut out = Vec::new();
    if !r.fetched.is_empty() {
        out.push(format!(
            "fetched {} ref(s) from {}",
            r.fetched.len(),
            r.remote
        ));
    }
    for n in &r.notes {
        let what = match n.action {
            NotesAction::Merged => format!("merged ({} object(s) from {})", n.objects, r.remote),
            NotesAction::Created => format!("created from {}", r.remote),
            NotesAction::FastForwarded => format!("fast-forwarded to {}", r.remote),
            NotesAction::Ahead | NotesAction::LocalOnly => "pushed".to_string(),
            NotesAction::UpToDate => continue,
        };
        out.push(format!("{}: {what}", n.notes_ref));
    }
    let l = &r.ledgers;
    for (label, list) in [
        ("created", &l.created),
        ("fast-forwarded", &l.fast_forwarded),
        ("left ahead and pushed", &l.left),
        ("published", &l.published),
    ] {
        // A first sync of a fleet moves thousands: the first ten and how many more.
        match list.len() {
            0 => {}
            n if n <= 10 => out.push(format!("runs {label}: {}", list.join(", "))),
            n => out.push(format!(
                "runs {label}: {} and {} more (--json lists them all)",
                list[..10].join(", "),
                n - 10
            )),
        }
    }
    for d in &l.diverged {
        out.push(format!("run diverged: {}", describe_diverged(d)));
    }
    for i in &l.ignored {
        out.push(format!(
            "run ignored: {} ({})",
            i.run,
            i.reason.as_deref().unwrap_or("unreadable")
        ));
    }
    let pushed: Vec<&PushedRef> = r.pushed.iter().filter(|p| p.status.is_ok()).collect();
    if r.outcome == SyncOutcome::Complete || r.outcome == SyncOutcome::Diverged {
        if pushed.is_empty() {
            out.push(format!("nothing to push to {}", r.remote));
        } else {
            let chunks = match r.pushes {
                0 | 1 => String::new(),
                n => format!(" in {n} pushes"),
            };
            out.push(format!(
                "pushed {} ref(s) to {}{chunks}",
                pushed.len(),
                r.remote
            ));
        }
    }
    let t = &r.took;
    let took = format!(
        "took {} ms (fetch {} ms, merge {} ms, push {} ms)",
        t.total_ms, t.fetch_ms, t.merge_ms, t.push_ms
    );
    if out.len() == 1 && r.fetched.is_empty() && r.outcome == SyncOutcome::Complete {
        return format!("up to date with {}; {took}", r.remote);
    }
    out.push(took);
    out.join("\n")
}
