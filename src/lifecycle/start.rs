//! `start`: freeze a base commit, create the ledger, the run branch and a linked worktree.
//!
//! Ledger and branch are created in one transaction (both must not exist). The worktree is added
//! after; if that fails, both refs are removed again by compare-and-swap and nothing is left.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::model::canonical::sha256_hex;
use crate::model::ids::generate_run_id;
use crate::model::run::{Actor, Base, Task, SCHEMA};
use crate::model::{time, RunRecord, RunState};
use crate::store::backoff;
use crate::store::ledger::{self, Ledger};
use crate::store::tx::{self, Cas};
use crate::store::Store;

use crate::run::actor::{own_id, parse_actor, parse_initiator};
use crate::run::workspace::{refuse_root_link, torn_start_lock};
use crate::run::{valid_run_id, Env};

#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    pub run_id: Option<String>,
    pub task: String,
    pub base: Option<String>,
    pub branch: Option<String>,
    pub actor: Option<String>,
    /// `--agent-name`, `--model`, `--harness-version`, `--session`.
    pub agent: crate::run::actor::AgentDetails,
    /// `--initiator <id>`: who asked for the run (default: whoever starts it).
    pub initiator: Option<String>,
    /// `--task-from <run>`: when `land` refused that run and nothing changed since, its change
    /// is carried onto the new base (as `reopen` carries it) and it is retired as `superseded`.
    pub carry_from: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StartOutcome {
    pub run: RunRecord,
    pub workspace: PathBuf,
    /// The symbolic ref the base was named by (`refs/heads/main` → `refs/heads/trunk`), when
    /// it was one; the run records the branch it names.
    pub base_via: Option<String>,
    /// What the person should know although the run started (the base is behind its remote).
    pub warnings: Vec<String>,
    /// The refused run whose change this run carries, now `superseded`.
    pub superseded: Option<String>,
}

/// The task of run `run`, verbatim, for `start --task-from`: the same words in a new run (the
/// way to go on after the target moved under a run that does not replay onto it). The text must
/// still match the SHA-256 pinned beside it.
pub fn task_of(env: &Env, run: &str) -> Result<String> {
    let ledger = crate::run::find_readable(&env.store, run)
        .map(|r| r.ledger)
        .map_err(|e| {
            let hint = e.hint.clone();
            e.hint(match hint {
                Some(h) => format!("{h}; --task-from names the run whose task to take"),
                None => "--task-from names the run whose task to take".to_string(),
            })
        })?;
    let task = ledger.record.task;
    if sha256_hex(task.text.as_bytes()) != task.sha256 {
        return Err(Error::refused(format!(
            "the task text of run {run} does not match its pinned SHA-256"
        ))
        .hint("give the task yourself with --task or --task-file"));
    }
    Ok(task.text)
}

/// The first line of the task, shortened, as its summary.
fn summarize(task: &str) -> String {
    let first = task
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // The summary is what terminals show (`list`, `status`): control characters (escape
    // sequences from a task that came with `sync`) become U+FFFD. The text stays verbatim.
    let first: String = first
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    let mut s: String = first.chars().take(72).collect();
    if first.chars().count() > 72 {
        s.push('…');
    }
    s
}

/// An existing ref that `name` would have to be a directory of, or that would have to be a
/// directory of `name` (`refs/heads/a` vs `refs/heads/a/b`): such a pair cannot coexist.
fn ref_path_clash(store: &crate::store::Store, name: &str) -> Result<Option<String>> {
    let mut prefix = String::new();
    let parts: Vec<&str> = name.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if prefix.matches('/').count() >= 2 && store.ref_target(&prefix)?.is_some() {
            return Ok(Some(prefix));
        }
    }
    Ok(store
        .refs_under(&format!("{name}/"))?
        .into_iter()
        .next()
        .map(|(n, _)| n))
}

