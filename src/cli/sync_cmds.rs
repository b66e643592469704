//! `init`, `sync` and `promote --remote`: arguments, calls into `tabellio::sync`, rendering.
//!
//! Sync is a report even when it ends in a conflict: with `--json` a diverged or given-up sync is
//! `{"ok": false, "error": {…}}` *plus* the report's fields, so a script sees what was shared.

use super::render::short;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use tabellio::run::Env;
use tabellio::sync::init::{self, InitOptions};
use tabellio::sync::ledgers::LedgerStep;
use tabellio::sync::notes_merge::NotesAction;
use tabellio::sync::push::PushedRef;
use tabellio::sync::remote_promote::{self, RemotePromoteOutcome};
use tabellio::sync::{self as sync_lib, SyncOutcome, SyncReport};
use tabellio::{Error, ErrorKind, Result};

use super::render::{run_json, Output};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Set up only this remote (default: every configured remote).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Install the hook shims too (the server's pre-receive in a bare repository).
    #[arg(long)]
    pub hooks: bool,
}

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// The remote (default: the only one, or `origin`).
    pub remote: Option<String>,
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub fn cmd_init(a: &InitArgs, cwd: &Path) -> Result<Output> {
    let env = Env::discover(cwd)?;
    let o = init::init(
        &env.store,
        &InitOptions {
            remote: a.remote.clone(),
            hooks: a.hooks,
        },
    )?;
    let mut human = Vec::new();
    if o.remotes.is_empty() && o.side == "client" {
        human.push(
            "no remote configured: nothing to track yet (`git remote add origin <url>`, then init again)"
                .to_string(),
        );
    }
    for r in &o.remotes {
        if r.added.is_empty() {
            human.push(format!(
                "{}: tracking refspecs already configured",
                r.remote
            ));
        } else {
            human.push(format!(
                "{}: added fetch refspecs {}",
                r.remote,
                r.added.join(" ")
            ));
        }
    }
    if o.exclude_added {
        human.push("added /.tabellio/worktrees/ to info/exclude".into());
    }
    for w in &o.warnings {
        human.push(format!("warning: {w}"));
    }
    if let Some(h) = &o.hooks {
        for hook in &h.hooks {
            human.push(format!(
                "hook {}: {}",
                hook.name,
                serde_json::to_value(hook.action)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ));
        }
    }
    human.push(if o.changed {
        format!("initialized ({})", o.side)
    } else {
        format!("already initialized ({}); nothing changed", o.side)
    });
    Ok(Output::new(to_json(&o), human.join("\n")))
}

pub fn cmd_sync(a: &SyncArgs, cwd: &Path, json_mode: bool) -> Result<Output> {
    let env = Env::discover(cwd)?;
    let report = sync_lib::sync(&env.store, a.remote.as_deref())?;
    let human = describe_sync(&report);
    let error = match report.outcome {
        SyncOutcome::Complete => None,
        SyncOutcome::Diverged => Some(
            Error::conflict(format!(
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
            .hint("both sides keep their ledger; decide which one stands (`git tabellio log <run>` here, the remote's in refs/tabellio/remotes/<remote>/runs/<run>) and keep it with the compare-and-swap commands in docs/sync.md (\"Conflicts\")"),
        ),
        SyncOutcome::GaveUp => Some(
            Error::conflict(format!(
                "{} kept changing: {} rounds of fetch, merge and push each lost the race; what was fetched is merged here, but the push did not land",
                report.remote, report.rounds
            ))
            .hint("other machines are pushing right now; run `git tabellio sync` again in a moment"),
        ),
        SyncOutcome::Declined => Some(
            Error::new(
                ErrorKind::Refused,
                format!(
                    "{} declined the push: {}",
                    report.remote,
                    if report.remote_messages.is_empty() {
                        "its hook said no".to_string()
                    } else {
                        report.remote_messages.join("; ")
                    }
                ),
            )
            .hint("nothing was pushed; see what the remote's hook requires"),
        ),
    };
    let Some(err) = error else {
        return Ok(Output::new(to_json(&report), human));
    };
    // A declining hook is a negative verdict (exit 1); the others are conflicts (exit 4).
    let code = if report.outcome == SyncOutcome::Declined {
        1
    } else {
        err.exit_code()
    };
    Ok(failure_with_report(
        err,
        code,
        to_json(&report),
        human,
        json_mode,
    ))
}

/// An error that still carries a report: `ok: false`, the error, and the report's fields.
fn failure_with_report(
    err: Error,
    code: i32,
    report: Value,
    human: String,
    json_mode: bool,
) -> Output {
    let mut v = report;
    if let Value::Object(m) = &mut v {
        m.insert("ok".into(), Value::Bool(false));
        m.insert(
            "error".into(),
            json!({"code": if code == 1 { "declined" } else { err.kind.as_str() }, "exit_code": code, "message": err.message, "hint": err.hint}),
        );
    }
    if !json_mode {
        let mut text = format!("error: {}\n", err.message);
        if let Some(h) = &err.hint {
            text.push_str(&format!("hint: {h}\n"));
        }
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    Output::new(v, human).exit(code)
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
        if !list.is_empty() {
            out.push(format!("runs {label}: {}", list.join(", ")));
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
            out.push(format!("pushed {} ref(s) to {}", pushed.len(), r.remote));
        }
    }
    if out.len() == 1 && r.fetched.is_empty() && r.outcome == SyncOutcome::Complete {
        return format!("up to date with {}", r.remote);
    }
    out.join("\n")
}

/// `promote <run> --remote <name> [--dry-run]`.
pub fn cmd_promote_remote(
    run: Option<&str>,
    remote: &str,
    dry_run: bool,
    cwd: &Path,
    json_mode: bool,
) -> Result<Output> {
    let env = Env::discover(cwd)?;
    let o: RemotePromoteOutcome = remote_promote::promote_remote(&env, run, remote, dry_run)?;
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
        return Ok(failure_with_report(err, 1, body, String::new(), json_mode));
    }
    let human = if o.already_promoted {
        super::render::already_promoted(&o.run.run_id, &o.target, &o.new)
    } else {
        let mut h = format!(
            "{}{} {} -> {} on {} for run {}",
            if o.dry_run {
                "would promote: "
            } else {
                "promoted: "
            },
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
