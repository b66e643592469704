//! Hooks that let only verified commits reach protected refs.
//!
//! Three git hooks share one gate ([`Gatekeeper`]): `reference-transaction` (every local ref
//! update, git ≥ 2.28), `pre-push` (the client, before anything is sent) and `pre-receive` (the
//! server, with the pushed objects still in quarantine). Each refuses to move a protected ref
//! to a commit that does not verify; deletions, symbolic-ref changes and unprotected refs pass.
//!
//! Which refs are protected and which checks they require come from the policy at the
//! protected ref's *current* tip — never from the commit being pushed, so a commit cannot weaken
//! its own gate — together with `git config tabellio.protect` (multi-valued patterns). A ref
//! that does not exist yet takes the policy of `HEAD`'s commit (in a server: the default
//! branch). The hooks only read: they write no ref, object or file in the repository.
//!
//! The installed hook files are shims ([`install`]): git runs them, they `exec git-tabellio
//! hook <name>`; we never start a shell ourselves.

mod evidence;
mod gate;
pub mod install;
pub mod quarantine;

pub use gate::{EvidenceSource, Gatekeeper};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::notes::{APPROVALS, EVIDENCE};
use crate::store::Store;

/// The hooks we provide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookName {
    ReferenceTransaction,
    PrePush,
    PreReceive,
}

impl HookName {
    pub const ALL: [HookName; 3] = [
        HookName::ReferenceTransaction,
        HookName::PrePush,
        HookName::PreReceive,
    ];

    /// The hook's file name, as git calls it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookName::ReferenceTransaction => "reference-transaction",
            HookName::PrePush => "pre-push",
            HookName::PreReceive => "pre-receive",
        }
    }
}

/// One ref update as a hook sees it; `None` is the null id (ref absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub name: String,
    pub old: Option<gix::ObjectId>,
    pub new: Option<gix::ObjectId>,
}

/// A refused update: the ref, the commit, and what it lacks.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    #[serde(rename = "ref")]
    pub refname: String,
    pub commit: String,
    /// Why, in words.
    pub reason: String,
    /// The unsatisfied checks as `name (verdict)`; empty when the refusal is not about evidence.
    pub missing: Vec<String>,
    /// The remote the commit came from (a remote-tracking ref points at it), and whether its
    /// evidence notes were fetched; `None` for a commit made here.
    #[serde(skip)]
    pub from_remote: Option<FromRemote>,
}

/// Where a refused commit came from, for the way out the refusal shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromRemote {
    pub remote: String,
    /// Its evidence notes were fetched (and still do not verify the commit).
    pub fetched: bool,
    /// The refused ref is the branch checked out here: git has already moved the index and
    /// the files to the commit.
    pub checked_out: bool,
}

impl Refusal {
    /// A refusal of `refname` moving to `commit`, for `reason`, with no evidence list.
    pub fn new(refname: &str, commit: impl Into<String>, reason: String) -> Refusal {
        Refusal {
            refname: refname.into(),
            commit: commit.into(),
            reason,
            missing: Vec::new(),
            from_remote: None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing to update {} to {}: {}",
            self.refname, self.commit, self.reason
        )
    }
}

/// An update that was gated and allowed.
#[derive(Debug, Clone, Serialize)]
pub struct Allowed {
    #[serde(rename = "ref")]
    pub refname: String,
    pub commit: String,
}

/// What a hook decided.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HookOutcome {
    pub refused: Vec<Refusal>,
    pub allowed: Vec<Allowed>,
    pub warnings: Vec<String>,
}

