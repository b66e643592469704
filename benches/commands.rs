//! `cargo bench`: each tabellio command against the git plumbing it replaces, at small scale
//! and (with `TABELLIO_BENCH_SCALE=1`) with 10,000 runs and 100,000 evidence notes, 0/50/200
//! live run worktrees, a 20,000-file worktree, and the ledger bytes a 100 KB task's transitions
//! add.
//!
//! Both sides are whole processes, as a user or hook would run them, so the ratio includes
//! process start-up. The small repository's lifecycle rows (and `verify` of 1,000 commits with
//! records) run `git tabellio <command>`, git's dispatcher in front, as a user types it. Medians
//! over repeated runs; nothing here asserts a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/support/hermetic.rs"]
mod hermetic;
mod scopes;

const BIN: &str = env!("CARGO_BIN_EXE_git-tabellio");

struct Bench {
    dir: tempfile::TempDir,
    repo: PathBuf,
}

/// A ledger's next `run.json` and the refs made for git to write a promote into
/// ([`Bench::promote_copies`]).
struct PromoteCopies {
    run_json: String,
    tip: String,
    new_tip: String,
    target: String,
    old_target: String,
    ledger_copy: String,
}

/// What [`Bench::peak_memory`] measured of one process, in KiB.
#[derive(Clone, Copy)]
struct Peak {
    took: Duration,
    /// The largest resident set (`VmHWM`, sampled every millisecond: the `ru_maxrss` that
    /// `wait4` reports would count the bench's own pages, copied into the child before it
    /// started the command): with the pages of pack files mapped and read, which are the page
    /// cache's and shared with every process reading them.
    resident: u64,
    /// The largest anonymous resident memory (`RssAnon`, sampled every millisecond): what the
    /// process allocated itself.
    anonymous: u64,
}

impl Bench {
    fn new() -> Bench {
        Bench::new_in_format("files")
    }

    /// [`Bench::new`] with the ref storage `format` (`files` or `reftable`).
    fn new_in_format(format: &str) -> Bench {
        let mut dir = tempfile::tempdir().expect("temp dir");
        // `TABELLIO_BENCH_KEEP=1` leaves every repository behind, to profile a command there.
        if std::env::var("TABELLIO_BENCH_KEEP").is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("bench repository kept: {}", dir.path().display());
        }
        let repo = dir.path().join("repo");
        let b = Bench { dir, repo };
        let format = format!("--ref-format={format}");
        b.run(
            "git",
            b.dir.path(),
            &[
                "init",
                "-q",
                "-b",
                "main",
                &format,
                b.repo.to_str().unwrap(),
            ],
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
        cmd.args(args);
        self.run_command(cmd, cwd)
    }

    /// `cmd` (a program and its arguments) run hermetic in `cwd` to its exit, which must be a
    /// success: the time and the trimmed stdout.
    fn run_command(&self, mut cmd: Command, cwd: &Path) -> (Duration, String) {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        cmd.current_dir(cwd)
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
        self.with_input(program, cwd, args, input).0
    }

