//! Which candidate stacks to validate at once: parallel bisection over prefixes.
//!
//! The queue's first `N` runs are stacked on the tip; the notes already say of some prefixes
//! that they pass or fail (a stack's verdict is its tree's, whoever validated it). From that:
//!
//! - nothing fails yet: the `W` prefixes that split the unknown part evenly, the whole queue
//!   always among them, so a passing whole lands in one round and a failure is narrowed to a
//!   segment of about `N / W` runs;
//! - the smallest failing prefix is `f` and the largest passing one below it `p`: the culprit
//!   is in `(p, f]`. The unknown prefixes inside are split as above, and beside them, for each
//!   suspect `s`, the queue without `s` — the stack that lands if `s` is the culprit. With
//!   `N <= 2W` the segment has at most two runs, so the next round both names the culprit and
//!   has validated what lands after it.
//!
//! The stack `land` itself is waiting for comes first. Stacks whose verdict is known are left
//! out; at most `W` are returned.

use crate::error::Result;
use crate::model::policy::ResolvedCheck;
use crate::store::Store;

use crate::evidence::known::{tree_verdict, Known};

/// A stack to validate: run ids in order (empty: the tip itself).
pub type Runs = Vec<String>;

/// What the planner needs to know of a stack: its tree and the checks it must pass.
pub trait Stacks {
    /// The tree of `runs` stacked on the tip and its checks; `None` when it cannot be stacked
    /// (a conflict: such a run never lands in this order, and `land` records why).
    fn tree(&mut self, runs: &[String]) -> Result<Option<(gix::ObjectId, Vec<ResolvedCheck>)>>;
}

/// The verdict of `runs` as the notes give it (`Unknown` for a stack that cannot be built).
fn verdict(store: &Store, stacks: &mut impl Stacks, runs: &[String]) -> Result<Known> {
    Ok(match stacks.tree(runs)? {
        Some((tree, checks)) => tree_verdict(store, tree, &checks)?,
        None => Known::Unknown,
    })
}

/// The smallest prefix of `queue` whose stack the notes say fails, if any.
pub fn smallest_failing(
    store: &Store,
    stacks: &mut impl Stacks,
    queue: &[String],
) -> Result<Option<Runs>> {
    for k in 1..=queue.len() {
        if verdict(store, stacks, &queue[..k])? == Known::Fail {
            return Ok(Some(queue[..k].to_vec()));
        }
    }
    Ok(None)
}

/// What the notes say of the queue's prefixes so far: the smallest failing one (its length)
/// and the largest passing one below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The largest passing prefix (below `fail`); 0: none, the tip itself.
    pub pass: usize,
    /// The smallest failing prefix, if any.
    pub fail: Option<usize>,
}

impl Bounds {
    /// Could the verdict of the stack of `runs` still change what the next round plans for
    /// `queue`? Not when it begins with the smallest failing prefix (it is taken to fail, as
    /// bisection assumes), nor when it is a prefix no longer than the largest passing one
    /// (bisection never asks below a passing prefix).
    pub fn matters(&self, queue: &[String], runs: &[String]) -> bool {
        if let Some(f) = self.fail {
            if runs.starts_with(&queue[..f]) {
                return false;
            }
        }
        !(runs.len() <= self.pass && queue.starts_with(runs))
    }
}

/// The [`Bounds`] of `queue`'s prefixes as the notes give them.
pub fn bounds(store: &Store, stacks: &mut impl Stacks, queue: &[String]) -> Result<Bounds> {
    let known = prefix_verdicts(store, stacks, queue)?;
    Ok(bounds_of(&known))
}

/// The verdict of every prefix of `queue` (index: its length; the empty one passes).
fn prefix_verdicts(
    store: &Store,
    stacks: &mut impl Stacks,
    queue: &[String],
) -> Result<Vec<Known>> {
    let mut known = vec![Known::Unknown; queue.len() + 1];
    known[0] = Known::Pass;
    for (k, slot) in known.iter_mut().enumerate().skip(1) {
        *slot = verdict(store, stacks, &queue[..k])?;
    }
    Ok(known)
}

fn bounds_of(known: &[Known]) -> Bounds {
    let n = known.len() - 1;
    let fail = (1..=n).find(|&k| known[k] == Known::Fail);
    let below = fail.unwrap_or(n + 1);
    let pass = (0..below)
        .rev()
        .find(|&k| known[k] == Known::Pass)
        .unwrap_or(0);
    Bounds { pass, fail }
}

