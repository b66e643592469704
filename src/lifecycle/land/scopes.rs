//! Independent landing: runs whose changes fall in disjoint check scopes are landed side by
//! side, one lane each, so a culprit in one scope never holds up the runs of another.
//!
//! A run's footprint is the set of required checks (of the policy at the target's tip) its
//! change touches: a check without declared inputs is touched by every run, one with inputs by
//! a run whose base and head have different scoped trees, and every check by a run that changes
//! the policy. Runs whose footprints share a check are in one lane (transitively); runs that
//! touch no check at all share one lane. Lanes land concurrently, each as `land` lands one
//! queue, each validating with the target tip's required checks: a check outside a lane's
//! footprint has the same scoped tree on the lane's stack as on the tip, so its evidence stands
//! (`not_applicable`) and landing one lane never invalidates another's. A lane whose write finds
//! the target moved (another lane landed) rebuilds on the new tip, which re-runs nothing: the
//! scoped trees it validated are unchanged, and the failures it saw are remembered.

use crate::error::{Error, Result};
use crate::model::policy;
use crate::run::Env;
use crate::store::scoped::Materialise;
use crate::store::Store;

use super::check::Checker;
use super::queue::Candidate;
use super::required::requirements;
use super::{land_runs, LandOptions, LandOutcome, ROUNDS};

/// The candidates' run ids grouped into lanes of intersecting footprints, each lane in queue
/// order, lanes in the order of their first run.
pub fn partition(
    store: &Store,
    tip: gix::ObjectId,
    candidates: &[Candidate],
) -> Result<Vec<Vec<String>>> {
    let mut footprints: Vec<Vec<String>> = Vec::with_capacity(candidates.len());
    for c in candidates {
        footprints.push(footprint(store, tip, c)?);
    }
    // Union-find over runs: one shared check joins two lanes.
    let mut lane: Vec<usize> = (0..candidates.len()).collect();
    fn root(lane: &mut [usize], mut i: usize) -> usize {
        while lane[i] != i {
            lane[i] = lane[lane[i]];
            i = lane[i];
        }
        i
    }
    let untouched: Vec<usize> = (0..candidates.len())
        .filter(|&i| footprints[i].is_empty())
        .collect();
    for pair in untouched.windows(2) {
        let (a, b) = (root(&mut lane, pair[0]), root(&mut lane, pair[1]));
        lane[b] = a;
    }
    for i in 0..candidates.len() {
        for j in 0..i {
            if footprints[i].iter().any(|n| footprints[j].contains(n)) {
                let (a, b) = (root(&mut lane, j), root(&mut lane, i));
                if a != b {
                    lane[b] = a;
                }
            }
        }
    }
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let r = root(&mut lane, i);
        match out.iter_mut().find(|(k, _)| *k == r) {
            Some((_, ids)) => ids.push(c.run_id().to_string()),
            None => out.push((r, vec![c.run_id().to_string()])),
        }
    }
    Ok(out.into_iter().map(|(_, ids)| ids).collect())
}

/// The required checks `c`'s change touches (see the module docs).
fn footprint(store: &Store, tip: gix::ObjectId, c: &Candidate) -> Result<Vec<String>> {
    let checks = requirements(store, tip, std::slice::from_ref(c))?;
    let policy_changed =
        store.read_file_at(c.base, policy::PATH)? != store.read_file_at(c.head, policy::PATH)?;
    let (from, to) = (store.tree_of(c.base)?, store.tree_of(c.head)?);
    let mut out = Vec::new();
    for check in checks {
        let touched = policy_changed
            || match check.def.scope() {
                None => true,
                Some(inputs) => {
                    store.scoped_tree(from, &inputs, Materialise::HashOnly)?
                        != store.scoped_tree(to, &inputs, Materialise::HashOnly)?
                }
            };
        if touched && !out.contains(&check.name) {
            out.push(check.name);
        }
    }
    Ok(out)
}

/// Land each of `lanes` (run ids) in its own thread, with its own view of the repository,
/// adding what each did to `outcome`. A lane that fails does not stop the others; the first
/// error is returned once all have ended.
pub fn land_scopes(
    env: &Env,
    (target, squash): (&str, bool),
    opts: &LandOptions,
    lanes: Vec<Vec<String>>,
    outcome: &mut LandOutcome,
) -> Result<()> {
    // One signal guard for every lane's checks (guards dropped out of order across threads
    // would restore the wrong handlers).
    let _signals = crate::evidence::interrupt::install()?;
    // Every other lane may move the target once under each lane's feet.
    let rounds = ROUNDS + lanes.len() as u32;
    let cwd = env.cwd.clone();
    let empty = LandOutcome {
        runs: Vec::new(),
        ..outcome.clone()
    };
    let order: Vec<String> = lanes.iter().flatten().cloned().collect();
    let results: Vec<Result<LandOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .into_iter()
            .map(|ids| {
                let (cwd, mut lane) = (cwd.clone(), empty.clone());
                scope.spawn(move || -> Result<LandOutcome> {
                    let env = Env::discover(&cwd)?;
                    let store = &env.store;
                    let signer = super::signing::signer(store, opts, target)?;
                    let mut checker = Checker::new(store, opts, squash).signing(signer);
                    land_runs(store, target, ids, &mut checker, &mut lane, rounds)?;
                    lane.checks_run = checker.checks_run;
                    lane.checks_reused = checker.checks_reused;
                    lane.validations = checker.validations;
                    lane.executions = std::mem::take(&mut checker.executions);
                    Ok(lane)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("a landing lane panicked")))
            })
            .collect()
    });
    let mut first_error = None;
    let mut runs = Vec::new();
    for result in results {
        match result {
            Ok(lane) => {
                runs.extend(lane.runs);
                outcome.checks_run += lane.checks_run;
                outcome.checks_reused += lane.checks_reused;
                outcome.validations += lane.validations;
                outcome.executions.extend(lane.executions);
                outcome.rounds += lane.rounds;
                if lane.mode != crate::model::run::PromotionMode::Ref {
                    outcome.mode = lane.mode;
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    // In queue order, as a landing of one lane reports them.
    runs.sort_by_key(|r| order.iter().position(|id| *id == r.run_id));
    outcome.runs.extend(runs);
    Ok(())
}
