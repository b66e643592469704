//! The run lifecycle: start, checkpoint, finish, status, promote, abandon, cleanup, list, log,
//! evidence, blame: one file (or folder) per operation. Runs are found and advanced through
//! [`crate::run`].
//!
//! Every command checks all of its preconditions before its first write, then writes through one
//! compare-and-swap transaction (see [`crate::store::tx`]). A refused command leaves refs,
//! worktrees and files exactly as they were.

pub mod abandon;
pub mod approve;
pub mod blame;
pub mod checkpoint;
pub mod checks;
pub mod enqueue;
pub mod finish;
pub mod gc;
pub mod land;
pub mod land_stats;
pub mod manage;
pub mod plans;
pub mod promote;
pub mod queue;
pub mod reopen;
pub mod rewind;
pub mod start;
pub mod status;
pub mod worker;
