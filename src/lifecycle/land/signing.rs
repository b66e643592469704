//! Landing under a policy that requires signed evidence: checks `land` would run (on a
//! restacked or squashed tree) with a key whose records could not count are refused before any
//! of them runs, with the set-up steps, as `finish` refuses. A landing that runs no check (every
//! run lands as it was validated, or reuses evidence) needs no key and is never refused here.

use crate::error::Result;
use crate::evidence::sign::{refuse_uncountable, JudgedAt, RecordSigner};
use crate::store::policy::policy_at;
use crate::store::Store;

use super::queue::Candidate;
use super::LandOptions;

/// Who signs the records `land` makes here: `--sign-key`, else git's signing key (none with
/// `--no-sign`), its principal as the policy at the target's tip grants it.
pub(super) fn signer(
    store: &Store,
    opts: &LandOptions,
    target: &str,
) -> Result<Option<RecordSigner>> {
    RecordSigner::resolve(
        store,
        opts.sign_key.as_deref(),
        opts.no_sign,
        store.ref_target(target)?,
    )
}

/// Refuse (exit 3, nothing written) when the landing would run checks whose records `signer`
/// cannot make count under the policy at the target's tip.
pub(super) fn refuse_uncountable_checks(
    store: &Store,
    target: &str,
    candidates: &[Candidate],
    (squash, batch): (bool, usize),
    (signer, no_sign): (Option<&RecordSigner>, bool),
) -> Result<()> {
    let Some(tip) = store.ref_target(target)? else {
        return Ok(());
    };
    let required = policy_at(store, tip)?
        .map(|p| p.required)
        .unwrap_or_default();
    let label = target.strip_prefix("refs/heads/").unwrap_or(target);
    let again = format!("git tabellio land --target {label}");
    let judged = JudgedAt {
        commit: tip,
        label,
        again: &again,
        run: None,
    };
    let refusal = refuse_uncountable(
        store,
        signer,
        Some(judged),
        required.iter().map(String::as_str),
        no_sign,
    );
    match refusal {
        // Only a landing that would run checks needs a key that counts: ask the prediction
        // `--dry-run` makes, which writes nothing.
        Err(e)
            if super::stack::dry_run(store, target, candidates, squash, batch)?
                .1
                .checks_run
                > 0 =>
        {
            Err(e)
        }
        _ => Ok(()),
    }
}