/// `name` as a full, valid `refs/heads/…` name (`flag` and `hint` for the error).
fn local_branch(flag: &str, name: &str, hint: &str) -> Result<String> {
    let full = if name.starts_with("refs/") {
        name.to_string()
    } else {
        format!("refs/heads/{name}")
    };
    if !full.starts_with("refs/heads/") {
        return Err(Error::usage(format!("{flag} {name:?} is not a local branch")).hint(hint));
    }
    let short = &full["refs/heads/".len()..];
    if let Err(why) = crate::model::ids::check_branch_name(short) {
        return Err(
            Error::usage(format!("{flag} {name:?} is not a valid branch name: {why}")).hint(hint),
        );
    }
    if gix::validate::reference::name(full.as_bytes().into()).is_err() {
        return Err(Error::usage(format!("{flag} {name:?} is not a valid branch name")).hint(hint));
    }
    Ok(full)
}

/// The branch `name` names: itself, or, when it is a symbolic ref (`main` → `trunk`), the
/// branch at the end of the chain. The run's base is that branch, the ref promotion moves.
fn follow_symbolic(store: &Store, name: &str) -> Result<String> {
    let mut at = name.to_string();
    // git itself gives up after five hops.
    for _ in 0..5 {
        let Some(next) = store.symbolic_target(&at)? else {
            return Ok(at);
        };
        if !next.starts_with("refs/heads/") {
            return Err(Error::usage(format!(
                "the base {name} is a symbolic ref to {next}, which is not a branch"
            ))
            .hint("name a branch under refs/heads/ with --base"));
        }
        at = next;
    }
    Err(Error::usage(format!(
        "the base {name} is a chain of symbolic refs too long to follow"
    ))
    .hint("name the branch it should mean with --base"))
}

/// The base branch (`--base`, else the branch HEAD is on, symbolic refs followed), the
/// symbolic ref it was named by if any, and its tip.
fn resolve_base(
    store: &Store,
    base: Option<&str>,
) -> Result<(String, Option<String>, gix::ObjectId)> {
    let base_ref = match base {
        Some(b) => local_branch(
            "--base",
            b,
            "the base must be a branch under refs/heads/, the target of promote",
        )?,
        None => {
            let head = store.head()?.branch.ok_or_else(|| {
                Error::usage("HEAD is detached, so there is no base branch to start from")
                    .hint("name one with --base <branch>")
            })?;
            if head.starts_with("refs/heads/tabellio/") {
                return Err(Error::usage(format!(
                    "HEAD is the run branch {head}; a run cannot be the base of another by default"
                ))
                .hint("name the base with --base <branch>"));
            }
            head
        }
    };
    let named = base_ref;
    let base_ref = follow_symbolic(store, &named)?;
    let base_commit = store.ref_target(&base_ref)?.ok_or_else(|| {
        Error::not_found(format!("base branch {base_ref} does not exist"))
            .hint("create it first, or name an existing branch with --base")
    })?;
    let via = (base_ref != named).then_some(named);
    Ok((base_ref, via, base_commit))
}

/// What `start` found to hold before its first write.
struct Checked {
    run_id: String,
    actor: Actor,
    initiator: String,
    ledger_ref: String,
    torn: Option<TornStart>,
    branch: String,
    base_ref: String,
    base_via: Option<String>,
    base_commit: gix::ObjectId,
    warnings: Vec<String>,
    worktree: PathBuf,
}

