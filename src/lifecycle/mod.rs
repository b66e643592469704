//! The run lifecycle: start, checkpoint, finish, status, promote, abandon, cleanup, list, log,
//! evidence: one file (or folder) per operation. Runs are found and advanced through
//! [`crate::run`].
//!
//! Every command checks all of its preconditions before its first write, then writes through one
//! compare-and-swap transaction (see [`crate::store::tx`]). A refused command leaves refs,
//! worktrees and files exactly as they were.

pub mod abandon;
pub mod approve;
pub mod checkpoint;
pub mod checks;
pub mod finish;
pub mod land;
pub mod manage;
pub mod plans;
pub mod promote;
pub mod start;
pub mod status;
