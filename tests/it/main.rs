//! One integration-test binary (link time on 2 cores): modules per area, all driving the built
//! `git-tabellio` binary against real repositories.

mod docs;
mod export;
mod fixtures;
mod harness;
mod help;
mod hooks;
mod lifecycle;
mod plans;
mod promote;
mod recovery;
mod refusals;
mod runner;
mod storage;
mod sync;
mod util;
mod verify;
