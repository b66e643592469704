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
use crate::store::scoped::Materialise;
use crate::store::scratch::ScratchWorktree;
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

/// `checks` (as [`resolve_checks`] chose them for `sel`) less the required checks whose `when`
/// does not hold of an actor proven of `kind` ([`super::sign::kind_proven_by`]), and the names
/// of those left out. Checks named on the command line all run.
pub fn drop_not_asked(
    checks: Vec<ResolvedCheck>,
    sel: &CheckSelection,
    kind: Option<&str>,
) -> (Vec<ResolvedCheck>, Vec<String>) {
    if !sel.names.is_empty() || !sel.argv.is_empty() {
        return (checks, Vec::new());
    }
    let (run, left): (Vec<_>, Vec<_>) = checks
        .into_iter()
        .partition(|c| c.def.when.as_ref().is_none_or(|w| w.holds(kind)));
    (run, left.into_iter().map(|c| c.name).collect())
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
    /// Who made the change (the run's actor and initiator), carried by every record.
    pub provenance: Option<&'a crate::model::provenance::Provenance>,
    /// Where the worktrees of checks with declared inputs are left for the caller to remove
    /// once the records are safe (`None`: each is removed as soon as its check ended).
    pub left: Option<&'a std::cell::RefCell<Vec<std::path::PathBuf>>>,
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
    // Each record with where its check ran (reused ones did not) and whether it is sealed.
    let mut pending: Vec<(EvidenceRecord, Ran)> = Vec::new();
    let mut opened: Option<gix::Repository> = None;
    for check in checks {
        if let Some(rec) = super::reuse::try_reuse(
            ctx.store, ctx.reuse, ctx.commit, ctx.run_id, check, ctx.signer,
        )? {
            pending.push(with_provenance(ctx, rec)?);
            continue;
        }
        let cmd = CheckCommand {
            name: check.name.clone(),
            argv: check.def.argv.clone(),
            timeout: Duration::from_secs(check.def.timeout_s),
        };
        let opts = |cwd: &Path| RunOptions {
            cwd: cwd.to_path_buf(),
            excerpt_cap: ctx.excerpt_cap,
            stream: ctx.stream,
            signing_env: ctx.signing_env,
            ..RunOptions::default()
        };
        // The check's test report, read from the worktree it ran in (before a scratch one
        // is removed).
        let report = |dir: &Path, started: std::time::SystemTime| {
            check
                .def
                .report
                .as_ref()
                .and_then(|decl| super::report::read_report(dir, decl, &redactor, started))
        };
        let (executed, mutated, ran) = match check.def.scope() {
            None => {
                let outcome = runner::run_command(&cmd, &opts(ctx.worktree))
                    .context(|| format!("could not run check {}", check.name))?;
                let mutated = head_moved(ctx, &mut opened)?;
                let tests = report(ctx.worktree, outcome.started_at);
                let executed = Executed {
                    outcome,
                    scoped: None,
                    undeclared: Vec::new(),
                    tests,
                };
                (executed, mutated, Ran::Here)
            }
            Some(inputs) => {
                // Only the declared inputs are there: reading anything else fails loudly.
                let scoped = ctx.store.scoped_tree(tree, &inputs, Materialise::Write)?;
                let checkout = ctx.store.scoped_commit(scoped, &check.name)?;
                let scratch =
                    ScratchWorktree::create(ctx.store, checkout, super::interrupt::flag())?;
                let outcome = runner::run_command(&cmd, &opts(scratch.path()))
                    .context(|| format!("could not run check {}", check.name))?;
                let mutated = scratch_changed(ctx.store, scratch.path(), checkout)?;
                let undeclared = if outcome.status == crate::model::evidence::CheckStatus::Passed {
                    Vec::new()
                } else {
                    super::scope::undeclared_inputs(
                        ctx.store,
                        (tree, scoped),
                        &outcome.output.excerpt,
                        scratch.path(),
                    )
                };
                let tests = report(scratch.path(), outcome.started_at);
                match ctx.left {
                    Some(left) => left.borrow_mut().push(scratch.leave()),
                    None => scratch.remove()?,
                }
                let executed = Executed {
                    outcome,
                    scoped: Some(scoped.to_string()),
                    undeclared,
                    tests,
                };
                (executed, mutated, Ran::Scoped)
            }
        };
        let rec = fresh_record(
            ctx,
            check,
            (tree, &repository),
            (&redactor, &scrub),
            executed,
        )?;
        pending.push((mark_mutated(rec, mutated), ran));
    }
    seal_all(ctx, pending, opened.is_some())
}