/// `k` points spread evenly over `(lo, hi]` (`hi` included when `include_hi`).
fn spread(lo: usize, hi: usize, k: usize, include_hi: bool) -> Vec<usize> {
    let width = hi - lo;
    if width == 0 || k == 0 {
        return Vec::new();
    }
    let parts = if include_hi { k } else { k + 1 };
    let mut out: Vec<usize> = (1..=k)
        .map(|i| lo + (i * width).div_ceil(parts))
        .filter(|&x| x > lo && (x < hi || (include_hi && x == hi)))
        .collect();
    out.dedup();
    out
}

/// The stacks to validate next, at most `lanes`, the `pending` one first.
pub fn plan(
    store: &Store,
    stacks: &mut impl Stacks,
    queue: &[String],
    pending: &[String],
    lanes: usize,
) -> Result<Vec<Runs>> {
    let n = queue.len();
    let Bounds { pass: p, fail } = bounds_of(&prefix_verdicts(store, stacks, queue)?);
    let mut want: Vec<Runs> = vec![pending.to_vec()];
    match fail {
        None => {
            for k in spread(p, n, lanes, true) {
                want.push(queue[..k].to_vec());
            }
        }
        Some(f) => {
            let suspects: Vec<usize> = (p + 1..=f).collect();
            let room = lanes.saturating_sub(suspects.len()).max(1);
            for k in spread(p, f, room, false) {
                want.push(queue[..k].to_vec());
            }
            for s in suspects {
                let without: Runs = queue
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i + 1 != s)
                    .map(|(_, r)| r.clone())
                    .collect();
                want.push(without);
            }
        }
    }
    let mut out: Vec<Runs> = Vec::new();
    for runs in want {
        if out.len() >= lanes.max(1) {
            break;
        }
        if out.contains(&runs) || verdict(store, stacks, &runs)? != Known::Unknown {
            continue;
        }
        if stacks.tree(&runs)?.is_none() {
            continue;
        }
        out.push(runs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{bounds_of, spread, Bounds};
    use crate::evidence::known::Known;

    fn runs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bounds_decide_which_verdicts_still_matter() {
        use Known::{Fail, Pass, Unknown};
        // Prefixes 2 and 4 pass, 6 and 8 fail: the culprit is run 5 or 6.
        let known = [
            Pass, Unknown, Pass, Unknown, Pass, Unknown, Fail, Unknown, Unknown,
        ];
        let b = bounds_of(&known);
        assert_eq!(
            b,
            Bounds {
                pass: 4,
                fail: Some(6)
            }
        );
        let queue = runs(&["a", "b", "c", "d", "e", "f", "g", "h"]);
        // Below the passing prefix, or over the failing one: decided already.
        assert!(!b.matters(&queue, &queue[..2]));
        assert!(!b.matters(&queue, &queue[..4]));
        assert!(!b.matters(&queue, &queue));
        assert!(!b.matters(&queue, &runs(&["a", "b", "c", "d", "e", "f", "h"])));
        // Between them, or a stack without a suspect: still open.
        assert!(b.matters(&queue, &queue[..5]));
        assert!(b.matters(&queue, &runs(&["a", "b", "c", "d", "f", "g", "h"])));
        assert!(b.matters(&queue, &runs(&["a", "b", "c", "d", "e", "g", "h"])));
        // Nothing known: everything is open.
        let none = bounds_of(&[Pass, Unknown, Unknown]);
        assert_eq!(
            none,
            Bounds {
                pass: 0,
                fail: None
            }
        );
        assert!(none.matters(&queue[..2], &queue[..1]));
        // A passing prefix above a failing one does not count (bisection blames below it).
        let odd = bounds_of(&[Pass, Unknown, Fail, Pass]);
        assert_eq!(
            odd,
            Bounds {
                pass: 0,
                fail: Some(2)
            }
        );
    }

    #[test]
    fn spread_splits_the_range_evenly() {
        assert_eq!(spread(0, 8, 4, true), [2, 4, 6, 8]);
        assert_eq!(spread(0, 8, 1, true), [8]);
        assert_eq!(spread(0, 8, 1, false), [4]);
        assert_eq!(spread(4, 6, 2, false), [5]);
        assert_eq!(spread(4, 5, 2, false), Vec::<usize>::new());
        assert_eq!(spread(0, 3, 4, true), [1, 2, 3]);
    }
}
