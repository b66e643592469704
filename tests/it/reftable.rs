//! The reftable pass: the same tests again, on repositories with reftable ref storage. Each
//! module below is the very file of the files pass, compiled a second time under
//! `reftable::`; the test helper sees that path in the name of the test's thread and creates
//! its repositories with `--ref-format=reftable` ([`crate::util::ref_format`]).
//!
//! Not here: modules that build a torn files-backend state by hand (lock files under
//! `.git/refs/`, a loose ref written directly: `recovery`, `refusals`, `hardening2`), which a
//! reftable repository cannot be in.

// Loading each file twice is the point: one body, two ref formats.
#![allow(clippy::duplicate_mod)]

#[path = "approvals.rs"]
mod approvals;
#[path = "crash.rs"]
mod crash;
#[path = "export.rs"]
mod export;
#[path = "hardening.rs"]
mod hardening;
#[path = "hardening3.rs"]
mod hardening3;
#[path = "harness.rs"]
mod harness;
#[path = "hooks.rs"]
mod hooks;
#[path = "land.rs"]
mod land;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "plans.rs"]
mod plans;
#[path = "promote.rs"]
mod promote;
#[path = "pull.rs"]
mod pull;
#[path = "sync.rs"]
mod sync;
#[path = "trust.rs"]
mod trust;
#[path = "verify.rs"]
mod verify;