    /// Like `run`, with `input` on stdin: the time and the trimmed stdout.
    fn run_with_input(
        &self,
        program: &str,
        cwd: &Path,
        args: &[&str],
        input: &str,
    ) -> (Duration, String) {
        let (took, out) = self.with_input(program, cwd, args, input);
        assert!(out.status.success(), "{program} {args:?} failed");
        (
            took,
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    }

    /// `program args` in `cwd` with `input` on stdin, timed to its exit; any exit code.
    fn with_input(
        &self,
        program: &str,
        cwd: &Path,
        args: &[&str],
        input: &str,
    ) -> (Duration, std::process::Output) {
        let mut cmd = Command::new(program);
        cmd.args(args);
        self.command_with_input(cmd, cwd, input)
    }

    /// `git tabellio <args>` in `cwd` ([`Bench::tab_via_git`]) with `input` on stdin, timed to
    /// its exit; any exit code.
    fn tab_via_git_any(&self, cwd: &Path, args: &[&str], input: &str) -> Duration {
        self.command_with_input(via_git(args), cwd, input).0
    }

    /// [`Bench::with_input`] of `cmd` (a program and its arguments).
    fn command_with_input(
        &self,
        mut cmd: Command,
        cwd: &Path,
        input: &str,
    ) -> (Duration, std::process::Output) {
        use std::io::Write;
        cmd.current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        hermetic::apply(&mut cmd, self.dir.path());
        let start = Instant::now();
        let mut child = cmd.spawn().expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        if input.is_empty() {
            drop(stdin);
            let out = child.wait_with_output().expect("wait");
            return (start.elapsed(), out);
        }
        // Written beside the wait, not before it: a command that answers as it reads (`git
        // cat-file --batch`) would otherwise fill its output pipe and stop. A command that exits
        // without reading all of it (a verdict) closes the pipe.
        let out = std::thread::scope(|s| {
            s.spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
            child.wait_with_output().expect("wait")
        });
        (start.elapsed(), out)
    }

    /// What a ref-only promote of the run at `ledger` writes, made ready for git to write it
    /// (`how` names the copies): a new `run.json`, and a target and a ledger copy made for it.
    fn promote_copies(&self, ledger: &str, i: usize, how: &str) -> PromoteCopies {
        let run_json = self.git(&["cat-file", "blob", &format!("{ledger}:run.json")]);
        let copies = PromoteCopies {
            run_json: format!("{run_json}\n{{\"{how}\":{i}}}\n"),
            tip: self.git(&["rev-parse", ledger]),
            new_tip: self.git(&["rev-parse", "HEAD"]),
            target: format!("refs/bench/{how}-target-{i}"),
            old_target: self.git(&["rev-parse", "main"]),
            ledger_copy: format!("refs/bench/{how}-ledger-{i}"),
        };
        self.git(&["update-ref", &copies.target, &copies.old_target]);
        self.git(&["update-ref", &copies.ledger_copy, &copies.tip]);
        copies
    }

    /// The writes of a ref-only promote done by git plumbing, timed as four processes: a new
    /// `run.json` for the ledger at `ledger` (`git hash-object -w`), its tree (`git mktree`)
    /// and commit (`git commit-tree`), and one `git update-ref --stdin` transaction moving two
    /// refs made for it (a target and a ledger) with their old values. What prepares the input
    /// is not timed.
    fn promote_by_plumbing(&self, ledger: &str, i: usize) -> Duration {
        let listing = self.git(&["ls-tree", ledger]);
        let old_blob = self.git(&["rev-parse", &format!("{ledger}:run.json")]);
        let c = self.promote_copies(ledger, i, "plumbing");
        let repo = &self.repo;
        let (a, blob) =
            self.run_with_input("git", repo, &["hash-object", "-w", "--stdin"], &c.run_json);
        let (b, tree) =
            self.run_with_input("git", repo, &["mktree"], &listing.replace(&old_blob, &blob));
        let (d, commit) = self.run(
            "git",
            repo,
            &["commit-tree", &tree, "-p", &c.tip, "-m", "promote"],
        );
        let edits = format!(
            "update {} {} {}\nupdate {} {commit} {}\n",
            c.target, c.new_tip, c.old_target, c.ledger_copy, c.tip
        );
        let (e, _) = self.run_with_input("git", repo, &["update-ref", "--stdin"], &edits);
        a + b + d + e
    }

    /// The same writes as [`Bench::promote_by_plumbing`] by git's own one-process writer: one
    /// `git fast-import` commits the new `run.json` on a ledger copy and moves a target made
    /// for it (without a compare-and-swap of either, and not as one transaction). What
    /// prepares the input is not timed.
    fn promote_by_fast_import(&self, ledger: &str, i: usize) -> Duration {
        let c = self.promote_copies(ledger, i, "fast-import");
        let script = format!(
            "commit {}\ncommitter bench <bench@example.com> 1767225600 +0000\n\
             data 7\npromote\nfrom {}\nM 100644 inline run.json\ndata {}\n{}\n\
             reset {}\nfrom {}\n\n",
            c.ledger_copy,
            c.tip,
            c.run_json.len(),
            c.run_json,
            c.target,
            c.new_tip
        );
        let args = ["fast-import", "--quiet", "--force"];
        self.run_with_input("git", &self.repo, &args, &script).0
    }

    /// [`Bench::fast_import`], reading and writing the marks in `marks`.
    fn fast_import_with_marks(&self, script: &str, marks: &Path) {
        let import = format!("--import-marks-if-exists={}", marks.display());
        let export = format!("--export-marks={}", marks.display());
        self.fast_import_args(script, &["fast-import", "--quiet", &import, &export]);
    }

    /// Feed `script` to `git fast-import` in the repository.
    fn fast_import(&self, script: &str) {
        self.fast_import_args(script, &["fast-import", "--quiet"]);
    }

    /// Feed `script` to `git <args>` (a fast-import) in the repository.
    fn fast_import_args(&self, script: &str, args: &[&str]) {
        use std::io::Write;
        let mut cmd = Command::new("git");
        cmd.args(args).current_dir(&self.repo).stdin(Stdio::piped());
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

    /// `start <id>` off `main`, and for comparison `git worktree add -b plain/<id>` into the
    /// directory `plain`: the two times.
    fn start_beside_worktree_add(&self, id: &str, plain: &str) -> (Duration, Duration) {
        self.start_beside(id, plain, false)
    }

    /// [`Bench::start_beside_worktree_add`], with `start` run as `git tabellio start` when
    /// `via_git`.
    fn start_beside(&self, id: &str, plain: &str, via_git: bool) -> (Duration, Duration) {
        let args = ["start", id, "--task", "bench", "--base", "main"];
        let ours = if via_git {
            self.tab_via_git(&self.repo, &args)
        } else {
            self.tab(&self.repo, &args)
        };
        let dir = self.dir.path().join(plain);
        let branch = format!("plain/{id}");
        let args = [
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            dir.to_str().unwrap(),
            "main",
        ];
        (ours, self.run("git", &self.repo, &args).0)
    }

    fn tab(&self, cwd: &Path, args: &[&str]) -> Duration {
        self.run(BIN, cwd, args).0
    }

    /// `git tabellio <args>` in `cwd`, as a user runs it: git's dispatcher finds the binary under
    /// test first on `PATH` ([`path_with_bin`]) and runs it.
    fn tab_via_git(&self, cwd: &Path, args: &[&str]) -> Duration {
        self.run_command(via_git(args), cwd).0
    }

    fn worktree(&self, id: &str) -> PathBuf {
        self.repo.join(".tabellio/worktrees").join(id)
    }

    /// Start run `id` off `main`, commit file `i` in its worktree and finish it with `true`: a
    /// run ready to promote. Its worktree.
    fn validated_run(&self, id: &str, i: usize) -> PathBuf {
        self.tab(
            &self.repo,
            &["start", id, "--task", "bench", "--base", "main"],
        );
        let wt = self.worktree(id);
        self.commit_in(&wt, i);
        self.tab(&wt, &["finish", "--", "true"]);
        wt
    }

    /// The git side of a ref-only promote: `git update-ref <name> <new> <old>` moving a ref of
    /// its own from `main` to `HEAD`, first set to `main`.
    fn update_ref_with_old(&self, name: &str) -> Duration {
        let new = self.git(&["rev-parse", "HEAD"]);
        let old = self.git(&["rev-parse", "main"]);
        self.git(&["update-ref", name, &old]);
        self.run("git", &self.repo, &["update-ref", name, &new, &old])
            .0
    }

    /// `program args` in `cwd`, its output discarded, measured as one process (not the
    /// children it starts): its time and [`Peak`] memory. Any exit code is accepted unless
    /// `must_succeed`.
    #[allow(unsafe_code)]
    fn peak_memory(&self, program: &str, cwd: &Path, args: &[&str], must_succeed: bool) -> Peak {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        hermetic::apply(&mut cmd, self.dir.path());
        let start = Instant::now();
        let child = cmd.spawn().expect("spawn");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        let status_file = format!("/proc/{pid}/status");
        let (mut anonymous, mut resident) = (0, 0);
        let mut status = 0;
        loop {
            // Sampled every millisecond while it runs (the kernel keeps no peak of it).
            if let Ok(text) = std::fs::read_to_string(&status_file) {
                let kib = |field: &str| -> u64 {
                    text.lines()
                        .find_map(|l| l.strip_prefix(field))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                        .unwrap_or(0)
                };
                anonymous = anonymous.max(kib("RssAnon:"));
                resident = resident.max(kib("VmHWM:"));
            }
            // SAFETY: the child is ours, reaped here once (std's `Child` is dropped without
            // waiting); `status` is a plain integer the kernel fills in.
            let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if reaped == pid {
                break;
            }
            assert_eq!(reaped, 0, "waitpid of {program} {args:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
        let took = start.elapsed();
        drop(child);
        let exited_0 = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        assert!(!must_succeed || exited_0, "{program} {args:?} failed");
        Peak {
            took,
            resident,
            anonymous,
        }
    }

    fn commit_in(&self, wt: &Path, i: usize) {
        std::fs::write(wt.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
        self.run("git", wt, &["add", "-A"]);
        self.run("git", wt, &["commit", "-q", "-m", "edit"]);
    }
}

/// `git nothing`: git's dispatcher finding `git-nothing` (a link to `true`) on `PATH` and running
/// it, as it finds and runs `git-tabellio`.
struct NothingViaGit {
    path: std::ffi::OsString,
}

impl NothingViaGit {
    fn new(b: &Bench) -> NothingViaGit {
        let dir = b.dir.path().join("nothing-bin");
        std::fs::create_dir_all(&dir).expect("nothing-bin");
        let path = std::env::var_os("PATH").unwrap_or_default();
        let truth = std::env::split_paths(&path)
            .map(|d| d.join("true"))
            .find(|p| p.is_file())
            .expect("`true` on PATH");
        let link = dir.join("git-nothing");
        if !link.exists() {
            std::os::unix::fs::symlink(truth, link).expect("git-nothing");
        }
        let path = std::env::join_paths(
            std::iter::once(dir).chain(std::env::split_paths(&path_with_bin())),
        )
        .expect("PATH");
        NothingViaGit { path }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("nothing").env("PATH", &self.path);
        cmd
    }

    /// What git's dispatcher adds in front of an external command: `git nothing` less `true`.
    fn dispatcher(&self, b: &Bench) -> Duration {
        let via = b.run_command(self.command(), &b.repo).0;
        via.saturating_sub(b.run("true", &b.repo, &[]).0)
    }
}

/// `git tabellio <args>`, with the directory of the binary under test first on `PATH`
/// ([`path_with_bin`]).
fn via_git(args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("tabellio").args(args).env("PATH", path_with_bin());
    cmd
}

/// `PATH` with the directory of the binary under test first, as after `cargo install`: where
/// `git tabellio` and the hook shims find `git-tabellio`.
fn path_with_bin() -> std::ffi::OsString {
    let bin_dir = Path::new(BIN).parent().expect("binary directory");
    std::env::join_paths(
        std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .expect("PATH")
}

/// The pairwise sums of two rows of runs taken in turn.
fn sum(a: &[Duration], b: &[Duration]) -> Vec<Duration> {
    a.iter().zip(b).map(|(x, y)| *x + *y).collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Print one row of runs taken in turn (ours, theirs, ours, …) and return its ratio: the median
/// of the pairs' ratios, which a drift in the machine's speed during the row moves far less than
/// it moves the ratio of the two medians.
fn report(name: &str, ours: Vec<Duration>, theirs: Vec<Duration>, plumbing: &str) -> f64 {
    assert_eq!(ours.len(), theirs.len(), "{name}: runs not taken in pairs");
    let ratio = paired_ratio(&ours, &theirs);
    row(name, median(ours), median(theirs), plumbing, ratio)
}

/// The median of the ratios of runs taken in turn.
fn paired_ratio(ours: &[Duration], theirs: &[Duration]) -> f64 {
    let mut ratios: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

/// Print one row of runs not taken in turn (two repositories measured one after the other) and
/// return the ratio of the medians.
fn report_unpaired(name: &str, ours: Vec<Duration>, theirs: Vec<Duration>, plumbing: &str) -> f64 {
    let (a, b) = (median(ours), median(theirs));
    row(name, a, b, plumbing, a.as_secs_f64() / b.as_secs_f64())
}

fn row(name: &str, a: Duration, b: Duration, plumbing: &str, ratio: f64) -> f64 {
    println!(
        "{name:<28} {:>9.2} ms   {plumbing:<34} {:>9.2} ms   ratio {ratio:>5.2}x",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
    );
    ratio
}

/// The performance goals met or missed in this run: (what, ratio, at most).
type Floor = Option<(String, f64)>;
static GOALS: std::sync::Mutex<Vec<(String, f64, f64, Floor)>> = std::sync::Mutex::new(Vec::new());

fn goal(what: &str, ratio: f64, at_most: f64) {
    GOALS
        .lock()
        .expect("goals")
        .push((what.to_string(), ratio, at_most, None));
}

/// [`goal`], with what the same ratio is for the least that can do the job at all (`floor`:
/// what it is, its ratio), printed beside the verdict: a goal below its floor cannot be met.
fn goal_with_floor(what: &str, ratio: f64, at_most: f64, floor: (&str, f64)) {
    GOALS.lock().expect("goals").push((
        what.to_string(),
        ratio,
        at_most,
        Some((floor.0.to_string(), floor.1)),
    ));
}

fn print_goals() {
    println!(
        "
goals (ratio of this run, at most):"
    );
    // A goal below its floor is judged at the floor: no command can take less than git's
    // dispatcher and git's own commands for the part of its job it may not leave out.
    for (what, ratio, at_most, floor) in GOALS.lock().expect("goals").iter() {
        let verdict = match floor {
            _ if ratio <= at_most => "met".to_string(),
            Some((least, f)) if f > at_most && ratio <= f => {
                format!("met at its floor ({least}: {f:.2}x)")
            }
            Some((least, f)) if f > at_most => {
                format!("missed: above its floor ({least}: {f:.2}x)")
            }
            Some((least, f)) => format!("missed ({least} alone: {f:.2}x)"),
            None => "missed".to_string(),
        };
        println!("{what:<44} {ratio:>6.2}x   <= {at_most:.1}x   {verdict}");
    }
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
        mut truth,
        mut plumbing,
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
        vec![],
        vec![],
    );
    let (mut fast_import, mut notes_show) = (vec![], vec![]);
    // What git's dispatcher in front of every `git tabellio` row costs: `git <command>` running
    // a program that does nothing, less that program alone.
    let nothing = NothingViaGit::new(b);
    let mut dispatcher = vec![];
    for i in 0..n {
        let id = format!("{label}{i}");
        let (ours, git) = b.start_beside(&id, &format!("plain-{label}{i}"), true);
        start.push(ours);
        wt_add.push(git);

        dispatcher.push(nothing.dispatcher(b));
        let wt = b.worktree(&id);
        b.commit_in(&wt, i);
        cp.push(b.tab_via_git(&wt, &["checkpoint"]));
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

        fin.push(b.tab_via_git(&wt, &["finish", "--", "true"]));
        upd.push(
            b.run(
                "git",
                &wt,
                &["update-ref", &format!("refs/bench/{label}{i}"), "HEAD"],
            )
            .0,
        );

        st.push(b.tab_via_git(&wt, &["status"]));
        porcelain.push(b.run("git", &wt, &["status", "--porcelain"]).0);
        // What status reports beside the worktree's state: the evidence on the head.
        let show = ["notes", "--ref=tabellio/evidence", "show", "HEAD"];
        notes_show.push(b.run("git", &wt, &show).0);
        truth.push(b.run("true", &wt, &[]).0);
    }
    // Promote each run in turn (each from the tip the previous one left) against update-ref
    // with an old value.
    for i in 0..n {
        let id = format!("{label}p{i}");
        b.validated_run(&id, 1000 + i);
        promote.push(b.tab_via_git(&b.repo, &["promote", &id]));
        upd_old.push(b.update_ref_with_old(&format!("refs/bench/promote-{label}{i}")));
        plumbing.push(b.promote_by_plumbing(&format!("refs/tabellio/runs/{id}"), i));
        fast_import.push(b.promote_by_fast_import(&format!("refs/tabellio/runs/{id}"), i));
    }
    // finish's overhead (finish -- true, less `true` itself) against what git would do by hand
    // around the check: look at the worktree and add a note.
    let overhead = median(fin.clone()).saturating_sub(median(truth.clone()));
    let by_hand = median(porcelain.clone()) + median(notes_add.clone());
    if label == "r" {
        // The floor under every row: a process that starts, prints one line and exits.
        let (mut ours, mut dispatched, mut git) = (vec![], vec![], vec![]);
        for _ in 0..n {
            ours.push(b.run(BIN, &b.repo, &["--version"]).0);
            dispatched.push(b.tab_via_git(&b.repo, &["--version"]));
            git.push(b.run("git", &b.repo, &["--version"]).0);
        }
        report("start-up (--version)", ours, git.clone(), "git --version");
        // What every row below pays for git's dispatcher in front: a second process.
        report(
            "git tabellio --version",
            dispatched.clone(),
            git.clone(),
            "git --version",
        );
        // git's dispatcher running a program that does nothing: the least any `git <external
        // command>` takes.
        let mut via = vec![];
        for _ in 0..n {
            via.push(b.run_command(nothing.command(), &b.repo).0);
        }
        report(
            "git tabellio --version",
            dispatched,
            via.clone(),
            "git <nothing>",
        );
        report("git <nothing>", via, git, "git --version");
    }
    // The least a dispatched command can take against `plumbing`: git's dispatcher (one more
    // git process) and `least`, git's own commands for the part of the job it may not leave out.
    let dispatched_floor_of = |least: &[Duration], plumbing: &[Duration]| {
        paired_ratio(&sum(&dispatcher, least), plumbing)
    };
    let dispatched_floor = |plumbing: &[Duration]| dispatched_floor_of(plumbing, plumbing);
    let start_floor = dispatched_floor(&wt_add);
    let start = report("start", start, wt_add, "git worktree add -b");
    // What a checkpoint does beside the note: refuse a dirty worktree (a `git status`).
    let status_and_note = sum(&porcelain, &notes_add);
    // git's own commands for what finish may not leave out: look at the worktree, run the
    // check, look again (the check must not have changed it) and note the evidence.
    let around_check = sum(&sum(&porcelain, &truth), &status_and_note);
    // git's own commands for the two jobs a checkpoint cannot leave out, against the goal's.
    let checkpoint_floor = dispatched_floor_of(&status_and_note, &notes_add);
    let checkpoint = report("checkpoint", cp.clone(), notes_add, "git notes add");
    report(
        "checkpoint",
        cp,
        status_and_note,
        "git status --porcelain + notes add",
    );
    let finish_floor = dispatched_floor_of(&around_check, &upd);
    let finish = report("finish (true)", fin, upd, "git update-ref");
    // git's own commands for what status must report: the worktree's state and its evidence.
    let status_and_show = sum(&porcelain, &notes_show);
    let status_floor = dispatched_floor_of(&status_and_show, &porcelain);
    let status = report("status", st, porcelain, "git status --porcelain");
    // git's one-process writer doing promote's writes alone (no reads, no judging, no
    // compare-and-swap), against the goal's.
    let promote_floor = dispatched_floor_of(&fast_import, &upd_old);
    let promote_ratio = report(
        "promote (ref-only)",
        promote.clone(),
        upd_old,
        "git update-ref <new> <old>",
    );
    // Its writes by git plumbing: the ledger's run.json, tree and commit, and both refs.
    report(
        "promote (ref-only)",
        promote.clone(),
        plumbing,
        "hash-object+mktree+commit-tree+upd",
    );
    report(
        "promote (ref-only)",
        promote,
        fast_import,
        "git fast-import of its writes",
    );
    let at = if label == "r" { "" } else { ", at scale" };
    let dispatcher_and = "git's dispatcher + the same";
    goal_with_floor(
        &format!("start / git worktree add -b{at}"),
        start,
        1.0,
        (dispatcher_and, start_floor),
    );
    goal_with_floor(
        &format!("finish (true) / git update-ref{at}"),
        finish,
        1.3,
        (
            "git's dispatcher + status, true, status, notes add",
            finish_floor,
        ),
    );
    goal_with_floor(
        &format!("checkpoint / git notes add{at}"),
        checkpoint,
        1.5,
        (
            "git's dispatcher + status --porcelain + notes add",
            checkpoint_floor,
        ),
    );
    goal_with_floor(
        &format!("status / git status --porcelain{at}"),
        status,
        1.5,
        (
            "git's dispatcher + status --porcelain + notes show",
            status_floor,
        ),
    );
    goal_with_floor(
        &format!("promote / git update-ref{at}"),
        promote_ratio,
        1.5,
        (
            "git's dispatcher + fast-import of its writes",
            promote_floor,
        ),
    );
    goal(
        &format!("finish overhead / (status + notes add){at}"),
        overhead.as_secs_f64() / by_hand.as_secs_f64(),
        2.0,
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

/// The run record of an ended run `id` off `head` (abandoned), as fast-import writes it.
fn ended_run_json(id: &str, head: &str) -> String {
    format!(
        "{{\"schema\":\"tabellio.run/v1\",\"run_id\":\"{id}\",\"state\":\"abandoned\",\"previous_state\":\"active\",\"task\":{{\"summary\":\"s\",\"text\":\"s\",\"sha256\":\"{z}\"}},\"actor\":{{\"type\":\"agent\",\"id\":\"b\"}},\"repository\":\"local/bench\",\"base\":{{\"ref\":\"refs/heads/main\",\"commit\":\"{head}\"}},\"branch\":\"refs/heads/tabellio/{id}\",\"checkpoints\":[],\"attempts\":[],\"validated\":null,\"promotion\":null,\"loop\":null,\"reason\":null,\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\"}}\n",
        z = "0".repeat(64)
    )
}

/// `live` ledgers of ended runs `l<i>` and `archived` runs `a<i>` folded into ten months of
/// archive (as `gc` writes it: each archive commit has up to 100 ledger tips as parents and
/// adds their `runs/<xx>/<id>.json` entries), all by one `git fast-import`.
fn populate_archive(b: &Bench, live: usize, archived: usize) {
    use sha2::Digest as _;
    let head = b.git(&["rev-parse", "main"]);
    let now = 1_767_225_600;
    let mut script = String::new();
    let mut mark = 1;
    let mut ledger = |script: &mut String, id: &str, refname: &str| -> usize {
        let run = ended_run_json(id, &head);
        script.push_str(&format!("blob\nmark :{mark}\ndata {}\n{run}\n", run.len()));
        let msg = format!("tabellio: abandon {id}: active -> abandoned\n");
        script.push_str(&format!(
            "commit {refname}\nmark :{}\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}M 100644 :{mark} run.json\n\n",
            mark + 1,
            msg.len()
        ));
        mark += 2;
        mark - 1
    };
    for i in 0..live {
        let id = format!("l{i}");
        ledger(&mut script, &id, &format!("refs/tabellio/runs/{id}"));
    }
    let months = 10;
    let per_month = archived.div_ceil(months).max(1);
    let mut tips = Vec::new();
    for i in 0..archived {
        let id = format!("a{i}");
        let tip = ledger(&mut script, &id, "refs/bench/ledgers");
        tips.push((id, tip));
        // Each ledger its own root commit: the scratch ref is reset after every one.
        script.push_str("reset refs/bench/ledgers\n\n");
    }
    // The entries name their ledger tips by id: the ledgers go in first, and the archive is
    // written once fast-import has said their ids.
    let marks = b.dir.path().join("marks");
    b.fast_import_with_marks(&script, &marks);
    let ids: std::collections::HashMap<usize, String> = std::fs::read_to_string(&marks)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(m, id)| Some((m.trim_start_matches(':').parse().ok()?, id.to_string())))
        .collect();
    let mut script = String::new();
    // (index path, entry) of every archived run, for the archive index.
    let mut indexed = Vec::new();
    for (m, month_runs) in tips.chunks(per_month).enumerate() {
        let refname = format!("refs/tabellio/archive/2026-{:02}", m + 1);
        for chunk in month_runs.chunks(100) {
            // The month's previous archive commit is the first parent (fast-import continues
            // the ref), the ledger tips the others.
            let msg = "tabellio: gc bench\n";
            script.push_str(&format!(
                "commit {refname}\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}",
                msg.len()
            ));
            for (_, tip) in chunk {
                script.push_str(&format!("merge :{tip}\n"));
            }
            for (id, tip) in chunk {
                let bucket = &format!("{:x}", sha2::Sha256::digest(id.as_bytes()))[..2];
                let entry = format!(
                    "{{\"schema\":\"tabellio.archived-run/v1\",\"run_id\":\"{id}\",\"ledger\":\"{}\",\"state\":\"abandoned\",\"branch\":\"refs/heads/tabellio/{id}\",\"head\":null,\"base\":\"refs/heads/main\",\"summary\":\"s\",\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\",\"archived_at\":\"2026-06-01T00:00:00Z\"}}\n",
                    ids[tip]
                );
                script.push_str(&format!(
                    "M 100644 inline runs/{bucket}/{id}.json\ndata {}\n{entry}\n",
                    entry.len()
                ));
                let hash = format!("{:x}", sha2::Sha256::digest(id.as_bytes()));
                indexed.push((
                    format!("runs/{}/{}/{id}.json", &hash[..2], &hash[2..4]),
                    entry,
                ));
            }
            script.push('\n');
        }
    }
    if script.is_empty() {
        return;
    }
    b.fast_import_with_marks(&script, &marks);
    // The archive index as `gc` writes it: one parentless commit listing the month tips it
    // covers, every run's entry at `runs/<xx>/<yy>/<id>.json`.
    let months = b.git(&[
        "for-each-ref",
        "--format=%(refname:lstrip=3) %(objectname)",
        "refs/tabellio/archive/",
    ]);
    let months = format!("{months}\n");
    let msg = "tabellio: archive index of 10 months\n";
    let mut script = format!(
        "commit refs/tabellio/archive-index\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}M 100644 inline months\ndata {}\n{months}\n",
        msg.len(),
        months.len()
    );
    for (path, entry) in indexed {
        script.push_str(&format!(
            "M 100644 inline {path}\ndata {}\n{entry}\n",
            entry.len()
        ));
    }
    script.push('\n');
    b.fast_import(&script);
}

impl Bench {
    /// A clone of `server` (its `main` checked out), which `sync` has brought up to date.
    fn synced_clone_of(server: &Bench) -> Bench {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path().join("repo");
        let b = Bench { dir, repo };
        b.run(
            "git",
            b.dir.path(),
            &[
                "clone",
                "-q",
                "-b",
                "main",
                server.repo.to_str().unwrap(),
                b.repo.to_str().unwrap(),
            ],
        );
        b.tab(&b.repo, &["sync"]);
        b
    }

    /// `count` new ended runs `<prefix><i>` (ledger refs) and an evidence note on each ledger
    /// commit (one notes commit on top of the current one), by one `git fast-import`: the ref
    /// names of the new ledgers.
    fn new_runs(&self, prefix: &str, count: usize) -> Vec<String> {
        let head = self.git(&["rev-parse", "main"]);
        let now = 1_767_225_600;
        let mut script = String::new();
        let mut names = Vec::new();
        for i in 0..count {
            let id = format!("{prefix}{i}");
            let run = ended_run_json(&id, &head);
            let name = format!("refs/tabellio/runs/{id}");
            let msg = format!("tabellio: abandon {id}: active -> abandoned\n");
            script.push_str(&format!(
                "commit {name}\nmark :{}\ncommitter bench <bench@example.com> {now} +0000\ndata {}\n{msg}M 100644 inline run.json\ndata {}\n{run}\n",
                i + 1,
                msg.len(),
                run.len()
            ));
            names.push(name);
        }
        let notes = "refs/notes/tabellio/evidence";
        let from = self
            .run_status("git", &["rev-parse", "-q", "--verify", notes])
            .map(|_| format!("from {notes}^0\n"))
            .unwrap_or_default();
        script.push_str(&format!(
            "commit {notes}\ncommitter bench <bench@example.com> {now} +0000\ndata 6\nbench\n{from}"
        ));
        for i in 0..count {
            let note = format!("{{\"bench\":\"{prefix}{i}\"}}\n");
            script.push_str(&format!(
                "N inline :{}\ndata {}\n{note}\n",
                i + 1,
                note.len()
            ));
        }
        script.push('\n');
        self.fast_import(&script);
        names
    }

    /// `git <args>`'s trimmed stdout when it succeeds, `None` when it fails.
    fn run_status(&self, program: &str, args: &[&str]) -> Option<String> {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.repo).stdin(Stdio::null());
        hermetic::apply(&mut cmd, self.dir.path());
        let out = cmd.output().expect("spawn");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Delete `names` in one `git update-ref --stdin` (each wherever it is).
    fn delete_refs(&self, names: &[String]) {
        let input: String = names.iter().map(|n| format!("delete {n}\n")).collect();
        self.with_input("git", &self.repo, &["update-ref", "--stdin"], &input);
    }
}

/// `sync` after 1,000 new runs (ledgers and an evidence note each), from a clone of a remote
/// that holds 1,000 live runs and 100,000 archived, against one `git push` of exactly the refs
/// that changed (the new ledgers and the notes ref) and one `git fetch` of the same refs; and
/// `sync` with nothing to do there against the same beside no archive. After each round the new
/// ledgers are deleted on both sides, so every round starts from 1,000 live runs.
fn sync_at_scale(n: usize, with: &Bench, alone: &Bench) {
    let client = Bench::synced_clone_of(with);
    let bare = Bench::synced_clone_of(alone);
    let (ours, theirs) = in_turn(
        n,
        |_| client.tab(&client.repo, &["sync"]),
        |_| bare.tab(&bare.repo, &["sync"]),
    );
    let idle = report(
        "sync, nothing to do, +100k archived",
        ours,
        theirs,
        "the same, 1k live only",
    );
    goal(
        "sync with nothing to do, 100k archived / 1k live only",
        idle,
        1.2,
    );
    let rounds = n.min(5);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let tracking = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .map(|n| n.replace("refs/tabellio/runs/", "refs/tabellio/remotes/origin/runs/"))
            .collect()
    };
    for round in 0..rounds {
        let names = client.new_runs(&format!("s{round}-"), 1_000);
        ours.push(client.tab(&client.repo, &["sync"]));
        with.delete_refs(&names);
        client.delete_refs(&names);
        client.delete_refs(&tracking(&names));

        let names = client.new_runs(&format!("g{round}-"), 1_000);
        let notes = "refs/notes/tabellio/evidence";
        let mut push = vec!["push", "-q", "origin"];
        let specs: Vec<String> = names
            .iter()
            .map(|n| format!("{n}:{n}"))
            .chain([format!("{notes}:{notes}")])
            .collect();
        push.extend(specs.iter().map(String::as_str));
        let mut fetch = vec!["fetch", "-q", "origin"];
        let fetched: Vec<String> = names
            .iter()
            .zip(tracking(&names))
            .map(|(n, t)| format!("+{n}:{t}"))
            .chain([format!(
                "+{notes}:refs/notes/tabellio/remotes/origin/evidence"
            )])
            .collect();
        fetch.extend(fetched.iter().map(String::as_str));
        let took =
            client.run("git", &client.repo, &push).0 + client.run("git", &client.repo, &fetch).0;
        theirs.push(took);
        with.delete_refs(&names);
        client.delete_refs(&names);
        client.delete_refs(&tracking(&names));
    }
    let ratio = report(
        "sync after 1,000 new runs, +100k archived",
        ours,
        theirs,
        "git push + git fetch of those refs",
    );
    goal(
        "sync of 1,000 new runs / git push + fetch of them",
        ratio,
        1.5,
    );
}

/// `ours` and `theirs` taken in turn, `n` times each: their times, for a paired ratio.
fn in_turn(
    n: usize,
    mut ours: impl FnMut(usize) -> Duration,
    mut theirs: impl FnMut(usize) -> Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    (0..n).map(|i| (ours(i), theirs(i))).unzip()
}

/// 1,000 live ended runs beside 100,000 archived ones, against the same 1,000 alone, each
/// command taken in turn in the two repositories: `list`, `status` of a live run, `start`
/// (which also makes sure the id is not archived), `land` of one run, `verify`, `gc
/// --dry-run`, `sync` (nothing to do, and 1,000 new runs); and `log` of an archived run
/// against a live one. Both repositories are packed by `git gc` first, as a long-lived one is:
/// the rows compare what the archive costs, not how many packs `git fast-import` left. Then
/// `git tabellio gc` (nothing due) writes their multi-pack index, as every `gc` keeps it; one
/// row first takes `status <run>` without it, as a plain `git gc` leaves the packs.
fn retention(n: usize) {
    let alone = Bench::new();
    populate_archive(&alone, 1_000, 0);
    let with = Bench::new();
    populate_archive(&with, 1_000, 100_000);
    for b in [&with, &alone] {
        validated_range(b, "bench-long", "long ", 10_000);
        b.git(&["gc", "-q"]);
    }
    let (ours, theirs) = in_turn(
        n,
        |_| with.run_any(BIN, &with.repo, &["status", "l7"], ""),
        |_| alone.run_any(BIN, &alone.repo, &["status", "l7"], ""),
    );
    report(
        "status <run>, +100k archived, no multi-pack index",
        ours,
        theirs,
        "the same, 1k live only",
    );
    for b in [&with, &alone] {
        b.tab(&b.repo, &["gc", "--archive-after", "1000w"]);
        assert!(
            b.repo.join(".git/objects/pack/multi-pack-index").is_file(),
            "gc writes the multi-pack index"
        );
    }
    let live_refs = with
        .git(&["for-each-ref", "--format=x", "refs/tabellio/"])
        .lines()
        .count();
    println!("live refs under refs/tabellio/ beside 100,000 archived runs: {live_refs}");
    let row = |what: &str, args: &[&str], at_most: Option<f64>| {
        // `verify` exits 1 on a commit without evidence: any exit code counts.
        let (ours, theirs) = in_turn(
            n,
            |_| with.run_any(BIN, &with.repo, args, ""),
            |_| alone.run_any(BIN, &alone.repo, args, ""),
        );
        let ratio = report(
            &format!("{what}, +100k archived"),
            ours,
            theirs,
            "the same, 1k live only",
        );
        if let Some(at_most) = at_most {
            goal(
                &format!("{what} with 100k archived / 1k live only"),
                ratio,
                at_most,
            );
        }
    };
    list_beside_its_floor(n, &with, &alone);
    row("status <run>", &["status", "l7"], Some(1.2));
    let start = |b: &Bench, i: usize| -> Duration {
        b.tab(
            &b.repo,
            &[
                "start",
                &format!("n{i}"),
                "--task",
                "bench",
                "--base",
                "main",
            ],
        )
    };
    let (ours, theirs) = in_turn(n, |i| start(&with, i), |i| start(&alone, i));
    let ratio = report(
        "start, +100k archived",
        ours,
        theirs,
        "the same, 1k live only",
    );
    goal("start with 100k archived / 1k live only", ratio, 1.2);
    for b in [&with, &alone] {
        require_true_on_main(b);
    }
    let (ours, theirs) = in_turn(
        n,
        |i| land_one(&with, &format!("land{i}"), i),
        |i| land_one(&alone, &format!("land{i}"), i),
    );
    let ratio = report(
        "land of one run, +100k archived",
        ours,
        theirs,
        "the same, 1k live only",
    );
    goal(
        "land of one run with 100k archived / 1k live only",
        ratio,
        1.2,
    );
    let (ours, theirs) = in_turn(
        n,
        |_| with.tab(&with.repo, &["log", "a99999"]),
        |_| with.tab(&with.repo, &["log", "l7"]),
    );
    let log = report("log <archived run>", ours, theirs, "log <live run>");
    goal("log of an archived run / a live one", log, 2.0);
    row("verify main", &["verify", "main"], None);
    row(
        "gc --dry-run",
        &["gc", "--dry-run", "--archive-after", "0"],
        None,
    );
    // Before the sync rows, which add 1,000 runs and their notes to one side only: the two
    // repositories then differ by the archive alone.
    peak_memory(n, &with, &alone);
    sync_at_scale(n, &with, &alone);
}

/// `list` beside the archive against `list` alone, and its floor: `list` alone plus what the
/// archive adds to the same reads done by git's own plumbing (`git for-each-ref` of the ledgers
/// and one `git cat-file --batch` of what `list` reads of each: its commit, tree and `run.json`,
/// the bench's ledgers holding nothing else, by object id). The archive makes every object
/// lookup search an index 30 times larger: a cost in time per lookup, the same for any reader,
/// so the floor adds git's extra time rather than multiplying by git's ratio (which would ask
/// less of a slower reader).
fn list_beside_its_floor(n: usize, with: &Bench, alone: &Bench) {
    let objects = |b: &Bench| -> String {
        let tips = b.git(&[
            "for-each-ref",
            "--format=%(objectname)",
            "refs/tabellio/runs/",
        ]);
        let mut names = String::new();
        for tip in tips.lines() {
            names.push_str(&format!("{tip}\n{tip}^{{tree}}\n{tip}:run.json\n"));
        }
        let (_, ids) = b.run_with_input(
            "git",
            &b.repo,
            &["cat-file", "--batch-check=%(objectname)"],
            &names,
        );
        assert!(!ids.contains("missing"), "every ledger holds run.json");
        ids + "\n"
    };
    let plumbing = |b: &Bench, ids: &str| -> Duration {
        let refs = ["for-each-ref", "refs/tabellio/runs/"];
        b.run_any("git", &b.repo, &refs, "")
            + b.run_any("git", &b.repo, &["cat-file", "--batch"], ids)
    };
    let (with_ids, alone_ids) = (objects(with), objects(alone));
    let (ours, theirs) = in_turn(
        n,
        |_| with.run_any(BIN, &with.repo, &["list"], ""),
        |_| alone.run_any(BIN, &alone.repo, &["list"], ""),
    );
    let list_alone = median(theirs.clone()).as_secs_f64();
    let ratio = report(
        "list, +100k archived",
        ours,
        theirs,
        "the same, 1k live only",
    );
    let (git_with, git_alone) = in_turn(
        n,
        |_| plumbing(with, &with_ids),
        |_| plumbing(alone, &alone_ids),
    );
    let added = median(git_with.clone()).as_secs_f64() - median(git_alone.clone()).as_secs_f64();
    report(
        "  its reads by git, +100k",
        git_with,
        git_alone,
        "the same, 1k live only",
    );
    println!("  the archive adds {:.2} ms to git's reads", added * 1e3);
    goal_with_floor(
        "list with 100k archived / 1k live only",
        ratio,
        1.2,
        (
            "list alone + what the archive adds to git's same reads",
            (list_alone + added) / list_alone,
        ),
    );
}

/// `count` commits on `branch` from `main`, sharing its tree (the messages `<prefix><i>`), each
/// with an evidence record of its own: one `validate` of the tip makes the first, the others are
/// its copies with their commit, tree and digest, noted by `git fast-import`. The tree and the
/// record's text of every commit, newest first.
fn validated_range(b: &Bench, branch: &str, prefix: &str, count: usize) -> Vec<(String, String)> {
    let mut script = format!("reset refs/heads/{branch}\nfrom refs/heads/main\n\n");
    for i in 0..count {
        let msg = format!("{prefix}{i}\n");
        script.push_str(&format!(
            "commit refs/heads/{branch}\ncommitter bench <bench@example.com> 1767225600 +0000\ndata {}\n{msg}\n",
            msg.len()
        ));
    }
    b.fast_import(&script);
    let tip = b.git(&["rev-parse", branch]);
    b.tab(
        &b.repo,
        &["validate", tip.as_str(), "--no-sign", "--", "true"],
    );
    let template = first_record(b, &tip);
    let parent = b.git(&["rev-parse", "refs/notes/tabellio/evidence"]);
    let mut notes = format!(
        "commit refs/notes/tabellio/evidence\ncommitter bench <bench@example.com> 1767225600 +0000\ndata 5\nbench\nfrom {parent}\n",
    );
    let mut records = Vec::new();
    for line in b
        .git(&["log", "--format=%H %T", &format!("main..{branch}")])
        .lines()
    {
        let (commit, tree) = line.split_once(' ').unwrap();
        let mut rec = template.clone();
        rec["commit"] = commit.into();
        rec["tree"] = tree.into();
        let digest = tabellio::trust::signed_digest(&rec).unwrap();
        rec["digest"] = digest.into();
        let text = format!("{}\n", serde_json::to_string(&rec).unwrap());
        notes.push_str(&format!("N inline {commit}\ndata {}\n{text}\n", text.len()));
        records.push((tree.to_string(), text));
    }
    b.fast_import(&notes);
    records
}

/// Peak memory of `verify` of 10,000 commits with a record each, and of one `land` of 100
/// finished runs onto a moved `main`, beside 100,000 archived runs and beside none: what the
/// process allocates must not grow with the archive. Its whole resident set is printed too,
/// which also counts the pages of the (larger) pack and pack index it mapped and read.
fn peak_memory(n: usize, with: &Bench, alone: &Bench) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let row = |what: &str, ours: Peak, theirs: Peak| {
        let ratio = ours.anonymous as f64 / theirs.anonymous as f64;
        println!(
            "{what:<28} {:>6.1} MiB ({:>6.1} MiB resident, {:>6.0} ms)   the same, 1k live only {:>6.1} MiB ({:>6.1} MiB resident, {:>6.0} ms)   ratio {ratio:>5.2}x",
            mib(ours.anonymous),
            mib(ours.resident),
            ours.took.as_secs_f64() * 1e3,
            mib(theirs.anonymous),
            mib(theirs.resident),
            theirs.took.as_secs_f64() * 1e3,
        );
        goal(
            &format!("peak memory of {what}, 100k archived / 1k live"),
            ratio,
            1.1,
        );
    };
    // The median run of each side by its peak (a peak hardly moves between runs).
    let median_of = |mut v: Vec<Peak>| {
        v.sort_by_key(|m| m.anonymous);
        v[v.len() / 2]
    };
    let verify = ["verify", "main..bench-long"];
    let (ours, theirs) = (0..n.min(5))
        .map(|_| {
            (
                with.peak_memory(BIN, &with.repo, &verify, false),
                alone.peak_memory(BIN, &alone.repo, &verify, false),
            )
        })
        .unzip();
    row(
        "verify of 10,000 commits",
        median_of(ours),
        median_of(theirs),
    );
    let land_100 = |b: &Bench, round: usize| -> Peak {
        let ids: Vec<String> = (0..100).map(|k| format!("m{round}-{k}")).collect();
        for (k, id) in ids.iter().enumerate() {
            b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
            let wt = b.worktree(id);
            b.commit_in(&wt, 7000 + 100 * round + k);
            b.tab(&wt, &["finish"]);
        }
        move_main(b);
        let mut args = vec!["land"];
        args.extend(ids.iter().map(String::as_str));
        b.peak_memory(BIN, &b.repo, &args, true)
    };
    let (ours, theirs) = (0..n.min(2))
        .map(|round| (land_100(with, round), land_100(alone, round)))
        .unzip();
    row("land of 100 runs", median_of(ours), median_of(theirs));
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
    b.fast_import(&range_script());
    let range = verify_range(b, "main..bench-range", n, "verify (1,000 commits)");
    goal("verify of 1,000 commits / git log --notes", range, 2.0);

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

/// A repository whose `main` requires check `t` and protects `main`, with `trust` (an ed25519
/// key made here allowed) when `signed`; 1,000 commits on `bench-range`, each with a passing
/// record of `t` (signed when `signed`). The range tip and the key.
fn trust_repo(signed: bool) -> (Bench, String) {
    let b = Bench::new();
    let key = b.dir.path().join("ci");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "ci", "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success());
    let public = std::fs::read_to_string(b.dir.path().join("ci.pub")).unwrap();
    b.git(&["switch", "-q", "main"]);
    let mut policy = serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {"t": {"argv": ["true"], "timeout_s": 60}},
        "required": ["t"],
        "protect": ["refs/heads/main"],
    });
    if signed {
        policy["trust"] = serde_json::json!({"allowed_signers": ".tabellio/allowed_signers", "require_signed": "*"});
        std::fs::create_dir_all(b.repo.join(".tabellio")).unwrap();
        std::fs::write(
            b.repo.join(".tabellio/allowed_signers"),
            format!("ci@example.com {public}"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(b.repo.join(".tabellio")).unwrap();
    std::fs::write(b.repo.join(".tabellio/policy.json"), policy.to_string()).unwrap();
    b.git(&["add", "-A"]);
    b.git(&["commit", "-q", "-m", "policy"]);
    b.git(&["switch", "-q", "bench-home"]);
    b.fast_import(&range_script());
    // One real record (run by `validate` on the tip) is the template of all the others.
    let tip = b.git(&["rev-parse", "bench-range"]);
    let sign_args: Vec<&str> = if signed {
        vec!["--sign-key", key.to_str().unwrap()]
    } else {
        vec!["--no-sign"]
    };
    let mut args = vec!["validate", tip.as_str()];
    args.extend(sign_args);
    b.tab(&b.repo, &args);
    let template = first_record(&b, &tip);
    let signer = tabellio::trust::SigningConfig::new(tabellio::trust::SigningKey::File(key));
    let parent = b.git(&["rev-parse", "refs/notes/tabellio/evidence"]);
    let mut notes = format!(
        "commit refs/notes/tabellio/evidence\ncommitter bench <bench@example.com> 1767225600 +0000\ndata 5\nbench\nfrom {parent}\n",
    );
    for line in b
        .git(&["log", "--format=%H %T", "main..bench-range^"])
        .lines()
    {
        let (commit, tree) = line.split_once(' ').unwrap();
        let mut rec = template.clone();
        rec["commit"] = commit.into();
        rec["tree"] = tree.into();
        if let Some(map) = rec.as_object_mut() {
            map.remove("signature");
        }
        let digest = tabellio::trust::signed_digest(&rec).unwrap();
        rec["digest"] = digest.clone().into();
        if signed {
            let sig = signer.sign_digest(&digest, "ci@example.com").unwrap();
            rec["signature"] = serde_json::to_value(sig).unwrap();
        }
        let text = format!("{}\n", serde_json::to_string(&rec).unwrap());
        notes.push_str(&format!("N inline {commit}\ndata {}\n{text}\n", text.len()));
    }
    b.fast_import(&notes);
    (b, tip)
}

/// `verify` and the reference-transaction hook on a protected ref, with signature checks
/// against the same without `trust`: the cost of judging signatures.
fn signatures(n: usize) {
    let (plain, plain_tip) = trust_repo(false);
    let (signed, signed_tip) = trust_repo(true);
    let (mut with, mut without) = (vec![], vec![]);
    for _ in 0..n {
        with.push(signed.run_any(BIN, &signed.repo, &["verify", &signed_tip], ""));
        without.push(plain.run_any(BIN, &plain.repo, &["verify", &plain_tip], ""));
    }
    report(
        "verify (one commit, signed)",
        with,
        without,
        "the same, unsigned",
    );
    let range = "main..bench-range";
    let (mut with, mut without, mut log) = (vec![], vec![], vec![]);
    for _ in 0..n.min(7) {
        with.push(signed.tab_via_git_any(&signed.repo, &["verify", range], ""));
        without.push(plain.tab_via_git_any(&plain.repo, &["verify", range], ""));
        log.push(plain.run_any(
            "git",
            &plain.repo,
            &["log", "--notes=tabellio/evidence", "--format=%H %N", range],
            "",
        ));
    }
    let evidence = report(
        "verify (1,000, with records)",
        without.clone(),
        log,
        "git log --notes --format=%H%N",
    );
    goal(
        "verify of 1,000 commits with records / git log",
        evidence,
        1.5,
    );
    report("verify (1,000 signed)", with, without, "the same, unsigned");
    let (mut with, mut without) = (vec![], vec![]);
    let line =
        |b: &Bench, tip: &str| format!("{} {tip} refs/heads/main\n", b.git(&["rev-parse", "main"]));
    let (signed_line, plain_line) = (line(&signed, &signed_tip), line(&plain, &plain_tip));
    for _ in 0..n {
        let args = ["hook", "reference-transaction", "prepared"];
        with.push(signed.run_any(BIN, &signed.repo, &args, &signed_line));
        without.push(plain.run_any(BIN, &plain.repo, &args, &plain_line));
    }
    report(
        "hook (protected, signed)",
        with,
        without,
        "the same, unsigned",
    );
}

/// 1,000 empty commits that share `main`'s tree, each validated: every record is noted on its
/// commit and on the shared tree, whose note so holds 1,000 records. `verify` of the range
/// against `git log --notes` printing them.
fn shared_tree(n: usize) {
    let b = &Bench::new();
    let records = validated_range(b, "bench-empty", "e", 1000);
    let tree = records[0].0.clone();
    let tree_note: String = records.iter().map(|(_, text)| text.as_str()).collect();
    let mut sorted: Vec<&str> = tree_note.lines().collect();
    sorted.sort_unstable();
    let file = b.dir.path().join("tree-note");
    std::fs::write(&file, sorted.join("\n") + "\n").unwrap();
    let file = file.to_str().unwrap().to_string();
    b.git(&[
        "notes",
        "--ref=tabellio/evidence",
        "add",
        "-f",
        "-F",
        &file,
        &tree,
    ]);
    verify_range(b, "main..bench-empty", n, "verify (1,000, one tree)");
}

/// The first evidence record noted on `tip`, as JSON: the template of generated records.
fn first_record(b: &Bench, tip: &str) -> serde_json::Value {
    let note = b.git(&["notes", "--ref=tabellio/evidence", "show", tip]);
    serde_json::from_str(note.lines().next().unwrap()).unwrap()
}

/// `verify` of `range` against `git log --notes` printing the same notes.
fn verify_range(b: &Bench, range: &str, n: usize, label: &str) -> f64 {
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
    report(label, ours, theirs, "git log --notes --format=%H%N")
}

/// A `git fast-import` script of 1,000 commits on `bench-range`, from `main`.
fn range_script() -> String {
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
    script
}

/// A fresh repository whose `main` requires one check, `true`.
fn land_repo() -> Bench {
    let b = Bench::new();
    require_true_on_main(&b);
    b
}

/// Commit a policy on `main` that requires one check, `true`, and protects `main`.
fn require_true_on_main(b: &Bench) {
    b.git(&["switch", "-q", "main"]);
    std::fs::create_dir_all(b.repo.join(".tabellio")).unwrap();
    std::fs::write(
        b.repo.join(".tabellio/policy.json"),
        r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["true"],"timeout_s":60}},"required":["t"],"protect":["refs/heads/main"]}"#,
    )
    .unwrap();
    b.git(&["add", ".tabellio/policy.json"]);
    b.git(&["commit", "-q", "-m", "policy"]);
    b.git(&["switch", "-q", "bench-home"]);
}

/// `land` of one finished run `id` onto a moved `main` (which requires `true`): the time of
/// `land` alone.
fn land_one(b: &Bench, id: &str, file: usize) -> Duration {
    b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
    let wt = b.worktree(id);
    b.commit_in(&wt, 5000 + file);
    b.tab(&wt, &["finish"]);
    move_main(b);
    b.tab(&b.repo, &["land", id])
}

/// Move `main` by an empty commit (same tree), as another landing would without touching files.
fn move_main(b: &Bench) {
    let tip = b.git(&["rev-parse", "main"]);
    let moved = b.git(&["commit-tree", "main^{tree}", "-p", &tip, "-m", "moved"]);
    b.git(&["update-ref", "refs/heads/main", &moved, &tip]);
}

/// `land` onto a moved target: one run (restacked; its tree is unchanged, so the evidence of
/// `finish` is reused and no check runs) and a batch of 8 (restacked; the top's new tree is
/// validated once), against replaying the same commits with `git cherry-pick` in a detached
/// worktree and moving a ref with `git update-ref <new> <old>`.
fn land(n: usize) {
    let b = land_repo();
    let plain = b.dir.path().join("plain-land");
    b.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        plain.to_str().unwrap(),
        "main",
    ]);
    // Replay `commits` onto `onto` the git way; the time of the three processes.
    let replay = |onto: &str, commits: &[String], i: usize| -> Duration {
        let mut took = b
            .run("git", &plain, &["checkout", "-q", "--detach", onto])
            .0;
        let mut args = vec!["cherry-pick", "--allow-empty"];
        args.extend(commits.iter().map(String::as_str));
        took += b.run("git", &plain, &args).0;
        let name = format!("refs/bench/land-{i}");
        b.git(&["update-ref", &name, onto]);
        took += b.run("git", &plain, &["update-ref", &name, "HEAD", onto]).0;
        took
    };
    let finished = |id: &str, file: usize| -> String {
        b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
        let wt = b.worktree(id);
        b.commit_in(&wt, file);
        b.tab(&wt, &["finish"]);
        b.run("git", &wt, &["rev-parse", "HEAD"]).1
    };
    let (mut one, mut one_git) = (vec![], vec![]);
    for i in 0..n {
        let id = format!("l{i}");
        let head = finished(&id, 2000 + i);
        move_main(&b);
        let onto = b.git(&["rev-parse", "main"]);
        one_git.push(replay(&onto, &[head], i));
        one.push(b.tab(&b.repo, &["land", &id]));
    }
    let (mut batch, mut batch_git) = (vec![], vec![]);
    for i in 0..n.min(5) {
        let ids: Vec<String> = (0..8).map(|k| format!("b{i}-{k}")).collect();
        let heads: Vec<String> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| finished(id, 3000 + 8 * i + k))
            .collect();
        move_main(&b);
        let onto = b.git(&["rev-parse", "main"]);
        batch_git.push(replay(&onto, &heads, 1000 + i));
        let mut args = vec!["land"];
        args.extend(ids.iter().map(String::as_str));
        batch.push(b.tab(&b.repo, &args));
    }
    report(
        "land (1 run, moved target)",
        one,
        one_git,
        "git checkout+cherry-pick+update-ref",
    );
    report(
        "land (batch of 8)",
        batch,
        batch_git,
        "git checkout+cherry-pick+update-ref",
    );
}

/// A command without a run id outside any run worktree (it fails with the hint) at this
/// repository's number of runs. (`checkpoint`: `status` there is the overview of every run, which
/// reads every ledger as `list` does.)
fn idless(b: &Bench, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| b.run_any(BIN, &b.repo, &["checkpoint"], ""))
        .collect()
}

/// `git commit --allow-empty` and `git update-ref` in a fresh repository without and with the
/// hooks installed (the shims find `git-tabellio` on `PATH`).
fn hooks_overhead(n: usize) {
    let path = path_with_bin();
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
    // The floor of any `reference-transaction` hook: one that does nothing. git starts it five
    // times per `git commit` (two transactions, and an aborted one), whatever it does.
    let empty = Bench::new();
    let hook = empty.repo.join(".git/hooks/reference-transaction");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").expect("empty hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let (mut with, mut without, mut upd_with, mut upd_without) = (vec![], vec![], vec![], vec![]);
    let (mut with_empty, mut with_again) = (vec![], vec![]);
    for _ in 0..n {
        let commit = ["commit", "-q", "--allow-empty", "-m", "e"];
        without.push(time(&plain, &commit));
        with.push(time(&hooked, &commit));
        with_empty.push(time(&empty, &commit));
        with_again.push(time(&hooked, &commit));
        let update = ["update-ref", "refs/heads/bench-x", "HEAD"];
        upd_without.push(time(&plain, &update));
        upd_with.push(time(&hooked, &update));
    }
    let floor = report(
        "git commit, an empty hook",
        with_empty.clone(),
        without.clone(),
        "git commit without hooks",
    );
    let beside_empty = report(
        "git commit, hooks installed",
        with_again,
        with_empty,
        "git commit, an empty hook",
    );
    let commit = report(
        "git commit, hooks installed",
        with,
        without,
        "git commit without hooks",
    );
    goal(
        "git commit, hooks installed / an empty hook",
        beside_empty,
        1.2,
    );
    goal_with_floor(
        "git commit, hooks installed / without",
        commit,
        1.3,
        ("an empty reference-transaction hook", floor),
    );
    report(
        "git update-ref, hooks",
        upd_with,
        upd_without,
        "git update-ref without hooks",
    );
}

/// `status` (of a completed run) and ref-only `promote` with 0, 50 and 200 live run worktrees.
fn live_worktrees(n: usize) {
    // Three repositories, taken in turn in every iteration so that each row is paired.
    let repos: Vec<(usize, Bench)> = [0, 50, 200]
        .into_iter()
        .map(|live| {
            let b = Bench::new();
            for i in 0..live {
                b.tab(&b.repo, &["start", &format!("live{i}"), "--task", "bench"]);
            }
            (live, b)
        })
        .collect();
    // start, status, promote, and `git branch -f` (which, like promote, asks whether the branch
    // is checked out in any worktree) in each repository.
    let mut rows: Vec<[Vec<Duration>; 4]> = (0..repos.len()).map(|_| Default::default()).collect();
    for i in 0..n {
        for ((_, b), row) in repos.iter().zip(rows.iter_mut()) {
            let id = format!("w{i}");
            row[0].push(b.tab(
                &b.repo,
                &["start", &id, "--task", "bench", "--base", "main"],
            ));
            let wt = b.worktree(&id);
            b.commit_in(&wt, i);
            b.tab(&wt, &["finish", "--", "true"]);
            row[1].push(b.tab(&wt, &["status"]));
            row[2].push(b.tab(&b.repo, &["promote", &id]));
            row[3].push(
                b.run("git", &b.repo, &["branch", "-f", "bench-x", "main"])
                    .0,
            );
        }
    }
    let [start0, st0, pr0, branch0] = rows.remove(0);
    for ((live, _), [start, st, promote, branch]) in repos.iter().skip(1).zip(rows) {
        report(
            &format!("start, {live} worktrees"),
            start,
            start0.clone(),
            "start, 0 worktrees",
        );
        let status = report(
            &format!("status, {live} worktrees"),
            st,
            st0.clone(),
            "status, 0 worktrees",
        );
        let promote = report(
            &format!("promote, {live} worktrees"),
            promote,
            pr0.clone(),
            "promote, 0 worktrees",
        );
        let git = report(
            &format!("git branch -f, {live} worktrees"),
            branch,
            branch0.clone(),
            "git branch -f, 0 worktrees",
        );
        if *live == 200 {
            let floor = ("git branch -f", git);
            goal_with_floor("status, 200 worktrees / 0", status, 1.2, floor);
            goal_with_floor("promote, 200 worktrees / 0", promote, 1.2, floor);
        }
    }
}

/// A reftable repository with 50 live run worktrees: `start`, `status`, ref-only `promote` and
/// `verify` of one commit against the git commands of the same jobs there. gix cannot read a reftable
/// stack, so every ref these read is read by a `git` process (one `git worktree list` for all
/// the worktrees' `HEAD`s): the rows show what that costs beside git itself.
fn reftable(n: usize) {
    let b = Bench::new_in_format("reftable");
    for i in 0..50 {
        b.tab(&b.repo, &["start", &format!("live{i}"), "--task", "bench"]);
    }
    let (mut st, mut porcelain, mut promote, mut upd_old) = (vec![], vec![], vec![], vec![]);
    let (mut verify, mut notes_show, mut start, mut wt_add) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let (ours, git) = b.start_beside_worktree_add(&format!("s{i}"), &format!("plain-s{i}"));
        start.push(ours);
        wt_add.push(git);
        let id = format!("t{i}");
        let wt = b.validated_run(&id, i);
        st.push(b.tab(&wt, &["status"]));
        porcelain.push(b.run("git", &wt, &["status", "--porcelain"]).0);
        verify.push(b.tab(&wt, &["verify", "HEAD"]));
        let show = ["notes", "--ref=tabellio/evidence", "show", "HEAD"];
        notes_show.push(b.run("git", &wt, &show).0);
        promote.push(b.tab(&b.repo, &["promote", &id]));
        upd_old.push(b.update_ref_with_old(&format!("refs/bench/promote-t{i}")));
    }
    report("start", start, wt_add, "git worktree add -b");
    report("status", st, porcelain, "git status --porcelain");
    report(
        "promote (ref-only)",
        promote,
        upd_old,
        "git update-ref <new> <old>",
    );
    report("verify (one commit)", verify, notes_show, "git notes show");
}

