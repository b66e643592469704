//! Waiting before the next attempt after losing a race on a ref: exponential with jitter, so
//! writers that collided spread out instead of colliding again in lockstep.
//!
//! The wait is `base + jitter` with `base = first << min(round, max_doublings)` and the jitter
//! below `base`, so it never exceeds twice the largest base. It only sleeps; it cannot fail.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One backoff schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The base of round 0.
    pub first: Duration,
    /// Rounds after this many no longer double the base.
    pub max_doublings: u32,
}

/// Local writers racing on a notes ref: their transactions take milliseconds.
pub const LOCAL_REFS: Backoff = Backoff {
    first: Duration::from_millis(5),
    max_doublings: 7,
};

/// Clones racing through a remote: each round is a fetch and a push.
pub const REMOTE_ROUNDS: Backoff = Backoff {
    first: Duration::from_millis(40),
    max_doublings: 6,
};

impl Backoff {
    /// How long to wait before attempt `round + 1`.
    pub fn delay(self, round: u32) -> Duration {
        let base = self.first * (1u32 << round.min(self.max_doublings));
        let base_nanos = u64::try_from(base.as_nanos()).unwrap_or(u64::MAX).max(1);
        base + Duration::from_nanos(jitter(round) % base_nanos)
    }

    /// Sleep for [`Backoff::delay`].
    pub fn sleep(self, round: u32) {
        std::thread::sleep(self.delay(round));
    }
}

/// Differs between processes (pid) and between calls (clock), without a random generator.
fn jitter(round: u32) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    (nanos ^ u64::from(std::process::id()).wrapping_mul(2_654_435_761))
        .wrapping_add(u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_up_to_a_cap_and_jitters_below_its_base() {
        for round in 0..12 {
            let base = Duration::from_millis(5 << round.min(7));
            let delay = LOCAL_REFS.delay(round);
            assert!(
                delay >= base && delay < base * 2,
                "round {round}: {delay:?}"
            );
        }
        let last = REMOTE_ROUNDS.delay(100);
        assert!(last >= Duration::from_millis(40 << 6), "{last:?}");
        assert!(last < Duration::from_millis(80 << 6), "{last:?}");
    }
}
