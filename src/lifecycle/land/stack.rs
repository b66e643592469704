//! Putting runs one after another on a tip: each run's commits replayed (or squashed) onto the
//! stack so far. Objects only; refs move in `write`.

use crate::error::Result;
use crate::model::land::RestackMode;
use crate::store::replay::{
    self, would_replay_cleanly, would_squash_cleanly, Prediction, ReplayError, SquashRequest,
};
use crate::store::Store;

use super::queue::Candidate;
use super::required::{requirements, satisfied};
use super::{Landing, RunLanding};

/// One run on the stack.
#[derive(Debug, Clone)]
pub struct Stacked {
    pub candidate: Candidate,
    pub mode: RestackMode,
    /// What it was stacked on, and its new head.
    pub onto: gix::ObjectId,
    pub head: gix::ObjectId,
}

/// Why a run could not be stacked.
#[derive(Debug, Clone)]
pub struct Unstacked {
    pub candidate: Candidate,
    pub onto: gix::ObjectId,
    pub result: Landing,
    /// The run's commit that did not apply (conflicts).
    pub commit: Option<gix::ObjectId>,
    pub paths: Vec<String>,
    pub reason: String,
}

/// Stack `candidate` onto `onto`: nothing to do when `onto` is its base (and no squash was
/// asked), else a replay or a squash.
pub fn stack_one(
    store: &Store,
    candidate: &Candidate,
    onto: gix::ObjectId,
    squash: bool,
    committer: &gix::actor::Signature,
) -> Result<Result<Stacked, Unstacked>> {
    let stacked = |mode, head| {
        Ok(Ok(Stacked {
            candidate: candidate.clone(),
            mode,
            onto,
            head,
        }))
    };
    if onto == candidate.base && !squash {
        return stacked(RestackMode::None, candidate.head);
    }
    let rec = &candidate.ledger.record;
    let result = if squash {
        let request = SquashRequest {
            base: candidate.base,
            head: candidate.head,
            onto,
            summary: &rec.task.summary,
            run_id: &rec.run_id,
        };
        replay::squash(store, &request, committer).map(|s| (RestackMode::Squash, s.commit))
    } else {
        replay::replay(store, &candidate.commits, candidate.base, onto, committer)
            .map(|r| (RestackMode::Replay, r.tip))
    };
    match result {
        Ok((mode, head)) => stacked(mode, head),
        Err(e) => Ok(Err(unstacked(candidate, onto, e)?)),
    }
}

/// A replay error that refuses only this run, or the error that stops the command.
fn unstacked(candidate: &Candidate, onto: gix::ObjectId, e: ReplayError) -> Result<Unstacked> {
    let reason = e.to_string();
    let (result, commit, paths) = match e {
        ReplayError::Conflict { commit, paths, .. } => (Landing::Conflict, Some(commit), paths),
        ReplayError::MergeCommit { .. } | ReplayError::NoCommits { .. } => {
            (Landing::Refused, None, Vec::new())
        }
        other => return Err(other.into()),
    };
    Ok(Unstacked {
        candidate: candidate.clone(),
        onto,
        result,
        commit,
        paths,
        reason,
    })
}

/// `--dry-run`: each run predicted alone on the current tip (the queue's runs are not stacked
/// on one another, since that would mean writing their commits). Nothing is written.
pub fn dry_run(
    store: &Store,
    target: &str,
    candidates: &[Candidate],
    squash: bool,
) -> Result<Vec<RunLanding>> {
    let Some(tip) = store.ref_target(target)? else {
        return Err(crate::error::Error::not_found(format!(
            "the target {target} does not exist"
        )));
    };
    let mut out = Vec::new();
    for c in candidates {
        let rec = &c.ledger.record;
        let plain = tip == c.base && !squash;
        let prediction = if plain {
            Prediction::Clean {
                tree: store.tree_of(c.head)?,
            }
        } else if squash {
            would_squash_cleanly(store, c.base, c.head, tip)?
        } else {
            would_replay_cleanly(store, &c.commits, c.base, tip)?
        };
        let mode = if plain {
            RestackMode::None
        } else if squash {
            RestackMode::Squash
        } else {
            RestackMode::Replay
        };
        let mut result = RunLanding {
            run_id: rec.run_id.clone(),
            result: Landing::WouldLand,
            state: rec.state,
            landed: plain.then(|| c.head.to_string()),
            restack: Some(mode),
            base_before: rec.base.commit.clone(),
            base_after: Some(tip.to_string()),
            paths: Vec::new(),
            commit: None,
            reason: None,
            satisfied: None,
        };
        match prediction {
            Prediction::Clean { tree } => {
                let reqs = requirements(store, tip, std::slice::from_ref(c))?;
                result.satisfied = Some(!reqs.is_empty() && satisfied(store, tree, &reqs)?);
            }
            Prediction::Conflict { commit, paths } => {
                result.result = Landing::Conflict;
                result.reason = Some(format!("{commit} would conflict onto {tip}"));
                result.paths = paths;
                result.commit = Some(commit.to_string());
            }
        }
        out.push(result);
    }
    Ok(out)
}
