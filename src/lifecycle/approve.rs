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
use crate::model::policy::ApproverRole;
use crate::model::run::same_id;
use crate::model::run::Actor;
use crate::model::{time, RunRecord};
use crate::run::{resolve_run, Env};
use crate::store::notes::APPROVALS;
use crate::store::policy::policy_at;
use crate::store::publish::publish;
use crate::store::Store;
use crate::trust::approval::{allowed_signers_at, ApprovalRecord, Guard, RunActors, SCHEMA};
use crate::trust::{self, AllowedSigners, SigningConfig};

/// What `approve` was asked.
#[derive(Debug, Clone, Default)]
pub struct ApproveOptions {
    pub run: Option<String>,
    /// `-m`: why.
    pub reason: Option<String>,
    /// `--actor <type>:<id>`: who approves (default: `human:<canonical id>`).
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

/// The approver: `--actor`, else a human by the canonical id of whoever runs this (the
/// principal the allowed signers at `judged_at` grant the signing key, else the git email).
fn approver(env: &Env, spec: Option<&str>, judged_at: gix::ObjectId) -> Result<Actor> {
    crate::run::actor::parse_actor(spec, || {
        crate::run::actor::own_id(&env.store, Some(judged_at))
    })
}

/// Refuse an approval by `id` when the policy excludes it as the run's actor or initiator.
fn refuse_excluded(
    run: &RunRecord,
    excluded: &[ApproverRole],
    id: &str,
    whose: &str,
) -> Result<()> {
    for role in excluded {
        let (is, hint) = match role {
            ApproverRole::Actor => (
                same_id(id, &run.actor.id),
                "approval.distinct_from_actor or guarded_paths.*.approver_not",
            ),
            ApproverRole::Initiator => (
                run.initiator.as_deref().is_none_or(|i| same_id(id, i)),
                "guarded_paths.*.approver_not",
            ),
        };
        if is {
            let who = if whose.is_empty() {
                id.to_string()
            } else {
                format!("{id}'s")
            };
            return Err(Error::refused(format!(
                "{whose}{who} is run {}'s own {} (or the run names none), and the policy says the approver must be someone else",
                run.run_id,
                role.as_str()
            ))
            .hint(format!(
                "ask another person to run `git tabellio approve` with their own key ({hint})"
            )));
        }
    }
    Ok(())
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
    let signing = SigningConfig::resolve(&store.repo, opts.sign_key.as_deref(), opts.no_sign)?;
    let signers = match &gating_policy {
        Some(p) => allowed_signers_at(store, p, gating)?.unwrap_or_default(),
        None => AllowedSigners::default(),
    };
    let at = time::now();
    let public = signing.as_ref().and_then(SigningConfig::public_key);
    // Without --actor, the approver is who signs: the principal the allowed signers grant the
    // key (one id whether it came from --sign-key or git's configuration).
    let approver = match (&opts.actor, &public) {
        (None, Some(key)) => {
            let email = crate::run::actor::own_id(store, None);
            let principal = trust::signing_principal(&signers, key.key_data(), Some(&email), &at)
                .filter(|p| {
                    signers
                        .find_principal(key.key_data(), Some(p), trust::NAMESPACE, &at)
                        .is_ok()
                })
                .unwrap_or(email);
            Actor::new("human", principal)
        }
        _ => approver(env, opts.actor.as_deref(), gating)?,
    };
    let excluded = guard
        .as_ref()
        .map(|g| g.excluded(&paths))
        .unwrap_or_default();
    refuse_excluded(run, &excluded, &approver.id, "")?;
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
        run_initiator: run.initiator.clone(),
        reason: crate::run::non_empty(opts.reason.as_deref()),
        at,
        tool: tool_id(),
        signature: None,
        digest: String::new(),
    }
    .seal();
    if let Some(signing) = signing {
        sign(store, run, &mut record, &signing, &signers, &excluded)?;
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

/// Sign `record` with `signing`, refusing when the signer is someone the guard excludes or the
/// key that signed the run's evidence (a key that vouched for the checks cannot approve them).
fn sign(
    store: &Store,
    run: &RunRecord,
    record: &mut ApprovalRecord,
    signing: &SigningConfig,
    signers: &AllowedSigners,
    excluded: &[ApproverRole],
) -> Result<()> {
    let public = signing.public_key();
    let principal = public
        .as_ref()
        .and_then(|key| {
            trust::signing_principal(
                signers,
                key.key_data(),
                Some(&record.approver.id),
                &record.at,
            )
        })
        .unwrap_or_else(|| record.approver.id.clone());
    // The signer is who approves under `trust`: it must not be excluded either.
    refuse_excluded(run, excluded, &principal, "the signing key is ")?;
    // Nor may the key that signed the run's evidence approve it.
    if let Some(key) = &public {
        let fingerprint = trust::sshsig::fingerprint(key);
        let ids = RunActors::default().of(store, record, Some(&run.actor))?;
        if ids.evidence_keys.contains(&fingerprint) {
            return Err(Error::refused(format!(
                "the signing key ({fingerprint}) signed run {}'s evidence, and a key that vouched for the checks cannot also approve the change",
                run.run_id
            ))
            .hint("ask another person to run `git tabellio approve` with their own key"));
        }
    }
    record.signature = Some(signing.sign_digest(&record.digest, &principal)?);
    Ok(())
}
