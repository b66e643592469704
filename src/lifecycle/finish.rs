//! `finish`: run the validation checks in the run worktree and record the attempt.
//!
//! Nothing is written while checks run: a finish killed at any moment leaves the run exactly as
//! it was, finishable again. Afterwards the attempt goes into the ledger and the evidence records
//! onto the validated commit and its tree, in one transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::evidence::{set_digest, tool_id, CheckRef, OutputRecord, Stopped, SCHEMA};
use crate::model::policy::{self, CheckDef, Policy, DEFAULT_EXCERPT_BYTES};
use crate::model::run::{Attempt, AttemptCheck, Validated};
use crate::model::{time, EvidenceRecord, RunRecord, RunState};
use crate::runner::{self, CheckCommand, RunOptions, Stream};
use crate::store::ledger::{self, Ledger};
use crate::store::notes::EVIDENCE;
use crate::store::{worktree, Store};

use super::checkpoint::workspace_with_work;
use super::{resolve_run, Env};

/// Which checks to run, as the command line said.
#[derive(Debug, Clone, Default)]
pub struct CheckSelection {
    /// `--check <name>`: policy checks by name, or the name of the ad-hoc check.
    pub names: Vec<String>,
    /// The argv after `--`: an ad-hoc check.
    pub argv: Vec<String>,
    /// `--timeout <seconds>` for the ad-hoc check.
    pub timeout_s: Option<u64>,
}

/// A check to run, with its definition (whose digest the evidence carries).
#[derive(Debug, Clone)]
pub struct ResolvedCheck {
    pub name: String,
    pub def: CheckDef,
}

/// Read `.tabellio/policy.json` at `commit`, `None` when there is none.
pub fn policy_at(store: &Store, commit: gix::ObjectId) -> Result<Option<Policy>> {
    match store.read_file_at(commit, policy::PATH)? {
        None => Ok(None),
        Some(bytes) => Ok(Some(Policy::parse(&String::from_utf8_lossy(&bytes))?)),
    }
}

