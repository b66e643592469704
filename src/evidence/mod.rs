//! Evidence: what a commit can prove, and how that proof is made, read and judged.
//!
//! An evidence record proves that one check, with one definition (its argv and timeout,
//! digested), ran on one commit or tree and passed or failed, and what it printed (capped and
//! redacted). The record is sealed by its own digest and noted on the commit and on its tree
//! in `refs/notes/tabellio/evidence`.
//!
//! What is never trusted: the run ledger alone (its `validated` and attempts say what was run,
//! never that it still holds); a record whose digest does not match its body (`tampered`); a
//! digest without the body it seals; a record naming another commit and tree; a record made
//! with another definition of the check than the policy has now (`stale-check`); a record of a
//! schema this tool cannot read (it never satisfies); who wrote the note.
//!
//! - [`read`]: the one reader of the records on a commit and its tree.
//! - [`requirements`]: the one rule for what a run head, a promotion and `verify` must prove.
//! - [`judge`]: the verdict on each requirement.
//! - [`produce`]: resolve checks and run them into sealed records.
//! - [`sign`]: sign sealed records (`--sign-key`, git's `user.signingKey`).
//! - [`scope`]: declared inputs — records keyed to the tree restricted to a check's inputs.
//! - [`applies`]: which required checks a change needs where it lands, and how each stands.
//!
//! The record types live in [`crate::model::evidence`].

pub mod applies;
pub mod detached;
pub mod explain;
pub mod history;
pub mod interrupt;
pub mod judge;
pub mod known;
pub mod produce;
pub mod read;
pub mod report;
pub mod requirements;
pub mod reuse;
pub mod scope;
pub mod sign;
pub mod tree_judge;
pub mod verifier;