/// A run with 300 checkpoints against a run with one: `checkpoint` and `status`, each taken in
/// turn with the same command in the young run. What grows is reading the history (one loose
/// object per entry) and what the ancestry check walks. Then the same after `git gc` packed
/// the history written so far.
fn long_run(n: usize) {
    let b = Bench::new();
    for id in ["old", "young"] {
        b.tab(&b.repo, &["start", id, "--task", "bench", "--base", "main"]);
    }
    let (old, young) = (b.worktree("old"), b.worktree("young"));
    for i in 0..300 {
        b.commit_in(&old, i);
        b.tab(&old, &["checkpoint"]);
    }
    b.commit_in(&young, 0);
    b.tab(&young, &["checkpoint"]);
    for (first, when) in [
        (1000, "run of 300 checkpoints"),
        (2000, "the same after git gc"),
    ] {
        if first == 2000 {
            // As git's automatic gc does once enough loose objects pile up: the history read
            // so far is packed, what the next transitions write is loose.
            b.run("git", &b.repo, &["gc", "-q"]);
        }
        let (mut cp_old, mut cp_young, mut st_old, mut st_young) = (vec![], vec![], vec![], vec![]);
        for i in 0..n {
            b.commit_in(&old, first + i);
            b.commit_in(&young, first + i);
            cp_old.push(b.tab(&old, &["checkpoint"]));
            cp_young.push(b.tab(&young, &["checkpoint"]));
            st_old.push(b.tab(&old, &["status"]));
            st_young.push(b.tab(&young, &["status"]));
        }
        let row = format!("checkpoint, {when}");
        report(&row, cp_old, cp_young, "checkpoint, run of 1");
        report(
            &format!("status, {when}"),
            st_old,
            st_young,
            "status, run of 1",
        );
    }
}