impl HookOutcome {
    /// The lines a person sees (git shows hook stderr; a server's goes to the pusher).
    pub fn report(&self, hook: HookName) -> String {
        let mut out = String::new();
        for r in &self.refused {
            out.push_str(&format!("tabellio: {r}\n"));
            if r.missing.is_empty() {
                continue;
            }
            if let (HookName::ReferenceTransaction, Some(from)) = (hook, &r.from_remote) {
                out.push_str(&from_remote_way_out(&r.commit, from));
                continue;
            }
            out.push_str(&match hook {
                HookName::ReferenceTransaction | HookName::PrePush => format!(
                    "tabellio:   make evidence with `git tabellio validate {}` (check it with `git tabellio verify {}`), then try again\n",
                    r.commit, r.commit
                ),
                HookName::PreReceive => format!(
                    "tabellio:   validate it (`git tabellio validate {}`) and push the evidence notes in the same push:\n\
                     tabellio:   `git push --atomic <remote> <commit>:<ref> {EVIDENCE}`\n",
                    r.commit
                ),
            });
        }
        for w in &self.warnings {
            out.push_str(&format!("tabellio: warning: {w}\n"));
        }
        out
    }
}

/// The way out of a refused update to a commit from `from.remote` (a `git pull`, or a merge of
/// what `git fetch` brought). git has already moved the index and the files to the commit when
/// the transaction is refused; the two-way `read-tree` moves them back the way `git checkout`
/// would, keeping the user's own staged and unstaged changes (`git reset --merge` would drop
/// staged ones).
fn from_remote_way_out(commit: &str, from: &FromRemote) -> String {
    let remote = &from.remote;
    let evidence = if from.fetched {
        format!(
            "tabellio:   {remote}'s evidence notes do not verify it either: once it is validated \
             there, `git tabellio sync {remote}`; or validate it here \
             (`git tabellio validate {commit}`); then pull again\n"
        )
    } else {
        format!(
            "tabellio:   its evidence notes could not be fetched from {remote}: \
             `git tabellio sync {remote}`, then pull again\n"
        )
    };
    if !from.checked_out {
        return evidence;
    }
    format!(
        "tabellio:   your index and files were already moved to it; put them back \
         (your own changes are kept):\n\
         tabellio:     git read-tree -m -u {commit} HEAD\n{evidence}"
    )
}

/// Namespaces never gated: git's pseudo-refs and bookkeeping, remote-tracking refs, and the
/// tool's own ledger and notes refs. Skipping them without opening the repository is what keeps
/// `reference-transaction` free for fetches, notes writes and rebases.
fn never_gated(name: &str) -> bool {
    !name.starts_with("refs/")
        || NEVER_GATED_PREFIXES.iter().any(|p| name.starts_with(p))
        || NEVER_GATED_REFS.contains(&name)
}

/// The namespaces under `refs/` that are never gated (see [`never_gated`]); the
/// `reference-transaction` shim skips them with the same list ([`install::shim`]).
pub(crate) const NEVER_GATED_PREFIXES: [&str; 7] = [
    "refs/notes/",
    "refs/tabellio/",
    "refs/remotes/",
    "refs/bisect/",
    "refs/rewritten/",
    "refs/prefetch/",
    "refs/worktree/",
];

/// Single refs under `refs/` that are never gated.
pub(crate) const NEVER_GATED_REFS: [&str; 1] = ["refs/stash"];

/// Parse an object id field of hook input: `None` for the null id, an error for garbage.
fn parse_oid(field: &str) -> Result<Option<gix::ObjectId>> {
    if !field.is_empty() && field.bytes().all(|b| b == b'0') {
        return Ok(None);
    }
    gix::ObjectId::from_hex(field.as_bytes())
        .map(Some)
        .map_err(|e| {
            Error::usage(format!("hook input: {field:?} is not an object id: {e:#}")).caused_by(e)
        })
}

/// `<old> <new> <ref>` lines (reference-transaction, pre-receive). Symbolic-ref changes are
/// left out: they do not move a ref to a commit.
pub fn parse_old_new_ref(input: &str) -> Result<Vec<RefUpdate>> {
    let mut out = Vec::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.splitn(3, ' ');
        let (Some(old), Some(new), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Error::usage(format!(
                "hook input: expected `<old> <new> <ref>`, got {line:?}"
            )));
        };
        if old.starts_with("ref:") || new.starts_with("ref:") {
            continue;
        }
        out.push(RefUpdate {
            name: name.trim_end().to_string(),
            old: parse_oid(old)?,
            new: parse_oid(new)?,
        });
    }
    Ok(out)
}

