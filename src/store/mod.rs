//! Git-native storage: the repository handle, ref transactions, run ledgers and notes.
//!
//! Everything durable is a git object reachable from a ref. Every ref write is compare-and-swap
//! and writes that belong together go through one [`tx::apply`] call, which is all-or-nothing
//! (gix-ref locks every ref first, checks every expected value, then commits). Objects written
//! before a failed transaction are unreachable garbage that `git gc` removes; they are never
//! visible through a ref.

pub mod backoff;
pub mod diff;
pub mod git_cli;
pub mod identity;
pub mod ledger;
pub mod merge;
pub mod notes;
pub mod notes_view;
pub mod paths;
pub mod policy;
pub mod publish;
pub mod remote;
pub mod replay;
pub mod repo;
pub mod tx;
pub mod worktree;

pub use repo::Store;
