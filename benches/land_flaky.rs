//! `cargo bench --bench land_flaky`: the landing simulation with a flaky check, real processes.
//!
//! 20 completed runs wait on `main`, 2 of them real culprits (their file makes the check fail
//! every time), and the check fails spuriously on `FLAKE` of its executions (10 % by default),
//! drawn from a random number seeded by the seed and the execution's number
//! (`tests/support/flaky_check.py`, which appends one line per execution to a counter file
//! outside the repository). `main` has moved since the runs finished, so every tree `land`
//! validates is new. The policy marks the check `flaky_prone` (one retry, spent lazily) and
//! accepts flaky passes. For each seed one `git tabellio land` lands the queue; the bench counts
//! the check's executions (the counter's lines), innocent runs refused, and culprits landed.
//! Then a check that never flakes: 6 runs, 1 culprit, not marked flaky, and marked `flaky_prone`
//! (what the lazy confirmations cost when nothing flakes).
//!
//! `TABELLIO_SIM_SEEDS` (default 200), `TABELLIO_SIM_FIRST_SEED` (default 0),
//! `TABELLIO_SIM_FLAKE` (default 0.1),
//! `TABELLIO_SIM_BATCH` (default: land's own), `TABELLIO_SIM_BIN` (another build of the binary,
//! to compare two). Nothing here asserts: the numbers are printed (and recorded in
//! docs/land.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "../tests/support/hermetic.rs"]
mod hermetic;

/// The binary under test: `TABELLIO_SIM_BIN` (a copy, to compare two builds), else this build's.
fn bin() -> String {
    std::env::var("TABELLIO_SIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_git-tabellio").into())
}
const FLAKY_CHECK: &str = include_str!("../tests/support/flaky_check.py");

fn run(home: &Path, cwd: &Path, program: &str, args: &[&str], env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(cwd).stdin(Stdio::null());
    hermetic::apply(&mut cmd, home);
    let bin = bin();
    let dir = Path::new(&bin).parent().expect("the binary's directory");
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the command runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = run(home, cwd, "git", args, &[]);
    out.trim().to_string()
}

fn tab(home: &Path, cwd: &Path, args: &[&str], env: &[(&str, String)]) -> String {
    run(home, cwd, &bin(), args, env)
}

/// A repository with `runs` completed runs `r0…` (run `i` adds `f<i>.txt`), finished on the
/// first `main`, which then moved (`moved.txt`) and was validated.
fn template(home: &Path, root: &Path, runs: usize, policy_extra: serde_json::Value) -> PathBuf {
    let repo = root.join("template");
    std::fs::create_dir_all(&repo).expect("the template directory");
    git(home, &repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.join(".tabellio")).expect(".tabellio");
    std::fs::write(repo.join(".tabellio/flaky_check.py"), FLAKY_CHECK).expect("the check");
    let mut check =
        serde_json::json!({"argv": ["python3", ".tabellio/flaky_check.py"], "timeout_s": 60});
    for (k, v) in policy_extra.as_object().expect("fields") {
        check[k] = v.clone();
    }
    let policy = serde_json::json!({
        "schema": "tabellio.policy/v1", "checks": {"flaky": check},
        "required": ["flaky"], "protect": ["refs/heads/main"],
    });
    std::fs::write(repo.join(".tabellio/policy.json"), policy.to_string()).expect("policy");
    git(home, &repo, &["add", "-A"]);
    git(home, &repo, &["commit", "-q", "-m", "policy"]);
    git(home, &repo, &["switch", "-q", "-c", "elsewhere"]);
    let calm = [("FLAKE", "0".to_string())];
    for i in 0..runs {
        let id = format!("r{i:02}");
        tab(
            home,
            &repo,
            &["start", &id, "--task", &id, "--base", "main"],
            &[],
        );
        let wt = repo.join(".tabellio/worktrees").join(&id);
        std::fs::write(wt.join(format!("f{i}.txt")), format!("{i}\n")).expect("a file");
        git(home, &wt, &["add", "-A"]);
        git(home, &wt, &["commit", "-q", "-m", &id]);
        tab(home, &repo, &["finish", &id], &calm);
    }
    git(home, &repo, &["switch", "-q", "main"]);
    std::fs::write(repo.join("moved.txt"), "moved\n").expect("moved");
    git(home, &repo, &["add", "-A"]);
    git(home, &repo, &["commit", "-q", "-m", "main moves on"]);
    git(home, &repo, &["switch", "-q", "elsewhere"]);
    tab(home, &repo, &["validate", "main"], &calm);
    repo
}

