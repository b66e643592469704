//! `cargo bench`: each tabellio command against the git plumbing it replaces, at small scale
//! and (with `TABELLIO_BENCH_SCALE=1`) with 10,000 runs and 100,000 evidence notes.
//!
//! Both sides are whole processes, as a user or hook would run them, so the ratio includes
//! process start-up. Medians over repeated runs; nothing here asserts a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/support/hermetic.rs"]
mod hermetic;

const BIN: &str = env!("CARGO_BIN_EXE_git-tabellio");

struct Bench {
    dir: tempfile::TempDir,
    repo: PathBuf,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path().join("repo");
        let b = Bench { dir, repo };
        b.run(
            "git",
            b.dir.path(),
            &["init", "-q", "-b", "main", b.repo.to_str().unwrap()],
        );
        std::fs::write(b.repo.join("README.md"), "bench\n").unwrap();
        b.git(&["add", "-A"]);
        b.git(&["commit", "-q", "-m", "initial"]);
        // Keep `main` a ref-only target: promote then measures the ref transaction itself.
        b.git(&["switch", "-q", "-c", "bench-home"]);
        b
    }

    fn run(&self, program: &str, cwd: &Path, args: &[&str]) -> (Duration, String) {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .stdout(Stdio::piped());
        hermetic::apply(&mut cmd, self.dir.path());
        let start = Instant::now();
        let out = cmd.output().expect("spawn");
        let took = start.elapsed();
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            took,
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    }

    /// Like `run`, with `input` on stdin and any exit code accepted (verdicts exit 1).
    fn run_any(&self, program: &str, cwd: &Path, args: &[&str], input: &str) -> Duration {
        use std::io::Write;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        hermetic::apply(&mut cmd, self.dir.path());
        let start = Instant::now();
        let mut child = cmd.spawn().expect("spawn");
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
        child.wait().expect("wait");
        start.elapsed()
    }

    /// Feed `script` to `git fast-import` in the repository.
    fn fast_import(&self, script: &str) {
        use std::io::Write;
        let mut cmd = Command::new("git");
        cmd.args(["fast-import", "--quiet"])
            .current_dir(&self.repo)
            .stdin(Stdio::piped());
        hermetic::apply(&mut cmd, self.dir.path());
        let mut child = cmd.spawn().expect("fast-import");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write");
        assert!(
            child.wait().expect("wait").success(),
            "git fast-import failed"
        );
    }

    fn git(&self, args: &[&str]) -> String {
        self.run("git", &self.repo, args).1
    }

    fn tab(&self, cwd: &Path, args: &[&str]) -> Duration {
        self.run(BIN, cwd, args).0
    }

    fn worktree(&self, id: &str) -> PathBuf {
        self.repo.join(".tabellio/worktrees").join(id)
    }

    fn commit_in(&self, wt: &Path, i: usize) {
        std::fs::write(wt.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
        self.run("git", wt, &["add", "-A"]);
        self.run("git", wt, &["commit", "-q", "-m", "edit"]);
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn report(name: &str, ours: Vec<Duration>, theirs: Vec<Duration>, plumbing: &str) {
    let (a, b) = (median(ours), median(theirs));
    println!(
        "{name:<28} {:>9.2} ms   {plumbing:<34} {:>9.2} ms   ratio {:>5.2}x",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        a.as_secs_f64() / b.as_secs_f64()
    );
}

fn lifecycle(b: &Bench, n: usize, label: &str) {
    let (
        mut start,
        mut wt_add,
        mut cp,
        mut notes_add,
        mut fin,
        mut upd,
        mut st,
        mut porcelain,
        mut promote,
        mut upd_old,
    ) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    for i in 0..n {
        let id = format!("{label}{i}");
        start.push(b.tab(
            &b.repo,
            &["start", &id, "--task", "bench", "--base", "main"],
        ));
        let plain = b.dir.path().join(format!("plain-{label}{i}"));
        wt_add.push(
            b.run(
                "git",
                &b.repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("plain/{label}{i}"),
                    plain.to_str().unwrap(),
                    "main",
                ],
            )
            .0,
        );

        let wt = b.worktree(&id);
        b.commit_in(&wt, i);
        cp.push(b.tab(&wt, &["checkpoint"]));
        notes_add.push(
            b.run(
                "git",
                &wt,
                &[
                    "notes",
                    "--ref=bench/plain",
                    "add",
                    "-m",
                    "{\"x\":1}",
                    "HEAD",
                ],
            )
            .0,
        );

        fin.push(b.tab(&wt, &["finish", "--", "true"]));
        upd.push(
            b.run(
                "git",
                &wt,
                &["update-ref", &format!("refs/bench/{label}{i}"), "HEAD"],
            )
            .0,
        );

        st.push(b.tab(&wt, &["status"]));
        porcelain.push(b.run("git", &wt, &["status", "--porcelain"]).0);
    }
    // Promote each run in turn (each from the tip the previous one left) against update-ref
    // with an old value.
    for i in 0..n {
        let id = format!("{label}p{i}");
        b.tab(
            &b.repo,
            &["start", &id, "--task", "bench", "--base", "main"],
        );
        let wt = b.worktree(&id);
        b.commit_in(&wt, 1000 + i);
        b.tab(&wt, &["finish", "--", "true"]);
        promote.push(b.tab(&b.repo, &["promote", &id]));
        let head = b.git(&["rev-parse", "HEAD"]);
        let old = b.git(&["rev-parse", "main"]);
        let name = format!("refs/bench/promote-{label}{i}");
        b.git(&["update-ref", &name, &old]);
        upd_old.push(b.run("git", &b.repo, &["update-ref", &name, &head, &old]).0);
    }
    report("start", start, wt_add, "git worktree add -b");
    report("checkpoint", cp, notes_add, "git notes add");
    report("finish (true)", fin, upd, "git update-ref");
    report("status", st, porcelain, "git status --porcelain");
    report(
        "promote (ref-only)",
        promote,
        upd_old,
        "git update-ref <new> <old>",
    );
}

/// 10,000 ledgers and 100,000 evidence notes, written with git fast-import.
fn populate_scale(b: &Bench) {
    let head = b.git(&["rev-parse", "main"]);
    let mut script = String::new();
    let mut mark = 1;
    let now = 1_767_225_600;
    for i in 0..10_000 {
        let run = format!(
            "{{\"schema\":\"tabellio.run/v1\",\"run_id\":\"s{i}\",\"state\":\"abandoned\",\"previous_state\":\"active\",\"task\":{{\"summary\":\"s\",\"text\":\"s\",\"sha256\":\"{z}\"}},\"actor\":{{\"type\":\"agent\",\"id\":\"b\"}},\"repository\":\"local/bench\",\"base\":{{\"ref\":\"refs/heads/main\",\"commit\":\"{head}\"}},\"branch\":\"refs/heads/tabellio/s{i}\",\"checkpoints\":[],\"attempts\":[],\"validated\":null,\"promotion\":null,\"loop\":null,\"reason\":null,\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\"}}\n",
            z = "0".repeat(64)
        );
        script.push_str(&format!("blob\nmark :{mark}\ndata {}\n{run}\n", run.len()));
        let msg = format!("tabellio: start s{i}: (none) -> abandoned\n");
        script.push_str(&format!(
            "commit refs/tabellio/runs/s{i}\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}M 100644 :{mark} run.json\n\n",
            msg.len()
        ));
        mark += 1;
    }
    // 100,000 notes on distinct commits (fast-import notes annotate commits), one notes commit.
    let first_annotated = mark;
    for i in 0..100_000 {
        let msg = format!("object {i}\n");
        script.push_str(&format!(
            "commit refs/bench/annotated\nmark :{mark}\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}\n",
            msg.len()
        ));
        mark += 1;
    }
    script.push_str(&format!("commit refs/notes/tabellio/evidence\ncommitter bench <bench@example.com> {now} +0000\ndata 6\nbench\n\n"));
    for (i, m) in (first_annotated..mark).enumerate() {
        let note = format!("{{\"bench\":{i}}}\n");
        script.push_str(&format!("N inline :{m}\ndata {}\n{note}\n", note.len()));
    }
    b.fast_import(&script);
}

/// `verify` of one validated commit and of a 1,000-commit range, and the
/// reference-transaction hook on a transaction without protected refs.
fn evidence(b: &Bench, n: usize) {
    let id = "v0";
    b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
    let wt = b.worktree(id);
    b.commit_in(&wt, 5000);
    b.tab(&wt, &["finish", "--", "true"]);
    let head = b.run("git", &wt, &["rev-parse", "HEAD"]).1;
    let (mut one, mut show) = (vec![], vec![]);
    for _ in 0..n {
        one.push(b.run_any(BIN, &b.repo, &["verify", &head], ""));
        show.push(b.run_any(
            "git",
            &b.repo,
            &["notes", "--ref=tabellio/evidence", "show", &head],
            "",
        ));
    }
    report("verify (one commit)", one, show, "git notes show");

    // 1,000 commits on a side branch, half of them validated through the tree notes.
    let mut script = String::from("reset refs/heads/bench-range\nfrom refs/heads/main\n\n");
    for i in 0..1000 {
        let content = format!("{i}\n");
        let msg = format!("c{i}\n");
        script.push_str(&format!(
            "commit refs/heads/bench-range\ncommitter bench <bench@example.com> 1767225600 +0000\ndata {}\n{msg}M 100644 inline f.txt\ndata {}\n{content}\n",
            msg.len(),
            content.len()
        ));
    }
    b.fast_import(&script);
    let range = "main..bench-range";
    let (mut ours, mut theirs) = (vec![], vec![]);
    for _ in 0..n.min(7) {
        ours.push(b.run_any(BIN, &b.repo, &["verify", range], ""));
        theirs.push(b.run_any(
            "git",
            &b.repo,
            &["log", "--notes=tabellio/evidence", "--format=%H %N", range],
            "",
        ));
    }
    report(
        "verify (1,000 commits)",
        ours,
        theirs,
        "git log --notes --format=%H%N",
    );

    let line = format!("{} {} refs/heads/feature\n", "0".repeat(40), head);
    let (mut hook, mut noop) = (vec![], vec![]);
    for _ in 0..n {
        hook.push(b.run_any(
            BIN,
            &b.repo,
            &["hook", "reference-transaction", "prepared"],
            &line,
        ));
        noop.push(b.run_any("true", &b.repo, &[], &line));
    }
    report(
        "hook (no protected ref)",
        hook,
        noop,
        "true (an empty hook)",
    );
}

/// A command without a run id outside any run worktree (it fails with the hint) at this
/// repository's number of runs.
fn idless(b: &Bench, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| b.run_any(BIN, &b.repo, &["status"], ""))
        .collect()
}

