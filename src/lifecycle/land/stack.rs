//! Putting runs one after another on a tip: each run's commits replayed (or squashed) onto the
//! stack so far. Objects only; refs move in `write`.

use crate::error::Result;
use crate::model::land::RestackMode;
use crate::store::replay::{self, ReplayError, SquashRequest, StackPrediction, StackStep};
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

/// What a dry run predicts the first pass of validations costs, if every check passes: a
/// failing stack is bisected, which costs more, and cannot be known before the checks run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Predicted {
    /// Stack tops to validate.
    pub validations: usize,
    /// Checks to execute on them.
    pub checks_run: usize,
    /// Checks whose passing evidence on the same tree would be reused instead.
    pub checks_reused: usize,
}

/// `--dry-run`: the queue stacked as `land` stacks it, in memory (each run onto the one before
/// it, in batches of `batch`), with the conflicts it would meet and, for every run and every
/// batch's top, the required checks existing evidence already satisfies. Nothing is written.
pub fn dry_run(
    store: &Store,
    target: &str,
    candidates: &[Candidate],
    squash: bool,
    batch: usize,
) -> Result<(Vec<RunLanding>, Predicted)> {
    let Some(tip) = store.ref_target(target)? else {
        return Err(crate::error::Error::not_found(format!(
            "the target {target} does not exist"
        )));
    };
    let predictor = StackPrediction::new(store)?;
    let mut out = Vec::new();
    let mut predicted = Predicted::default();
    let mut onto = tip;
    for chunk in candidates.chunks(batch.max(1)) {
        let mut stacked: Vec<Candidate> = Vec::new();
        let mut top_tree = None;
        for c in chunk {
            let rec = &c.ledger.record;
            let plain = onto == c.base && !squash;
            let mode = if plain {
                RestackMode::None
            } else if squash {
                RestackMode::Squash
            } else {
                RestackMode::Replay
            };
            let stacked_on = onto;
            let top = if plain {
                StackStep::Clean {
                    tip: c.head,
                    tree: store.tree_of(c.head)?,
                }
            } else {
                let request = squash.then_some(SquashRequest {
                    base: c.base,
                    head: c.head,
                    onto,
                    summary: &rec.task.summary,
                    run_id: &rec.run_id,
                });
                predictor.stack(&c.commits, c.base, onto, request)?
            };
            let mut result = RunLanding {
                run_id: rec.run_id.clone(),
                result: Landing::WouldLand,
                state: rec.state,
                landed: plain.then(|| c.head.to_string()),
                restack: Some(mode),
                base_before: rec.base.commit.clone(),
                base_after: Some(stacked_on.to_string()),
                paths: Vec::new(),
                commit: None,
                reason: None,
                satisfied: None,
                checks: None,
            };
            match top {
                StackStep::Clean { tip: head, tree } => {
                    let reqs = requirements(store, tip, std::slice::from_ref(c))?;
                    let exists = plain.then_some(tree);
                    result.checks = Some(super::plan::plan(store, tip, c, exists)?);
                    let ok = !reqs.is_empty() && satisfied(store, tree, &reqs)?;
                    result.satisfied = Some(ok);
                    if !ok && !reqs.is_empty() {
                        let names: Vec<&str> = reqs.iter().map(|r| r.name.as_str()).collect();
                        result.reason = Some(format!(
                            "validation needed: {} on the stacked tree {tree}; whether it passes \
                             cannot be known before it runs",
                            names.join(", ")
                        ));
                    }
                    onto = head;
                    top_tree = Some(tree);
                    stacked.push(c.clone());
                }
                StackStep::Conflict { commit, paths } => {
                    result.result = Landing::Conflict;
                    result.reason = Some(format!("{commit} would conflict onto {stacked_on}"));
                    result.paths = paths;
                    result.commit = Some(commit.to_string());
                }
            }
            out.push(result);
        }
        // The batch's top is what `land` validates.
        if let Some(tree) = top_tree {
            let checks = requirements(store, tip, &stacked)?;
            if !checks.is_empty() {
                predicted.validations += 1;
                for check in &checks {
                    if satisfied(store, tree, std::slice::from_ref(check))? {
                        predicted.checks_reused += 1;
                    } else {
                        predicted.checks_run += 1;
                    }
                }
            }
        }
    }
    Ok((out, predicted))
}