/// A copy of `template` at `to`, its run worktrees reconnected to the copy.
fn copy(home: &Path, template: &Path, to: &Path) {
    let status = Command::new("cp")
        .args(["-a"])
        .arg(template)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(status.success(), "cp -a failed");
    let worktrees: Vec<String> = std::fs::read_dir(to.join(".tabellio/worktrees"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut args = vec!["worktree", "repair"];
    args.extend(worktrees.iter().map(String::as_str));
    git(home, to, &args);
}

/// A small deterministic generator (SplitMix64) for the culprits' places.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Landing {
    executions: usize,
    innocent_refused: usize,
    culprits_landed: usize,
}

fn land_once(
    home: &Path,
    template: &Path,
    root: &Path,
    seed: u64,
    runs: usize,
    culprits: usize,
    flake: &str,
) -> Landing {
    let repo = root.join(format!("seed-{seed}"));
    copy(home, template, &repo);
    let mut state = seed;
    let mut bad: Vec<usize> = Vec::new();
    while bad.len() < culprits {
        let i = (splitmix(&mut state) % runs as u64) as usize;
        if !bad.contains(&i) {
            bad.push(i);
        }
    }
    let counter = root.join(format!("counter-{seed}"));
    let env = [
        ("FLAKE", flake.to_string()),
        ("SEED", seed.to_string()),
        (
            "CULPRITS",
            bad.iter()
                .map(|i| format!("f{i}.txt"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("FLAKE_COUNTER", counter.display().to_string()),
    ];
    let mut args: Vec<String> = vec!["--json".into(), "land".into()];
    if let Ok(batch) = std::env::var("TABELLIO_SIM_BATCH") {
        args.push("--batch".into());
        args.push(batch);
    }
    args.extend((0..runs).map(|i| format!("r{i:02}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tab(home, &repo, &args, &env);
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    let executions = std::fs::read_to_string(&counter)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let mut innocent_refused = 0;
    let mut culprits_landed = 0;
    for i in 0..runs {
        let id = format!("r{i:02}");
        let landed = j["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["run_id"] == id.as_str() && r["result"] == "landed");
        match (bad.contains(&i), landed) {
            (false, false) => innocent_refused += 1,
            (true, true) => culprits_landed += 1,
            _ => {}
        }
    }
    std::fs::remove_dir_all(&repo).ok();
    Landing {
        executions,
        innocent_refused,
        culprits_landed,
    }
}

fn percentile(sorted: &[usize], p: f64) -> usize {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn simulate(
    label: &str,
    (runs, culprits): (usize, usize),
    flake: &str,
    policy: serde_json::Value,
    seeds: u64,
) {
    let home_dir = tempfile::tempdir().expect("a temp dir");
    let home = home_dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let root = home_dir.path().to_path_buf();
    let template = template(&home, &root, runs, policy.clone());
    let mut executions = Vec::new();
    let (mut innocent, mut culprits_landed) = (0, 0);
    // `TABELLIO_SIM_FIRST_SEED` starts elsewhere, so seeds can be split across processes.
    let first: u64 = std::env::var("TABELLIO_SIM_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let l = land_once(&home, &template, &root, seed, runs, culprits, flake);
        // One line per seed: a partial run still says something.
        eprintln!(
            "{label} seed {seed}: {} executions, {} innocent refused, {} culprits landed",
            l.executions, l.innocent_refused, l.culprits_landed
        );
        executions.push(l.executions);
        innocent += l.innocent_refused;
        culprits_landed += l.culprits_landed;
    }
    executions.sort_unstable();
    let mean = executions.iter().sum::<usize>() as f64 / executions.len() as f64;
    let landings = (runs - culprits) as f64 * seeds as f64;
    println!(
        "{label}: {seeds} seeds, {runs} runs, {culprits} culprits, FLAKE={flake}, policy {policy}: executions mean {mean:.2}, p95 {}, max {}; innocent runs refused {innocent} ({:.3} per 20 landings); culprits landed {culprits_landed}",
        percentile(&executions, 0.95),
        executions.last().copied().unwrap_or(0),
        innocent as f64 * 20.0 / landings,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let seeds: u64 = std::env::var("TABELLIO_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let flake = std::env::var("TABELLIO_SIM_FLAKE").unwrap_or_else(|_| "0.1".into());
    let prone = serde_json::json!({"flaky_prone": true, "flaky": "accept"});
    simulate("flaky", (20, 2), &flake, prone.clone(), seeds);
    // A check not marked flaky: no retries, exactly today's bisection.
    simulate("steady", (6, 1), "0", serde_json::json!({}), seeds.min(20));
    // The same steady check marked flaky_prone: what the lazy confirmations cost.
    simulate("steady, flaky_prone", (6, 1), "0", prone, seeds.min(20));
}