/// `git commit --allow-empty` and `git update-ref` in a fresh repository without and with the
/// hooks installed (the shims find `git-tabellio` on `PATH`).
fn hooks_overhead(n: usize) {
    let bin_dir = Path::new(BIN).parent().expect("binary directory");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let time = |b: &Bench, args: &[&str]| {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(&b.repo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        hermetic::apply(&mut cmd, b.dir.path());
        cmd.env("PATH", &path);
        let start = Instant::now();
        let ok = cmd.status().expect("spawn").success();
        assert!(ok, "git {args:?} failed");
        start.elapsed()
    };
    let plain = Bench::new();
    let hooked = Bench::new();
    hooked.tab(&hooked.repo, &["hooks", "install"]);
    let (mut with, mut without, mut upd_with, mut upd_without) = (vec![], vec![], vec![], vec![]);
    for _ in 0..n {
        let commit = ["commit", "-q", "--allow-empty", "-m", "e"];
        without.push(time(&plain, &commit));
        with.push(time(&hooked, &commit));
        let update = ["update-ref", "refs/heads/bench-x", "HEAD"];
        upd_without.push(time(&plain, &update));
        upd_with.push(time(&hooked, &update));
    }
    report(
        "git commit, hooks installed",
        with,
        without,
        "git commit without hooks",
    );
    report(
        "git update-ref, hooks",
        upd_with,
        upd_without,
        "git update-ref without hooks",
    );
}

fn main() {
    let n: usize = std::env::var("TABELLIO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    println!("git-tabellio vs git plumbing: medians of {n} runs each (whole processes)\n");
    println!("small repository:");
    let b = Bench::new();
    lifecycle(&b, n, "r");
    evidence(&b, n);
    hooks_overhead(n);
    if std::env::var("TABELLIO_BENCH_SCALE").is_ok_and(|v| v == "1") {
        println!("\nat scale: 10,000 runs and 100,000 evidence notes:");
        let empty = Bench::new();
        let at_zero = idless(&empty, n);
        let b = Bench::new();
        populate_scale(&b);
        report(
            "id-less status, 10,000 runs",
            idless(&b, n),
            at_zero,
            "the same at 0 runs",
        );
        lifecycle(&b, n, "x");
    }
}
