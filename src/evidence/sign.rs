//! Signing evidence records: the one place a sealed record gets its `signature`.
//!
//! A record is sealed first (its `digest` covers everything but `digest` and `signature`), then
//! signed over that digest. A signing failure is an error before anything is written: a user
//! who asked for signing never gets an unsigned record instead.

use std::path::Path;

use crate::error::{Error, Result};
use crate::model::{time, EvidenceRecord};
use crate::store::policy::{policy_at, trust_at};
use crate::store::Store;
use crate::trust::{
    self, sshsig, AllowedSigners, SignError, SignerRefusal, SigningConfig, SigningKey,
};

/// Who signs the records a command writes, and as whom.
#[derive(Debug, Clone)]
pub struct RecordSigner {
    config: SigningConfig,
    principal: String,
    /// `SHA256:…` of the signing key, when it is known without signing.
    fingerprint: Option<String>,
    /// The signing key's public half, when it is known without signing.
    public: Option<ssh_key::PublicKey>,
}

impl RecordSigner {
    /// `--sign-key <file>`, `--no-sign`, or git's `gpg.format=ssh` + `user.signingKey`;
    /// `None`: no signing. The principal claimed is the one the allowed signers at
    /// `principal_from` grant the key (`user.email` when it is one of them), else `user.email`.
    /// A key that cannot be used (missing file, literal without ssh-agent) is an error now, before
    /// any check runs.
    pub fn resolve(
        store: &Store,
        key_file: Option<&Path>,
        no_sign: bool,
        principal_from: Option<gix::ObjectId>,
    ) -> Result<Option<RecordSigner>> {
        let Some(config) = SigningConfig::resolve(&store.repo, key_file, no_sign)? else {
            return Ok(None);
        };
        match &config.key {
            SigningKey::File(path) if !path.exists() => {
                return Err(SignError::MissingKeyFile(path.clone()).into())
            }
            SigningKey::Agent(literal) if config.agent_socket.is_none() => {
                return Err(SignError::NoAgent {
                    key: literal.clone(),
                }
                .into())
            }
            _ => {}
        }
        let email = store
            .repo
            .config_snapshot()
            .string("user.email")
            .map(|e| e.to_string());
        let public = config.public_key();
        let signers = match principal_from {
            Some(at) => trust_at(store, at)?.map(|t| t.signers),
            None => None,
        };
        let now = time::rfc3339(std::time::SystemTime::now());
        let principal = match (&public, &signers) {
            (Some(key), Some(signers)) => {
                let chosen =
                    trust::signing_principal(signers, key.key_data(), email.as_deref(), &now);
                // `signing_principal` falls back to `email` when no line allows the key now.
                let allowed_now = chosen.as_deref().is_some_and(|p| {
                    signers
                        .find_principal(key.key_data(), Some(p), trust::NAMESPACE, &now)
                        .is_ok()
                });
                if allowed_now {
                    chosen
                } else {
                    listed_principal(signers, key.key_data()).or(email)
                }
            }
            _ => email,
        }
        .unwrap_or_else(|| "tabellio".into());
        Ok(Some(RecordSigner {
            fingerprint: public.as_ref().map(sshsig::fingerprint),
            public,
            config,
            principal,
        }))
    }

    /// `rec` (sealed) with its signature. The digest is recomputed, never taken on its word.
    pub fn sign(&self, mut rec: EvidenceRecord) -> Result<EvidenceRecord> {
        rec.signature = None;
        let rec = rec.seal();
        let signature = self.config.sign_digest(&rec.digest, &self.principal)?;
        Ok(EvidenceRecord {
            signature: Some(signature),
            ..rec
        })
    }

    /// Does `rec` carry a signature by this very key over its own digest? A signer vouches for
    /// reusing only what it signed itself: reusing anything else would launder a record it never
    /// judged into one it signs.
    pub fn signed_it(&self, rec: &EvidenceRecord) -> bool {
        let (Some(ours), Some(sig)) = (&self.fingerprint, &rec.signature) else {
            return false;
        };
        rec.digest_is_valid()
            && &sig.key_fingerprint == ours
            && sshsig::verify(&sig.sig, trust::NAMESPACE, rec.digest.as_bytes())
                .is_ok_and(|key| &sshsig::fingerprint(&key) == ours)
    }
}

