//! Dispatch: call the library for each subcommand and turn its outcome into [`Output`].

use super::render::short;
use std::io::{IsTerminal, Read};

use serde_json::json;

use tabellio::lifecycle::{self, finish::CheckSelection, Env};
use tabellio::validate::Stream;
use tabellio::{Error, Result};

use super::render::{print_stdout, run_json, Output};
use super::{Cli, Command};

fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

pub fn dispatch(cli: &Cli) -> Result<Output> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::internal(format!("cannot read the current directory: {e}")))?;
    let stream = if !cli.quiet && !cli.json && std::io::stderr().is_terminal() {
        Stream::Stderr
    } else {
        Stream::Quiet
    };
    match &cli.command {
        Command::Start(a) => {
            let task = match (&a.task, &a.task_file) {
                (Some(t), _) => t.clone(),
                (None, Some(f)) if f.as_os_str() == "-" => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s).map_err(|e| {
                        Error::usage(format!("could not read the task from standard input: {e}"))
                    })?;
                    s
                }
                (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| {
                    Error::usage(format!("could not read the task file {}: {e}", f.display()))
                        .hint("give a readable UTF-8 text file")
                })?,
                (None, None) => {
                    return Err(Error::usage("a task is required")
                        .hint("--task <text> or --task-file <file>"))
                }
            };
            let env = Env::discover(&cwd)?;
            let o = lifecycle::start::start(
                &env,
                lifecycle::start::StartOptions {
                    run_id: a.run.clone(),
                    task,
                    base: a.base.clone(),
                    branch: a.branch.clone(),
                    actor: a.actor.clone(),
                },
            )?;
            let human = format!(
                "started run {} from {} ({})\nworktree: {}\nbranch:   {}\nnext: commit your work there, then `git tabellio finish {}`",
                o.run.run_id,
                o.run.base.reference,
                short(&o.run.base.commit),
                o.workspace.display(),
                o.run.branch,
                o.run.run_id
            );
            Ok(Output::new(
                run_json(&o.run, Some(&o.workspace), json!({})),
                human,
            ))
        }
        Command::Checkpoint(a) => {
            let env = Env::discover(&cwd)?;
            let o =
                lifecycle::checkpoint::checkpoint(&env, a.run.as_deref(), a.message.as_deref())?;
            let human = if o.recorded {
                format!(
                    "checkpoint {} on run {} ({} so far)",
                    short(&o.commit),
                    o.run.run_id,
                    o.run.checkpoints.len()
                )
            } else {
                format!(
                    "{} is already checkpointed on run {}; nothing to do",
                    short(&o.commit),
                    o.run.run_id
                )
            };
            Ok(Output::new(
                run_json(
                    &o.run,
                    o.workspace.as_deref(),
                    json!({"commit": o.commit, "recorded": o.recorded}),
                ),
                human,
            ))
        }
        Command::Finish(a) => {
            let env = Env::discover(&cwd)?;
            let sel = CheckSelection {
                names: a.checks.clone(),
                argv: a.argv.clone(),
                timeout_s: a.timeout,
                reuse: lifecycle::reuse::Reuse::from_flag(a.no_reuse),
            };
            let o = lifecycle::finish::finish(&env, a.run.as_deref(), &sel, stream)?;
            let mut human = super::render::evidence_lines(&o.evidence);
            let passed = o.passed();
            human.push_str(&format!(
                "run {} is {} (attempt {} on {})",
                o.run.run_id,
                o.run.state,
                o.attempt.n,
                short(&o.attempt.commit)
            ));
            if passed {
                human.push_str(&format!("\nnext: `git tabellio promote {}`", o.run.run_id));
            }
            let extra = json!({"attempt": to_json(&o.attempt), "evidence": to_json(&o.evidence), "verdict": if passed {"passed"} else {"failed"}});
            Ok(
                Output::new(run_json(&o.run, Some(&o.workspace), extra), human).exit(if passed {
                    0
                } else {
                    1
                }),
            )
        }
        Command::Promote(a) => {
            if let Some(remote) = &a.remote {
                return super::sync_cmds::cmd_promote_remote(
                    a.run.as_deref(),
                    remote,
                    a.dry_run,
                    &cwd,
                    cli.json,
                );
            }
            let env = Env::discover(&cwd)?;
            let o = tabellio::promote::promote(&env, a.run.as_deref(), a.dry_run)?;
            let human = if o.already_promoted {
                super::render::already_promoted(&o.run.run_id, &o.target, &o.new)
            } else {
                format!(
                    "{}{} {} -> {} ({}{}) for run {}",
                    if o.dry_run {
                        "would promote: "
                    } else {
                        "promoted: "
                    },
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
        Command::Status(a) => {
            let env = Env::discover(&cwd)?;
            let o = lifecycle::status::status(&env, a.run.as_deref())?;
            let mut human = format!(
                "run {}: {}{}\ntask: {}\nbase: {} at {}\nbranch: {}\n",
                o.run.run_id,
                o.state,
                o.previous_state
                    .map_or(String::new(), |p| format!(" (was {p})")),
                super::render::printable(&o.run.task.summary),
                o.run.base.reference,
                short(&o.run.base.commit),
                o.run.branch
            );
            if let Some(w) = &o.workspace {
                human.push_str(&format!("worktree: {}\n", w.display()));
            }
            if let Some(bar) = o.plans.as_ref().and_then(|p| p["bar"].as_str()) {
                human.push_str(&format!("plans: {bar}\n"));
            }
            if !o.satisfied_evidence.is_empty() {
                human.push_str(&format!("evidence: {}\n", o.satisfied_evidence.join(", ")));
            }
            if !o.missing_evidence.is_empty() {
                human.push_str(&format!(
                    "missing evidence: {}\n",
                    o.missing_evidence.join(", ")
                ));
            }
            human.push_str(&format!(
                "next: {}{} — {}{}",
                o.next_action.action,
                if o.next_action.blocking {
                    " (blocking)"
                } else {
                    ""
                },
                o.next_action.reason,
                o.next_action
                    .command
                    .as_deref()
                    .map_or(String::new(), |c| format!("\n      {c}"))
            ));
            let extra = json!({
                "state": o.state, "previous_state": o.previous_state,
                "allowed_actions": o.allowed_actions, "next_action": to_json(&o.next_action),
                "satisfied_evidence": o.satisfied_evidence, "missing_evidence": o.missing_evidence,
                "live": to_json(&o.live), "plans": o.plans,
            });
            Ok(Output::new(
                run_json(&o.run, o.workspace.as_deref(), extra),
                human,
            ))
        }
        Command::List(a) => {
            let env = Env::discover(&cwd)?;
            let o = lifecycle::manage::list(&env, a.state.as_deref())?;
            let human = o
                .runs
                .iter()
                .map(|r| {
                    format!(
                        "{:<24} {:<18} {}{}",
                        r.run_id,
                        r.state.as_str(),
                        super::render::printable(&r.summary),
                        r.landed
                            .as_deref()
                            .map_or(String::new(), |c| format!(" (landed as {})", short(c)))
                    )
                })
                .chain(
                    o.unreadable
                        .iter()
                        .map(|u| format!("{:<24} {:<18} {}", u.run_id, "unreadable", u.message)),
                )
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Output::new(
                json!({"runs": to_json(&o.runs), "unreadable": to_json(&o.unreadable)}),
                human,
            ))
        }
        Command::Log(a) => {
            let env = Env::discover(&cwd)?;
            let (run, entries) = lifecycle::manage::log(&env, &a.run)?;
            let human = entries
                .iter()
                .map(|e| format!("{} {} {}", short(&e.commit), e.at, e.message))
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Output::new(
                run_json(&run, None, json!({"log": to_json(&entries)})),
                human,
            ))
        }
        Command::Abandon(a) => {
            let env = Env::discover(&cwd)?;
            let o = lifecycle::manage::abandon(&env, Some(&a.run), a.message.as_deref())?;
            let human = format!("run {} abandoned (was {}); `git tabellio cleanup {}` removes its worktree and branch", o.run.run_id, o.run.previous_state.map_or("-", |s| s.as_str()), o.run.run_id);
            Ok(Output::new(
                run_json(&o.run, o.workspace.as_deref(), json!({})),
                human,
            ))
        }
        Command::Cleanup(a) => {
            let env = Env::discover(&cwd)?;
            let o = lifecycle::manage::cleanup(&env, &a.run, a.force)?;
            let human =
                format!(
                    "cleaned up run {}: {}{}",
                    o.run.run_id,
                    o.removed_worktree.as_ref().map_or(
                        "no worktree to remove".into(),
                        |p| format!("removed worktree {}", p.display())
                    ),
                    o.deleted_branch
                        .as_ref()
                        .map_or(String::new(), |b| format!(", deleted branch {b}"))
                );
            Ok(Output::new(
                run_json(
                    &o.run,
                    None,
                    json!({"removed_worktree": o.removed_worktree.as_ref().map(|p| p.display().to_string()), "deleted_branch": o.deleted_branch}),
                ),
                human,
            ))
        }
        Command::Demo(a) => demo(cli, a.keep),
        Command::Plans(a) => super::plans_cmd::run(a, &cwd),
        Command::Validate(a) => super::evidence_cmds::validate(a, &cwd, stream),
        Command::Verify(a) => super::evidence_cmds::verify(a, &cwd),
        Command::Hooks(a) => super::evidence_cmds::hooks_install(a, &cwd),
        Command::Hook(a) => super::evidence_cmds::hook(a, &cwd),
        Command::Init(a) => super::sync_cmds::cmd_init(a, &cwd),
        Command::Sync(a) => super::sync_cmds::cmd_sync(a, &cwd, cli.json),
        Command::Loop(a) => super::harness_cmds::cmd_loop(cli, a, &cwd, stream),
        Command::Context(a) => super::harness_cmds::cmd_context(cli, a, &cwd),
        Command::Export(a) => super::export_cmd::cmd_export(a, &cwd),
        Command::Land(a) => super::land_cmd::cmd_land(a, &cwd, stream),
        Command::Evidence(a) => {
            let env = Env::discover(&cwd)?;
            let o = lifecycle::manage::evidence(&env, &a.rev)?;
            let mut human = match &o.commit {
                Some(commit) => format!(
                    "commit {} (tree {}): {} record(s)\n",
                    commit,
                    short(&o.tree),
                    o.records.len()
                ),
                None => format!("tree {}: {} record(s)\n", o.tree, o.records.len()),
            };
            for e in &o.records {
                match &e.record {
                    Some(r) => human.push_str(&format!(
                        "{:<9} {:<16} {} {}{}\n",
                        r.status,
                        r.check.name,
                        r.finished_at,
                        r.run_id.as_deref().unwrap_or("-"),
                        if e.valid {
                            ""
                        } else {
                            "  TAMPERED (digest mismatch)"
                        }
                    )),
                    None => human.push_str(&format!(
                        "unreadable record: {}\n",
                        e.problem.as_deref().unwrap_or("not a record")
                    )),
                }
            }
            Ok(Output::new(to_json(&o), human))
        }
    }
}