/// Every precondition of `start`, read in one view of the refs ([`Store::snapshot_refs`]).
fn preconditions(env: &Env, opts: &StartOptions) -> Result<Checked> {
    let store = &env.store;
    let run_id = match &opts.run_id {
        Some(id) => {
            valid_run_id(id)?;
            id.clone()
        }
        None => generate_run_id(),
    };
    if opts.task.trim().is_empty() {
        return Err(Error::usage("the task is empty")
            .hint("describe the task with --task <text> or --task-file <file>"));
    }
    let ledger_ref = ledger::ref_name(&run_id);
    let branch = match &opts.branch {
        Some(b) => local_branch(
            "--branch",
            b,
            "give a name like my-run, which becomes refs/heads/my-run",
        )?,
        None => format!("refs/heads/tabellio/{run_id}"),
    };
    // With reftable, the ledger, the branch and what is below the branch in one `git`.
    store.snapshot_refs_named(&[&ledger_ref, &branch])?;
    // A start of this id killed inside its ref transaction is started again, afresh.
    let torn = match store.ref_target(&ledger_ref)? {
        None => None,
        Some(tip) => match torn_start_of(store, &run_id, tip)? {
            Some(torn) => Some(torn),
            None => {
                return Err(Error::usage(format!("run {run_id:?} already exists"))
                    .hint("choose another run id, or omit it to have one generated"))
            }
        },
    };
    if torn.is_none() {
        if let Some(found) = store.try_find_archived(&run_id)? {
            return Err(Error::usage(format!(
                "run {run_id:?} already exists: it ended ({}) and is archived in {}",
                found.entry.state, found.archive_ref
            ))
            .hint("choose another run id, or omit it to have one generated"));
        }
    }
    if let Some(torn) = &torn {
        if torn.branch != branch {
            return Err(Error::usage(format!(
                "run {run_id:?} was interrupted while starting on {}, not {branch}",
                torn.branch
            ))
            .hint("start it again with the branch it had (or without --branch)"));
        }
    }
    check_branch_free(store, &branch)?;
    let (base_ref, base_via, base_commit) = resolve_base(store, opts.base.as_deref())?;
    // One canonical id, judged by the allowed signers of the tip the run will land on.
    let own = || own_id(store, Some(base_commit));
    let actor = opts.agent.apply(parse_actor(opts.actor.as_deref(), own)?)?;
    let initiator = parse_initiator(opts.initiator.as_deref(), own)?;
    let warnings = stale_base_warning(store, &base_ref).into_iter().collect();
    check_worktree_root(&store.worktree_root()?)?;
    refuse_root_link(store)?;
    let worktree = store.worktree_root()?.join(&run_id);
    check_worktree_path(
        store,
        &worktree,
        &run_id,
        &ledger_ref,
        torn.as_ref().map(|t| t.tip),
    )?;
    Ok(Checked {
        run_id,
        actor,
        initiator,
        ledger_ref,
        torn,
        branch,
        base_ref,
        base_via,
        base_commit,
        warnings,
        worktree,
    })
}

/// A refused run whose change a new run carries onto its base.
struct Carry {
    source: Ledger,
    carried: crate::run::reopen::Carried,
    reopen: crate::model::land::Reopen,
}

/// What `--task-from` carries: the change of a run `land` refused (unchanged since), or of a
/// completed run whose target moved, when the new run goes onto the same target. Objects
/// only; nothing moves.
fn carry_of(store: &Store, from: Option<&str>, c: &Checked) -> Result<Option<Carry>> {
    let Some(from) = from.filter(|f| *f != c.run_id) else {
        return Ok(None);
    };
    let Some(source) = store.try_find_ledger(from)? else {
        return Ok(None);
    };
    let Some(head) = store.ref_target(&source.record.branch)? else {
        return Ok(None);
    };
    let rec = &source.record;
    // Refused by `land`, or completed on a base the target has left (what `status` sends to
    // `start --task-from`): a run whose change would otherwise be a dead end.
    let base = store.parse_oid(&rec.base.commit)?;
    let stuck = rec.standing_refusal(Some(&head.to_string())).is_some()
        || (rec.state == RunState::Completed && c.base_commit != base);
    if rec.base.reference != c.base_ref || !stuck {
        return Ok(None);
    }
    let carried = crate::run::reopen::carry(store, rec, [base, head, c.base_commit])?;
    let reopen = crate::model::land::Reopen {
        n: 1,
        base_before: base.to_string(),
        base_after: c.base_commit.to_string(),
        head_before: head.to_string(),
        head_after: carried.head.to_string(),
        mode: carried.mode,
        conflicts: carried.conflicts.clone(),
        after_attempts: 0,
        by: "start".into(),
        at: time::now(),
    };
    Ok(Some(Carry {
        source,
        carried,
        reopen,
    }))
}

