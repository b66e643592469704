//! Where this clone and a remote disagree, as far as the last fetch knows: the run's ledger and
//! the shared notes against their tracking refs (`refs/tabellio/remotes/<remote>/runs/<run>`,
//! `refs/notes/tabellio/remotes/<remote>/<name>`, written by `sync` and by a `git fetch` after
//! `init`), and the run's target branch against its remote-tracking branch (its upstream, else
//! `refs/remotes/<remote>/<branch>`).
//!
//! Nothing here touches the network: a remote that moved since the last fetch is not seen, and a
//! remote never fetched is not compared. Each difference comes with the command that resolves it.

use serde::Serialize;

use crate::error::Result;
use crate::model::RunRecord;
use crate::store::notes::{APPROVALS, CHECKPOINTS, EVIDENCE};
use crate::store::remote::fetch::{remote_names, tracking_notes_prefix, tracking_runs_prefix};
use crate::store::Store;

/// How a local ref stands against its tracking ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// The local ref has commits the remote lacks (it is missing there, or behind ours).
    Ahead,
    /// The remote has commits the local ref lacks (or the local ref does not exist).
    Behind,
    /// Both moved since they last agreed.
    Diverged,
}

/// One local ref that differs from a remote's copy of it.
#[derive(Debug, Clone, Serialize)]
pub struct Divergence {
    pub remote: String,
    /// The local ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The tracking ref that holds the remote's value as last fetched.
    pub tracking: String,
    /// The local value (`None`: the ref does not exist here).
    pub local: Option<String>,
    /// The remote's value as last fetched.
    pub remote_tip: String,
    pub relation: Relation,
    /// The command that brings both sides together.
    pub fix: String,
}

impl Divergence {
    /// `refs/notes/tabellio/evidence is behind origin: git tabellio sync origin`.
    pub fn describe(&self) -> String {
        format!(
            "{} is {} {}: {}",
            self.reference,
            match self.relation {
                Relation::Ahead => "ahead of",
                Relation::Behind => "behind",
                Relation::Diverged => "diverged from",
            },
            self.remote,
            self.fix
        )
    }
}

/// How `local` stands against `remote` (`None`: equal).
fn relation(
    store: &Store,
    local: Option<gix::ObjectId>,
    remote: gix::ObjectId,
) -> Result<Option<Relation>> {
    let Some(local) = local else {
        return Ok(Some(Relation::Behind));
    };
    Ok(if local == remote {
        None
    } else if store.is_ancestor(local, remote)? {
        Some(Relation::Behind)
    } else if store.is_ancestor(remote, local)? {
        Some(Relation::Ahead)
    } else {
        Some(Relation::Diverged)
    })
}

/// The run's ledger, the shared notes and the run's target against every remote that was
/// fetched from, in remote order; only the refs that differ.
pub fn divergences(store: &Store, run: &RunRecord) -> Result<Vec<Divergence>> {
    let mut out = Vec::new();
    for remote in remote_names(store) {
        let sync = format!("git tabellio sync {}", crate::error::shell_quote(&remote));
        let mut pairs = vec![(
            crate::store::ledger::ref_name(&run.run_id),
            format!("{}{}", tracking_runs_prefix(&remote), run.run_id),
        )];
        for notes in [EVIDENCE, CHECKPOINTS, APPROVALS] {
            let name = notes.trim_start_matches(crate::store::remote::fetch::NOTES_PREFIX);
            pairs.push((
                notes.to_string(),
                format!("{}{name}", tracking_notes_prefix(&remote)),
            ));
        }
        for (local_ref, tracking) in pairs {
            // A remote whose name cannot be part of a ref name has no tracking refs.
            let Some(remote_tip) = store.ref_target(&tracking).ok().flatten() else {
                continue;
            };
            let local = store.ref_target(&local_ref)?;
            if let Some(relation) = relation(store, local, remote_tip)? {
                out.push(Divergence {
                    remote: remote.clone(),
                    reference: local_ref,
                    tracking,
                    local: local.map(|l| l.to_string()),
                    remote_tip: remote_tip.to_string(),
                    relation,
                    fix: sync.clone(),
                });
            }
        }
    }
    if let Some(target) = branch_divergence(store, &run.base.reference)? {
        out.push(target);
    }
    Ok(out)
}

/// A local branch against its remote-tracking branch: the upstream git is configured with
/// (`branch.<name>.remote` and `.merge`), else `refs/remotes/<default remote>/<name>`. `None`
/// when they agree or there is nothing to compare with.
pub fn branch_divergence(store: &Store, branch: &str) -> Result<Option<Divergence>> {
    let Some(short) = branch.strip_prefix("refs/heads/") else {
        return Ok(None);
    };
    let Some((remote, tracking)) = tracking_branch(store, branch, short) else {
        return Ok(None);
    };
    let Some(remote_tip) = store.ref_target(&tracking).ok().flatten() else {
        return Ok(None);
    };
    let local = store.ref_target(branch)?;
    let Some(relation) = relation(store, local, remote_tip)? else {
        return Ok(None);
    };
    let fix = branch_fix(store, &remote, short, relation)?;
    Ok(Some(Divergence {
        remote,
        reference: branch.to_string(),
        tracking,
        local: local.map(|l| l.to_string()),
        remote_tip: remote_tip.to_string(),
        relation,
        fix,
    }))
}

/// The remote and the remote-tracking ref of `branch`, if it has one.
fn tracking_branch(store: &Store, branch: &str, short: &str) -> Option<(String, String)> {
    use gix::bstr::ByteSlice;
    let repo = &store.repo;
    let full: &gix::refs::FullNameRef = branch.try_into().ok()?;
    if let Some(remote) = repo.branch_remote_name(short, gix::remote::Direction::Fetch) {
        if let Some(Ok(tracking)) =
            repo.branch_remote_tracking_ref_name(full, gix::remote::Direction::Fetch)
        {
            let remote = match remote {
                gix::remote::Name::Symbol(s) => s.into_owned(),
                // A URL as the upstream's remote: no name, no tracking namespace.
                gix::remote::Name::Url(_) => return None,
            };
            return Some((remote, tracking.as_bstr().to_str_lossy().into_owned()));
        }
    }
    let remote = repo
        .remote_default_name(gix::remote::Direction::Fetch)?
        .to_str_lossy()
        .into_owned();
    Some((remote.clone(), format!("refs/remotes/{remote}/{short}")))
}

/// The command that brings `branch` and the remote's together: a fast-forward from the remote
/// (`git pull` where the branch is checked out, else a fetch into it), a push, or a pull that
/// merges.
fn branch_fix(store: &Store, remote: &str, short: &str, relation: Relation) -> Result<String> {
    let (r, b) = (
        crate::error::shell_quote(remote),
        crate::error::shell_quote(short),
    );
    if relation == Relation::Ahead {
        return Ok(format!("git push {r} {b}"));
    }
    let ff = if relation == Relation::Behind {
        " --ff-only"
    } else {
        ""
    };
    Ok(
        match store
            .worktrees_of_branch(&format!("refs/heads/{short}"))?
            .first()
        {
            Some(wt) => format!("git -C {} pull{ff} {r} {b}", crate::error::shell_path(wt)),
            None if relation == Relation::Behind => format!("git fetch {r} {b}:{b}"),
            None => format!("git switch {b} && git pull {r} {b}"),
        },
    )
}