/// The demo prints as it goes: a line per step, or one JSON object per step with `--json`.
fn demo(cli: &Cli, keep: bool) -> Result<Output> {
    let dir = tempfile::Builder::new()
        .prefix("tabellio-demo-")
        .tempdir()
        .map_err(|e| Error::internal(format!("could not make a temporary directory: {e}")))?;
    let mut n = 0;
    let result = tabellio::demo::run(dir.path(), &mut |step| {
        n += 1;
        // Not `println!`: it panics when the reader went away (`demo | head -1`).
        if cli.json {
            print_stdout(&format!(
                "{}\n",
                json!({"ok": true, "n": n, "step": step.step, "say": step.say, "data": step.data})
            ));
        } else if !cli.quiet {
            print_stdout(&format!("{n}. {:<10} {}\n", step.step, step.say));
        }
    });
    let repo = result?;
    if keep {
        // Dropping `dir` removes the repository; keeping it hands it to the user.
        let _ = dir.keep();
    }
    let human = if keep {
        format!("kept the demo repository at {}", repo.display())
    } else {
        "done; the demo repository was removed (--keep keeps it)".into()
    };
    // The steps were the output; with --json a closing object says where the repository is.
    Ok(Output::new(
        json!({"step": "done", "kept": keep, "repository": keep.then(|| repo.display().to_string())}),
        human,
    ))
}
