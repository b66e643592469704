//! The verification summary `promote` and `land` note on the tip they move a target to: the
//! SLSA source levels the policy that judged the move earns, and the evidence records it rests
//! on (docs/verify.md, "Verification summaries"). Written after the move, as its own notes
//! commit: a summary missing after a crash is only a summary missing, never a gate.

use std::path::Path;

use serde_json::json;

use crate::error::Result;
use crate::evidence::judge::{evaluate, Verdict};
use crate::evidence::requirements::{under_trust, Gate};
use crate::model::{evidence::tool_id, time};
use crate::store::notes::{EVIDENCE, VSA};
use crate::store::policy::{policy_at, trust_at};
use crate::store::publish::publish;
use crate::store::Store;
use crate::trust::vsa::{seal, PREDICATE_TYPE, STATEMENT_TYPE};
use crate::trust::SigningConfig;

/// The verifier id every summary names.
pub const VERIFIER_ID: &str = "urn:git-tabellio:verifier";

/// The Statement for `tip`, which `target` moved to under the policy at `gating` (its tip
/// before the move); `None` when the evidence on `tip` does not pass that policy.
pub fn statement(
    store: &Store,
    target: &str,
    gating: gix::ObjectId,
    tip: gix::ObjectId,
) -> Result<Option<serde_json::Value>> {
    let policy = policy_at(store, gating)?;
    let trust = trust_at(store, gating)?;
    let reqs = match Gate::from_policy(policy.as_ref(), &[]) {
        Gate::Required(reqs) => under_trust(reqs, trust.as_ref()),
        Gate::AnyPassing => Vec::new(),
    };
    let verdicts = evaluate(store, tip, &reqs)?;
    if reqs.is_empty() || verdicts.iter().any(|v| v.verdict != Verdict::Satisfied) {
        return Ok(None);
    }
    let repository = store.repository_id();
    // Level 1: the change is in version control with its evidence. Level 2: the target is a
    // protected branch of the policy (its history moves only through the gate). Level 3: every
    // required check's evidence is signed by an allowed signer (technical controls whose
    // records anyone can check).
    let levels = levels(policy.as_ref(), target, &verdicts);
    let inputs: Vec<serde_json::Value> = verdicts
        .iter()
        .filter_map(|v| v.record.as_ref())
        .map(|digest| json!({"uri": format!("git+{repository}#{EVIDENCE}"), "digest": {"sha256": digest}}))
        .collect();
    let resource = format!("git+{repository}@{target}");
    Ok(Some(json!({
        "_type": STATEMENT_TYPE,
        "subject": [{"uri": resource, "digest": {"gitCommit": tip.to_string()}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"git-tabellio": tool_id()}},
            "timeVerified": time::now(),
            "resourceUri": resource,
            "policy": {
                "uri": format!("git+{repository}@{gating}#{}", crate::model::policy::PATH),
                "digest": {"gitCommit": gating.to_string()},
            },
            "inputAttestations": inputs,
            "verificationResult": "PASSED",
            "verifiedLevels": levels,
            "slsaVersion": "1.1",
        },
    })))
}

/// The SLSA source levels passing `verdicts` (every required check of `policy` satisfied) earn
/// for `target` under `policy`.
pub fn levels(
    policy: Option<&crate::model::policy::Policy>,
    target: &str,
    verdicts: &[crate::evidence::judge::CheckVerdict],
) -> Vec<&'static str> {
    let mut levels = vec!["SLSA_SOURCE_LEVEL_1"];
    if policy.is_some_and(|p| p.protects(target)) {
        levels.push("SLSA_SOURCE_LEVEL_2");
        if verdicts.iter().all(|v| v.signer.is_some()) {
            levels.push("SLSA_SOURCE_LEVEL_3");
        }
    }
    levels
}

/// The `(old, new)` of promotion `p` when its target still holds `new` and `new` has no
/// summary: a promotion or landing killed between its move and its summary, whose summary is
/// noted when it is asked for again.
pub fn unsummarised(
    store: &Store,
    p: &crate::model::run::Promotion,
) -> Result<Option<(gix::ObjectId, gix::ObjectId)>> {
    let (old, new) = (store.parse_oid(&p.old)?, store.parse_oid(&p.new)?);
    if old == new || store.ref_target(&p.target)? != Some(new) {
        return Ok(None);
    }
    Ok(store.note_lines(VSA, new)?.is_empty().then_some((old, new)))
}

/// Note the summary of `tip` (signed with `key_file`, else git's signing key, when one is
/// configured and usable). Nothing is noted when the evidence does not pass.
pub fn note_summary(
    store: &Store,
    target: &str,
    (gating, tip): (gix::ObjectId, gix::ObjectId),
    key_file: Option<&Path>,
) -> Result<()> {
    let Some(statement) = statement(store, target, gating, tip)? else {
        return Ok(());
    };
    let signer = SigningConfig::resolve(&store.repo, key_file, false)?;
    let envelope = seal(&statement, signer.as_ref())?;
    publish(
        store,
        None,
        &[(VSA, vec![(tip, vec![envelope.to_line()])])],
        &format!("tabellio: verification summary of {tip}"),
    )
}

/// [`note_summary`] of a landing on `remote`'s `target`, then the summaries notes pushed there
/// with a lease on the remote's value (merged with theirs, as `sync` merges notes, when another
/// clone moved them meanwhile). The summary is written after the landing was pushed: a push
/// that fails leaves it here, and the next `sync` carries it.
pub fn publish_summary(
    store: &Store,
    remote: &str,
    target: &str,
    (gating, tip): (gix::ObjectId, gix::ObjectId),
    key_file: Option<&Path>,
) -> Result<()> {
    use crate::store::remote::{fetch, plan_notes, push};
    note_summary(store, target, (gating, tip), key_file)?;
    let message = format!("tabellio: verification summary of {tip} to {remote}");
    for round in 1..=fetch::FETCH_ATTEMPTS {
        let tracking = fetch::Tracking::read(store, remote)?;
        let steps = plan_notes(store, &tracking, remote)?;
        let Some(step) = steps.iter().find(|s| s.notes_ref == VSA) else {
            return Ok(());
        };
        let Some(push_ref) = step.push() else {
            return Ok(());
        };
        if let Some(edit) = step.local_update(&message) {
            crate::store::tx::apply(store, &[edit]).map_err(|e| e.into_error())?;
        }
        let pushes = [push_ref];
        match push::push(store, remote, &pushes)? {
            push::PushResult::Pushed(_) => {
                crate::store::remote::record_pushed_in_tracking(store, remote, &pushes);
                return Ok(());
            }
            push::PushResult::LostRace(_) => {
                crate::store::backoff::REMOTE_ROUNDS.sleep(round);
                fetch::fetch(store, remote)?;
            }
            push::PushResult::Declined { messages, .. } => {
                return Err(crate::error::Error::refused(format!(
                    "{remote} declined the verification summary: {}",
                    messages.join("; ")
                )))
            }
        }
    }
    Err(crate::error::Error::conflict(format!(
        "the verification summaries on {remote} kept moving; this one is noted here"
    ))
    .hint(format!("`git tabellio sync {remote}` pushes it")))
}
