//! `cargo bench --bench lanes`: landing queued runs through one bare repository, with checks
//! that sleep T seconds (`TABELLIO_BENCH_T`, default 2) and log their start and end to a file
//! outside the repositories. The lander runs no check; validators are two separate clones,
//! each running `worker --remote origin --lanes N` with its own signing key.
//!
//! For each scenario it prints the wall time, the check span (first check start to last check
//! end, in units of T: between rounds it includes the tool's own work), the check time (the
//! time at least one check was running, in T), the tool's own overhead (wall minus check time)
//! and the executions, all in one table:
//!
//! - 8 runs, no culprit, `land --lanes 4`;
//! - 8 runs, one culprit, `land --lanes 4`, then `--lanes 1`, then serial (`land --batch 1`,
//!   validating in-process one run at a time);
//! - priority: 8 runs, `--lanes 4`, a check with declared inputs, and a run outside them
//!   enqueued with `--priority` once the first four checks started: how long after its
//!   enqueue it landed (in T) and the executions in all (4 without it, plus its own);
//! - overhead: 10 and then 100 queued runs whose check is `true`, 4 workers: the tool's time
//!   per landed run (wall time: the checks take none) and its growth from 10 to 100.
//!
//! Nothing here asserts a time; docs/land.md reports the numbers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

#[path = "../tests/support/hermetic.rs"]
mod hermetic;

const BIN: &str = env!("CARGO_BIN_EXE_git-tabellio");

struct Machine {
    home: PathBuf,
    repo: PathBuf,
}

impl Machine {
    fn git(&self, args: &[&str]) -> String {
        run(hermetic::git(&self.home, &self.repo).args(args))
    }

    fn tab_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&self.repo).args(args);
        hermetic::apply(&mut cmd, &self.home);
        let dir = Path::new(BIN).parent().expect("a directory");
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", dir.display()));
        cmd
    }

    fn tab(&self, args: &[&str]) -> String {
        run(&mut self.tab_cmd(args))
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn machine(root: &Path, name: &str, clone_of: Option<&Path>) -> Machine {
    let home = root.join(format!("{name}-home"));
    std::fs::create_dir_all(&home).expect("home");
    let repo = root.join(name);
    let m = Machine { home, repo };
    let mut git = hermetic::git(&m.home, root);
    match clone_of {
        Some(server) => git.args(["clone", "-q", server.to_str().expect("utf-8"), name]),
        None => git.args(["init", "-q", "--bare", "-b", "main", name]),
    };
    run(&mut git);
    m
}

struct Outcome {
    wall: f64,
    check_span: f64,
    /// Seconds during which at least one check was running.
    check_busy: f64,
    executions: usize,
    /// Priority: seconds from its enqueue to its landing on the server.
    priority_landed: Option<f64>,
}

/// What one scenario does.
struct Scenario<'a> {
    runs: usize,
    /// Run 4 fails once run 0 is under it.
    culprit: bool,
    land: &'a [&'a str],
    /// Worker processes per validator clone (two clones); none: the lander validates.
    lanes_per_validator: Option<usize>,
    /// The check is `true` instead of the sleeping one.
    trivial: bool,
    /// A run outside the check's inputs (`f*.txt`) is enqueued with `--priority` mid-flight.
    priority: bool,
}

