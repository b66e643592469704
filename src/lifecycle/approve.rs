//! `approve`: a person approves a run's change to guarded paths.
//!
//! The approval is a `tabellio.approval/v1` record noted on the run's head commit and on its
//! tree in `refs/notes/tabellio/approvals`, signed as evidence is when a signing key is
//! configured. Everything is checked before the one notes write: a run that touches no guarded
//! path, or an approver the policy does not accept, is refused with nothing written.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::evidence::tool_id;
use crate::model::run::Actor;
use crate::model::{time, RunRecord};
use crate::run::{resolve_run, Env};
use crate::store::notes::APPROVALS;
use crate::store::policy::policy_at;
use crate::store::publish::publish;
use crate::trust::approval::{allowed_signers_at, ApprovalRecord, Guard, SCHEMA};
use crate::trust::{self, AllowedSigners, SigningConfig};

/// What `approve` was asked.
#[derive(Debug, Clone, Default)]
pub struct ApproveOptions {
    pub run: Option<String>,
    /// `-m`: why.
    pub reason: Option<String>,
    /// `--actor <type>:<id>`: who approves (default: `human:<committer email>`).
    pub actor: Option<String>,
    /// `--sign-key <file>`.
    pub sign_key: Option<PathBuf>,
    /// `--no-sign`.
    pub no_sign: bool,
}

#[derive(Debug, Serialize)]
pub struct ApproveOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    pub approval: ApprovalRecord,
}

/// The approver: `--actor`, else the committer identity's email as a human.
fn approver(env: &Env, spec: Option<&str>) -> Result<Actor> {
    if spec.is_some() {
        return crate::run::actor::parse_actor(spec);
    }
    let email = Some(
        env.store
            .signature(crate::store::identity::Role::Committer)
            .email
            .to_string(),
    )
    .filter(|e| !e.trim().is_empty());
    match email {
        Some(id) => Ok(Actor {
            kind: "human".into(),
            id,
        }),
        None => crate::run::actor::parse_actor(None),
    }
}

pub fn approve(env: &Env, opts: &ApproveOptions) -> Result<ApproveOutcome> {
    let store = &env.store;
    let ledger = resolve_run(env, opts.run.as_deref())?;
    let run = &ledger.record;
    let workspace = crate::run::run_workspace(store, &ledger)?;
    let head = store.ref_target(&run.branch)?.ok_or_else(|| {
        Error::refused(format!(
            "the run branch {} is not in this repository",
            run.branch
        ))
        .hint("approve on the machine that has the run branch")
    })?;
    let base = store.parse_oid(&run.base.commit)?;
    // Guarded as promote judges it: the target's tip's policy plus the run's own list.
    let gating = store.ref_target(&run.base.reference)?.unwrap_or(base);
    let gating_policy = policy_at(store, gating)?;
    let own = policy_at(store, head)?;
    let guard = Guard::new(
        store,
        gating_policy.as_ref().map(|p| (p, gating)),
        own.as_ref(),
    )?;
    let tree = store.tree_of(head)?;
    let paths = match &guard {
        Some(g) => g.touched(store, store.tree_of(base)?, tree)?,
        None => Vec::new(),
    };
    if paths.is_empty() {
        return Err(Error::refused(format!(
            "run {} changes no guarded path; there is nothing to approve",
            run.run_id
        ))
        .hint("only changes to the policy's `guarded` paths need an approval"));
    }
    let approver = approver(env, opts.actor.as_deref())?;
    if guard.as_ref().is_some_and(|g| g.distinct_from_actor)
        && approver.id.eq_ignore_ascii_case(&run.actor.id)
    {
        return Err(Error::refused(format!(
            "{} is run {}'s own actor, and the policy says the approver must be someone else",
            approver.id, run.run_id
        ))
        .hint("ask another person to run `git tabellio approve` (approval.distinct_from_actor)"));
    }
    let signing = SigningConfig::resolve(&store.repo, opts.sign_key.as_deref(), opts.no_sign)?;
    let mut record = ApprovalRecord {
        schema: SCHEMA.into(),
        run_id: run.run_id.clone(),
        repository: store.repository_id(),
        base: Some(base.to_string()),
        commit: head.to_string(),
        tree: tree.to_string(),
        paths,
        approver,
        run_actor: Some(run.actor.clone()),
        reason: crate::run::non_empty(opts.reason.as_deref()),
        at: time::now(),
        tool: tool_id(),
        signature: None,
        digest: String::new(),
    }
    .seal();
    if let Some(signing) = signing {
        let signers = match &gating_policy {
            Some(p) => allowed_signers_at(store, p, gating)?.unwrap_or_default(),
            None => AllowedSigners::default(),
        };
        let principal = signing
            .public_key()
            .and_then(|key| {
                trust::signing_principal(
                    &signers,
                    key.key_data(),
                    Some(&record.approver.id),
                    &record.at,
                )
            })
            .unwrap_or_else(|| record.approver.id.clone());
        // The signer is who approves under `trust`: it must not be the actor either.
        if guard.as_ref().is_some_and(|g| g.distinct_from_actor)
            && principal.eq_ignore_ascii_case(&run.actor.id)
        {
            return Err(Error::refused(format!(
                "the signing key is {principal}'s, run {}'s own actor, and the policy says the approver must be someone else",
                run.run_id
            ))
            .hint("ask another person to run `git tabellio approve` with their own key (approval.distinct_from_actor)"));
        }
        record.signature = Some(signing.sign_digest(&record.digest, &principal)?);
    }
    let line = record.to_line();
    publish(
        store,
        None,
        &[(
            APPROVALS,
            vec![(head, vec![line.clone()]), (tree, vec![line])],
        )],
        &format!("tabellio: approve {}", run.run_id),
    )?;
    Ok(ApproveOutcome {
        run: run.clone(),
        workspace,
        approval: record,
    })
}
