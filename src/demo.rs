//! `git tabellio demo`: the whole life of a run in a throwaway repository, step by step.
//!
//! The person's and the agent's own actions (making the repository, editing, committing) are
//! done with the git CLI, as they would be; every tabellio step goes through the library. The
//! demo needs nothing but git and this binary: its check is `git grep`, not `grep`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::evidence::produce::CheckSelection;
use crate::lifecycle;
use crate::run::Env;
use crate::runner::Stream;
use crate::store::git_cli;

/// One step of the demo, for a person (`say`) and for a program (`data`).
#[derive(Debug, Serialize)]
pub struct Step {
    pub step: String,
    pub say: String,
    pub data: serde_json::Value,
}

const POLICY: &str = r#"{
  "schema": "tabellio.policy/v1",
  "checks": {
    "greeting": {"argv": ["git", "grep", "-q", "-F", "Hello, tabellio!", "--", "greeting.txt"], "timeout_s": 30}
  },
  "required": ["greeting"],
  "protect": ["refs/heads/main"]
}
"#;

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let mut argv = git_cli::argv([
        "-c",
        "user.name=tabellio demo",
        "-c",
        "user.email=demo@tabellio.invalid",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "core.hooksPath=/dev/null",
    ]);
    argv.extend(git_cli::argv(args.iter().copied()));
    let out = git_cli::run_in(dir, &argv, "the demo needs git on PATH")?;
    if !out.success() {
        return Err(Error::internal(format!(
            "git {} failed: {}",
            args.join(" "),
            out.stderr.trim()
        )));
    }
    Ok(out.stdout)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).context(|| format!("could not write {}", path.display()))
}

/// The person's tiny project: a greeting and a policy requiring the check `greeting`, committed.
fn make_project(repo: &Path) -> Result<()> {
    git(repo, &["init", "-q", "-b", "main"])?;
    write(&repo.join("greeting.txt"), "Hello, world!\n")?;
    std::fs::create_dir_all(repo.join(".tabellio")).map_err(|e| Error::internal(e.to_string()))?;
    write(&repo.join(".tabellio/policy.json"), POLICY)?;
    git(repo, &["add", "-A"])?;
    git(
        repo,
        &["commit", "-q", "-m", "A tiny project with a policy"],
    )?;
    Ok(())
}

/// `finish` the demo run: the status of its check, the run's new state, and the step's data.
fn finish_demo_run(env: &Env) -> Result<(String, String, serde_json::Value)> {
    let done = lifecycle::finish::finish(
        env,
        &lifecycle::finish::FinishOptions {
            run: Some("demo-1"),
            checks: &CheckSelection::default(),
            stream: Stream::Quiet,
        },
    )?;
    Ok((
        done.evidence
            .first()
            .map_or("?", |e| e.status.as_str())
            .to_string(),
        done.run.state.to_string(),
        serde_json::json!({"state": done.run.state, "attempt": done.attempt}),
    ))
}

/// Run the demo in a fresh directory; `on_step` sees each step as it happens. Returns the
/// directory (which the caller removes unless asked to keep it).
pub fn run(dir: &Path, on_step: &mut dyn FnMut(&Step)) -> Result<PathBuf> {
    let repo = dir.join("demo");
    std::fs::create_dir_all(&repo).context(|| format!("could not create {}", repo.display()))?;
    let mut emit = |step: &str, say: String, data: serde_json::Value| {
        on_step(&Step {
            step: step.into(),
            say,
            data,
        })
    };

    make_project(&repo)?;
    emit("setup", format!("made a repository at {} with greeting.txt and a policy requiring the check `greeting` (`git grep` for \"Hello, tabellio!\")", repo.display()), serde_json::json!({"repository": repo}));

    let env = Env::discover(&repo)?;
    let task = "Make greeting.txt greet tabellio: it must say \"Hello, tabellio!\"";
    let started = lifecycle::start::start(
        &env,
        lifecycle::start::StartOptions {
            run_id: Some("demo-1".into()),
            task: task.into(),
            base: None,
            branch: None,
            actor: Some("agent:demo".into()),
            carry_from: None,
        },
    )?;
    let wt = started.workspace.clone();
    emit(
        "start",
        format!(
            "started run demo-1 from main: branch {} in its own worktree {}",
            started.run.branch,
            wt.display()
        ),
        serde_json::to_value(&started.run).unwrap_or_default(),
    );

    write(&wt.join("greeting.txt"), "Hello, tabelio!\n")?;
    git(&wt, &["commit", "-q", "-am", "Greet tabellio"])?;
    emit(
        "edit",
        "the agent edited greeting.txt in the run worktree and committed (with a typo)".into(),
        serde_json::json!({"file": "greeting.txt"}),
    );

    let cp = lifecycle::checkpoint::checkpoint(
        &env,
        Some("demo-1"),
        Some("first attempt at the greeting"),
    )?;
    emit(
        "checkpoint",
        format!(
            "checkpointed {} (a note on the commit and a ledger entry)",
            &cp.commit[..12]
        ),
        serde_json::json!({"commit": cp.commit}),
    );

    let (status, state, data) = finish_demo_run(&env)?;
    emit(
        "finish",
        format!("finish ran the required check: {status} → run is {state}"),
        data,
    );

    write(&wt.join("greeting.txt"), "Hello, tabellio!\n")?;
    git(&wt, &["commit", "-q", "-am", "Fix the typo"])?;
    emit(
        "fix",
        "the agent fixed the typo and committed".into(),
        serde_json::json!({}),
    );

    let (status, state, data) = finish_demo_run(&env)?;
    emit(
        "finish",
        format!(
            "finish again: {status} → run is {state}; evidence noted on the commit and its tree"
        ),
        data,
    );

    let promoted = crate::lifecycle::promote::promote(
        &env,
        &crate::lifecycle::promote::PromoteOptions {
            run: Some("demo-1"),
            dry_run: false,
        },
    )?;
    emit(
        "promote",
        format!(
            "promoted: main {} -> {} ({} mode; main is checked out, so its files moved too)",
            &promoted.old[..12],
            &promoted.new[..12],
            promoted.mode.as_str()
        ),
        serde_json::json!({"target": promoted.target, "old": promoted.old, "new": promoted.new, "mode": promoted.mode}),
    );

    let log = git(&repo, &["log", "--notes=tabellio/evidence", "-1", "main"])?;
    emit(
        "log",
        format!(
            "stock git shows the evidence:\n$ git log --notes=tabellio/evidence -1 main\n{}",
            log.trim_end()
        ),
        serde_json::json!({"git_log": log}),
    );
    Ok(repo)
}
