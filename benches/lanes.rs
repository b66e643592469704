//! `cargo bench --bench lanes`: landing 8 queued runs through one bare repository, with checks
//! that sleep T seconds (`TABELLIO_BENCH_T`, default 2) and log their start and end to a file
//! outside the repositories. The lander runs no check; validators are two separate clones,
//! each running `worker --remote origin --lanes 2` with its own signing key.
//!
//! For each scenario it prints the wall time, the check time (first check start to last check
//! end, in units of T), the tool's own overhead (wall minus check time) and the executions:
//!
//! - 8 runs, no culprit, `land --lanes 4`;
//! - 8 runs, one culprit, `land --lanes 4`, then `--lanes 1`, then serial (`land --batch 1`,
//!   validating in-process one run at a time).
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
    executions: usize,
}

/// One scenario from scratch: `culprit` makes run 4 fail once run 0 is under it.
fn scenario(t: f64, culprit: bool, land: &[&str], workers: bool) -> Outcome {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let log = root.join("checks.log");
    let server = machine(root, "server.git", None);
    let seed = machine(root, "agents", Some(&server.repo));
    let code = format!(
        "import os, time\nt = float(os.environ.get('TABELLIO_BENCH_SLEEP', '0'))\nif t:\n    open({log:?}, 'a').write('start %f\\n' % time.time())\n    time.sleep(t)\n    open({log:?}, 'a').write('end %f\\n' % time.time())\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)",
        log = log.display().to_string()
    );
    let policy = serde_json::json!({"schema": "tabellio.policy/v1",
        "checks": {"sleep": {"argv": ["python3", "-c", code], "timeout_s": 600}},
        "required": ["sleep"], "protect": ["refs/heads/main"]});
    std::fs::create_dir_all(seed.repo.join(".tabellio")).expect("dir");
    std::fs::write(seed.repo.join(".tabellio/policy.json"), policy.to_string()).expect("policy");
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "policy"]);
    seed.git(&["push", "-q", "origin", "HEAD:main"]);
    let mut ids = Vec::new();
    for i in 0..8 {
        let id = format!("r{i}");
        seed.tab(&["start", &id, "--task", "bench", "--base", "main"]);
        let wt = seed.repo.join(".tabellio/worktrees").join(&id);
        std::fs::write(wt.join(format!("f{i}.txt")), "x\n").expect("file");
        if culprit && i == 4 {
            std::fs::write(wt.join("bad.txt"), "bad\n").expect("file");
        }
        run(hermetic::git(&seed.home, &wt).args(["add", "-A"]));
        run(hermetic::git(&seed.home, &wt).args(["commit", "-q", "-m", &id]));
        seed.tab(&["finish", &id]);
        ids.push(id);
    }
    let mut enqueue = vec!["enqueue"];
    enqueue.extend(ids.iter().map(String::as_str));
    seed.tab(&enqueue);
    seed.tab(&["sync"]);
    let mut kids: Vec<Child> = Vec::new();
    if workers {
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
            let mut cmd = v.tab_cmd(&[
                "-q",
                "worker",
                "--remote",
                "origin",
                "--lanes",
                "2",
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
    let mut cmd = seed.tab_cmd(land);
    cmd.env("TABELLIO_BENCH_SLEEP", t.to_string());
    let started = Instant::now();
    let out = cmd.output().expect("land");
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
        executions: starts.len(),
    }
}

fn main() {
    let t: f64 = std::env::var("TABELLIO_BENCH_T")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    let remote_lanes = |w: &'static str| -> Vec<&'static str> {
        vec![
            "--json", "land", "--lanes", w, "--remote", "origin", "--target", "main",
        ]
    };
    let rows: Vec<(&str, Outcome)> = vec![
        (
            "8 runs, 0 culprits, 4 lanes",
            scenario(t, false, &remote_lanes("4"), true),
        ),
        (
            "8 runs, 1 culprit, 4 lanes",
            scenario(t, true, &remote_lanes("4"), true),
        ),
        (
            "8 runs, 1 culprit, 1 lane",
            scenario(t, true, &remote_lanes("1"), true),
        ),
        (
            "8 runs, 1 culprit, serial",
            scenario(
                t,
                true,
                &[
                    "--json", "land", "--batch", "1", "--remote", "origin", "--target", "main",
                ],
                false,
            ),
        ),
    ];
    println!("T = {t} s");
    println!(
        "{:<30} {:>8} {:>12} {:>10} {:>11}",
        "scenario", "wall s", "check time", "overhead s", "executions"
    );
    for (name, o) in rows {
        println!(
            "{name:<30} {:>8.1} {:>10.2} T {:>10.1} {:>11}",
            o.wall,
            o.check_span / t,
            o.wall - o.check_span,
            o.executions
        );
    }
}
