//! One integration-test binary (link time on 2 cores): modules per area driving the built
//! `git-tabellio` binary against real repositories, and the `lib_*` modules calling the library
//! in-process (the quick suite: `cargo test --test it lib_`).

// Some tests call libc directly (signals to real processes, a pseudo-terminal): the crate's
// lint policy denies `unsafe` elsewhere (`Cargo.toml`, `[lints]`).
#![allow(unsafe_code)]

#[path = "../support/hermetic.rs"]
mod hermetic;

mod advice;
mod approvals;
mod blame;
mod caps;
mod completion;
mod corruption;
mod crash;
mod docs;
mod drain;
mod exit_codes;
mod export;
mod fixtures;
mod fleet;
mod gc;
mod git_environment;
mod harness;
mod help;
mod hooks;
mod inputs;
mod land;
mod lanes;
mod layers;
mod ledger;
mod lib_env;
mod lib_evidence;
mod lib_promote;
mod lib_status;
mod lifecycle;
mod loop_agent;
mod newer_records;
mod output;
mod plan_completion;
mod plans;
mod promote;
mod provenance;
mod pull;
mod queue;
mod recovery;
mod reftable;
mod refusals;
mod reopen;
mod replacements;
mod report;
mod rewind;
mod runner;
mod scratch;
mod secrets;
mod servers;
mod signing;
mod storage;
mod sync;
mod terminal;
mod trust;
mod unreadable_refs;
mod util;
mod verdicts;
mod verify;
mod worktrees;

/// Every `.rs` file next to this one is declared as a module above: a file that is not is never
/// compiled, so its tests would silently never run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("read tests/it/main.rs");
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut forgotten = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read tests/it") {
        let path = entry.expect("read a tests/it entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs")
            && stem != "main"
            && !declared.contains(&stem)
        {
            forgotten.push(stem.to_string());
        }
    }
    forgotten.sort();
    assert!(
        forgotten.is_empty(),
        "files in tests/it that are not modules of tests/it/main.rs (add `mod <name>;`): {forgotten:?}"
    );
}
