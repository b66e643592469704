//! Producing evidence: resolve which checks to run, run them in a worktree, and seal each
//! outcome into an evidence record.
//!
//! Nothing here writes a ref: the records are returned to the operation that publishes them
//! (`finish`, `validate`, the loop). A check that commits, switches branches or leaves changes
//! behind fails, whatever it exited with: it changed what it was asked to prove.

use std::path::Path;
use std::time::Duration;

use crate::error::{Context, Error, Result};
use crate::model::evidence::{tool_id, CheckRef, OutputRecord, Stopped, SCHEMA};
pub use crate::model::policy::ResolvedCheck;
use crate::model::policy::{self, CheckDef, Policy, PolicyError, DEFAULT_EXCERPT_BYTES};
use crate::model::{time, EvidenceRecord};
use crate::runner::{self, CheckCommand, OutputSummary, RunOptions, Stream};
use crate::store::paths::LocalPaths;
use crate::store::policy::{policy_at, PolicyAtError};
use crate::store::Store;

/// Why the checks to run could not be resolved.
#[derive(Debug)]
pub enum ResolveChecksError {
    /// The repository could not be read.
    Read(Error),
    /// The policy committed at the commit cannot be used.
    InvalidPolicy(PolicyError),
    /// The selection names no checks that can run there (no policy and no ad-hoc command, a
    /// check the policy does not define, a malformed ad-hoc check): exit 2.
    Selection(Error),
}

impl From<ResolveChecksError> for Error {
    fn from(e: ResolveChecksError) -> Self {
        match e {
            ResolveChecksError::Read(e) | ResolveChecksError::Selection(e) => e,
            ResolveChecksError::InvalidPolicy(e) => e.into(),
        }
    }
}

/// Which checks to run, as the command line said.
#[derive(Debug, Clone, Default)]
pub struct CheckSelection {
    /// `--check <name>`: policy checks by name, or the name of the ad-hoc check.
    pub names: Vec<String>,
    /// The argv after `--`: an ad-hoc check.
    pub argv: Vec<String>,
    /// `--timeout <seconds>` for the ad-hoc check.
    pub timeout_s: Option<u64>,
    /// `--no-reuse`: run every check even where the tree has passing evidence.
    pub reuse: super::reuse::Reuse,
    /// `--sign-key <file>`: sign with this key instead of git's `user.signingKey`.
    pub sign_key: Option<std::path::PathBuf>,
    /// `--no-sign`: do not sign, whatever git's configuration says.
    pub no_sign: bool,
}

