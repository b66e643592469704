//! Hermetic git for the integration tests: each test gets its own temp dir and HOME, no global
//! or system config, a fixed identity and fixed dates. Failures print the command, its cwd, stdout
//! and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_git-tabellio");

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    /// The main worktree of the repository under test.
    pub repo: PathBuf,
}

/// What a command printed and how it ended. A `Run` nobody looks at hides a failed command:
/// check it (`.ok()`, `.code(n)`) or read what it printed.
#[must_use = "check the exit code (`.ok()`, `.code(n)`) or read the output"]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub desc: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.desc))
    }
    /// Every line of stdout parsed as JSON (a `--json` stream such as the demo's).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    #[track_caller]
    pub fn code(&self, want: i32) -> &Self {
        assert_eq!(self.code, want, "unexpected exit code\n{}", self.desc);
        self
    }
    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.code(0)
    }
}

fn describe(cmd: &Command, out: &Output) -> String {
    format!(
        "command: {:?}\ncwd: {:?}\nexit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        cmd,
        cmd.get_current_dir(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The shared hermetic environment, plus what only the integration tests need: no inherited
/// test marker, no colour or progress settings of the outer terminal, a fixed user and the
/// built binary first on `PATH` (so `git tabellio` finds it).
pub fn hermetic(cmd: &mut Command, home: &Path) {
    crate::hermetic::apply(cmd, home);
    for key in [
        "NO_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "TERM",
        "TABELLIO_HEARTBEAT_SECS",
    ] {
        cmd.env_remove(key);
    }
    cmd.env_remove("TABELLIO_TEST_INHERITED")
        .env("USER", "tester")
        .env("PATH", path_with_binary());
}

impl TestEnv {
    /// A repository with one commit on `main` (`README.md`).
    pub fn new() -> Self {
        Self::with_init(&["init", "-q", "-b", "main"])
    }

    pub fn with_init(init_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = dir.path().join("repo");
        let env = TestEnv {
            dir,
            home,
            repo: repo.clone(),
        };
        let mut args = with_ref_format(init_args);
        let repo_s = repo.to_str().unwrap().to_string();
        args.push(&repo_s);
        env.git_in(env.dir.path(), &args).ok();
        env.assert_ref_storage(init_args, &repo);
        if !init_args.contains(&"--bare") {
            env.write("README.md", "hello\n");
            env.git(&["add", "-A"]).ok();
            env.git(&["commit", "-q", "-m", "initial"]).ok();
        }
        env
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, content: &str) {
        write_file(&self.repo.join(rel), content);
    }

    pub fn command(&self, program: &str, cwd: &Path, args: &[&str]) -> Run {
        self.command_with_env(program, cwd, &[], args)
    }

    /// Like [`TestEnv::command`], with extra environment variables set last.
    pub fn command_with_env(
        &self,
        program: &str,
        cwd: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        args: &[&str],
    ) -> Run {
        self.run_command(program, cwd, env, args, None)
    }

    /// Like [`TestEnv::command_with_env`], with `input` written to the command's stdin.
    pub fn command_with_input(
        &self,
        program: &str,
        cwd: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        args: &[&str],
        input: &str,
    ) -> Run {
        self.run_command(program, cwd, env, args, Some(input))
    }

    /// Run `program` hermetically to its end, with `input` (if any) on stdin.
    fn run_command(
        &self,
        program: &str,
        cwd: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        args: &[&str],
        input: Option<&str>,
    ) -> Run {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(cwd);
        hermetic(&mut cmd, &self.home);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = match input {
            None => cmd.output(),
            Some(input) => cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    child.stdin.take().unwrap().write_all(input.as_bytes())?;
                    child.wait_with_output()
                }),
        }
        .unwrap_or_else(|e| panic!("could not run {program}: {e}"));
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            desc: describe(&cmd, &out),
        }
    }

    pub fn git_in(&self, cwd: &Path, args: &[&str]) -> Run {
        self.command("git", cwd, args)
    }

    pub fn git(&self, args: &[&str]) -> Run {
        self.git_in(&self.repo, args)
    }

    /// `git <args>` in the repo, its trimmed stdout, asserting success.
    pub fn git_out(&self, args: &[&str]) -> String {
        let r = self.git(args);
        r.ok();
        r.stdout.trim().to_string()
    }

    /// `git <args>` in `cwd`, its trimmed stdout, asserting success.
    pub fn git_out_in(&self, cwd: &Path, args: &[&str]) -> String {
        let r = self.git_in(cwd, args);
        r.ok();
        r.stdout.trim().to_string()
    }

    /// Run `git-tabellio <args>` in `cwd`.
    pub fn tab_in(&self, cwd: &Path, args: &[&str]) -> Run {
        self.command(BIN, cwd, args)
    }

    /// Run `git-tabellio <args>` in the main worktree.
    pub fn tab(&self, args: &[&str]) -> Run {
        self.tab_in(&self.repo, args)
    }

    /// Run `git-tabellio --json <args>` and parse the object.
    pub fn tab_json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = self.tab(&all);
        (r.code, r.json())
    }

    /// Start `git-tabellio <args>` in the background in `cwd`: stdin closed, output piped.
    pub fn spawn_tab_in(&self, cwd: &Path, args: &[&str]) -> Child {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        hermetic(&mut cmd, &self.home);
        cmd.spawn().expect("spawn git-tabellio")
    }

    /// Start `git-tabellio <args>` in the background in the main worktree.
    pub fn spawn_tab(&self, args: &[&str]) -> Child {
        self.spawn_tab_in(&self.repo, args)
    }

    /// The run worktree of `run` at its default place.
    pub fn worktree(&self, run: &str) -> PathBuf {
        self.repo.join(".tabellio").join("worktrees").join(run)
    }

    /// Every ref with its value, and the worktree list: the state a refused command must not change.
    pub fn snapshot(&self) -> String {
        let refs = self.git_out(&["for-each-ref", "--format=%(objectname) %(refname)"]);
        let wts = self.git_out(&["worktree", "list", "--porcelain"]);
        format!("{refs}\n--\n{wts}")
    }

    #[track_caller]
    pub fn fsck(&self) {
        let r = self.git(&["fsck", "--strict", "--no-progress"]);
        assert!(
            r.code == 0 && !r.stderr.contains("error") && !r.stdout.contains("error"),
            "fsck failed\n{}",
            r.desc
        );
    }

    /// A bare repository playing the server (`<dir>/server.git`), holding `main` with one
    /// commit, in its own temp dir and HOME.
    pub fn bare_server() -> TestEnv {
        let seed = TestEnv::new();
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = dir.path().join("server.git");
        let (from, to) = (seed.repo.to_str().unwrap(), repo.to_str().unwrap());
        seed.git_in(
            seed.path(),
            &with_ref_format(&["clone", "-q", "--bare", "--no-local", from, to]),
        )
        .ok();
        let server = TestEnv { dir, home, repo };
        server.assert_ref_storage(&["clone"], &server.repo);
        // The seed is about to disappear: the server must not remember it.
        server.git(&["remote", "remove", "origin"]).ok();
        server
    }

    /// A clone of the bare `server` (remote `origin`) in its own temp dir and HOME: one machine.
    pub fn clone_of(server: &TestEnv) -> TestEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = dir.path().join("repo");
        let env = TestEnv { dir, home, repo };
        let (from, to) = (server.repo.to_str().unwrap(), env.repo.to_str().unwrap());
        env.git_in(env.path(), &with_ref_format(&["clone", "-q", from, to]))
            .ok();
        env.assert_ref_storage(&["clone"], &env.repo);
        env
    }
}

