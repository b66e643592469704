//! `land --until-empty`: a queue of agent runs drained without a person — conflicts and a
//! semantic culprit reopened, repaired by the runs' own (scripted, deterministic) agent, landed
//! — and a drain killed at random points converging when run again.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::land::run_json;
use crate::util::*;

/// The scripted agent: on its first run in a run's worktree it writes the run's file; on
/// every run it resolves conflict markers by one fixed rule (keep both sides, in order); with
/// `fix` it deletes `bad.txt` from its third run on (the culprit's second repair round). Each
/// run appends `<n> seeded|plain` to `<state>/<run>.log`: `seeded` when its context packet
/// carried the repair seed (the reopen, with what landed since the old base).
const AGENT: &str = r###"
import os, sys, pathlib
state, mode, name, content = sys.argv[1:5]
run = os.path.basename(os.getcwd())
log = pathlib.Path(state) / (run + ".log")
n = (len(log.read_text().splitlines()) if log.exists() else 0) + 1
ctx = open(os.environ["TABELLIO_CONTEXT"]).read() if "TABELLIO_CONTEXT" in os.environ else ""
seeded = "## Reopened" in ctx and "landed on the target since the old base" in ctx
with open(log, "a") as f:
    f.write("%d %s\n" % (n, "seeded" if seeded else "plain"))
if n == 1:
    pathlib.Path(name).write_text(content + "\n")
for p in pathlib.Path(".").rglob("*"):
    if ".git" in p.parts or not p.is_file():
        continue
    text = p.read_text(errors="ignore")
    if "<<<<<<< " in text:
        keep = [l for l in text.splitlines(True) if not l.startswith(("<<<<<<<", "=======", ">>>>>>>"))]
        p.write_text("".join(keep))
if mode == "fix" and n >= 3 and os.path.exists("bad.txt"):
    os.remove("bad.txt")
"###;

/// The ten runs, in the order they complete (and land): `r00` adds `f0.txt`; three pairs
/// write the same new file (the second of each pair conflicts); `r09` adds `bad.txt`, which
/// fails the check once `f0.txt` is under it.
const RUNS: [(&str, &str, &str); 10] = [
    ("r00", "f0.txt", "zero"),
    ("r01", "x.txt", "x from r01"),
    ("r02", "y.txt", "y from r02"),
    ("r03", "z.txt", "z from r03"),
    ("r04", "p4.txt", "four"),
    ("r05", "x.txt", "x from r05"),
    ("r06", "y.txt", "y from r06"),
    ("r07", "z.txt", "z from r07"),
    ("r08", "p8.txt", "eight"),
    ("r09", "bad.txt", "bad"),
];

/// A repository whose `main` requires `check` (fails when `bad.txt` and `f0.txt` both exist),
/// and the ten runs completed by their loops; the agent's state directory.
fn queue(mode: &str) -> (TestEnv, PathBuf) {
    queue_of(&RUNS, mode)
}

/// [`queue`] with these runs.
fn queue_of(runs: &[(&str, &str, &str)], mode: &str) -> (TestEnv, PathBuf) {
    let t = TestEnv::ref_only();
    let code = "import os\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)";
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("check", &["python3", "-c", code])]));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let state = t.path().join("agent-state");
    std::fs::create_dir_all(&state).unwrap();
    let agent = t.path().join("agent.py");
    write_file(&agent, AGENT);
    for &(id, file, content) in runs {
        t.tab(&[
            "start",
            id,
            "--task",
            &format!("write {file}"),
            "--base",
            "main",
            "--actor",
            "agent:scripted",
        ])
        .ok();
        let r = t.tab(&[
            "loop",
            id,
            "--",
            "python3",
            agent.to_str().unwrap(),
            state.to_str().unwrap(),
            mode,
            file,
            content,
        ]);
        assert_eq!(r.code, 0, "{}", r.desc);
    }
    (t, state)
}