/// Refuse, before any check runs, to sign records for `actor` that the allowed signers at
/// `judged_at` (the target's tip) would not let this key vouch for: an agent's key signing a
/// person's run, or another agent's (exit 3; nothing is written).
pub fn refuse_misattributed(
    store: &Store,
    signer: Option<&RecordSigner>,
    judged_at: Option<gix::ObjectId>,
    actor: &crate::model::provenance::ActorProvenance,
) -> Result<()> {
    let (Some(signer), Some(at)) = (signer, judged_at) else {
        return Ok(());
    };
    let Some(fingerprint) = &signer.fingerprint else {
        return Ok(());
    };
    let Some(trust) = trust_at(store, at)? else {
        return Ok(());
    };
    match trust::refuse_attribution(&trust.signers, &signer.principal, fingerprint, Some(actor)) {
        None => Ok(()),
        Some(why) => Err(Error::refused(format!(
            "the records would not count: {why}"
        ))
        .hint(format!(
            "sign with a key that may vouch for {}:{} (a person's or a CI worker's), or start the run with --actor agent:{}",
            actor.kind, actor.id, signer.principal
        ))),
    }
}

/// The kind of actor that records made for `actor` (signed by `signer`) and noted on `commit`
/// will prove at the gates judging by the policy at `judged_at`, with the records already there
/// ([`crate::evidence::requirements::applicable`]): the new records prove, without `trust`
/// there, the kind they claim; with it, the actor's kind only when the key is the actor's own
/// (its principal), allowed now and declared of that kind. `None`: no one kind is proven, so
/// every required check with `when` is asked for.
pub fn kind_proven_by(
    store: &Store,
    signer: Option<&RecordSigner>,
    (judged_at, commit): (Option<gix::ObjectId>, gix::ObjectId),
    actor: &crate::model::provenance::ActorProvenance,
) -> Result<Option<String>> {
    let trust = match judged_at {
        Some(at) => trust_at(store, at)?,
        None => None,
    };
    let signers = trust.as_ref().map(|t| &*t.signers);
    let lines = crate::evidence::read::records_for(store, commit, store.tree_of(commit)?)?;
    let mut kinds = crate::evidence::requirements::kinds_proven(&lines, signers);
    let proves = match signers {
        None => true,
        Some(signers) => signer
            .and_then(|s| {
                s.public
                    .as_ref()
                    .zip(s.fingerprint.as_ref())
                    .map(|k| (s, k))
            })
            .is_some_and(|(signer, (public, fingerprint))| {
                crate::model::run::same_id(&actor.id, &signer.principal)
                    && allowed_now(signers, signer, public).is_ok()
                    && trust::declared_kind(signers, &signer.principal, fingerprint)
                        == Some(actor.kind.as_str())
            }),
    };
    if proves && !kinds.contains(&actor.kind) {
        kinds.push(actor.kind.clone());
    }
    Ok(match kinds.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    })
}

/// The first plain principal of a line holding `key`, whatever its validity window: a key
/// outside its window still signs as who it is, and the judge says `signer-expired`.
fn listed_principal(signers: &AllowedSigners, key: &ssh_key::public::KeyData) -> Option<String> {
    signers
        .entries()
        .iter()
        .filter(|e| !e.cert_authority && e.key.key_data() == key)
        .flat_map(|e| e.principals.split(','))
        .find(|p| !p.is_empty() && !p.starts_with('!') && !p.contains(['*', '?']))
        .map(str::to_string)
}

/// `rec`, signed when there is a signer.
pub fn maybe_sign(signer: Option<&RecordSigner>, rec: EvidenceRecord) -> Result<EvidenceRecord> {
    match signer {
        Some(s) => s.sign(rec),
        None => Ok(rec),
    }
}