/// A repository whose `main` has 20,000 files (200 directories of 100), checked out in the main
/// worktree: each command of a run's life against the git commands a person would run for the
/// same work, taken in turn. `start` against `git worktree add -b`; `status` against `git
/// status`; `checkpoint` of a one-file commit against `git status` + `git notes add`; `finish --
/// true` against `git status`, the check, `git status` again and `git notes add`; and the
/// promotion onto the checked-out `main` of a one-file change against `git merge --ff-only` of
/// the same commit in a second worktree of the same size.
fn large_worktree(n: usize) {
    let b = Bench::new();
    let mut script = String::from(
        "commit refs/heads/main\ncommitter bench <bench@example.com> 1767225600 +0000\ndata 6\nlarge\nfrom refs/heads/main^0\n",
    );
    for d in 0..200 {
        for f in 0..100 {
            let body = format!("file {d}/{f}\n");
            script.push_str(&format!(
                "M 100644 inline d{d:03}/f{f:03}.txt\ndata {}\n{body}\n",
                body.len()
            ));
        }
    }
    b.fast_import(&script);
    b.git(&["switch", "-q", "main"]);
    // git's side moves its own checkout of the same commits.
    let plain = b.dir.path().join("plain");
    b.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "plain-main",
        plain.to_str().unwrap(),
        "main",
    ]);
    let note = |wt: &Path, notes: &str| -> Duration {
        let args = ["notes", notes, "add", "-f", "-m", "{\"x\":1}", "HEAD"];
        b.run("git", wt, &args).0
    };
    let (mut start, mut wt_add, mut st, mut git_st) = (vec![], vec![], vec![], vec![]);
    let (mut cp, mut cp_git, mut fin, mut fin_git) = (vec![], vec![], vec![], vec![]);
    let (mut promote, mut merge) = (vec![], vec![]);
    for i in 0..n {
        let id = format!("big{i}");
        let (ours, git) = b.start_beside_worktree_add(&id, &format!("plain-wt{i}"));
        start.push(ours);
        wt_add.push(git);
        let wt = b.worktree(&id);
        std::fs::write(wt.join("d100/f050.txt"), format!("changed {i}\n")).unwrap();
        b.run("git", &wt, &["commit", "-q", "-am", "one file"]);
        st.push(b.tab(&wt, &["status"]));
        git_st.push(b.run("git", &wt, &["status"]).0);
        cp.push(b.tab(&wt, &["checkpoint"]));
        let t0 = Instant::now();
        b.run("git", &wt, &["status"]);
        note(&wt, "--ref=bench/checkpoints");
        cp_git.push(t0.elapsed());
        fin.push(b.tab(&wt, &["finish", "--", "true"]));
        // A person's finish: the worktree is clean, the check, still clean, note the evidence.
        let t0 = Instant::now();
        b.run("git", &wt, &["status"]);
        b.run("true", &wt, &[]);
        b.run("git", &wt, &["status"]);
        note(&wt, "--ref=bench/evidence");
        fin_git.push(t0.elapsed());

        let new = b.run("git", &wt, &["rev-parse", "HEAD"]).1;
        promote.push(b.tab(&b.repo, &["promote", &id]));
        merge.push(b.run("git", &plain, &["merge", "-q", "--ff-only", &new]).0);
    }
    let rows = [
        ("start", start, wt_add, "git worktree add -b"),
        ("status", st, git_st, "git status"),
        ("checkpoint", cp, cp_git, "git status + notes add"),
        (
            "finish (true)",
            fin,
            fin_git,
            "2x git status + true + notes add",
        ),
        ("promote checked-out", promote, merge, "git merge --ff-only"),
    ];
    for (what, ours, theirs, git) in rows {
        let ratio = report(&format!("{what}, 20,000 files"), ours, theirs, git);
        goal(&format!("{what}, 20,000 files / {git}"), ratio, 1.1);
    }
}