/// The ref storage of the repositories this test creates: `reftable` for the tests of the
/// `reftable::` pass (the test harness names each test's thread after the test's path, so the
/// same test body runs once per format), `files` otherwise.
pub fn ref_format() -> &'static str {
    match std::thread::current().name() {
        Some(name) if name.starts_with("reftable::") => "reftable",
        _ => "files",
    }
}

impl TestEnv {
    /// The sentinel of the reftable pass: a repository a test of the pass made with `args`
    /// (the test's own `git init` or `git clone` arguments, before [`with_ref_format`]) really
    /// stores its refs in reftable, as `git rev-parse --show-ref-format` and
    /// `extensions.refStorage` say, so the pass cannot quietly run on the files backend.
    /// Nothing to check where the test chose a format itself, or outside the pass (files is
    /// git's default, and gits older than 2.45 know no `--show-ref-format`).
    #[track_caller]
    pub fn assert_ref_storage(&self, args: &[&str], repo: &Path) {
        if ref_format() != "reftable" || args.iter().any(|a| a.starts_with("--ref-format")) {
            return;
        }
        let shown = self.git_out_in(repo, &["rev-parse", "--show-ref-format"]);
        let config = self.git_out_in(
            repo,
            &["config", "--default", "files", "extensions.refStorage"],
        );
        assert_eq!(
            (shown.as_str(), config.as_str()),
            ("reftable", "reftable"),
            "{} is not a reftable repository, yet the test runs in the reftable pass",
            repo.display()
        );
    }
}

/// `git init` / `git clone` arguments with this test's [`ref_format`] added (unless the test
/// chose one itself).
pub fn with_ref_format<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out = args.to_vec();
    let creates = matches!(args.first(), Some(&"init") | Some(&"clone"));
    // Nothing for files: git's default, and gits older than 2.45 do not know the option.
    if creates && ref_format() == "reftable" && !args.iter().any(|a| a.starts_with("--ref-format"))
    {
        out.insert(1, "--ref-format=reftable");
    }
    out
}

/// How a background command ended: its exit code (-1 if a signal ended it) and its output.
#[derive(Debug)]
pub struct Exit {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Wait for a background command and collect what it printed.
pub fn wait(child: Child) -> Exit {
    let out = child.wait_with_output().expect("wait");
    Exit {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Wait for every one of `children`, started together so that they race; exits in order.
pub fn race(children: Vec<Child>) -> Vec<Exit> {
    children.into_iter().map(wait).collect()
}

/// Wait (bounded, 60 s) until `path` exists: a check announcing that it has started.
pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "the check never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn write_file(path: &Path, content: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

/// A policy with the given checks (name, argv) all required.
pub fn policy(checks: &[(&str, &[&str])]) -> String {
    let mut defs = serde_json::Map::new();
    for (name, argv) in checks {
        defs.insert(
            name.to_string(),
            serde_json::json!({"argv": argv, "timeout_s": 60}),
        );
    }
    let names: Vec<&str> = checks.iter().map(|(n, _)| *n).collect();
    serde_json::json!({"schema": "tabellio.policy/v1", "checks": defs, "required": names, "protect": ["refs/heads/main"]}).to_string()
}

/// `PATH` with the directory of the built binary first, so `git tabellio` finds it.
pub fn path_with_binary() -> String {
    let dir = Path::new(BIN).parent().unwrap().display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}