/// What judges the records a command is about to write: the commit whose policy and allowed
/// signers count (the target's tip for `finish`, the policy commit for `validate`), how to name
/// it to a person, and the command that writes the records once a key counts.
#[derive(Debug, Clone, Copy)]
pub struct JudgedAt<'a> {
    pub commit: gix::ObjectId,
    /// `main`, or the revision given.
    pub label: &'a str,
    /// `git tabellio finish r1`: what to run again.
    pub again: &'a str,
    /// The run, when a commit on `label` moves the target under it (then it lands, restacked).
    pub run: Option<&'a str>,
}

impl JudgedAt<'_> {
    /// What to run once a line was committed on `label`.
    fn after_allowing(&self) -> String {
        match self.run {
            Some(run) => format!(
                "`{}`, then `git tabellio land {run}` (the commit moved {} under the run, and promote only fast-forwards)",
                self.again, self.label
            ),
            None => format!("`{}` again", self.again),
        }
    }
}

/// Refuse, before any check runs, to make records that could not count: the policy at
/// `judged.commit` requires a signature on one of `checks`, and there is no signer (none
/// configured, or `--no-sign`) or its key is not an allowed signer for namespace `tabellio`
/// there now. Such records would be refused by `promote`, `land`, `verify` and the hooks as
/// `unsigned` or `unknown-signer`, and running the checks again would make the same ones. The
/// refusal (exit 3) names the set-up steps. A key whose public half cannot be known without
/// signing is let through: the verdict on its records is the judges' to give.
pub fn refuse_uncountable<'n>(
    store: &Store,
    signer: Option<&RecordSigner>,
    judged: Option<JudgedAt<'_>>,
    checks: impl IntoIterator<Item = &'n str>,
    no_sign: bool,
) -> Result<()> {
    let Some(judged) = judged else {
        return Ok(());
    };
    let Some(trust) = trust_at(store, judged.commit)? else {
        return Ok(());
    };
    let covered: Vec<&str> = checks
        .into_iter()
        .filter(|name| trust.require_signed.covers(name))
        .collect();
    if covered.is_empty() {
        return Ok(());
    }
    let file = signers_file(store, judged.commit)?;
    let label = judged.label;
    let needs = format!(
        "the policy at {label} requires signed evidence for {}",
        covered.join(", ")
    );
    let Some(signer) = signer else {
        let why = if no_sign {
            "--no-sign was given"
        } else {
            "no SSH signing key is configured (git's user.signingKey with gpg.format=ssh, or --sign-key)"
        };
        return Err(Error::refused(format!(
            "{needs}, and {why}: the records would be unsigned and could not count; nothing was run"
        ))
        .hint(format!(
            "set up a signing key the policy at {label} allows, then run {}:\n{}",
            judged.after_allowing(),
            setup_commands(store, label, &file)
        )));
    };
    let Some(public) = &signer.public else {
        return Ok(());
    };
    let Err(refusal) = allowed_now(&trust.signers, signer, public) else {
        return Ok(());
    };
    let verdict = match refusal {
        SignerRefusal::Expired { .. } | SignerRefusal::NotYetValid { .. } => "signer-expired",
        _ => "unknown-signer",
    };
    Err(Error::refused(format!(
        "{needs}, and the signing key {} (as {}) is not an allowed signer in {file} at {label}: {refusal}; the records would be {verdict} and could not count; nothing was run",
        sshsig::fingerprint(public),
        signer.principal
    ))
    .hint(allow_this_key(store, judged, &file, signer, public)))
}

/// May `signer` sign evidence as its principal under `signers` now?
fn allowed_now(
    signers: &AllowedSigners,
    signer: &RecordSigner,
    public: &ssh_key::PublicKey,
) -> std::result::Result<String, SignerRefusal> {
    let now = time::rfc3339(std::time::SystemTime::now());
    signers.find_principal(
        public.key_data(),
        Some(&signer.principal),
        trust::NAMESPACE,
        &now,
    )
}