/// Agent runs so far, per run, from the agent's own log.
fn agent_runs(state: &Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(state.join(format!("{id}.log")))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// `land --until-empty` of main, one run a batch: every landed run is a stack top, validated
/// on the tree it lands as.
fn drain(t: &TestEnv) -> Run {
    t.tab(&DRAIN)
}

const DRAIN: [&str; 7] = [
    "--json",
    "land",
    "--until-empty",
    "--target",
    "main",
    "--batch",
    "1",
];

fn drained(j: &Value, id: &str) -> Value {
    j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in {j}"))
}

/// Every landed run's landed commit has passing evidence for the required check on its tree.
#[track_caller]
fn landed_with_fresh_evidence(t: &TestEnv, id: &str) {
    let run = run_json(t, id);
    assert_eq!(run["state"], "promoted", "{id}: {run}");
    let landed = run["landed"].as_str().unwrap();
    let r = t.tab(&["verify", landed]);
    assert_eq!(
        r.code, 0,
        "{id} landed as {landed} without evidence\n{}",
        r.desc
    );
    let on = t.git(&["merge-base", "--is-ancestor", landed, "main"]);
    assert_eq!(on.code, 0, "{id} landed as {landed}, not on main");
}

#[test]
fn ten_runs_with_conflicts_and_a_culprit_land_without_a_person() {
    let (t, state) = queue("fix");
    let before: Vec<usize> = RUNS.iter().map(|r| agent_runs(&state, r.0).len()).collect();
    // One command, no person.
    let r = drain(&t);
    assert_eq!(r.code, 0, "{}", r.desc);
    let j = r.json();
    for (i, (id, _, _)) in RUNS.iter().enumerate() {
        landed_with_fresh_evidence(&t, id);
        let d = drained(&j, id);
        assert_eq!(d["state"], "promoted", "{d}");
        let rounds = d["rounds"].as_u64().unwrap();
        assert!(rounds <= 2, "{id}: {rounds} rounds");
        let ran = agent_runs(&state, id).len() - before[i];
        assert_eq!(d["agent_invocations"], ran as u64, "{id}: {d}");
        // Each repair run of the agent had the seed in its context.
        for line in &agent_runs(&state, id)[before[i]..] {
            assert!(line.ends_with("seeded"), "{id}: {line}");
        }
    }
    for id in ["r05", "r06", "r07"] {
        assert_eq!(drained(&j, id)["rounds"], 1, "{id}: {j}");
        let x = t.git_out(&[
            "show",
            &format!("main:{}", RUNS[id[1..].parse::<usize>().unwrap()].1),
        ]);
        assert!(!x.contains("<<<<<<<") && x.lines().count() == 2, "{x}");
    }
    let culprit = drained(&j, "r09");
    assert_eq!(culprit["rounds"], 2, "{j}");
    assert!(culprit["check_executions"].as_u64().unwrap() >= 2, "{j}");
    assert!(t.git(&["cat-file", "-e", "main:bad.txt"]).code != 0);
    // The culprit's whole path is in its ledger, readable by stock git.
    let log = t.git_out(&["log", "--reverse", "--format=%s", "refs/tabellio/runs/r09"]);
    let steps: Vec<&str> = log.lines().collect();
    let at = |needle: &str| {
        steps
            .iter()
            .position(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{log}"))
    };
    let refused = at("land r09: completed -> validation_failed");
    let reopened = at("land r09: validation_failed -> reopened");
    let completed = steps
        .iter()
        .rposition(|s| s.ends_with("-> completed"))
        .unwrap();
    let promoted = at("-> promoted");
    assert!(
        refused < reopened && reopened < completed && completed < promoted,
        "{log}"
    );
    t.tab(&["verify", "main"]).ok();
    t.fsck();
}

#[test]
fn an_agent_that_never_fixes_is_stopped_after_its_repair_rounds() {
    let (t, state) = queue("never");
    let before: usize = RUNS.iter().map(|r| agent_runs(&state, r.0).len()).sum();
    let r = drain(&t);
    assert_eq!(r.code, 1, "{}", r.desc);
    let j = r.json();
    let culprit = run_json(&t, "r09");
    assert_eq!(culprit["state"], "blocked", "{culprit}");
    assert_eq!(culprit["loop"]["why_harness_stopped"], "repair_exhausted");
    assert_eq!(culprit["repair"]["rounds"], 2, "{culprit}");
    assert!(culprit["reason"]
        .as_str()
        .unwrap()
        .contains("repair_exhausted"));
    assert_eq!(drained(&j, "r09")["rounds"], 2);
    for (id, _, _) in &RUNS[..9] {
        landed_with_fresh_evidence(&t, id);
    }
    // 4 runs were refused (three conflicts and the culprit).
    let ran: usize = RUNS
        .iter()
        .map(|r| agent_runs(&state, r.0).len())
        .sum::<usize>()
        - before;
    assert!(ran <= 3 * 4, "{ran} agent runs");
    let (_, st) = t.tab_json(&["status", "r09"]);
    assert_eq!(st["next_action"]["action"], "review", "{st}");
    // Run again: nothing left to do, nothing changes.
    let refs = t.snapshot();
    let r = drain(&t);
    assert_eq!(r.code, 1, "{}", r.desc);
    assert_eq!(t.snapshot(), refs);
    t.fsck();
}

/// Trials of the killed drain: `TABELLIO_CRASH_TRIALS` (50 for a thorough run), else a number
/// CI affords.
fn drain_trials() -> u32 {
    std::env::var("TABELLIO_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
}

/// A drain of four runs (a conflict and the culprit among them) killed (SIGKILL) anywhere —
/// landing, reopening, in a repair loop — then run again: it converges, every run lands once,
/// none is lost, the target verifies and `git fsck --strict` is clean.
#[test]
fn a_drain_killed_anywhere_converges_when_run_again() {
    let runs = [RUNS[0], RUNS[1], RUNS[5], RUNS[9]];
    let span = {
        let (t, _) = queue_of(&runs, "fix");
        let started = std::time::Instant::now();
        drain(&t).ok();
        (started.elapsed().as_millis() as u64).max(1)
    };
    let mut reruns_needed = Vec::new();
    for round in 0..drain_trials() {
        let (t, _) = queue_of(&runs, "fix");
        let base = t.git_out(&["rev-parse", "main"]);
        let mut child = t.spawn_tab(&DRAIN[1..]);
        std::thread::sleep(crate::crash::random_delay_up_to(round, span * 3 / 2));
        let _ = child.kill();
        let _ = child.wait();
        // Run again (removing a stale lock it names, waiting for a loop lock a process the
        // killed drain started still holds): the run after converges.
        let mut reruns = 0;
        let r = loop {
            reruns += 1;
            let r = crate::crash::with_stale_locks_removed(&t, &DRAIN[1..]);
            if r.code == 0 || reruns == 3 {
                break r;
            }
            eprintln!(
                "round {round}: rerun {reruns} did not converge:\n{}",
                r.stdout
            );
            // The documented wait: a process the killed drain started (its agent, a check)
            // holds the run's loop lock until it ends; `fuser` names it.
            let message = r.json()["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Some((_, held)) = message.split_once("(it holds ") {
                let lock = held.trim_end_matches(')');
                let holders = t.command("fuser", t.path(), &["-v", lock]);
                eprintln!("round {round}: {lock} held by:\n{}", holders.stderr);
                t.command("flock", t.path(), &["-w", "60", lock, "true"])
                    .ok();
            }
        };
        assert_eq!(r.code, 0, "round {round}: {}", r.desc);
        reruns_needed.push(reruns);
        let main = t.git_out(&["rev-parse", "main"]);
        // Each file added once; x.txt changed once more (r05 after its repair): nothing
        // landed twice, nothing lost.
        let commits = |filter: &str, file: &str| {
            t.git_out(&[
                "log",
                "--format=%H",
                &format!("--diff-filter={filter}"),
                &format!("{base}..{main}"),
                "--",
                file,
            ])
            .lines()
            .count()
        };
        for (id, file, _) in runs {
            landed_with_fresh_evidence(&t, id);
            assert_eq!(commits("A", file), 1, "round {round}: {id}'s {file}");
        }
        assert_eq!(commits("M", "x.txt"), 1, "round {round}: x.txt");
        assert!(t.git(&["cat-file", "-e", "main:bad.txt"]).code != 0);
        t.tab(&["verify", "main"]).ok();
        t.fsck();
    }
    eprintln!("reruns needed per trial: {reruns_needed:?}");
}

/// A culprit a plain `land` refused, with a stale lock a killed process left on its branch:
/// the drain stops on the lock (exit 4, naming it) rather than calling it the run's failure,
/// and once the lock is removed, as the message says, it repairs and lands the run.
#[test]
fn a_stale_lock_on_a_refused_run_stops_the_drain_until_removed() {
    // A reftable repository locks its whole table list, not one ref.
    if ref_format() == "reftable" {
        return;
    }
    let runs = [RUNS[0], RUNS[9]];
    let (t, _) = queue_of(&runs, "fix");
    let r = t.tab(&["--json", "land", "--target", "main", "--batch", "1"]);
    let culprit = run_json(&t, "r09");
    assert_eq!(
        culprit["state"], "validation_failed",
        "{}\n{culprit}",
        r.desc
    );
    let lock = t.repo.join(".git/refs/heads/tabellio/r09.lock");
    write_file(&lock, "");
    let refs = t.snapshot();
    let r = drain(&t);
    assert_eq!(r.code, 4, "{}", r.desc);
    let error = &r.json()["error"];
    assert!(
        error["message"].as_str().unwrap().contains("r09.lock"),
        "{error}"
    );
    assert!(error["hint"].as_str().unwrap().contains("rm "), "{error}");
    assert_eq!(t.snapshot(), refs, "{}", r.desc);
    let r = crate::crash::with_stale_locks_removed(&t, &DRAIN[1..]);
    assert_eq!(r.code, 0, "{}", r.desc);
    landed_with_fresh_evidence(&t, "r09");
}