/// Bytes the ledger of a run with a 100 KB task grows by per transition (20 checkpoints, then
/// finish and promote): the objects reachable from the ledger that the transitions added, as
/// stored (loose, compressed).
fn ledger_growth() {
    let b = Bench::new();
    // Hex of a hash chain: text that compression cannot shrink below about half.
    let mut task = String::from("Do the big thing\n");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while task.len() < 100 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        task.push_str(&format!("{x:016x}\n"));
    }
    let file = b.dir.path().join("task.md");
    std::fs::write(&file, &task).unwrap();
    b.tab(
        &b.repo,
        &[
            "start",
            "big",
            "--task-file",
            file.to_str().unwrap(),
            "--base",
            "main",
        ],
    );
    let ledger = "refs/tabellio/runs/big";
    let objects = |b: &Bench| -> Vec<String> {
        b.git(&["rev-list", "--objects", ledger])
            .lines()
            .map(|l| l.split(' ').next().unwrap_or_default().to_string())
            .collect()
    };
    let disk = |b: &Bench, ids: &[String]| -> u64 {
        let mut cmd = Command::new("git");
        cmd.args(["cat-file", "--batch-check=%(objectsize:disk)"])
            .current_dir(&b.repo)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        hermetic::apply(&mut cmd, b.dir.path());
        let mut child = cmd.spawn().expect("cat-file");
        use std::io::Write;
        let input: String = ids.iter().map(|i| format!("{i}\n")).collect();
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("cat-file");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum()
    };
    let before = objects(&b);
    let at_start = disk(&b, &before);
    let wt = b.worktree("big");
    for i in 0..20 {
        b.commit_in(&wt, i);
        b.tab(&wt, &["checkpoint"]);
    }
    b.tab(&wt, &["finish", "--", "true"]);
    b.tab(&b.repo, &["promote", "big"]);
    let after = objects(&b);
    let added: Vec<String> = after
        .iter()
        .filter(|o| !before.contains(o))
        .cloned()
        .collect();
    let bytes = disk(&b, &added);
    println!(
        "ledger, 100 KB task: start stores {at_start} bytes; 22 transitions (20 checkpoints, \
         finish, promote) add {bytes} bytes, {} bytes each ({} objects)",
        bytes / 22,
        added.len()
    );
}

