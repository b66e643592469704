//! Independent landing against whole-tree checks: 10 queued runs, 5 under `a/` and 5 under
//! `b/`, one culprit under `a/` (it fails once another `a/` run is under it); checks `t_a`
//! (reads `a/`) and `t_b` (reads `b/`), each sleeping `T` while `land` runs. Once with declared
//! inputs (`a/**`, `b/**`), once without (whole tree). Executions are counted in files outside
//! the repository, each with the moments it started and ended; when the `b/` runs landed is read
//! from their ledger refs (the loose ref file's time). `TABELLIO_BENCH_T` sets `T` in seconds
//! (default 2).
//!
//! The checks run the Python interpreter by its own path (`sys.executable`), not through
//! `python3` on `PATH`: a version manager's shim there (pyenv's is a shell script that starts
//! several more) takes a good part of a second to start the interpreter on a loaded machine, a
//! cost of the check, not of `land`. The `b/` lane's time is printed in three parts: `land`'s
//! own until `t_b` started, `t_b` itself, and `land`'s own from `t_b`'s end until the `b/` runs
//! had landed.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Bench;

/// What one landing of the queue cost.
struct Landed {
    t_a: usize,
    t_b: usize,
    /// Seconds from the start of `land` until the first `t_b` began and until it ended.
    t_b_began: f64,
    t_b_ended: f64,
    /// Seconds from the start of `land` until every `b/` run, and every run, had landed.
    b_landed: f64,
    all_landed: f64,
    wall: Duration,
}

/// Executions of check `name`: one `start <epoch seconds>` line each, and an `end` line when
/// it ended.
fn count(dir: &Path, name: &str) -> usize {
    moments(dir, name, "start").len()
}

/// The `what` (`start` or `end`) moments of check `name`, in seconds since the epoch.
fn moments(dir: &Path, name: &str, what: &str) -> Vec<f64> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix(what)?.trim().parse().ok())
        .collect()
}

/// The Python interpreter `python3` on `PATH` runs, by its own path.
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!path.is_empty(), "python3 names no interpreter");
    path
}

/// Seconds since the epoch of an RFC 3339 UTC time as the ledger writes it.
fn epoch_seconds(at: &str) -> u64 {
    let n = |r: std::ops::Range<usize>| -> i64 { at[r].parse().expect("a ledger time") };
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Howard Hinnant's days-from-civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    (days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) as u64
}