/// `hook reference-transaction <phase>`: gate a local transaction in its `prepared` phase.
///
/// Returns at once — without opening the repository — in any other phase and when no update in
/// the transaction could be gated (deletions, symbolic refs, pseudo-refs, notes, remote-tracking
/// and tabellio refs). `open` is called only when there is something to judge.
pub fn reference_transaction<S: std::ops::Deref<Target = Store>>(
    phase: &str,
    input: &str,
    moved_by: Option<&str>,
    open: impl FnOnce() -> Result<S>,
) -> Result<HookOutcome> {
    if phase != "prepared" {
        return Ok(HookOutcome::default());
    }
    let all = parse_old_new_ref(input)?;
    // Evidence notes updated in the same transaction (an atomic fetch, a push received by a
    // non-bare repository) count as if already there.
    let source = evidence_source(&all);
    let approvals = approvals_source(&all);
    let updates: Vec<RefUpdate> = all
        .iter()
        .filter(|u| u.new.is_some() && !never_gated(&u.name))
        .cloned()
        .collect();
    if updates.is_empty() {
        return Ok(HookOutcome::default());
    }
    let store = open()?;
    let mut out = gate_transaction(&store, source, approvals, &updates, &[])?;
    if matches!(source, EvidenceSource::CurrentRef) && !out.refused.is_empty() {
        // A fetch into a branch updates the remote-tracking branch in the same transaction.
        let fetched = evidence::fetch_for_refused(&store, &mut out, &all);
        if !fetched.remotes.is_empty() {
            // Judge again with what was fetched; the way out still names the remote.
            out = gate_transaction(&store, source, approvals, &updates, &fetched.notes)?;
            evidence::mark_origins(&store, &mut out, &all, &fetched.remotes);
        }
        out.warnings.extend(fetched.warnings);
    }
    if moved_by.is_some_and(moves_files_first) {
        files_moved_notes(&store, &updates, &mut out);
    }
    Ok(out)
}

/// Does the git command that runs the transaction (its `GIT_REFLOG_ACTION`: `merge …`,
/// `pull …`) update the index and files before the branch? `git commit` sets no such action,
/// and there the index holds the new commit's tree because the person staged it: nothing was
/// moved, and nothing is to be put back.
fn moves_files_first(action: &str) -> bool {
    matches!(action.split_whitespace().next(), Some("merge" | "pull"))
}

/// A refused move of the branch checked out here, whose index and files git already moved
/// (`git merge`, `git pull`, `git reset` update them before the ref): say so, and the one
/// command that puts them back, keeping the person's own changes.
fn files_moved_notes(store: &Store, updates: &[RefUpdate], out: &mut HookOutcome) {
    let Some(branch) = store.head().ok().and_then(|h| h.branch) else {
        return;
    };
    for r in &out.refused {
        let Some(u) = updates
            .iter()
            .find(|u| u.name == r.refname && u.name == branch)
        else {
            continue;
        };
        let (Some(old), Some(new)) = (u.old, u.new) else {
            continue;
        };
        if crate::store::checkout::index_moved_to(store, old, new).unwrap_or(false) {
            let note = format!(
                "{branch} stays at {old}, but git had already moved this worktree's index and \
                 files to the refused {new}; put them back (your own changes are kept) with \
                 `git read-tree -m -u {new} {old}`"
            );
            out.warnings.push(note);
        }
    }
}