fn main() {
    let n: usize = std::env::var("TABELLIO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // `TABELLIO_BENCH_ONLY=scopes`: only the independent-landing comparison.
    if std::env::var("TABELLIO_BENCH_ONLY").is_ok_and(|v| v == "scopes") {
        scopes::scopes();
        return;
    }
    // `TABELLIO_BENCH_ONLY=verify`: only the `verify` rows.
    if std::env::var("TABELLIO_BENCH_ONLY").is_ok_and(|v| v == "verify") {
        let b = Bench::new();
        evidence(&b, n);
        shared_tree(n);
        signatures(n);
        print_goals();
        return;
    }
    // `TABELLIO_BENCH_ONLY=large`: only the 20,000-file worktree rows.
    if std::env::var("TABELLIO_BENCH_ONLY").is_ok_and(|v| v == "large") {
        println!("a 20,000-file worktree:");
        large_worktree(n.min(9));
        print_goals();
        return;
    }
    println!(
        "git-tabellio vs git plumbing: medians of {n} runs each (whole processes); the ratio is \
         the median of the ratios of runs taken in turn, else (10,000 runs against none) of the medians\n"
    );
    // The retention rows alone: building 100,000 archived runs takes a while.
    if std::env::var("TABELLIO_BENCH_ARCHIVE").is_ok_and(|v| v == "1") {
        println!("retention: 1,000 live runs beside 100,000 archived ones:");
        retention(n);
        print_goals();
        return;
    }
    println!("small repository:");
    let b = Bench::new();
    lifecycle(&b, n, "r");
    evidence(&b, n);
    shared_tree(n);
    println!("\nsigned evidence (trust) against the same without trust:");
    signatures(n);
    land(n);
    scopes::scopes();
    hooks_overhead(n);
    println!("\na reftable repository with 50 live run worktrees:");
    reftable(n);
    if std::env::var("TABELLIO_BENCH_SCALE").is_ok_and(|v| v == "1") {
        println!("\nat scale: 10,000 runs and 100,000 evidence notes:");
        let empty = Bench::new();
        let at_zero = idless(&empty, n);
        let b = Bench::new();
        populate_scale(&b);
        let idless = report_unpaired(
            "id-less checkpoint, 10,000 runs",
            idless(&b, n),
            at_zero,
            "the same at 0 runs",
        );
        goal("id-less checkpoint, 10,000 runs / 0 runs", idless, 1.2);
        lifecycle(&b, n, "x");
        println!("\nlive run worktrees:");
        live_worktrees(n);
        println!("\na long run:");
        long_run(n);
        println!("\na 20,000-file worktree:");
        large_worktree(n.min(9));
        println!();
        ledger_growth();
    }
    print_goals();
}
