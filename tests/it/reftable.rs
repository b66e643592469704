//! The reftable pass: the same tests again, on repositories with reftable ref storage. Each
//! module below is the very file of the files pass, compiled a second time under
//! `reftable::`; the test helper sees that path in the name of the test's thread and creates
//! its repositories with `--ref-format=reftable` ([`crate::util::ref_format`]).

// Loading each file twice is the point: one body, two ref formats.
#![allow(clippy::duplicate_mod)]

#[path = "crash.rs"]
mod crash;
#[path = "hooks.rs"]
mod hooks;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "promote.rs"]
mod promote;
#[path = "sync.rs"]
mod sync;