/// Gate every update of a `prepared` transaction.
fn gate_transaction(
    store: &Store,
    source: EvidenceSource,
    approvals: EvidenceSource,
    updates: &[RefUpdate],
    fetched: &[(String, gix::ObjectId)],
) -> Result<HookOutcome> {
    let mut out = HookOutcome::default();
    let mut gate = Gatekeeper::new(store, source)?;
    gate.set_approvals_source(approvals);
    gate.read_evidence_also(fetched);
    for u in updates {
        // In `prepared` the old value is the ref's current value (the ref is locked).
        let base = match u.old {
            Some(old) => Some(old),
            None => store.ref_target(&u.name)?,
        };
        gate.gate(&u.name, base, u.new, &mut out)?;
    }
    Ok(out)
}

/// `hook pre-push <remote> <url>`: refuse pushing a protected ref whose new value does not
/// verify here, and warn when the evidence notes the remote will need are not in the push.
///
/// Input lines are `<local ref> <local oid> <remote ref> <remote oid>`.
pub fn pre_push(store: &Store, remote: &str, input: &str) -> Result<HookOutcome> {
    let mut out = HookOutcome::default();
    let mut pushes = Vec::new();
    // The lines git gave for our notes refs: (local, remote) values.
    let mut notes_lines: Vec<(&str, Option<gix::ObjectId>, Option<gix::ObjectId>)> = Vec::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_local_ref, local_oid, remote_ref, remote_oid] = fields[..] else {
            return Err(Error::usage(format!(
                "pre-push input: expected `<local ref> <local oid> <remote ref> <remote oid>`, got {line:?}"
            )));
        };
        if let Some(notes_ref) = [EVIDENCE, APPROVALS].into_iter().find(|n| *n == remote_ref) {
            notes_lines.push((notes_ref, parse_oid(local_oid)?, parse_oid(remote_oid)?));
            continue;
        }
        pushes.push((
            remote_ref.to_string(),
            parse_oid(remote_oid)?,
            parse_oid(local_oid)?,
        ));
    }
    let mut gate = Gatekeeper::new(store, EvidenceSource::CurrentRef)?;
    for (remote_ref, remote_oid, local_oid) in pushes {
        // A push that creates the ref, or whose remote value this repository does not hold,
        // moves it like any other push: our own ref of that name is never its old value (it
        // usually is the pushed commit, which would make the push look like no move at all).
        let old = remote_oid.filter(|o| store.repo.has_object(o));
        // The policy that gates it: at the remote's tip when we have it, else at the last tip
        // fetched from it, else at our own ref of that name.
        let policy_base = match old {
            Some(b) => Some(b),
            None => match tracking_ref(store, remote, &remote_ref) {
                Some(tracking) => match store.ref_target(&tracking)? {
                    Some(t) => Some(t),
                    None => store.ref_target(&remote_ref)?,
                },
                None => store.ref_target(&remote_ref)?,
            },
        };
        gate.gate_from(&remote_ref, old, policy_base, local_oid, &mut out)?;
    }
    for notes_ref in [APPROVALS, EVIDENCE] {
        let line = notes_lines.iter().find(|(n, _, _)| *n == notes_ref);
        if let Some(warning) = notes_warning(store, remote, notes_ref, line, &out.allowed)? {
            out.warnings.push(warning);
        }
    }
    Ok(out)
}