/// Turn the command line's selection into checks, reading the policy at `commit`.
pub fn resolve_checks(
    store: &Store,
    commit: gix::ObjectId,
    sel: &CheckSelection,
) -> Result<(Vec<ResolvedCheck>, usize), ResolveChecksError> {
    let policy = policy_at(store, commit).map_err(|e| match e {
        PolicyAtError::Read(e) => ResolveChecksError::Read(e),
        PolicyAtError::Invalid { error, .. } => ResolveChecksError::InvalidPolicy(error),
    })?;
    let selection = ResolveChecksError::Selection;
    let cap = policy
        .as_ref()
        .map_or(DEFAULT_EXCERPT_BYTES, Policy::excerpt_bytes);
    if !sel.argv.is_empty() {
        if sel.names.len() > 1 {
            return Err(selection(Error::usage(
                "an ad-hoc check (after --) takes at most one --check name",
            )));
        }
        let name = sel.names.first().cloned().unwrap_or_else(|| "adhoc".into());
        crate::model::ids::check_run_id(&name)
            .map_err(|_| selection(Error::usage(format!("invalid check name {name:?}"))))?;
        let def = CheckDef {
            timeout_s: sel.timeout_s.unwrap_or(policy::DEFAULT_TIMEOUT_S),
            ..CheckDef::of_argv(sel.argv.clone())
        };
        if def.timeout_s == 0 {
            return Err(selection(Error::usage(
                "--timeout must be at least 1 second",
            )));
        }
        return Ok((vec![ResolvedCheck { name, def }], cap));
    }
    if sel.timeout_s.is_some() {
        return Err(selection(Error::usage("--timeout applies to an ad-hoc check given after --")
            .hint("a policy check's timeout is part of its definition: change timeout_s in .tabellio/policy.json")));
    }
    let Some(policy) = policy else {
        return Err(selection(Error::usage(format!("no checks to run: no {} at {commit} and no command after --", policy::PATH))
            .hint("give a check command after `--` (e.g. `-- cargo test`), or commit a policy with required checks")));
    };
    let names: Vec<String> = if sel.names.is_empty() {
        policy.required.clone()
    } else {
        sel.names.clone()
    };
    if names.is_empty() {
        return Err(selection(
            Error::usage(format!(
                "{} requires no checks and none were named",
                policy::PATH
            ))
            .hint("name checks with --check <name>, or list them under \"required\""),
        ));
    }
    let mut out = Vec::new();
    for name in names {
        let def = policy.checks.get(&name).ok_or_else(|| {
            selection(
                Error::usage(format!("check {name:?} is not defined in {}", policy::PATH)).hint(
                    format!(
                        "defined checks: {}",
                        policy.checks.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
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
    /// Whether passing evidence on the commit's tree stands in for running a check.
    pub reuse: super::reuse::Reuse,
    /// Who signs each record once it is sealed (`None`: records are not signed).
    pub signer: Option<&'a super::sign::RecordSigner>,
    /// Whether the checks get this user's signing setup (`loop` withholds it).
    pub signing_env: runner::SigningEnv,
}

/// Run each check and turn its outcome into a sealed evidence record.
///
/// The worktree is judged after every check for what is cheap to read (its `.git`, the branch
/// checked out, HEAD), and scanned for changes once, after the last check that ran: a scan
/// walks every file, and a finish must not cost one per check. Changes found then fail every
/// check that ran (`workspace_mutated`): which one left them is not known, and none of them
/// can be trusted to have run on the commit alone.
pub fn run_checks(ctx: &CheckContext<'_>, checks: &[ResolvedCheck]) -> Result<Vec<EvidenceRecord>> {
    let tree = ctx.store.tree_of(ctx.commit)?;
    let repository = ctx.store.repository_id();
    // Secrets passed on a check's command line must not be stored either; the check digest is
    // computed from the definition, so a redacted argv does not change what it proves.
    let redactor = runner::Redactor::from_env();
    let scrub = LocalPaths::new(ctx.store, Some(ctx.worktree));
    // Each record with whether its check ran (reused ones did not) and whether it is sealed.
    let mut pending: Vec<(EvidenceRecord, bool)> = Vec::new();
    let mut opened: Option<gix::Repository> = None;
    for check in checks {
        if let Some(rec) = super::reuse::try_reuse(
            ctx.store, ctx.reuse, ctx.commit, ctx.run_id, check, ctx.signer,
        )? {
            pending.push((rec, false));
            continue;
        }
        let cmd = CheckCommand {
            name: check.name.clone(),
            argv: check.def.argv.clone(),
            timeout: Duration::from_secs(check.def.timeout_s),
        };
        let opts = RunOptions {
            cwd: ctx.worktree.to_path_buf(),
            excerpt_cap: ctx.excerpt_cap,
            stream: ctx.stream,
            signing_env: ctx.signing_env,
            ..RunOptions::default()
        };
        let outcome = runner::run_command(&cmd, &opts)
            .context(|| format!("could not run check {}", check.name))?;
        let mutated = head_moved(ctx, &mut opened)?;
        let tests = check.def.report.as_ref().and_then(|decl| {
            super::report::read_report(ctx.worktree, decl, &redactor, outcome.started_at)
        });
        let rec = EvidenceRecord {
            schema: SCHEMA.into(),
            attempt: Some(super::history::next_attempt(
                ctx.store,
                tree,
                &check.def.digest(),
            )?),
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
            status: outcome.status,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            started_at: time::rfc3339(outcome.started_at),
            finished_at: time::rfc3339(outcome.finished_at),
            duration_ms: outcome.duration_ms,
            output: output_record(&outcome.output, &check.def.argv, &scrub),
            stopped: Stopped {
                command: outcome.stop.as_str().into(),
                tabellio: None,
            },
            tests,
            tool: tool_id(),
            reused_from: None,
            signature: None,
            digest: String::new(),
        };
        pending.push((mark_mutated(rec, mutated), true));
    }
    // One scan for changes, after the last check that ran (a moved HEAD was caught already).
    let dirty = match &opened {
        Some(_) if ctx.worktree.join(".git").exists() => {
            !ctx.store.inspect(ctx.worktree)?.is_clean()
        }
        Some(_) => true,
        None => false,
    };
    let mut records = Vec::new();
    for (rec, ran) in pending {
        if !ran {
            records.push(rec);
            continue;
        }
        let rec = mark_mutated(rec, dirty).seal();
        records.push(super::sign::maybe_sign(ctx.signer, rec)?);
    }
    Ok(records)
}

/// `rec` failed with `workspace_mutated` when `mutated`, as it is otherwise.
fn mark_mutated(mut rec: EvidenceRecord, mutated: bool) -> EvidenceRecord {
    if mutated {
        rec.status = crate::model::evidence::CheckStatus::Failed;
        rec.stopped.tabellio = Some("workspace_mutated".to_string());
    }
    rec
}

/// What is stored of a command's output (a check's, or the agent's in a loop): the runner's
/// summary with the secrets the command line carries redacted from the excerpt too (counted
/// with the others), and local paths scrubbed.
pub fn output_record(output: &OutputSummary, argv: &[String], paths: &LocalPaths) -> OutputRecord {
    let (argv_secrets_out, argv_redactions) =
        runner::Redactor::for_argv(argv).redact(&output.excerpt);
    OutputRecord {
        bytes: output.bytes,
        sha256: output.sha256.clone(),
        excerpt: paths.apply(&argv_secrets_out),
        truncated: output.truncated,
        redactions: output.redactions + argv_redactions,
    }
}

/// Did the check commit, switch branches, or remove the worktree? Read without a scan; the
/// worktree is opened once (`opened`) for all checks, and HEAD is read afresh each time.
fn head_moved(ctx: &CheckContext<'_>, opened: &mut Option<gix::Repository>) -> Result<bool> {
    // A check that deleted the worktree's `.git` file (or the worktree) changed it the most.
    if !ctx.worktree.join(".git").exists() {
        return Ok(true);
    }
    let repo = match opened {
        Some(repo) => repo,
        None => opened.insert(match ctx.store.opened_at(ctx.worktree)? {
            Some(repo) => repo,
            None => crate::store::repo::open_path(ctx.worktree)?,
        }),
    };
    // Through the ref seam: with reftable, HEAD lives in the worktree's own stack.
    let head = ctx.store.head_of(repo).unwrap_or_default();
    Ok(head.branch.as_deref() != ctx.branch || head.id != Some(ctx.commit))
}