/// Land the queue once, with `scoped` checks or whole-tree ones.
fn landing(scoped: bool, t: u64, python: &str) -> Landed {
    let b = Bench::new();
    let counts = b.dir.path().join("counts");
    std::fs::create_dir_all(&counts).unwrap();
    let sleep = b.dir.path().join("sleep");
    let check = |name: &str, fails: &str| {
        let code = format!(
            "import os, sys, time\nlog = open({:?}, 'a', buffering=1)\n\
             log.write('start %f\\n' % time.time())\n\
             os.path.exists({:?}) and time.sleep({t})\n\
             log.write('end %f\\n' % time.time())\nsys.exit(1 if {fails} else 0)",
            counts.join(name).display().to_string(),
            sleep.display().to_string(),
        );
        let mut def = serde_json::json!({"argv": [python, "-c", code], "timeout_s": 600});
        if scoped {
            def["inputs"] = serde_json::json!([format!("{}/**", &name[2..])]);
        }
        def
    };
    let policy = serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {
            "t_a": check("t_a", "os.path.exists('a/bad') and os.path.exists('a/1')"),
            "t_b": check("t_b", "not os.path.isdir('b')"),
        },
        "required": ["t_a", "t_b"],
        "protect": ["refs/heads/main"],
    });
    b.git(&["switch", "-q", "main"]);
    for dir in ["a", "b", ".tabellio"] {
        std::fs::create_dir_all(b.repo.join(dir)).unwrap();
    }
    std::fs::write(b.repo.join("a/0"), "0\n").unwrap();
    std::fs::write(b.repo.join("b/0"), "0\n").unwrap();
    std::fs::write(b.repo.join(".tabellio/policy.json"), policy.to_string()).unwrap();
    b.git(&["add", "-A"]);
    b.git(&["commit", "-q", "-m", "policy"]);
    b.git(&["switch", "-q", "bench-home"]);
    b.tab(&b.repo, &["validate", "main"]);
    // Interleaved, as they would finish; a3 is the culprit (a/bad beside a1's a/1).
    let runs = [
        ("a1", "a/1"),
        ("b1", "b/1"),
        ("a2", "a/2"),
        ("b2", "b/2"),
        ("a3", "a/bad"),
        ("b3", "b/3"),
        ("a4", "a/4"),
        ("b4", "b/4"),
        ("a5", "a/5"),
        ("b5", "b/5"),
    ];
    for (id, file) in runs {
        b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
        let wt = b.worktree(id);
        std::fs::write(wt.join(file), format!("{id}\n")).unwrap();
        b.run("git", &wt, &["add", "-A"]);
        b.run("git", &wt, &["commit", "-q", "-m", id]);
        b.tab(&wt, &["finish"]);
    }
    for name in ["t_a", "t_b"] {
        let _ = std::fs::remove_file(counts.join(name));
    }
    std::fs::write(&sleep, "").unwrap();
    let mut args = vec!["land", "--batch", "10"];
    args.extend(runs.iter().map(|(id, _)| *id));
    let start = SystemTime::now();
    let wall = b.run_any(BIN, &b.repo, &args, "");
    // When the run's ledger ref was last written (the landing transaction), to the
    // millisecond where the loose ref file says so, else in whole seconds from the ledger.
    let landed_at = |id: &str| -> f64 {
        let loose = b.repo.join(".git/refs/tabellio/runs").join(id);
        if let Ok(at) = std::fs::metadata(&loose).and_then(|m| m.modified()) {
            return at.duration_since(start).unwrap_or_default().as_secs_f64();
        }
        let run = b.git(&["show", &format!("refs/tabellio/runs/{id}:run.json")]);
        let run: serde_json::Value = serde_json::from_str(&run).expect("run.json");
        let start = start.duration_since(UNIX_EPOCH).unwrap().as_secs();
        run["promotion"]["at"].as_str().map_or(f64::INFINITY, |at| {
            epoch_seconds(at).saturating_sub(start) as f64
        })
    };
    let b_landed = runs
        .iter()
        .filter(|(id, _)| id.starts_with('b'))
        .map(|(id, _)| landed_at(id))
        .fold(0.0, f64::max);
    let since_start = |at: f64| at - start.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let t_b_began = moments(&counts, "t_b", "start")
        .first()
        .map_or(0.0, |&s| since_start(s));
    let t_b_ended = moments(&counts, "t_b", "end")
        .first()
        .map_or(0.0, |&s| since_start(s));
    let all_landed = runs
        .iter()
        .filter(|(id, _)| *id != "a3")
        .map(|(id, _)| landed_at(id))
        .fold(0.0, f64::max);
    Landed {
        t_a: count(&counts, "t_a"),
        t_b: count(&counts, "t_b"),
        t_b_began,
        t_b_ended,
        b_landed,
        all_landed,
        wall,
    }
}

use super::BIN;

/// The median time `python` takes to start and import what the checks import: the part of
/// "land, until the first `t_b`" that is the check's own start-up.
fn python_start(python: &str) -> f64 {
    let mut took: Vec<f64> = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            let ok = std::process::Command::new(python)
                .args(["-c", "import os, sys, time"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{python} does not start");
            start.elapsed().as_secs_f64()
        })
        .collect();
    took.sort_by(f64::total_cmp);
    took[took.len() / 2]
}

/// Print both landings side by side, with the targets.
pub fn scopes() {
    let t: u64 = std::env::var("TABELLIO_BENCH_T")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let python = python();
    println!("\nlanes: 10 runs (5 a/, 5 b/, one a/ culprit), checks sleeping T = {t} s:");
    println!(
        "  {:<16} {:>5} {:>5} {:>6} {:>16} {:>16} {:>9}   {:<44} b/ landing: land, first t_b, land",
        "", "t_a", "t_b", "execs", "b/ landed after", "all landed after", "land", ""
    );
    for (label, scoped, goal) in [
        (
            "declared inputs",
            true,
            "goal: <= 6 executions, b/ within 1 T",
        ),
        (
            "whole tree",
            false,
            "expected: >= 12 executions, b/ waits >= 5 T",
        ),
    ] {
        let l = landing(scoped, t, &python);
        println!(
            "  {label:<16} {:>5} {:>5} {:>6} {:>9.2} s ({:.2} T) {:>9.2} s ({:.2} T) {:>7.2} s   {goal:<44} {:.2} s + {:.2} s + {:.2} s",
            l.t_a,
            l.t_b,
            l.t_a + l.t_b,
            l.b_landed,
            l.b_landed / t as f64,
            l.all_landed,
            l.all_landed / t as f64,
            l.wall.as_secs_f64(),
            l.t_b_began,
            l.t_b_ended - l.t_b_began,
            l.b_landed - l.t_b_ended,
        );
    }
    println!(
        "  (b/ landing: land's own time until the first t_b logged its start, which includes the \
         interpreter's start-up, {:.2} s here; t_b; land's own time from t_b's end until the b/ \
         runs had landed)",
        python_start(&python)
    );
}