pub fn start(env: &Env, opts: StartOptions) -> Result<StartOutcome> {
    let store = &env.store;
    // Every precondition first: nothing is written until all of them hold.
    let c = store.snapshot_refs(|| preconditions(env, &opts))?;
    let carry = carry_of(store, opts.carry_from.as_deref(), &c)?;
    let mut record = new_record(
        store,
        &c.run_id,
        &opts.task,
        (c.actor, c.initiator),
        (&c.base_ref, c.base_commit),
        &c.branch,
    );
    let branch_tip = carry.as_ref().map_or(c.base_commit, |k| k.carried.head);
    let mut retire: Option<(Cas, Cas)> = None;
    if let Some(k) = &carry {
        record.supersedes = Some(k.source.record.run_id.clone());
        record.reopens.push(k.reopen.clone());
        let mut old = ledger::transition(&k.source.record, RunState::Superseded);
        old.superseded_by = Some(c.run_id.clone());
        old.reason = Some(format!(
            "superseded by run {}, which carries its change onto {}",
            c.run_id, c.base_commit
        ));
        let commit = store.write_ledger_commit(Some(&k.source), &old, "start")?;
        let name = ledger::ref_name(&old.run_id);
        let message = format!("tabellio: start {} supersedes {}", c.run_id, old.run_id);
        retire = Some((
            Cas::update(&name, Some(k.source.tip), commit, &message),
            Cas::update(
                &name,
                Some(commit),
                k.source.tip,
                "tabellio: start rolled back",
            ),
        ));
    }
    let ledger_commit = store.write_ledger_commit(None, &record, "start")?;
    let message = format!("tabellio: start {}", c.run_id);
    if let Some(torn) = &c.torn {
        // Last, after every precondition: the lock outlived the wait, so it is stale.
        std::fs::remove_file(&torn.lock).map_err(|e| {
            Error::internal(format!(
                "could not remove the stale lock {}: {e}",
                torn.lock.display()
            ))
        })?;
    }
    let mut edits = vec![
        Cas::update(
            &c.ledger_ref,
            c.torn.as_ref().map(|t| t.tip),
            ledger_commit,
            &message,
        ),
        Cas::update(&c.branch, None, branch_tip, &message),
    ];
    edits.extend(retire.as_ref().map(|(forward, _)| forward.clone()));
    tx::apply(store, &edits).map_err(|e| e.into_error())?;
    let added = add_worktree_and_exclude(env, &c.worktree, &c.branch).and_then(|()| {
        // The carried change's conflicts, written out in the new worktree for the repair.
        match &carry {
            Some(k) if k.carried.files != store.tree_of(k.carried.head)? => {
                crate::store::checkout::write_files(
                    &c.worktree,
                    store.tree_of(k.carried.head)?,
                    k.carried.files,
                )
            }
            _ => Ok(()),
        }
    });
    if let Err(e) = added {
        // Roll back: both refs are ours and nobody else knows them yet; CAS keeps it honest.
        let mut back = vec![
            Cas::delete(&c.ledger_ref, ledger_commit, "tabellio: start rolled back"),
            Cas::delete(&c.branch, branch_tip, "tabellio: start rolled back"),
        ];
        back.extend(retire.map(|(_, undo)| undo));
        let _ = tx::apply(store, &back);
        if c.worktree.exists() {
            let _ = store.remove_worktree(&c.worktree, true);
        }
        let _ = std::fs::remove_dir(&c.worktree);
        return Err(e);
    }
    Ok(StartOutcome {
        run: record,
        workspace: c.worktree,
        base_via: c.base_via,
        warnings: c.warnings,
        superseded: carry.map(|k| k.source.record.run_id),
    })
}