/// What one execution of a check gave, for its record.
struct Executed {
    outcome: runner::RunOutcome,
    /// The tree of its declared inputs it ran on, if it declares them.
    scoped: Option<String>,
    /// Paths outside its declared inputs that its failure names.
    undeclared: Vec<String>,
    tests: Option<crate::model::evidence::TestReport>,
}

/// The record of `check`'s execution on `tree` (in repository `repository`), its command line
/// redacted and free of local paths, not yet sealed.
fn fresh_record(
    ctx: &CheckContext<'_>,
    check: &ResolvedCheck,
    (tree, repository): (gix::ObjectId, &str),
    (redactor, scrub): (&runner::Redactor, &LocalPaths),
    executed: Executed,
) -> Result<EvidenceRecord> {
    let Executed {
        outcome,
        scoped,
        undeclared,
        tests,
    } = executed;
    Ok(EvidenceRecord {
        schema: SCHEMA.into(),
        attempt: Some(super::history::next_attempt(
            ctx.store,
            tree,
            &check.def.digest(),
        )?),
        run_id: ctx.run_id.map(str::to_string),
        repository: repository.to_string(),
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
            inputs: check.def.inputs.clone(),
        },
        status: outcome.status,
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        started_at: time::rfc3339(outcome.started_at),
        finished_at: time::rfc3339(outcome.finished_at),
        duration_ms: outcome.duration_ms,
        output: output_record(&outcome.output, &check.def.argv, scrub),
        stopped: Stopped {
            command: outcome.stop.as_str().into(),
            tabellio: None,
        },
        tests,
        tool: tool_id(),
        reused_from: None,
        actor: ctx.provenance.map(|p| p.actor.clone()),
        initiator: ctx.provenance.and_then(|p| p.initiator.clone()),
        scoped_tree: scoped,
        undeclared_inputs: undeclared,
        signature: None,
        digest: String::new(),
    })
}

/// Seal (and sign) the records `run_checks` made: those of checks run in the caller's worktree
/// marked when the worktree changed, scanned once after the last of them (`ran_here`).
fn seal_all(
    ctx: &CheckContext<'_>,
    pending: Vec<(EvidenceRecord, Ran)>,
    ran_here: bool,
) -> Result<Vec<EvidenceRecord>> {
    // One scan for changes, after the last check that ran (a moved HEAD was caught already).
    let dirty = ran_here
        && (!ctx.worktree.join(".git").exists() || !ctx.store.inspect(ctx.worktree)?.is_clean());
    let mut records = Vec::new();
    for (rec, ran) in pending {
        let rec = match ran {
            Ran::Reused => {
                records.push(rec);
                continue;
            }
            Ran::Here => mark_mutated(rec, dirty).seal(),
            Ran::Scoped => rec.seal(),
        };
        records.push(super::sign::maybe_sign(ctx.signer, rec)?);
    }
    Ok(records)
}

/// A reused record (sealed, signed) with this run's provenance: the record it stands on may
/// name the run that first made the tree, but this one attests this run's change. Unchanged
/// (and not signed again) when it already carries it or the context names none.
fn with_provenance(ctx: &CheckContext<'_>, rec: EvidenceRecord) -> Result<(EvidenceRecord, Ran)> {
    Ok((stamped(rec, ctx.provenance, ctx.signer)?, Ran::Reused))
}

/// `rec` (sealed, signed) naming `provenance` as who made the change: sealed and signed anew by
/// `signer` when it named another, unchanged when it names it already or `provenance` is none.
pub fn stamped(
    mut rec: EvidenceRecord,
    provenance: Option<&crate::model::provenance::Provenance>,
    signer: Option<&super::sign::RecordSigner>,
) -> Result<EvidenceRecord> {
    let Some(p) = provenance.filter(|p| !p.is_on(&rec)) else {
        return Ok(rec);
    };
    rec.actor = Some(p.actor.clone());
    rec.initiator = p.initiator.clone();
    rec.signature = None;
    super::sign::maybe_sign(signer, rec.seal())
}

