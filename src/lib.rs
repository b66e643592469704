//! git-tabellio: runs, checkpoints and validation evidence kept inside git, and promotion of
//! exactly-validated commits.
//!
//! The library does the work and returns typed outcomes; it never prints. `main.rs` parses the
//! command line, calls in here and renders the result. Arrows go one way:
//! cli → lifecycle → store/model.
//!
//! `unsafe` code lives in [`sys`] alone; everywhere else the compiler refuses it.

#![deny(unsafe_code)]

pub mod demo;
pub mod error;
pub mod evidence;
pub mod export;
pub mod harness;
pub mod model;
pub mod store;

pub use error::{Error, ErrorKind, Result};
pub mod hooks;
pub mod lifecycle;
pub mod plans;
pub mod report;
pub mod run;
pub mod runner;
pub mod sync;
#[allow(unsafe_code)]
pub mod sys;
pub mod trust;
pub mod verify;