/// One scenario from scratch.
fn scenario(t: f64, s: &Scenario<'_>) -> Outcome {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let log = root.join("checks.log");
    let server = machine(root, "server.git", None);
    let seed = machine(root, "agents", Some(&server.repo));
    let code = format!(
        "import os, time\nt = float(os.environ.get('TABELLIO_BENCH_SLEEP', '0'))\nif t:\n    open({log:?}, 'a').write('start %f\\n' % time.time())\n    time.sleep(t)\n    open({log:?}, 'a').write('end %f\\n' % time.time())\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)",
        log = log.display().to_string()
    );
    let mut check = serde_json::json!({"argv": ["python3", "-c", code], "timeout_s": 600});
    if s.trivial {
        check = serde_json::json!({"argv": ["true"], "timeout_s": 600});
    }
    if s.priority {
        check["inputs"] = serde_json::json!(["f*.txt"]);
    }
    let policy = serde_json::json!({"schema": "tabellio.policy/v1",
        "checks": {"sleep": check},
        "required": ["sleep"], "protect": ["refs/heads/main"]});
    std::fs::create_dir_all(seed.repo.join(".tabellio")).expect("dir");
    std::fs::write(seed.repo.join(".tabellio/policy.json"), policy.to_string()).expect("policy");
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "policy"]);
    seed.git(&["push", "-q", "origin", "HEAD:main"]);
    let make_run = |id: &str, file: &str, bad: bool| {
        seed.tab(&["start", id, "--task", "bench", "--base", "main"]);
        let wt = seed.repo.join(".tabellio/worktrees").join(id);
        std::fs::write(wt.join(file), "x\n").expect("file");
        if bad {
            std::fs::write(wt.join("bad.txt"), "bad\n").expect("file");
        }
        run(hermetic::git(&seed.home, &wt).args(["add", "-A"]));
        run(hermetic::git(&seed.home, &wt).args(["commit", "-q", "-m", id]));
        seed.tab(&["finish", id]);
    };
    if s.priority {
        // Finished on an older tip: landing restacks it, and its new tree needs a worker.
        make_run("p", "p.txt", false);
        std::fs::write(seed.repo.join("README"), "moved\n").expect("file");
        seed.git(&["add", "-A"]);
        seed.git(&["commit", "-q", "-m", "main moves"]);
        seed.git(&["push", "-q", "origin", "HEAD:main"]);
    }
    let mut ids = Vec::new();
    for i in 0..s.runs {
        let id = format!("r{i}");
        make_run(&id, &format!("f{i}.txt"), s.culprit && i == 4);
        ids.push(id);
    }
    let mut enqueue = vec!["enqueue"];
    enqueue.extend(ids.iter().map(String::as_str));
    seed.tab(&enqueue);
    seed.tab(&["sync"]);
    let mut kids: Vec<Child> = Vec::new();
    if let Some(lanes) = s.lanes_per_validator {
        for n in 0..2 {
            let v = machine(root, &format!("validator{n}"), Some(&server.repo));
            let key = root.join(format!("key{n}"));
            run(Command::new("ssh-keygen").args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "validator",
                "-f",
                key.to_str().expect("utf-8"),
            ]));
            let lanes = lanes.to_string();
            let mut cmd = v.tab_cmd(&[
                "-q",
                "worker",
                "--remote",
                "origin",
                "--lanes",
                &lanes,
                "--poll",
                "0.1",
                "--sign-key",
                key.to_str().expect("utf-8"),
            ]);
            cmd.env("TABELLIO_BENCH_SLEEP", t.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            kids.push(cmd.spawn().expect("worker"));
        }
    }
    let mut cmd = seed.tab_cmd(s.land);
    cmd.env("TABELLIO_BENCH_SLEEP", t.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let lander = cmd.spawn().expect("land");
    let mut priority_landed = None;
    if s.priority {
        let starts = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.starts_with("start"))
                .count()
        };
        let until = Instant::now() + std::time::Duration::from_secs(600);
        while starts() < 4 {
            assert!(
                Instant::now() < until,
                "the first four checks never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let enqueued = Instant::now();
        seed.tab(&["enqueue", "p", "--priority", "--remote", "origin"]);
        while server
            .git(&["ls-tree", "--name-only", "main", "p.txt"])
            .is_empty()
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        priority_landed = Some(enqueued.elapsed().as_secs_f64());
    }
    let out = lander.wait_with_output().expect("land");
    let wall = started.elapsed().as_secs_f64();
    for k in &kids {
        let _ = Command::new("kill")
            .args(["-TERM", &k.id().to_string()])
            .status();
    }
    for mut k in kids {
        let _ = k.wait();
    }
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let times = |kind: &str| -> Vec<f64> {
        text.lines()
            .filter_map(|l| l.strip_prefix(kind)?.trim().parse().ok())
            .collect()
    };
    let (starts, ends) = (times("start "), times("end "));
    let first = starts.iter().cloned().fold(f64::INFINITY, f64::min);
    let last = ends.iter().cloned().fold(0.0, f64::max);
    Outcome {
        wall,
        check_span: if starts.is_empty() { 0.0 } else { last - first },
        check_busy: busy(&starts, &ends),
        executions: starts.len(),
        priority_landed,
    }
}