/// What to say about the notes ref `notes_ref` of a push: `line` is the `(ref, local, remote)`
/// line git gave the hook for it, if any, and `allowed` the protected refs the push moves.
///
/// git tells a pre-push hook only the refs it is about to send: a notes ref it already rejected
/// as not a fast-forward (the remote's notes have records ours lack: someone else pushed
/// evidence) is left out of the hook's input although the command line named it. So a missing
/// line means "not named, or rejected", and the words say both; where the hook can tell the
/// notes diverged (the remote value git gave is not in ours, or the copy the last fetch left is
/// not), it says so and how to fix it: `git tabellio sync` merges the notes.
fn notes_warning(
    store: &Store,
    remote: &str,
    notes_ref: &str,
    line: Option<&(&str, Option<gix::ObjectId>, Option<gix::ObjectId>)>,
    allowed: &[Allowed],
) -> Result<Option<String>> {
    let what = if notes_ref == EVIDENCE {
        "evidence"
    } else {
        "approvals"
    };
    let diverged = |fetched: &str| {
        format!(
            "{remote}'s {notes_ref}{fetched} has records this clone has not merged (someone else pushed {what}), \
             so git rejects ours as not a fast-forward: run `git tabellio sync {remote}` (merges the notes) and push again"
        )
    };
    if let Some((_, local, theirs)) = line {
        let (Some(ours), Some(theirs)) = (local, theirs) else {
            return Ok(None);
        };
        let contained = store.repo.has_object(theirs) && store.is_ancestor(*theirs, *ours)?;
        return Ok((!contained).then(|| diverged("")));
    }
    if allowed.is_empty() || remote_has_our_notes(store, remote, notes_ref)? {
        return Ok(None);
    }
    if let (Some(ours), Some(fetched)) = (
        store.ref_target(notes_ref)?,
        store.ref_target(&tracking_notes(remote, notes_ref))?,
    ) {
        if !store.is_ancestor(fetched, ours)? {
            return Ok(Some(diverged(" (as last fetched)")));
        }
    }
    let not_carried = |needs: &str, push: &str| {
        format!(
            "{needs}; this push does not carry {notes_ref}, or git left it out as not a fast-forward (git does not \
             show this hook a ref it rejected). Not named: push it along, `git push --atomic {remote} {push}`; \
             rejected (someone else pushed {what}): run `git tabellio sync {remote}` (merges the notes) and push again"
        )
    };
    Ok(Some(if notes_ref == EVIDENCE {
        let refs: Vec<&str> = allowed.iter().map(|a| a.refname.as_str()).collect();
        not_carried(
            &format!(
                "{} is protected on {remote} as well, and its gate reads evidence from {EVIDENCE}",
                refs.join(", ")
            ),
            &format!("<ref> {EVIDENCE}"),
        )
    } else {
        not_carried(
            &format!("{remote}'s gate reads {APPROVALS} for changes to guarded paths"),
            &format!("<ref> {EVIDENCE} {APPROVALS}"),
        )
    }))
}

/// Where the last fetch from `remote` left its copy of our notes ref `notes_ref`
/// (`refs/notes/tabellio/remotes/<remote>/<name>`, as `init` configures it).
fn tracking_notes(remote: &str, notes_ref: &str) -> String {
    let name = notes_ref.rsplit('/').next().unwrap_or(notes_ref);
    format!("refs/notes/tabellio/remotes/{remote}/{name}")
}

/// `refs/remotes/<remote>/<branch>` for a branch `refs/heads/<branch>` on a configured remote
/// (the default fetch refspec), `None` for other refs or a remote given as a URL.
fn tracking_ref(store: &Store, remote: &str, remote_ref: &str) -> Option<String> {
    let branch = remote_ref.strip_prefix("refs/heads/")?;
    let configured = store
        .config_string(&format!("remote.{remote}.url"))
        .is_some();
    configured.then(|| format!("refs/remotes/{remote}/{branch}"))
}

/// Does the remote already hold every note of `notes_ref` we have? True when ours are
/// contained in what we last fetched from it (`init` keeps that copy at
/// `refs/notes/tabellio/remotes/<remote>/<name>`), or when we have none.
fn remote_has_our_notes(store: &Store, remote: &str, notes_ref: &str) -> Result<bool> {
    let Some(ours) = store.ref_target(notes_ref)? else {
        return Ok(true);
    };
    match store.ref_target(&tracking_notes(remote, notes_ref)) {
        Ok(Some(theirs)) => store.is_ancestor(ours, theirs),
        _ => Ok(false),
    }
}

