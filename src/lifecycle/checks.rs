//! `checks`: what the recorded evidence says about each check — executions, flake rate, mean
//! duration — read from `refs/notes/tabellio/evidence` alone (no check runs). A check whose
//! definition changed has one history per definition digest; the one the policy at `rev`
//! defines is marked `in_policy`, with its `max_flake_rate` and whether it is over it.

use serde::Serialize;

use crate::error::Result;
use crate::evidence::history::{CheckStats, History, FLAKE_WINDOW, MIN_MEASURED};
use crate::model::policy::Rate;
use crate::run::Env;
use crate::store::policy::{policy_at, trust_at};

/// One check definition's history, and what the policy says of it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    #[serde(flatten)]
    pub stats: CheckStats,
    /// The policy at `rev` defines the check with this digest.
    pub in_policy: bool,
    pub max_flake_rate: Option<f64>,
    /// Measured over the budget: `land` refuses what the check says (`flake budget exceeded`).
    pub over_budget: bool,
}

/// What `checks` found.
#[derive(Debug, Clone, Serialize)]
pub struct ChecksOutcome {
    /// The commit whose policy was read.
    pub policy_from: String,
    /// How many of the latest executions a flake rate is measured over, and from how many on
    /// it counts.
    pub window: usize,
    pub min_measured: usize,
    pub checks: Vec<CheckReport>,
}

/// The history of every check (or only `names`), judged by the policy at `rev`.
pub fn checks(env: &Env, rev: &str, names: &[String]) -> Result<ChecksOutcome> {
    let store = &env.store;
    let at = store.resolve_commit(rev)?;
    let policy = policy_at(store, at).map_err(crate::error::Error::from)?;
    let trust = trust_at(store, at).map_err(crate::error::Error::from)?;
    let history = History::read(store, trust.as_ref())?;
    let mut out = Vec::new();
    for stats in history.all() {
        if !names.is_empty() && !names.contains(&stats.name) {
            continue;
        }
        let def = policy
            .as_ref()
            .and_then(|p| p.checks.get(&stats.name))
            .filter(|d| d.digest() == stats.digest);
        let max_flake_rate = def.and_then(|d| d.max_flake_rate).map(|Rate(r)| r);
        out.push(CheckReport {
            in_policy: def.is_some(),
            over_budget: max_flake_rate.is_some_and(|m| stats.measured && stats.flake_rate > m),
            max_flake_rate,
            stats,
        });
    }
    for name in names {
        if !out.iter().any(|c| &c.stats.name == name) {
            return Err(crate::error::Error::not_found(format!(
                "no execution of a check named {name:?} is recorded"
            ))
            .hint("`git tabellio checks` lists every check with recorded executions"));
        }
    }
    Ok(ChecksOutcome {
        policy_from: at.to_string(),
        window: FLAKE_WINDOW,
        min_measured: MIN_MEASURED,
        checks: out,
    })
}
