//! The operating-system edge: the only module allowed to use `unsafe`.
//!
//! Everything here is a small, safe wrapper around one family of system calls: [`signals`]
//! (forwarding SIGINT/SIGTERM/SIGHUP to the process groups of our children), [`process`]
//! (child process groups, waiting without reaping, the one `/proc` scan) and [`flock`]
//! (advisory file locks). Each `unsafe` block carries a `SAFETY` comment; callers above this
//! layer see only safe functions that report failures as `std::io::Error` (or, where failure
//! cannot matter, document that they are best effort). Unix only; the `/proc` scan is Linux
//! only and finds nothing elsewhere.

pub mod flock;
pub mod process;
pub mod signals;
