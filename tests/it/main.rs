//! One integration-test binary (link time on 2 cores): modules per area, all driving the built
//! `git-tabellio` binary against real repositories.

mod export;
mod fixtures;
mod harness;
mod hooks;
mod lifecycle;
mod plans;
mod promote;
mod pull;
mod recovery;
mod refusals;
mod runner;
mod scratch;
mod secrets;
mod storage;
mod sync;
mod util;
mod verify;