/// Where a check's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Passing evidence stood in for it.
    Reused,
    /// It ran in the caller's worktree (scanned for changes after the last check).
    Here,
    /// It ran in a worktree of its declared inputs (judged for changes there).
    Scoped,
}

/// Did a check change the scratch worktree of its inputs checked out at `checkout`: removed
/// it, moved HEAD, or left changes?
fn scratch_changed(store: &Store, path: &Path, checkout: gix::ObjectId) -> Result<bool> {
    if !path.join(".git").exists() {
        return Ok(true);
    }
    let repo = match store.opened_at(path)? {
        Some(repo) => repo,
        None => crate::store::repo::open_path(path)?,
    };
    let head = store.head_of(&repo).unwrap_or_default();
    Ok(head.branch.is_some() || head.id != Some(checkout) || !store.inspect(path)?.is_clean())
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
    let (excerpt, cut) = within_stored_cap(paths.apply(&argv_secrets_out), EXCERPT_STORED_CAP);
    OutputRecord {
        bytes: output.bytes,
        sha256: output.sha256.clone(),
        excerpt,
        truncated: output.truncated || cut,
        redactions: output.redactions + argv_redactions,
    }
}

/// The most an output excerpt may take in a record as stored (JSON-escaped): 2 MiB. The runner
/// keeps at most `output.excerpt_bytes` (≤ 1 MiB) of output, but a control character is stored
/// as six (`\u0001`), so a megabyte of them would be six in the note.
pub const EXCERPT_STORED_CAP: usize = 2 * 1024 * 1024;

/// How many bytes `c` takes in canonical JSON.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `excerpt`, middle-truncated (⅓ head, ⅔ tail, as the runner cuts) until it takes at most
/// `cap` bytes as stored; whether it was cut.
pub fn within_stored_cap(excerpt: String, cap: usize) -> (String, bool) {
    let total: usize = excerpt.chars().map(escaped_len).sum();
    if total <= cap {
        return (excerpt, false);
    }
    let budget = cap.saturating_sub(runner::omission_marker(u64::MAX).len() + 16);
    let (mut head_end, mut used) = (0, 0);
    for (i, c) in excerpt.char_indices() {
        if used + escaped_len(c) > budget / 3 {
            break;
        }
        used += escaped_len(c);
        head_end = i + c.len_utf8();
    }
    let (mut tail_start, mut used) = (excerpt.len(), 0);
    for (i, c) in excerpt.char_indices().rev() {
        if i < head_end || used + escaped_len(c) > budget - budget / 3 {
            break;
        }
        used += escaped_len(c);
        tail_start = i;
    }
    let omitted = (tail_start - head_end) as u64;
    let cut = format!(
        "{}{}{}",
        &excerpt[..head_end],
        runner::omission_marker(omitted),
        &excerpt[tail_start..]
    );
    (cut, true)
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

#[cfg(test)]
mod tests {
    use super::within_stored_cap;

    fn stored_len(s: &str) -> usize {
        serde_json::to_string(s).expect("a string serializes").len() - 2
    }

    /// An excerpt of control characters (six bytes each as stored) is cut to the stored cap,
    /// keeping its head and tail; one within the cap is kept as it is.
    #[test]
    fn an_excerpt_is_cut_to_its_stored_size() {
        let controls = format!("start{}end", "\u{1}".repeat(100_000));
        assert!(stored_len(&controls) > 600_000);
        let (cut, was_cut) = within_stored_cap(controls.clone(), 64 * 1024);
        assert!(was_cut);
        assert!(stored_len(&cut) <= 64 * 1024, "{}", stored_len(&cut));
        assert!(cut.starts_with("start\u{1}") && cut.ends_with("\u{1}end"));
        assert!(cut.contains("bytes omitted"));
        let plain = "é".repeat(1000);
        assert_eq!(within_stored_cap(plain.clone(), 64 * 1024), (plain, false));
    }
}
