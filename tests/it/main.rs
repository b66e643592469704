//! One integration-test binary (link time on 2 cores): modules per area, all driving the built
//! `git-tabellio` binary against real repositories.

mod lifecycle;
mod refusals;
mod runner;
mod storage;
mod util;