/// `hook pre-receive` (server): gate every protected ref update of the push, reading evidence
/// from the evidence notes the same push carries (else the notes already here). The store `open`
/// returns must see the pushed objects in quarantine: open it with [`quarantine::open`].
///
/// Like `reference-transaction`, a push that could not touch a protected ref (only deletions,
/// notes, remote-tracking refs) is decided without opening the repository.
pub fn pre_receive<S: std::ops::Deref<Target = Store>>(
    input: &str,
    open: impl FnOnce() -> Result<S>,
) -> Result<HookOutcome> {
    let updates = parse_old_new_ref(input)?;
    let mut out = HookOutcome::default();
    // Notes and the archive only grow: each holds records (archived ledgers) nothing else has.
    let rewrites_notes = |u: &RefUpdate| {
        (u.name.starts_with("refs/notes/tabellio/")
            || u.name.starts_with(crate::store::ledger::archive::PREFIX))
            && u.old.is_some()
    };
    let notes_pushed =
        |u: &RefUpdate| u.name.starts_with("refs/notes/tabellio/") && u.new.is_some();
    if !updates
        .iter()
        .any(|u| (u.new.is_some() && !never_gated(&u.name)) || rewrites_notes(u) || notes_pushed(u))
    {
        return Ok(out);
    }
    let store = open()?;
    // One runaway note must not reach every clone: a note over the cap is refused.
    for u in updates.iter().filter(|u| notes_pushed(u)) {
        let Some(new) = u.new else { continue };
        for (path, size) in crate::store::notes::oversized_notes(&store, u.old, new)? {
            out.refused.push(Refusal {
                refname: u.name.clone(),
                commit: new.to_string(),
                reason: format!(
                    "the note {path} is {size} bytes, over the cap of {} bytes (16 MiB) for one \
                     note: git-tabellio never writes one this large (an output excerpt is at most \
                     1 MiB); remove it from {} and push again",
                    crate::store::notes::NOTE_CAP_BYTES,
                    u.name
                ),
                missing: Vec::new(),
                from_remote: None,
            });
        }
    }
    // Records are only ever added: a push that deletes a tabellio notes ref, or moves it to a
    // history that does not contain what the server has, would drop them.
    for u in updates.iter().filter(|u| rewrites_notes(u)) {
        let (Some(old), new) = (u.old, u.new) else {
            continue;
        };
        let keeps = match new {
            Some(new) => store.is_ancestor(old, new)?,
            None => false,
        };
        if !keeps {
            out.refused.push(Refusal {
                refname: u.name.clone(),
                commit: new.map_or_else(|| "(deletion)".to_string(), |n| n.to_string()),
                reason: if u.name.starts_with(crate::store::ledger::archive::PREFIX) {
                    format!(
                        "the push would drop archived runs of {}: an archive is only ever added \
                         to; merge it with `git tabellio sync` (which keeps both sides' runs) and \
                         push again",
                        u.name
                    )
                } else {
                    format!(
                        "the push would drop records of {}: notes are only ever added; merge them \
                         with `git tabellio sync` (which keeps both sides' records) and push again",
                        u.name
                    )
                },
                missing: Vec::new(),
                from_remote: None,
            });
        }
    }
    if !updates
        .iter()
        .any(|u| u.new.is_some() && !never_gated(&u.name))
    {
        return Ok(out);
    }
    let mut gate = Gatekeeper::new(&store, evidence_source(&updates))?;
    gate.set_approvals_source(approvals_source(&updates));
    for u in &updates {
        gate.gate(&u.name, u.old, u.new, &mut out)?;
    }
    Ok(out)
}

/// The evidence notes the updates carry, if they update the evidence notes ref.
fn evidence_source(updates: &[RefUpdate]) -> EvidenceSource {
    match updates.iter().find(|u| u.name == EVIDENCE) {
        Some(u) => EvidenceSource::Commit(u.new),
        None => EvidenceSource::CurrentRef,
    }
}

/// The approvals notes the updates carry, if they update the approvals notes ref.
fn approvals_source(updates: &[RefUpdate]) -> EvidenceSource {
    match updates.iter().find(|u| u.name == APPROVALS) {
        Some(u) => EvidenceSource::Commit(u.new),
        None => EvidenceSource::CurrentRef,
    }
}