/// The hint for a key the allowed signers at `judged` do not grant: the line that allows it,
/// or another key's set-up.
fn allow_this_key(
    store: &Store,
    judged: JudgedAt<'_>,
    file: &str,
    signer: &RecordSigner,
    public: &ssh_key::PublicKey,
) -> String {
    let label = judged.label;
    format!(
        "allow this key: on {label}, add this line to {file} and commit it (a person should review who may sign), then run {}:\n  {}\nor set up another key:\n{}",
        judged.after_allowing(),
        allowed_signers_line(&signer.principal, public),
        setup_commands(store, label, file)
    )
}

/// The allowed-signers file the policy at `commit` names (`.tabellio/allowed_signers`).
fn signers_file(store: &Store, commit: gix::ObjectId) -> Result<String> {
    Ok(policy_at(store, commit)?
        .and_then(|p| p.trust)
        .map_or_else(|| ".tabellio/allowed_signers".into(), |t| t.allowed_signers))
}

/// `<principal> namespaces="tabellio" <public key>`: the line that allows `key` to sign evidence.
fn allowed_signers_line(principal: &str, key: &ssh_key::PublicKey) -> String {
    let mut key = key.clone();
    key.set_comment("");
    let text = key.to_openssh().unwrap_or_default();
    format!(
        "{principal} namespaces=\"{}\" {}",
        trust::NAMESPACE,
        text.trim()
    )
}

/// The commands, one an indented line, that make a new key count under the policy at `label`,
/// whose allowed signers are `file`: make it, tell git to sign with it, allow it on `label`.
/// Pasted into a shell in a checkout of `label`, they run as they are.
fn setup_commands(store: &Store, label: &str, file: &str) -> String {
    let principal = store
        .repo
        .config_snapshot()
        .string("user.email")
        .map(|e| e.to_string())
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "you@example.com".into());
    let key = "~/.ssh/tabellio_ed25519";
    format!(
        "  mkdir -p ~/.ssh && ssh-keygen -t ed25519 -f {key} -N ''\n  \
         git config user.signingKey {key}.pub\n  \
         git config gpg.format ssh\n  \
         # on {label} (a person should review who may sign):\n  \
         printf '%s namespaces=\"{ns}\" %s\\n' {principal} \"$(cat {key}.pub)\" >> {file}\n  \
         git add {file} && git commit -m 'Allow my key to sign evidence'",
        ns = trust::NAMESPACE
    )
}

/// The hint for evidence refused for its signature (`unsigned`, `unknown-signer`,
/// `signer-expired`) under the policy at `judged`: running `again` is the way out only when the
/// key git is configured with now counts there; otherwise the set-up steps come first.
pub fn signing_hint(store: &Store, judged: JudgedAt<'_>) -> Option<String> {
    let trust = trust_at(store, judged.commit).ok().flatten()?;
    let file = signers_file(store, judged.commit).ok()?;
    let (label, again) = (judged.label, judged.again);
    let signer = RecordSigner::resolve(store, None, false, Some(judged.commit))
        .ok()
        .flatten();
    let Some((signer, public)) = signer
        .as_ref()
        .and_then(|s| s.public.as_ref().map(|p| (s, p)))
    else {
        return Some(format!(
            "no signing key that counts is configured here, and `{again}` refuses to run without one; set up a signing key the policy at {label} allows, then run {}:\n{}",
            judged.after_allowing(),
            setup_commands(store, label, &file)
        ));
    };
    if allowed_now(&trust.signers, signer, public).is_ok() {
        return Some(format!(
            "the signing key configured here ({}, as {}) is allowed at {label}: `{again}` signs the evidence anew",
            sshsig::fingerprint(public),
            signer.principal
        ));
    }
    Some(format!(
        "the signing key configured here ({}) is not allowed at {label}, and `{again}` refuses to run with it; {}",
        sshsig::fingerprint(public),
        allow_this_key(store, judged, &file, signer, public)
    ))
}
