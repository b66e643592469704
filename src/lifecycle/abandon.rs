//! `abandon`: move a run to `abandoned`, in one ledger transition. A run whose ledger ref points at something that is not a ledger (a blob, a
//! tree, a tag, a missing object, a commit without `run.json`).
//!
//! Nothing in such a ref says what the run was, so nothing is buried by replacing it: the ref
//! is moved, by compare-and-swap on the value it has now, to a fresh ledger of one commit whose
//! `run.json` says `abandoned` and names the value it replaced. What is not known is not made
//! up: the task, the base and the actor are recorded as unknown (empty, `system:unknown`), the
//! branch as the run's default one. The worktree and the branch stay, as after any `abandon`;
//! `cleanup` removes them. A ledger commit whose `run.json` exists but cannot be used (a newer
//! schema, an unknown field) is someone's record: it is never written over.

use crate::error::{Error, Result};
use crate::model::canonical::sha256_hex;
use crate::model::run::{Actor, Base, Task};
use crate::model::{self, RunRecord, RunState};
use crate::run::{resolve_run, run_workspace, Env};
use crate::store::ledger::{self, Ledger};
use crate::store::tx::{self, Cas};

use crate::run::unreadable::{unreadable_ledger, LedgerDamage, UnreadableLedger};

use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Serialize)]
pub struct RunOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    /// The unreadable ledger value `abandon` replaced, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_ledger: Option<ReplacedLedger>,
}

/// Move a run to `abandoned`. A ledger ref that is not a ledger at all (a blob, a tree, a commit
/// without `run.json`) is replaced by a fresh abandoned ledger (see [`abandon_unreadable`]).
pub fn abandon(env: &Env, run: Option<&str>, why: Option<&str>) -> Result<RunOutcome> {
    let store = &env.store;
    let ledger = match resolve_run(env, run) {
        Ok(ledger) => ledger,
        Err(e) => {
            let Some(bad) = run
                .map(|id| unreadable_ledger(&env.store, id))
                .transpose()?
                .flatten()
            else {
                return Err(e);
            };
            let (ledger, workspace, replaced) = abandon_unreadable(env, &bad, why, e)?;
            return Ok(RunOutcome {
                run: ledger.record,
                workspace,
                replaced_ledger: Some(replaced),
            });
        }
    };
    let rec = &ledger.record;
    if rec.state.is_terminal() {
        let from = crate::run::workspace::cleanup_from(
            store,
            &env.cwd,
            run_workspace(store, &ledger)?.as_deref(),
        );
        return Err(
            Error::refused(format!("run {} is already {}", rec.run_id, rec.state)).hint(format!(
                "`{}` removes its worktree and branch",
                crate::run::workspace::cleanup_command(from.as_deref(), &rec.run_id, false)
            )),
        );
    }
    let mut next = ledger::transition(rec, RunState::Abandoned);
    next.reason = crate::run::non_empty(why).or_else(|| Some("abandoned".into()));
    let advanced = crate::run::advance(store, &ledger, next, "abandon", &[])?;
    Ok(RunOutcome {
        workspace: run_workspace(store, &ledger)?,
        run: advanced.record,
        replaced_ledger: None,
    })
}

/// What `abandon` replaced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplacedLedger {
    #[serde(rename = "ref")]
    pub name: String,
    /// The value it had: the object id.
    pub target: String,
    /// What that object is (`blob`, `tree`, `tag`, `commit`, `missing`).
    pub object: String,
}

/// Abandon the run of the unreadable ledger `bad`: one compare-and-swap of its ledger ref, from
/// the value it has to a fresh `abandoned` ledger commit. `refusal` is what reading the ledger
/// said; it is the answer when the ledger holds a record (which is never written over).
pub fn abandon_unreadable(
    env: &Env,
    bad: &UnreadableLedger,
    why: Option<&str>,
    refusal: Error,
) -> Result<(Ledger, Option<std::path::PathBuf>, ReplacedLedger)> {
    let store = &env.store;
    let id = &bad.run_id;
    let name = ledger::ref_name(id);
    if bad.damage != LedgerDamage::NotALedger {
        // Someone's record this version cannot use: the reader's refusal, and the way out.
        let hint = refusal.hint.clone().unwrap_or_default();
        return Err(refusal.hint(format!(
            "{hint}; abandon does not write over it, but `git tabellio cleanup {id} --force` \
             removes the run's worktree and branch, and `git update-ref -d {name} {}` its ledger",
            bad.tip
        )));
    }
    let replaced = ReplacedLedger {
        name: name.clone(),
        target: bad.tip.to_string(),
        object: bad.object.clone(),
    };
    let now = model::time::now();
    let why = crate::run::non_empty(why).unwrap_or_else(|| "abandoned".into());
    let record = RunRecord {
        schema: model::run::SCHEMA.into(),
        run_id: id.clone(),
        state: RunState::Abandoned,
        previous_state: None,
        task: Task {
            summary: "(unknown: the ledger was unreadable)".into(),
            text: String::new(),
            sha256: sha256_hex(b""),
        },
        actor: Actor::new("system", "unknown"),
        repository: store.repository_id(),
        base: Base {
            reference: String::new(),
            commit: String::new(),
        },
        branch: format!("refs/heads/tabellio/{id}"),
        checkpoints: Vec::new(),
        attempts: Vec::new(),
        validated: None,
        promotion: None,
        loop_state: None,
        reason: Some(format!(
            "{why} (its ledger {name} was unreadable: it pointed at {} {})",
            bad.object, bad.tip
        )),
        landed: None,
        restack: None,
        land_attempts: Vec::new(),
        rewound: None,
        completion: None,
        initiator: None,
        reopens: Vec::new(),
        repair: None,
        superseded_by: None,
        supersedes: None,
        created_at: now.clone(),
        updated_at: now,
    };
    let tip = store.write_ledger_commit(None, &record, "abandon")?;
    tx::apply(
        store,
        &[Cas::update(
            &name,
            Some(bad.tip),
            tip,
            format!("tabellio: abandon {id} (replacing an unreadable ledger)"),
        )],
    )
    .map_err(|e| e.into_error())?;
    let ledger = Ledger { tip, record };
    let workspace = run_workspace(store, &ledger)?;
    Ok((ledger, workspace, replaced))
}