/// Turn the command line's selection into checks, reading the policy at `commit`.
pub fn resolve_checks(
    store: &Store,
    commit: gix::ObjectId,
    sel: &CheckSelection,
) -> Result<(Vec<ResolvedCheck>, usize)> {
    let policy = policy_at(store, commit)?;
    let cap = policy
        .as_ref()
        .map_or(DEFAULT_EXCERPT_BYTES, Policy::excerpt_bytes);
    if !sel.argv.is_empty() {
        if sel.names.len() > 1 {
            return Err(Error::usage(
                "an ad-hoc check (after --) takes at most one --check name",
            ));
        }
        let name = sel.names.first().cloned().unwrap_or_else(|| "adhoc".into());
        super::valid_run_id(&name)
            .map_err(|_| Error::usage(format!("invalid check name {name:?}")))?;
        let def = CheckDef {
            argv: sel.argv.clone(),
            timeout_s: sel.timeout_s.unwrap_or(policy::DEFAULT_TIMEOUT_S),
        };
        if def.timeout_s == 0 {
            return Err(Error::usage("--timeout must be at least 1 second"));
        }
        return Ok((vec![ResolvedCheck { name, def }], cap));
    }
    if sel.timeout_s.is_some() {
        return Err(Error::usage("--timeout applies to an ad-hoc check given after --")
            .hint("a policy check's timeout is part of its definition: change timeout_s in .tabellio/policy.json"));
    }
    let Some(policy) = policy else {
        return Err(Error::usage(format!("no checks to run: no {} at {commit} and no command after --", policy::PATH))
            .hint("give a check command after `--` (e.g. `-- cargo test`), or commit a policy with required checks"));
    };
    let names: Vec<String> = if sel.names.is_empty() {
        policy.required.clone()
    } else {
        sel.names.clone()
    };
    if names.is_empty() {
        return Err(Error::usage(format!(
            "{} requires no checks and none were named",
            policy::PATH
        ))
        .hint("name checks with --check <name>, or list them under \"required\""));
    }
    let mut out = Vec::new();
    for name in names {
        let def = policy.checks.get(&name).ok_or_else(|| {
            Error::usage(format!("check {name:?} is not defined in {}", policy::PATH)).hint(
                format!(
                    "defined checks: {}",
                    policy.checks.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        out.push(ResolvedCheck {
            name,
            def: def.clone(),
        });
    }
    Ok((out, cap))
}

/// Where checks run and what must still hold afterwards.
pub struct CheckContext<'a> {
    pub store: &'a Store,
    pub worktree: &'a Path,
    pub run_id: Option<&'a str>,
    pub commit: gix::ObjectId,
    /// The branch that must still be checked out afterwards (`None`: detached).
    pub branch: Option<&'a str>,
    pub excerpt_cap: usize,
    pub stream: Stream,
}

/// Run each check and turn its outcome into a sealed evidence record.
pub fn run_checks(ctx: &CheckContext<'_>, checks: &[ResolvedCheck]) -> Result<Vec<EvidenceRecord>> {
    let tree = ctx.store.tree_of(ctx.commit)?;
    let repository = ctx.store.repository_id();
    // Secrets passed on a check's command line must not be stored either; the check digest is
    // computed from the definition, so a redacted argv does not change what it proves.
    let redactor = runner::Redactor::from_env();
    let scrub = crate::store::paths::LocalPaths::new(ctx.store, Some(ctx.worktree));
    let mut records = Vec::new();
    for check in checks {
        let cmd = CheckCommand {
            name: check.name.clone(),
            argv: check.def.argv.clone(),
            timeout: Duration::from_secs(check.def.timeout_s),
        };
        let opts = RunOptions {
            cwd: ctx.worktree.to_path_buf(),
            excerpt_cap: ctx.excerpt_cap,
            stream: ctx.stream,
            ..RunOptions::default()
        };
        let outcome = runner::run_command(&cmd, &opts)
            .map_err(|e| Error::internal(format!("could not run check {}: {e}", check.name)))?;
        let mutated = workspace_mutated(ctx)?;
        // What the check printed of the secrets its command line carries is redacted too.
        let (argv_secrets_out, argv_redactions) =
            runner::Redactor::for_argv(&check.def.argv).redact(&outcome.output.excerpt);
        let mut status = outcome.status.as_str().to_string();
        if mutated {
            status = "failed".into();
        }
        let rec = EvidenceRecord {
            schema: SCHEMA.into(),
            run_id: ctx.run_id.map(str::to_string),
            repository: repository.clone(),
            commit: ctx.commit.to_string(),
            tree: tree.to_string(),
            check: CheckRef {
                name: check.name.clone(),
                argv: redactor
                    .redact_argv(&check.def.argv)
                    .iter()
                    .map(|a| scrub.apply(a))
                    .collect(),
                digest: check.def.digest(),
            },
            status,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            started_at: time::rfc3339(outcome.started_at),
            finished_at: time::rfc3339(outcome.finished_at),
            duration_ms: outcome.duration_ms,
            output: OutputRecord {
                bytes: outcome.output.bytes,
                sha256: outcome.output.sha256.clone(),
                excerpt: scrub.apply(&argv_secrets_out),
                truncated: outcome.output.truncated,
                redactions: outcome.output.redactions + argv_redactions,
            },
            stopped: Stopped {
                command: outcome.stop.as_str().into(),
                tabellio: mutated.then(|| "workspace_mutated".to_string()),
            },
            tool: tool_id(),
            digest: String::new(),
        }
        .seal();
        records.push(rec);
    }
    Ok(records)
}

/// Did the check commit, switch branches, or leave changes behind?
fn workspace_mutated(ctx: &CheckContext<'_>) -> Result<bool> {
    // A check that deleted the worktree's `.git` file (or the worktree) changed it the most.
    if !ctx.worktree.join(".git").exists() {
        return Ok(true);
    }
    let ws = worktree::inspect(ctx.worktree)?;
    Ok(ws.branch.as_deref() != ctx.branch || ws.head != Some(ctx.commit) || !ws.is_clean())
}

#[derive(Debug, Serialize)]
pub struct FinishOutcome {
    pub run: RunRecord,
    pub workspace: PathBuf,
    pub attempt: Attempt,
    pub evidence: Vec<EvidenceRecord>,
}

impl FinishOutcome {
    pub fn passed(&self) -> bool {
        self.run.state == RunState::Completed
    }
}

pub fn finish(
    env: &Env,
    run: Option<&str>,
    sel: &CheckSelection,
    stream: Stream,
) -> Result<FinishOutcome> {
    let store = &env.store;
    let ledger = resolve_run(env, run)?;
    let rec = &ledger.record;
    if !matches!(
        rec.state,
        RunState::Active | RunState::ValidationFailed | RunState::Completed | RunState::Blocked
    ) {
        return Err(Error::refused(format!(
            "run {} is {}; finish needs an active, failed, blocked or completed run",
            rec.run_id, rec.state
        ))
        .hint(if rec.state == RunState::Looping {
            "a loop is driving this run: `git tabellio loop --resume`"
        } else {
            "a promoted or abandoned run is over"
        }));
    }
    let (path, head) = workspace_with_work(env, &ledger)?;
    let (checks, cap) = resolve_checks(store, head, sel)?;
    let plans_gate = super::plans::gate(store, head)?;

    let ctx = CheckContext {
        store,
        worktree: &path,
        run_id: Some(&rec.run_id),
        commit: head,
        branch: Some(&rec.branch),
        excerpt_cap: cap,
        stream,
    };
    let records = run_checks(&ctx, &checks)?;
    // Checks chosen by hand (`--check`, or an ad-hoc command) do not complete a run whose
    // policy requires others: the policy's required checks must pass too, in this attempt or
    // in evidence already noted on this commit.
    let gate = match required_gap(store, head, &records)? {
        Some(gap) => Some(gap),
        None => plans_gate,
    };

    let (attempt, next) = record_attempt(
        store,
        &ledger,
        NewAttempt {
            head,
            records: &records,
            gate,
            command: "finish",
        },
        |completed| {
            if completed {
                RunState::Completed
            } else {
                RunState::ValidationFailed
            }
        },
        |_| {},
    )?;
    let next = next.record;
    Ok(FinishOutcome {
        run: next,
        workspace: path,
        attempt,
        evidence: records,
    })
}

/// The policy's required checks at `head` that neither `records` (this attempt) nor the
/// evidence already noted on `head` satisfy: `Some(reason)` when there are any.
fn required_gap(
    store: &Store,
    head: gix::ObjectId,
    records: &[EvidenceRecord],
) -> Result<Option<String>> {
    let Some(reqs) = super::evidence::policy_requirements(store, head)? else {
        return Ok(None);
    };
    let satisfied_now = |r: &super::evidence::Requirement| {
        records.iter().any(|rec| {
            rec.check.name == r.name
                && rec.passed()
                && r.digest.as_deref().is_none_or(|d| d == rec.check.digest)
        })
    };
    let before = super::evidence::evaluate(store, head, &reqs)?;
    let missing: Vec<String> = reqs
        .iter()
        .zip(before)
        .filter(|(r, v)| !satisfied_now(r) && v.verdict != super::evidence::Verdict::Satisfied)
        .map(|(r, _)| r.name.clone())
        .collect();
    Ok((!missing.is_empty()).then(|| {
        format!(
            "required checks not passed: {} (the policy at the run head requires them; `git tabellio finish` runs them)",
            missing.join(", ")
        )
    }))
}

/// The attempt [`record_attempt`] records.
pub struct NewAttempt<'a> {
    /// The validated commit.
    pub head: gix::ObjectId,
    /// Its sealed evidence records.
    pub records: &'a [EvidenceRecord],
    /// The plan-hygiene gate: `Some(reason)` keeps the run from completing.
    pub gate: Option<String>,
    /// Names the transition in the ledger commit's message.
    pub command: &'a str,
}

/// Record one validation attempt of `head`: the attempt (and, when every check passed and
/// `gate` is `None`, the validated commit) in a new ledger commit on top of `ledger`, and the
/// evidence records as notes on `head` and on its tree, in one transaction. `state` picks the
/// run's state from whether the attempt completed the run; `update` may change the new record
/// further before it is written (the loop records its phase transition in the same commit).
/// Shared by `finish` and the harness loop, so both record evidence the same way.
pub fn record_attempt(
    store: &Store,
    ledger: &Ledger,
    new: NewAttempt<'_>,
    state: impl FnOnce(bool) -> RunState,
    update: impl FnOnce(&mut RunRecord),
) -> Result<(Attempt, Ledger)> {
    let NewAttempt {
        head,
        records,
        gate,
        command,
    } = new;
    let rec = &ledger.record;
    let tree = store.tree_of(head)?;
    // An attempt passes when every check passed and the plan gate let it through.
    let completed = records.iter().all(EvidenceRecord::passed) && gate.is_none();
    let evidence_digest = set_digest(records.iter().map(|r| r.digest.as_str()));
    let attempt = Attempt {
        n: rec.attempts.len() as u32 + 1,
        commit: head.to_string(),
        tree: tree.to_string(),
        checks: records
            .iter()
            .map(|r| AttemptCheck {
                name: r.check.name.clone(),
                digest: r.check.digest.clone(),
                status: r.status.clone(),
                exit_code: r.exit_code,
            })
            .collect(),
        status: if completed { "passed" } else { "failed" }.into(),
        evidence_digest: evidence_digest.clone(),
        at: time::now(),
    };
    let mut next = ledger::transition(rec, state(completed));
    next.attempts.push(attempt.clone());
    next.validated = completed.then(|| Validated {
        commit: head.to_string(),
        tree: tree.to_string(),
        evidence_digest,
    });
    next.reason = gate;
    update(&mut next);
    let lines: Vec<String> = records.iter().map(EvidenceRecord::to_line).collect();
    let advanced = super::advance(
        store,
        ledger,
        next,
        command,
        &[(EVIDENCE, vec![(head, lines.clone()), (tree, lines)])],
    )?;
    Ok((attempt, advanced))
}