/// A warning when the base branch is behind (or diverged from) its remote-tracking branch as
/// last fetched: after `promote --remote` or a promotion on another machine the local branch
/// stays where it was, and a run started from it would start from a stale commit. A warning,
/// not a refusal: starting from an older commit is sometimes what a person wants, and this
/// clone may simply not have pulled yet. One that cannot be computed is no warning.
fn stale_base_warning(store: &Store, base_ref: &str) -> Option<String> {
    use crate::store::divergence::{branch_divergence, Relation};
    let d = branch_divergence(store, base_ref).ok().flatten()?;
    if d.relation == Relation::Ahead {
        return None;
    }
    let short = |hex: &str| hex[..hex.len().min(12)].to_string();
    Some(format!(
        "the base {base_ref} ({}) is {} {} ({}), as last fetched: the run starts from the older commit; \
         bring the branch up to date with `{}` (and the runs and evidence with `git tabellio sync {}`), \
         then start runs from it",
        d.local.as_deref().map_or_else(|| "-".to_string(), short),
        if d.relation == Relation::Behind { "behind" } else { "diverged from" },
        d.tracking,
        short(&d.remote_tip),
        d.fix,
        crate::error::shell_quote(&d.remote),
    ))
}

/// The run's worktree path must be free: not a symbolic link, and empty if it exists.
fn check_worktree_path(
    store: &Store,
    worktree: &std::path::Path,
    run_id: &str,
    ledger_ref: &str,
    torn_tip: Option<gix::ObjectId>,
) -> Result<()> {
    if std::fs::symlink_metadata(worktree).is_ok_and(|m| m.file_type().is_symlink()) {
        // git refuses to add a worktree at a symlink (even to an empty directory): say so now,
        // before anything is written.
        return Err(Error::refused(format!(
            "the worktree path {} is a symbolic link",
            worktree.display()
        ))
        .hint(
            "remove the link (or choose another run id); a run worktree is a directory of its own",
        ));
    }
    if worktree.exists()
        && std::fs::read_dir(worktree)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        // A concurrent `start` of the same run may be creating it right now: its ledger, read
        // as it is now (past the preconditions' snapshot).
        if store.ref_target_now(ledger_ref)? != torn_tip {
            return Err(Error::conflict(format!(
                "run {run_id:?} was just started by another process"
            ))
            .hint("look at it with `git tabellio status`"));
        }
        return Err(Error::refused(format!(
            "the worktree directory {} exists and is not empty",
            worktree.display()
        ))
        .hint("move it away if it is yours, or choose another run id"));
    }
    Ok(())
}

/// The first `run.json` of a run.
fn new_record(
    store: &Store,
    run_id: &str,
    task: &str,
    (actor, initiator): (Actor, String),
    (base_ref, base_commit): (&str, gix::ObjectId),
    branch: &str,
) -> RunRecord {
    let now = time::now();
    RunRecord {
        schema: SCHEMA.into(),
        run_id: run_id.to_string(),
        state: RunState::Active,
        previous_state: None,
        task: Task {
            summary: summarize(task),
            text: task.to_string(),
            sha256: sha256_hex(task.as_bytes()),
        },
        actor,
        repository: store.repository_id(),
        base: Base {
            reference: base_ref.to_string(),
            commit: base_commit.to_string(),
        },
        branch: branch.to_string(),
        checkpoints: Vec::new(),
        attempts: Vec::new(),
        validated: None,
        promotion: None,
        loop_state: None,
        reason: None,
        landed: None,
        restack: None,
        land_attempts: Vec::new(),
        rewound: None,
        completion: None,
        initiator: Some(initiator),
        reopens: Vec::new(),
        repair: None,
        superseded_by: None,
        supersedes: None,
        created_at: now.clone(),
        updated_at: now,
    }
}