/// The time during which at least one check was running: the union of the check intervals,
/// from the start and end times in any order (each start has its end after it).
fn busy(starts: &[f64], ends: &[f64]) -> f64 {
    let mut events: Vec<(f64, i32)> = starts.iter().map(|&s| (s, 1)).collect();
    events.extend(ends.iter().map(|&e| (e, -1)));
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut running, mut since, mut total) = (0, 0.0, 0.0);
    for (at, step) in events {
        if running == 0 && step > 0 {
            since = at;
        }
        running += step;
        if running == 0 {
            total += at - since;
        }
    }
    total
}

fn main() {
    let t: f64 = std::env::var("TABELLIO_BENCH_T")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    const LANES4: [&str; 8] = [
        "--json", "land", "--lanes", "4", "--remote", "origin", "--target", "main",
    ];
    const LANES1: [&str; 8] = [
        "--json", "land", "--lanes", "1", "--remote", "origin", "--target", "main",
    ];
    const SERIAL: [&str; 8] = [
        "--json", "land", "--batch", "1", "--remote", "origin", "--target", "main",
    ];
    let queued = |runs: usize, culprit: bool, land: &'static [&'static str]| Scenario {
        runs,
        culprit,
        land,
        lanes_per_validator: Some(2),
        trivial: false,
        priority: false,
    };
    let mut rows: Vec<(String, Outcome)> = vec![
        (
            "8 runs, 0 culprits, 4 lanes".into(),
            scenario(t, &queued(8, false, &LANES4)),
        ),
        (
            "8 runs, 1 culprit, 4 lanes".into(),
            scenario(t, &queued(8, true, &LANES4)),
        ),
        (
            "8 runs, 1 culprit, 1 lane".into(),
            scenario(t, &queued(8, true, &LANES1)),
        ),
        (
            "8 runs, 1 culprit, serial".into(),
            scenario(
                t,
                &Scenario {
                    lanes_per_validator: None,
                    ..queued(8, true, &SERIAL)
                },
            ),
        ),
        (
            "8 runs + priority, 4 lanes".into(),
            scenario(
                t,
                &Scenario {
                    // One worker process more per validator than the lanes take.
                    lanes_per_validator: Some(3),
                    priority: true,
                    ..queued(8, false, &LANES4)
                },
            ),
        ),
    ];
    let mut per_run = Vec::new();
    for n in [10, 100] {
        let o = scenario(
            t,
            &Scenario {
                trivial: true,
                ..queued(n, false, &LANES4)
            },
        );
        per_run.push(o.wall / n as f64);
        rows.push((format!("{n} runs, `true`, 4 workers"), o));
    }
    println!("T = {t} s");
    println!(
        "{:<30} {:>8} {:>12} {:>12} {:>10} {:>11} {:>14}",
        "scenario", "wall s", "check span", "check time", "overhead s", "executions", "priority in"
    );
    for (name, o) in rows {
        let priority = o
            .priority_landed
            .map_or_else(|| "-".to_string(), |s| format!("{:.2} T", s / t));
        println!(
            "{name:<30} {:>8.1} {:>10.2} T {:>10.2} T {:>10.1} {:>11} {:>14}",
            o.wall,
            o.check_span / t,
            o.check_busy / t,
            o.wall - o.check_busy,
            o.executions,
            priority
        );
    }
    println!(
        "tool time per landed run: {:.2} s at 10 runs, {:.2} s at 100 runs (growth {:.2}x)",
        per_run[0],
        per_run[1],
        per_run[1] / per_run[0]
    );
}