/// The run branch must not exist, nor clash with an existing branch's directory.
fn check_branch_free(store: &Store, branch: &str) -> Result<()> {
    // A symbolic ref at the name is a ref there too, whatever it points at (or whether that
    // exists): git would refuse to make the branch, after the ledger is written.
    if let Some(to) = store.symbolic_target(branch)? {
        return Err(Error::usage(format!(
            "branch {branch} already exists: it is a symbolic ref to {to}"
        ))
        .hint(format!(
            "a run needs a branch of its own; choose another --branch or run id, or delete the \
             symbolic ref with `git symbolic-ref -d {branch}`"
        )));
    }
    if store.ref_target(branch)?.is_some() {
        return Err(Error::usage(format!("branch {branch} already exists"))
            .hint("a run needs a branch of its own; choose another --branch or run id"));
    }
    if let Some(clash) = ref_path_clash(store, branch)? {
        return Err(Error::usage(format!(
            "branch {branch} cannot exist beside {clash}: git stores refs as files, and one would be the other's directory"
        ))
        .hint("choose another --branch (or run id) that is not a prefix of, or inside, an existing branch"));
    }
    Ok(())
}

fn add_worktree_and_exclude(env: &Env, worktree: &std::path::Path, branch: &str) -> Result<()> {
    let store = &env.store;
    if let Some(parent) = worktree.parent() {
        std::fs::create_dir_all(parent)
            .context(|| format!("could not create {}", parent.display()))?;
    }
    store.add_worktree(worktree, branch)?;
    // Excludes the worktree root when it lies inside the main worktree (default or configured),
    // so `git status` there does not list the run worktrees. Last: a start that fails earlier
    // leaves the file alone.
    store.ensure_excluded()?;
    Ok(())
}

/// A start killed inside its ref transaction: the ledger written, the branch not.
struct TornStart {
    /// The ledger's tip: its one start commit.
    tip: gix::ObjectId,
    branch: String,
    /// The branch's lock file, left by the killed transaction.
    lock: PathBuf,
}

/// [`torn_start_lock`] for `start`: the lock must outlive a short wait (a live `start` of the
/// same id holds it for milliseconds), else the run is being started by someone else.
fn torn_start_of(store: &Store, run_id: &str, tip: gix::ObjectId) -> Result<Option<TornStart>> {
    let Ok(record) = store.read_ledger_record(run_id, tip) else {
        return Ok(None);
    };
    let ledger = Ledger { tip, record };
    for round in 0..6 {
        if torn_start_lock(store, &ledger)?.is_none() {
            return Ok(None);
        }
        backoff::LOCAL_REFS.sleep(round);
    }
    Ok(torn_start_lock(store, &ledger)?.map(|lock| TornStart {
        tip,
        branch: ledger.record.branch.clone(),
        lock,
    }))
}

/// The worktree root must be creatable: no part of its path may be a file. Checked before the
/// first write, so a misconfiguration is a usage error that writes nothing.
fn check_worktree_root(root: &std::path::Path) -> Result<()> {
    for ancestor in root.ancestors() {
        let Ok(md) = std::fs::symlink_metadata(ancestor) else {
            continue;
        };
        if md.file_type().is_symlink() && !ancestor.exists() {
            return Err(Error::usage(format!(
                "the worktree root {} cannot be created: {} is a symbolic link to nowhere",
                root.display(),
                ancestor.display()
            ))
            .hint("point `git config tabellio.worktreeRoot` at a directory that can exist"));
        }
        if ancestor.exists() {
            if !ancestor.is_dir() {
                return Err(Error::usage(format!(
                    "the worktree root {} cannot be created: {} is a file",
                    root.display(),
                    ancestor.display()
                ))
                .hint(
                    "set `git config tabellio.worktreeRoot` to a directory, or move the file away",
                ));
            }
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(summarize("\n  Fix the login\nmore"), "Fix the login");
        assert_eq!(summarize(&"x".repeat(100)).chars().count(), 73);
    }
}
