//! The harness loop and the context packet, driven with scripted agents: small python3 scripts
//! written outside the worktree and run as the agent argv (the agent's own interpreter — the
//! loop never runs a shell).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::*;

/// The check every test uses: `value.txt` must say `2`. It prints the value it saw.
const VALUE_IS_TWO: &str = "import os,sys\nv=open('value.txt').read().strip() if os.path.exists('value.txt') else ''\nprint('error: value is', repr(v))\nsys.exit(0 if v=='2' else 1)";

/// A repository whose policy requires `check` (python source run with `python3 -c`).
fn repo_with_check(check: &str) -> TestEnv {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("test", &["python3", "-c", check])]));
    t
}

/// Write an executable python3 script at `<test dir>/<name>` (outside every worktree).
pub(crate) fn agent(t: &TestEnv, name: &str, body: &str) -> PathBuf {
    let path = t.path().join(name);
    write_file(
        &path,
        &format!("#!/usr/bin/env python3\nimport os, sys, time\n{body}\n"),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn start(t: &TestEnv, id: &str) {
    t.tab(&["start", id, "--task", "make value.txt say 2"]).ok();
}

/// `git tabellio --json loop <args>`: exit code and the object.
fn run_loop(t: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["loop"];
    all.extend_from_slice(args);
    t.tab_json(&all)
}

fn run_json(t: &TestEnv, id: &str) -> Value {
    t.ledger_record(&format!("refs/tabellio/runs/{id}"))
}

/// Lines the agent appended to `<test dir>/<name>`.
fn log_lines(t: &TestEnv, name: &str) -> Vec<String> {
    std::fs::read_to_string(t.path().join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[track_caller]
fn assert_stopped(out: &Value, status: &str, harness: &str, agent: &str, done: &str) {
    let l = &out["run"]["loop"];
    assert_eq!(l["status"], status, "{out:#}");
    assert_eq!(l["why_harness_stopped"], harness, "{out:#}");
    assert_eq!(l["why_agent_stopped"], agent, "{out:#}");
    assert_eq!(l["done_reason"], done, "{out:#}");
    assert_eq!(out["status"], status);
    let last = l["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["status"], status, "{out:#}");
    assert_eq!(last["why_harness_stopped"], harness, "{out:#}");
    assert_eq!(last["why_agent_stopped"], agent, "{out:#}");
    assert_eq!(last["done_reason"], done, "{out:#}");
}

#[test]
fn agent_fixing_on_iteration_two_completes_with_a_checkpoint_per_iteration() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let log = t.path().join("agent.log");
    let a = agent(
        &t,
        "fixer.py",
        &format!(
            "n = os.environ['TABELLIO_ITERATION']\n\
             ctx = open(os.environ['TABELLIO_CONTEXT']).read()\n\
             open({log:?}, 'a').write(n + ' ' + os.environ['TABELLIO_RUN_ID'] + ' ' + str('make value.txt say 2' in ctx) + ' ' + str(os.getcwd()) + '\\n')\n\
             open('value.txt', 'w').write(n + '\\n')",
            log = log.display().to_string()
        ),
    );
    let (code, out) = run_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["ok"], true);
    assert_eq!(out["run"]["state"], "completed");
    assert_stopped(&out, "terminal", "validated", "exited", "validated");
    let l = &out["run"]["loop"];
    assert_eq!(l["iteration"], 2);
    assert_eq!(l["phase"], "finalize");
    let history = l["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["status"], "progressing");
    assert_eq!(history[0]["why_harness_stopped"], Value::Null);
    assert_eq!(history[0]["evaluate"]["verdict"], "failed");
    assert_eq!(history[0]["evaluate"]["checks"][0]["name"], "test");
    assert_eq!(history[1]["evaluate"]["verdict"], "passed");
    assert_ne!(history[0]["fingerprint"], history[1]["fingerprint"]);

    // The agent ran in the run worktree, with the run id, the iteration and a context file
    // holding the task.
    let wt = t.worktree("r1");
    let wt_real = std::fs::canonicalize(&wt).unwrap();
    assert_eq!(
        log_lines(&t, "agent.log"),
        [
            format!("1 r1 True {}", wt_real.display()),
            format!("2 r1 True {}", wt_real.display())
        ]
    );
    // The context file lives outside the worktree, which is clean.
    assert_eq!(
        t.git_out(&["-C", wt.to_str().unwrap(), "status", "--porcelain"]),
        ""
    );
    assert!(t.repo.join(".git/tabellio/context/r1.md").is_file());

    // One checkpoint per iteration, each noted on its commit; one attempt per iteration, with
    // evidence notes that stock git reads.
    let run = &out["run"];
    let cps = run["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2, "{run:#}");
    for (i, cp) in cps.iter().enumerate() {
        let commit = cp["commit"].as_str().unwrap();
        assert_eq!(history[i]["collect"]["checkpoint"], commit);
        assert_eq!(history[i]["collect"]["committed_by"], "tabellio");
        let note = t.git_out(&["notes", "--ref=tabellio/checkpoints", "show", commit]);
        assert!(note.contains("tabellio.checkpoint/v1"), "{note}");
        let ev = t.git_out(&["notes", "--ref=tabellio/evidence", "show", commit]);
        assert!(ev.contains("\"name\":\"test\""), "{ev}");
    }
    assert_eq!(run["attempts"].as_array().unwrap().len(), 2);
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    assert_eq!(run["validated"]["commit"], head);
    assert_eq!(cps[1]["commit"], head);
    // The harness's commits carry the configured identity and say what they are.
    let msg = t.git_out(&["log", "-1", "--format=%an <%ae>%n%B", &head]);
    assert!(
        msg.starts_with("Test Author <author@example.com>\ntabellio: iteration 2"),
        "{msg}"
    );
    assert!(msg.contains("Tabellio-Run: r1"), "{msg}");
    assert_eq!(
        t.git_out(&["log", "--format=%s", "main..tabellio/r1"]),
        "tabellio: iteration 2\ntabellio: iteration 1"
    );

    // Every phase transition is a ledger commit.
    let subjects = t.git_out(&["log", "--reverse", "--format=%s", "refs/tabellio/runs/r1"]);
    let subjects: Vec<&str> = subjects.lines().collect();
    assert_eq!(
        subjects,
        [
            "tabellio: start r1: (none) -> active",
            "tabellio: loop 1/execute r1: active -> looping",
            "tabellio: loop 1/collect r1: looping -> looping",
            "tabellio: loop 1/evaluate r1: looping -> looping",
            "tabellio: loop 1/decide r1: looping -> looping",
            "tabellio: loop 1/persist r1: looping -> looping",
            "tabellio: loop 2/execute r1: looping -> looping",
            "tabellio: loop 2/collect r1: looping -> looping",
            "tabellio: loop 2/evaluate r1: looping -> looping",
            "tabellio: loop 2/decide r1: looping -> looping",
            "tabellio: loop 2/persist r1: looping -> looping",
            "tabellio: loop 2/finalize r1: looping -> looping",
            "tabellio: loop 2/stop r1: looping -> completed",
        ]
    );
    assert_ledger_consistent(&t, "r1");

    // A completed loop returns its stored outcome without running anything.
    let (code, again) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 0, "{again:#}");
    assert_eq!(again["invocation"], "replayed");
    assert_eq!(again["run"], out["run"]);
    assert_eq!(log_lines(&t, "agent.log").len(), 2);

    // And the run promotes like any completed run.
    t.tab(&["promote", "r1"]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    t.fsck();
}

#[test]
fn promote_flag_promotes_when_validated() {
    let t = repo_with_check(VALUE_IS_TWO);
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    t.tab(&["start", "r1", "--task", "t", "--base", "main"])
        .ok();
    let a = agent(&t, "two.py", "open('value.txt', 'w').write('2\\n')");
    let (code, out) = run_loop(&t, &["r1", "--promote", "--", a.to_str().unwrap()]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["run"]["state"], "promoted");
    assert_eq!(out["promoted"], true);
    assert_eq!(
        t.git_out(&["rev-parse", "main"]),
        t.git_out(&["rev-parse", "tabellio/r1"])
    );
    t.fsck();
}

#[test]
fn untracked_secret_named_files_stop_the_loop_and_are_never_committed() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let base = t.git_out(&["rev-parse", "tabellio/r1"]);
    let leaky = agent(
        &t,
        "leaky.py",
        "open('value.txt', 'w').write('2\\n')\n\
         open('.env', 'w').write('API_TOKEN=tok_live_5f3e2a1b9c8d7e6f\\n')\n\
         os.makedirs('keys', exist_ok=True)\n\
         open('keys/id_ed25519', 'w').write('not really a key\\n')",
    );
    let (code, out) = run_loop(&t, &["r1", "--", leaky.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_eq!(out["run"]["state"], "blocked");
    assert_stopped(
        &out,
        "executor-failure",
        "executor_failure",
        "exited",
        "none",
    );
    // The work was committed without them: they stay where the agent left them, and the stop
    // names them with the way out.
    let why = out["run"]["loop"]["history"][0]["collect"]["failure"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.contains(".env") && why.contains("keys/id_ed25519") && why.contains(".gitignore"),
        "{why}"
    );
    assert_ne!(t.git_out(&["rev-parse", "tabellio/r1"]), base);
    let files = t.git_out(&["ls-tree", "-r", "--name-only", "tabellio/r1"]);
    assert!(files.lines().any(|f| f == "value.txt"), "{files}");
    assert!(
        !files.contains(".env") && !files.contains("id_ed25519"),
        "{files}"
    );
    let wt = t.worktree("r1");
    assert!(wt.join(".env").exists() && wt.join("keys/id_ed25519").exists());

    // Following the hint (ignore them) and looping again completes the run without them.
    write_file(&t.repo.join(".git/info/exclude"), ".env\nkeys/\n");
    let (code, out) = run_loop(&t, &["r1", "--", leaky.to_str().unwrap()]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["run"]["state"], "completed");
    let files = t.git_out(&["ls-tree", "-r", "--name-only", "tabellio/r1"]);
    assert!(files.lines().any(|f| f == "value.txt"), "{files}");
    assert!(
        !files.contains(".env") && !files.contains("id_ed25519"),
        "{files}"
    );
    // No object anywhere in the repository holds the token.
    let all = t.git_out(&["log", "--all", "-p", "--format="]);
    assert!(!all.contains("tok_live_5f3e2a1b9c8d7e6f"), "{all}");
    t.fsck();
}

#[test]
fn same_edit_every_time_is_repeated_state() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let a = agent(&t, "same.py", "open('value.txt', 'w').write('1\\n')");
    let before = t.snapshot();
    let (code, out) = run_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_ne!(t.snapshot(), before);
    assert_eq!(out["run"]["state"], "blocked");
    assert_stopped(&out, "repeated-state", "repeated_state", "exited", "none");
    let h = out["run"]["loop"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0]["fingerprint"], h[1]["fingerprint"]);
    assert_eq!(h[1]["collect"]["changed"], false);
    let reason = out["run"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("repeated-state") && reason.contains("test"),
        "{reason}"
    );
    assert_eq!(out["next_action"]["blocking"], true);
    // status agrees the run needs a person.
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "blocked");
    assert_eq!(st["next_action"]["blocking"], true);
    assert_ledger_consistent(&t, "r1");
    t.fsck();
}

#[test]
fn agent_that_changes_nothing_is_no_progress() {
    // The check's failure message changes from run to run (a flaky or time-dependent check),
    // so the fingerprints differ and only the agent's inactivity stops the loop.
    let counter = "import os,sys\np=os.environ['HOME']+'/count'\nn=len(open(p).read()) if os.path.exists(p) else 0\nopen(p,'a').write('x')\nprint('error: flaky', ['alpha','beta','gamma','delta','epsilon','zeta'][n])\nsys.exit(1)";
    let t = repo_with_check(counter);
    t.start_with_commit("r1", "work.txt", "some work\n");
    let idle = agent(&t, "idle.py", "print('nothing to do')");
    let (code, out) = run_loop(&t, &["r1", "--", idle.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(&out, "no-progress", "no_progress", "exited", "none");
    let h = out["run"]["loop"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert_ne!(h[0]["fingerprint"], h[1]["fingerprint"]);
    assert!(h.iter().all(|i| i["collect"]["changed"] == false));
    assert!(out["run"]["reason"]
        .as_str()
        .unwrap()
        .contains("changed nothing"));
    // No checkpoint: nothing new to checkpoint.
    assert_eq!(out["run"]["checkpoints"].as_array().unwrap().len(), 0);

    // K is the limit: with 1, the first idle iteration stops the loop.
    t.start_with_commit("r2", "work.txt", "other work\n");
    let (code, out) = run_loop(
        &t,
        &[
            "r2",
            "--no-progress-limit",
            "1",
            "--",
            idle.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(&out, "no-progress", "no_progress", "exited", "none");
    assert_eq!(out["run"]["loop"]["history"].as_array().unwrap().len(), 1);
    t.fsck();
}

#[test]
fn idle_agent_against_deterministic_checks_repeats_the_state() {
    // Documented ordering: with the same tree and the same failure, repeated-state is checked
    // before no-progress.
    let t = repo_with_check(VALUE_IS_TWO);
    t.start_with_commit("r1", "value.txt", "0\n");
    let idle = agent(&t, "idle.py", "pass");
    let (code, out) = run_loop(&t, &["r1", "--", idle.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(&out, "repeated-state", "repeated_state", "exited", "none");
}

#[test]
fn executor_failures_say_why_the_agent_stopped() {
    let t = repo_with_check(VALUE_IS_TWO);

    // Exit 3 after changing something: the change is kept (collected and checkpointed), the
    // checks do not run.
    start(&t, "r1");
    let three = agent(
        &t,
        "three.py",
        "open('value.txt', 'w').write('2\\n')\nprint('giving up', file=sys.stderr)\nsys.exit(3)",
    );
    let (code, out) = run_loop(&t, &["r1", "--", three.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_eq!(out["run"]["state"], "blocked");
    assert_stopped(
        &out,
        "executor-failure",
        "executor_failure",
        "nonzero",
        "none",
    );
    let it = &out["run"]["loop"]["history"][0];
    assert_eq!(it["agent"]["exit_code"], 3);
    assert!(it["agent"]["output"]["excerpt"]
        .as_str()
        .unwrap()
        .contains("giving up"));
    assert_eq!(it["evaluate"]["verdict"], "skipped");
    assert_eq!(it["collect"]["changed"], true);
    assert_eq!(out["run"]["checkpoints"].as_array().unwrap().len(), 1);
    assert_eq!(out["run"]["attempts"].as_array().unwrap().len(), 0);
    assert!(out["run"]["reason"]
        .as_str()
        .unwrap()
        .contains("exited with code 3"));

    // Not found: an agent that is gone by iteration 2 (a missing one is refused before the
    // loop starts, see hardening4).
    start(&t, "r2");
    let vanishing = agent(
        &t,
        "vanishing.py",
        "open('value.txt', 'w').write('1\\n')\nos.remove(sys.argv[0])",
    );
    let (code, out) = run_loop(&t, &["r2", "--", vanishing.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(
        &out,
        "executor-failure",
        "executor_failure",
        "not_found",
        "none",
    );
    let history = out["run"]["loop"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{out:#}");
    assert_eq!(history[1]["collect"]["changed"], false);

    // Over its time limit: the whole process group is stopped, whenever the limit strikes.
    // The agent claims DONE, then leaves a marker, then waits to be stopped: the marker says
    // whether the claim was printed before the limit struck (on a loaded machine the agent
    // may not even have started by then), so what the loop recorded is checked against what
    // the agent did, not against a guess of how long starting it takes.
    start(&t, "r3");
    let claimed = t.path().join("claimed");
    let slow = agent(
        &t,
        "slow.py",
        &format!(
            "print('DONE', flush=True)\nopen({:?}, 'w').close()\ntime.sleep(60)",
            claimed.display().to_string()
        ),
    );
    let (code, out) = run_loop(
        &t,
        &["r3", "--agent-timeout", "4s", "--", slow.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{out:#}");
    // A DONE claim from an agent that then timed out is still only a claim.
    let done = if claimed.exists() {
        "claimed_not_validated"
    } else {
        eprintln!("the agent was stopped before it printed its claim: checked the timeout only");
        "none"
    };
    assert_stopped(
        &out,
        "executor-failure",
        "executor_failure",
        "timed_out",
        done,
    );
    assert!(
        out["run"]["loop"]["history"][0]["agent"]["duration_ms"]
            .as_u64()
            .unwrap()
            < 30_000
    );
    t.fsck();
}

#[test]
fn done_claims_are_not_validation() {
    let t = repo_with_check(VALUE_IS_TWO);
    let cases = [
        ("plain", "print('all good')\nprint('DONE')", true),
        ("fenced", "print('```')\nprint('DONE')\nprint('```')", false),
        ("unclosed", "print('~~~~')\nprint('DONE')", false),
        ("indented", "print('  DONE')", false),
        ("not-last", "print('DONE')\nprint('one more thing')", false),
        (
            "trailing-blank",
            "print('DONE')\nprint('')\nprint('   ')",
            true,
        ),
    ];
    for (i, (name, body, claims)) in cases.iter().enumerate() {
        let id = format!("d{i}");
        start(&t, &id);
        let a = agent(
            &t,
            &format!("{name}.py"),
            &format!("open('value.txt', 'w').write('1\\n')\n{body}"),
        );
        let (code, out) = run_loop(&t, &[&id, "--max-loops", "1", "--", a.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {out:#}");
        assert_eq!(out["run"]["state"], "blocked", "{name}");
        let done = if *claims {
            "claimed_not_validated"
        } else {
            "none"
        };
        assert_stopped(&out, "max-loops-reached", "max_loops", "exited", done);
        assert_eq!(
            out["run"]["loop"]["history"][0]["agent"]["claimed_done"], *claims,
            "{name}"
        );
    }
}

#[test]
fn always_different_change_reaches_max_loops() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let a = agent(
        &t,
        "drift.py",
        "open('drift.txt', 'a').write(os.environ['TABELLIO_ITERATION'] + '\\n')",
    );
    let (code, out) = run_loop(&t, &["r1", "--max-loops", "3", "--", a.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(&out, "max-loops-reached", "max_loops", "exited", "none");
    let h = out["run"]["loop"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 3);
    let mut fps: Vec<&str> = h
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    fps.sort();
    fps.dedup();
    assert_eq!(fps.len(), 3);
    assert_eq!(h[0]["status"], "progressing");
    assert_eq!(h[1]["status"], "progressing");
    assert_eq!(out["run"]["loop"]["max_loops"], 3);
    assert_eq!(out["run"]["checkpoints"].as_array().unwrap().len(), 3);
    assert_ledger_consistent(&t, "r1");
    t.fsck();
}

/// An agent that, on iteration 2 the first time, reports its pid through the FIFO at `fifo`
/// and then sleeps (to be killed); otherwise writes the iteration number to `value.txt`. Every
/// start is logged to `<test dir>/runs.log`.
fn agent_blocking_on_iteration_two(t: &TestEnv, fifo: &Path) -> PathBuf {
    let flag = t.path().join("blocked-once");
    let log = t.path().join("runs.log");
    agent(
        t,
        "blocker.py",
        &format!(
            "n = os.environ['TABELLIO_ITERATION']\n\
             open({log:?}, 'a').write(n + '\\n')\n\
             open('value.txt', 'w').write(n + '\\n')\n\
             if n == '2' and not os.path.exists({flag:?}):\n\
             \x20   open({flag:?}, 'w').close()\n\
             \x20   with open({fifo:?}, 'w') as f:\n\
             \x20       f.write(str(os.getpid()) + '\\n')\n\
             \x20   time.sleep(120)",
            log = log.display().to_string(),
            flag = flag.display().to_string(),
            fifo = fifo.display().to_string(),
        ),
    )
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Block until the agent writes its pid into the FIFO.
fn read_pid(fifo: &Path) -> libc::pid_t {
    let mut s = String::new();
    std::fs::File::open(fifo)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    s.trim().parse().unwrap()
}

/// Wait (bounded, 30 s) until `pid`, not our child, has ended; panic naming it when it has not.
fn wait_gone(pid: libc::pid_t) {
    wait_gone_within(pid, std::time::Duration::from_secs(30));
}

/// [`wait_gone`] with the bound `limit`. Ended: `kill(pid, 0)` finds no such process (`ESRCH`), or `/proc` shows it a zombie (it has
/// exited, and its new parent, not this test, reaps it). Any other answer, `EPERM` included,
/// means it is still there.
fn wait_gone_within(pid: libc::pid_t, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        // SAFETY: signal 0 sends nothing: it only asks whether the process exists.
        let answer = unsafe { libc::kill(pid, 0) };
        let errno = std::io::Error::last_os_error().raw_os_error();
        if answer == -1 && errno == Some(libc::ESRCH) {
            return;
        }
        let state = process_state(pid);
        if matches!(state, Some('Z' | 'X')) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} is still there after {limit:?} (kill(pid, 0) = {answer}, state {state:?})"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The state letter of `pid` in `/proc/<pid>/stat` (`R`, `S`, `Z`, …), `None` without one.
fn process_state(pid: libc::pid_t) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name in parentheses may hold anything: the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[test]
fn wait_gone_fails_naming_a_process_that_still_runs_and_returns_once_it_ended() {
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = libc::pid_t::try_from(sleeper.id()).unwrap();
    let still_there =
        std::panic::catch_unwind(|| wait_gone_within(pid, std::time::Duration::from_millis(200)))
            .expect_err("a running process counted as gone");
    let message = still_there
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains(&format!("process {pid} ")), "{message}");
    sleeper.kill().unwrap();
    // Killed and not yet reaped: a zombie, which has ended.
    wait_gone(pid);
    sleeper.wait().unwrap();
    // Reaped: no such process at all.
    wait_gone(pid);
}

/// Start `git tabellio --json loop <args>` in the background.
fn spawn_loop(t: &TestEnv, args: &[&str]) -> std::process::Child {
    let mut all = vec!["--json", "loop"];
    all.extend_from_slice(args);
    t.spawn_tab(&all)
}

#[test]
fn sigkill_during_second_execute_then_resume_finishes_without_repeating_iteration_one() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let fifo = t.path().join("agent.fifo");
    mkfifo(&fifo);
    let a = agent_blocking_on_iteration_two(&t, &fifo);
    let mut child = spawn_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    let agent_pid = read_pid(&fifo);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // The ledger says: iteration 2, about to execute (it never completed).
    let run = run_json(&t, "r1");
    assert_eq!(run["state"], "looping");
    assert_eq!(run["loop"]["iteration"], 2);
    assert_eq!(run["loop"]["phase"], "execute");
    assert_eq!(run["loop"]["why_harness_stopped"], Value::Null);
    assert_eq!(run["loop"]["history"].as_array().unwrap().len(), 1);
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(
        st["next_action"]["command"],
        "git tabellio loop r1 --resume"
    );

    // The killed loop's agent still runs in the worktree: resuming now is refused, and
    // changes nothing.
    let before = t.snapshot();
    let (code, refused) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 4, "{refused:#}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("still running"));
    assert_eq!(t.snapshot(), before);

    // SAFETY: signalling the agent process we were told the pid of.
    unsafe {
        libc::kill(agent_pid, libc::SIGKILL);
    }
    wait_gone(agent_pid);

    let (code, out) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["invocation"], "resumed");
    assert_eq!(out["run"]["state"], "completed");
    assert_stopped(&out, "terminal", "validated", "exited", "validated");
    let l = &out["run"]["loop"];
    assert_eq!(l["resumes"], 1);
    let h = l["history"].as_array().unwrap();
    assert_eq!(
        h.iter()
            .map(|i| i["n"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2]
    );
    // Iteration 1 ran once; iteration 2 ran again after the kill (its execute never committed).
    assert_eq!(log_lines(&t, "runs.log"), ["1", "2", "2"]);
    assert_eq!(out["run"]["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(out["run"]["checkpoints"].as_array().unwrap().len(), 2);
    assert_ledger_consistent(&t, "r1");
    t.fsck();
}

#[test]
fn interrupt_stops_the_agent_and_resume_continues() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let fifo = t.path().join("agent.fifo");
    mkfifo(&fifo);
    let a = agent_blocking_on_iteration_two(&t, &fifo);
    let child = spawn_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    let agent_pid = read_pid(&fifo);
    // SAFETY: signalling the loop process we started.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let output = child.wait_with_output().unwrap();
    // The agent's process group got SIGTERM from the loop.
    wait_gone(agent_pid);
    assert_eq!(output.status.code(), Some(1));
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["run"]["state"], "blocked");
    let l = &out["run"]["loop"];
    assert_eq!(l["why_harness_stopped"], "interrupted");
    assert_eq!(l["phase"], "execute", "the interrupted execute runs again");
    assert_eq!(l["iteration"], 2);
    assert_eq!(l["history"].as_array().unwrap().len(), 1);
    // The loop stopped iteration 2's agent itself; iteration 1's "exited" is not carried on.
    assert_eq!(l["why_agent_stopped"], "signaled", "{out:#}");
    assert_eq!(l["done_reason"], "none");
    assert_eq!(l["status"], "progressing");
    assert_eq!(
        out["next_action"]["command"],
        "git tabellio loop r1 --resume"
    );
    // The interrupted agent's changes wait for the resumed collect, and status says so.
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_ne!(st["next_action"]["action"], "commit", "{st:#}");
    assert!(st["next_action"]["reason"]
        .as_str()
        .unwrap()
        .contains("--resume"));

    let (code, out) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 0, "{out:#}");
    assert_stopped(&out, "terminal", "validated", "exited", "validated");
    assert_eq!(log_lines(&t, "runs.log"), ["1", "2", "2"]);
    assert_ledger_consistent(&t, "r1");
    t.fsck();
}

#[test]
fn shell_metacharacters_in_task_and_argv_are_data() {
    let t = repo_with_check(VALUE_IS_TWO);
    let task = "fix it; touch pwned-task-1 && $(touch pwned-task-2) `touch pwned-task-3` | cat > pwned-task-4";
    t.tab(&["start", "r1", "--task", task]).ok();
    let seen = t.path().join("argv.json");
    let ctx_copy = t.path().join("context.md");
    let a = agent(
        &t,
        "echo.py",
        &format!(
            "import json\n\
             json.dump(sys.argv[1:], open({seen:?}, 'w'))\n\
             open({ctx:?}, 'w').write(open(os.environ['TABELLIO_CONTEXT']).read())\n\
             open('value.txt', 'w').write('2\\n')",
            seen = seen.display().to_string(),
            ctx = ctx_copy.display().to_string()
        ),
    );
    let args = [
        "; touch pwned-argv-1",
        "$(touch pwned-argv-2)",
        "`touch pwned-argv-3`",
        "| touch pwned-argv-4",
        "> pwned-argv-5",
        "*",
        "$HOME",
    ];
    let mut argv = vec!["r1", "--", a.to_str().unwrap()];
    argv.extend_from_slice(&args);
    let (code, out) = run_loop(&t, &argv);
    assert_eq!(code, 0, "{out:#}");
    let got: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(got, args);
    assert_eq!(out["run"]["task"]["text"], task);
    assert_eq!(out["run"]["loop"]["agent"]["argv"][1], args[0]);
    assert!(std::fs::read_to_string(&ctx_copy).unwrap().contains(task));
    // Nothing was executed anywhere.
    let found = Command::new("find")
        .arg(t.path())
        .args(["-name", "pwned*"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&found.stdout), "");
}

#[test]
fn context_has_no_local_paths_and_its_digest_verifies() {
    // A check that prints where it runs: the excerpt holds the worktree path.
    let t = TestEnv::new();
    t.write(
        ".tabellio/policy.json",
        &policy(&[(
            "test",
            &[
                "python3",
                "-c",
                "import os,sys\nprint('error: failed in', os.getcwd(), os.path.realpath('.'), os.environ['HOME'])\nsys.exit(1)",
            ],
        )]),
    );
    t.write(
        "a.txt",
        "a file with enough content to be recognised when renamed\n",
    );
    t.commit_all("policy and a.txt");
    t.tab(&["start", "r1", "--task", "test task"]).ok();
    let wt = t.worktree("r1");
    t.git_in(&wt, &["mv", "a.txt", "b.txt"]).ok();
    t.git_in(&wt, &["commit", "-q", "-m", "rename"]).ok();
    t.tab(&["checkpoint", "r1", "-m", "renamed a to b"]).ok();
    t.tab(&["finish", "r1"]).code(1);

    let r = t.tab(&["context", "r1", "--format", "json"]);
    r.ok();
    let packet: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(packet["schema"], "tabellio.context/v1");
    assert_eq!(packet["task"]["text"], "test task");
    assert_eq!(packet["changes"][0]["status"], "renamed");
    assert_eq!(packet["changes"][0]["path"], "b.txt");
    assert_eq!(packet["changes"][0]["previous_path"], "a.txt");
    assert_eq!(packet["checkpoints"][0]["summary"], "renamed a to b");
    assert_eq!(packet["attempts"][0]["status"], "failed");
    let excerpt = packet["last_failure"]["checks"][0]["excerpt"]
        .as_str()
        .unwrap();
    assert!(excerpt.contains("error: failed in <worktree>"), "{excerpt}");
    assert_eq!(packet["merge_preview"]["clean"], true);
    assert_eq!(packet["merge_base"], t.git_out(&["rev-parse", "main"]));
    assert!(packet["allowed_actions"].is_array());
    assert!(packet["next_action"]["action"].is_string());

    // No local path anywhere.
    let real = std::fs::canonicalize(t.path()).unwrap();
    for p in [t.path().to_path_buf(), real] {
        let p = p.display().to_string();
        assert!(!r.stdout.contains(&p), "{p} in\n{}", r.stdout);
    }
    let md = t.tab(&["context", "r1"]);
    md.ok();
    assert!(!md.stdout.contains(&t.path().display().to_string()));

    // The integrity digest verifies independently (python's canonical JSON is RFC 8785 for
    // these values), and a change to the content breaks it.
    let verify = |v: &Value| -> String {
        let script = "import json,sys,hashlib\nd=json.load(sys.stdin)\nd.pop('integrity',None)\nprint(hashlib.sha256(json.dumps(d,sort_keys=True,separators=(',',':'),ensure_ascii=False).encode()).hexdigest())";
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(v.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(verify(&packet), packet["integrity"].as_str().unwrap());
    let mut forged = packet.clone();
    forged["task"]["text"] = "something else".into();
    assert_ne!(verify(&forged), packet["integrity"].as_str().unwrap());

    // Markdown is the same content: task verbatim, the same digest.
    assert!(md.stdout.contains("test task"));
    assert!(md.stdout.contains(packet["integrity"].as_str().unwrap()));
    assert!(md.stdout.contains("renamed b.txt (from a.txt)"));
    // --json wraps the packet.
    let (code, j) = t.tab_json(&["context", "r1"]);
    assert_eq!(code, 0);
    assert_eq!(j["context"], packet);
}

#[test]
fn refusals_write_nothing() {
    let t = repo_with_check(VALUE_IS_TWO);
    let idle = agent(&t, "idle.py", "pass");
    let idle = idle.to_str().unwrap();

    // No agent command.
    start(&t, "r1");
    let before = t.snapshot();
    assert_eq!(run_loop(&t, &["r1"]).0, 2);
    // Nothing to resume.
    let (code, out) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 3, "{out:#}");
    assert!(out["error"]["hint"].is_string());
    // A dirty worktree is the person's work, not the agent's: refused.
    write_file(&t.worktree("r1").join("wip.txt"), "wip\n");
    assert_eq!(run_loop(&t, &["r1", "--", idle]).0, 3);
    std::fs::remove_file(t.worktree("r1").join("wip.txt")).unwrap();
    // Bad options.
    assert_eq!(run_loop(&t, &["r1", "--max-loops", "0", "--", idle]).0, 2);
    assert_eq!(run_loop(&t, &["r1", "--check", "nope", "--", idle]).0, 2);
    assert_eq!(
        t.tab(&["loop", "r1", "--agent-timeout", "soon", "--", idle])
            .code,
        2
    );
    assert_eq!(t.snapshot(), before);

    // A stopped loop, then resumes that are refused.
    let (code, _) = run_loop(&t, &["r1", "--max-loops", "1", "--", idle]);
    assert_eq!(code, 1);
    let before = t.snapshot();
    let other = agent(&t, "other.py", "pass");
    let (code, out) = run_loop(&t, &["r1", "--resume", "--", other.to_str().unwrap()]);
    assert_eq!(code, 3, "{out:#}");
    assert!(out["error"]["message"]
        .as_str()
        .unwrap()
        .contains("different agent command"));
    assert!(out["error"]["hint"].as_str().unwrap().contains("--resume"));
    assert_eq!(run_loop(&t, &["r1", "--resume", "--max-loops", "9"]).0, 2);
    // Resuming a stopped loop replays its outcome (exit 1: blocked), running nothing.
    let (code, out) = run_loop(&t, &["r1", "--resume", "--", idle]);
    assert_eq!(code, 1);
    assert_eq!(out["invocation"], "replayed");
    assert_eq!(t.snapshot(), before);

    // A looping run refuses a second loop, and a different task on resume.
    let fifo = t.path().join("agent.fifo");
    mkfifo(&fifo);
    start(&t, "r2");
    let a = agent_blocking_on_iteration_two(&t, &fifo);
    let mut child = spawn_loop(&t, &["r2", "--", a.to_str().unwrap()]);
    let pid = read_pid(&fifo);
    child.kill().unwrap();
    child.wait().unwrap();
    // SAFETY: the agent's pid, told through the FIFO.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_gone(pid);
    let before = t.snapshot();
    let (code, out) = run_loop(&t, &["r2", "--", a.to_str().unwrap()]);
    assert_eq!(code, 3, "{out:#}");
    assert!(out["error"]["hint"].as_str().unwrap().contains("--resume"));
    assert_eq!(t.tab(&["checkpoint", "r2"]).code, 3);
    assert_eq!(t.tab(&["finish", "r2"]).code, 3);
    assert_eq!(t.snapshot(), before);

    // Someone rewrote the pinned task in the ledger: resume refuses.
    t.forge_ledger("r2", "retask", |run| {
        run["task"]["text"] = "a different task".into();
        run["task"]["sha256"] = sha256_of("a different task").into();
    });
    let before = t.snapshot();
    let (code, out) = run_loop(&t, &["r2", "--resume", "--", a.to_str().unwrap()]);
    assert_eq!(code, 3, "{out:#}");
    assert!(out["error"]["message"].as_str().unwrap().contains("task"));
    assert_eq!(t.snapshot(), before);
}

fn sha256_of(text: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())",
            text,
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every ledger commit of the run, oldest first, as run records.
fn ledger_records(t: &TestEnv, id: &str) -> Vec<Value> {
    let revs = t.git_out(&["rev-list", "--reverse", &format!("refs/tabellio/runs/{id}")]);
    revs.lines().map(|c| t.ledger_record(c)).collect()
}

/// The ledger tells one consistent story: history only grows by appending whole iterations
/// numbered 1, 2, …; phases move only along execute → collect → evaluate → decide → persist →
/// (execute | finalize); every iteration is recorded once, with one attempt when its checks ran.
#[track_caller]
fn assert_ledger_consistent(t: &TestEnv, id: &str) {
    let records = ledger_records(t, id);
    let mut prev: Option<&Value> = None;
    for rec in records.iter().filter(|r| !r["loop"].is_null()) {
        let l = &rec["loop"];
        let h = l["history"].as_array().unwrap();
        for (i, it) in h.iter().enumerate() {
            assert_eq!(it["n"], i as u64 + 1, "{l:#}");
            assert!(it["fingerprint"].is_string() && it["status"].is_string());
        }
        if let Some(p) = prev {
            let pl = &p["loop"];
            let ph = pl["history"].as_array().unwrap();
            assert!(
                h.len() == ph.len() || h.len() == ph.len() + 1,
                "history jumped"
            );
            assert_eq!(&h[..ph.len()], &ph[..], "history was rewritten");
            let (from, to) = (pl["phase"].as_str().unwrap(), l["phase"].as_str().unwrap());
            let ok = from == to
                || matches!(
                    (from, to),
                    ("execute", "collect")
                        | ("collect", "evaluate")
                        | ("evaluate", "decide")
                        | ("decide", "persist")
                        | ("persist", "execute")
                        | ("persist", "finalize")
                );
            assert!(ok, "phase {from} -> {to}");
            if from == "persist" && to == "execute" {
                assert_eq!(l["iteration"], pl["iteration"].as_u64().unwrap() + 1);
            } else {
                assert_eq!(l["iteration"], pl["iteration"]);
            }
        }
        prev = Some(rec);
    }
    let last = records.last().unwrap();
    let h = last["loop"]["history"].as_array().unwrap();
    let evaluated = h
        .iter()
        .filter(|i| i["evaluate"]["attempt"].is_u64())
        .count();
    assert_eq!(last["attempts"].as_array().unwrap().len(), evaluated);
}

#[test]
fn collect_commits_what_git_add_all_would() {
    let t = repo_with_check(VALUE_IS_TWO);
    t.write(".gitignore", "*.log\n");
    t.write("keep.txt", "keep\n");
    t.write("gone.txt", "gone\n");
    t.write("edit.txt", "before\n");
    t.write("run.sh", "echo hi\n");
    t.write("old-name.txt", "a file that will be renamed by the agent\n");
    t.commit_all("files");
    start(&t, "r1");
    let a = agent(
        &t,
        "busy.py",
        "import subprocess, stat\n\
         os.remove('gone.txt')\n\
         open('edit.txt', 'w').write('after\\n')\n\
         os.makedirs('new/deep', exist_ok=True)\n\
         open('new/deep/file with spaces.txt', 'w').write('x\\n')\n\
         os.symlink('keep.txt', 'link')\n\
         os.chmod('run.sh', 0o755)\n\
         open('debug.log', 'w').write('ignored\\n')\n\
         subprocess.run(['git', 'mv', 'old-name.txt', 'new-name.txt'], check=True)\n\
         subprocess.run(['git', 'add', 'edit.txt'], check=True)\n\
         open('edit.txt', 'a').write('and more\\n')",
    );
    let (code, out) = run_loop(&t, &["r1", "--max-loops", "1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    let it = &out["run"]["loop"]["history"][0];
    assert_eq!(it["collect"]["committed_by"], "tabellio", "{out:#}");
    let wt = t.worktree("r1");
    // Nothing is left to add, and only the ignored file is outside the commit.
    assert_eq!(
        t.git_out(&[
            "-C",
            wt.to_str().unwrap(),
            "status",
            "--porcelain",
            "--ignored"
        ]),
        "!! debug.log"
    );
    t.git_in(&wt, &["add", "-A"]).ok();
    t.git_in(&wt, &["diff", "--cached", "--quiet", "HEAD"]).ok();
    let tree = t.git_out(&[
        "ls-tree",
        "-r",
        "--format=%(objectmode) %(path)",
        "tabellio/r1",
    ]);
    let tree: Vec<&str> = tree.lines().collect();
    for want in [
        "100644 edit.txt",
        "100644 keep.txt",
        "100644 new-name.txt",
        "100644 new/deep/file with spaces.txt",
        "100755 run.sh",
        "120000 link",
    ] {
        assert!(tree.contains(&want), "{want} missing from {tree:?}");
    }
    for gone in ["gone.txt", "old-name.txt", "debug.log"] {
        assert!(
            !tree.iter().any(|l| l.ends_with(gone)),
            "{gone} in {tree:?}"
        );
    }
    assert_eq!(
        t.git_out(&["show", "tabellio/r1:edit.txt"]),
        "after\nand more"
    );
    t.fsck();
}

#[test]
fn secrets_in_the_agent_argv_are_not_stored() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let a = agent(&t, "secret.py", "open('value.txt', 'w').write('1\\n')");
    let secret = "s3cr3t-value-0123456789";
    let flag = format!("--token={secret}");
    let run = |args: &[&str]| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let token = [("AGENT_API_TOKEN", std::ffi::OsStr::new(secret))];
        let out = t.command_with_env(BIN, &t.repo, &token, &all);
        (out.code, out.stdout)
    };
    let (code, stdout) = run(&[
        "loop",
        "r1",
        "--max-loops",
        "1",
        "--",
        a.to_str().unwrap(),
        &flag,
    ]);
    assert_eq!(code, 1, "{stdout}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["run"]["loop"]["agent"]["redacted"], true);
    assert_eq!(out["run"]["loop"]["agent"]["argv"][1], "--token=[REDACTED]");
    let ledger = t.git_out(&["log", "-p", "refs/tabellio/runs/r1"]);
    assert!(!ledger.contains(secret));
    // A stopped loop replays without the argv; the same argv is accepted, another refused.
    assert_eq!(run(&["loop", "r1", "--resume"]).0, 1);
    assert_eq!(
        run(&["loop", "r1", "--resume", "--", a.to_str().unwrap(), &flag]).0,
        1
    );
    assert_eq!(
        run(&[
            "loop",
            "r1",
            "--resume",
            "--",
            a.to_str().unwrap(),
            "--token=other"
        ])
        .0,
        3
    );
}

#[test]
fn sigterm_during_iteration_two_records_the_agent_the_loop_stopped() {
    // Iteration 1's agent exits normally; iteration 2's agent marks that it is running (by
    // opening the FIFO, which the test blocks on) and sleeps until the loop stops it.
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let marker = t.path().join("running.fifo");
    mkfifo(&marker);
    let a = agent(
        &t,
        "sleeper.py",
        &format!(
            "n = os.environ['TABELLIO_ITERATION']\n\
             open('value.txt', 'w').write(n + '\\n')\n\
             if n == '2' and not os.path.exists({once:?}):\n\
             \x20   open({once:?}, 'w').close()\n\
             \x20   open({marker:?}, 'w').close()\n\
             \x20   time.sleep(120)",
            marker = marker.display().to_string(),
            once = t.path().join("slept-once").display().to_string(),
        ),
    );
    let child = spawn_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    // Returns once the agent of iteration 2 has opened and closed the marker.
    std::fs::read(&marker).unwrap();
    // SAFETY: signalling the loop process we started.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let l = &out["run"]["loop"];
    assert_eq!(out["run"]["state"], "blocked");
    assert_eq!(l["iteration"], 2);
    assert_eq!(l["phase"], "execute");
    assert_eq!(l["why_harness_stopped"], "interrupted", "{out:#}");
    assert_eq!(l["why_agent_stopped"], "signaled", "{out:#}");
    assert_eq!(l["current"]["why_agent_stopped"], "signaled", "{out:#}");
    assert_eq!(l["done_reason"], "none");
    // An interrupted loop was progressing and is resumable; the reason says both.
    assert_eq!(l["status"], "progressing");
    assert_eq!(out["status"], "progressing");
    assert_eq!(out["why_agent_stopped"], "signaled");
    let reason = out["run"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("interrupted")
            && reason.contains("progressing")
            && reason.contains("--resume"),
        "{reason}"
    );
    // Iteration 1 keeps what its own agent did.
    assert_eq!(l["history"][0]["why_agent_stopped"], "exited");
    assert_eq!(l["history"].as_array().unwrap().len(), 1);
    assert_eq!(
        out["next_action"]["command"],
        "git tabellio loop r1 --resume"
    );
    assert_ledger_consistent(&t, "r1");

    // The resumed loop runs iteration 2's agent again, which completes this time.
    let (code, out) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 0, "{out:#}");
    assert_stopped(&out, "terminal", "validated", "exited", "validated");
    assert_ledger_consistent(&t, "r1");
}

#[test]
fn agent_committing_a_broken_policy_stops_the_loop_with_an_error() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let a = agent(
        &t,
        "breaker.py",
        "import subprocess\n\
         open('value.txt', 'w').write('2\\n')\n\
         open('.tabellio/policy.json', 'w').write('{not json\\n')\n\
         subprocess.run(['git', 'add', '-A'], check=True)\n\
         subprocess.run(['git', 'commit', '-q', '-m', 'break the policy'], check=True)",
    );
    let (code, out) = run_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_eq!(out["ok"], true, "{out:#}");
    assert_eq!(out["run"]["state"], "blocked");
    // A harness error is its own status, never "progressing".
    assert_stopped(&out, "error", "error", "exited", "none");
    let it = &out["run"]["loop"]["history"][0];
    assert_eq!(it["collect"]["committed_by"], "agent");
    assert_eq!(it["evaluate"]["verdict"], "error");
    let reason = out["run"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("loop: error at iteration 1: ")
            && reason.contains(".tabellio/policy.json"),
        "{reason}"
    );
    assert_eq!(out["next_action"]["blocking"], true, "{out:#}");
    assert!(out["next_action"]["command"].is_string(), "{out:#}");
    assert_ledger_consistent(&t, "r1");

    // Replaying the stopped loop gives the same outcome, whatever the policy at the head says.
    let (code, again) = run_loop(&t, &["r1", "--resume"]);
    assert_eq!(code, 1, "{again:#}");
    assert_eq!(again["invocation"], "replayed");
    assert_eq!(again["run"], out["run"]);
    t.fsck();
}

/// A plan whose every task is ticked.
const TICKED_PLAN: &str = "# Plan\n\n- [x] make value.txt say 2\n";

/// A repository requiring `VALUE_IS_TWO` and plan hygiene, with a finished plan left in
/// `plans/` (it belongs in `plans_completed/`).
fn repo_with_plan_gate() -> TestEnv {
    let t = TestEnv::new();
    let policy = serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {"test": {"argv": ["python3", "-c", VALUE_IS_TWO], "timeout_s": 60}},
        "required": ["test"],
        "plans": {"require_hygiene": true}
    });
    t.write(".tabellio/policy.json", &policy.to_string());
    t.write("plans/value-plan.md", TICKED_PLAN);
    t.commit_all("policy and a finished plan");
    t
}

#[test]
fn the_plan_gate_is_in_the_agents_context_and_fixing_it_completes() {
    let t = repo_with_plan_gate();
    start(&t, "r1");
    // Fixes the check at once; moves the plan only when its context names it.
    let a = agent(
        &t,
        "planner.py",
        &format!(
            "n = os.environ['TABELLIO_ITERATION']\n\
             ctx = open(os.environ['TABELLIO_CONTEXT']).read()\n\
             open(os.path.join({dir:?}, 'ctx-' + n + '.md'), 'w').write(ctx)\n\
             open('value.txt', 'w').write('2\\n')\n\
             if 'plans/value-plan.md' in ctx:\n\
             \x20   os.makedirs('plans_completed', exist_ok=True)\n\
             \x20   os.rename('plans/value-plan.md', 'plans_completed/value-plan.md')",
            dir = t.path().display().to_string()
        ),
    );
    let (code, out) = run_loop(&t, &["r1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["run"]["state"], "completed");
    assert_stopped(&out, "terminal", "validated", "exited", "validated");
    let h = out["run"]["loop"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert!(h[0]["evaluate"]["plan_gate"]
        .as_str()
        .unwrap()
        .contains("plans/value-plan.md"));
    assert_eq!(h[1]["evaluate"]["plan_gate"], Value::Null);

    // Iteration 1 saw no failure; iteration 2 was told the plan gate failed, and which plan.
    let ctx1 = std::fs::read_to_string(t.path().join("ctx-1.md")).unwrap();
    assert!(!ctx1.contains("plans/value-plan.md"), "{ctx1}");
    let ctx2 = std::fs::read_to_string(t.path().join("ctx-2.md")).unwrap();
    let last_failure = &ctx2[ctx2.find("## Last failure").unwrap()..ctx2.find("## Loop").unwrap()];
    assert!(
        last_failure.contains("### plan-hygiene (failed")
            && last_failure.contains("plan-hygiene: ")
            && last_failure.contains("plans/value-plan.md"),
        "{ctx2}"
    );
    assert!(!last_failure.contains("\nnone\n"), "{ctx2}");
    let attempts = &ctx2[ctx2.find("## Attempts").unwrap()..ctx2.find("## Last failure").unwrap()];
    assert!(
        attempts.contains("- attempt 1 on ")
            && attempts.contains(": failed — test passed (exit 0), plan-hygiene failed"),
        "{attempts}"
    );
    let loop_part = &ctx2[ctx2.find("## Loop").unwrap()..];
    assert!(loop_part.contains("failing: plan-hygiene"), "{ctx2}");
    assert!(t
        .git_out(&["ls-tree", "-r", "--name-only", "tabellio/r1"])
        .contains("plans_completed/value-plan.md"));
    t.fsck();
}

#[test]
fn a_loop_stopped_by_the_plan_gate_names_the_plan_in_context() {
    // The agent fixes the check but never the plan: `git tabellio context` tells the person.
    let t = repo_with_plan_gate();
    start(&t, "r1");
    let a = agent(&t, "fixer.py", "open('value.txt', 'w').write('2\\n')");
    let (code, out) = run_loop(&t, &["r1", "--max-loops", "1", "--", a.to_str().unwrap()]);
    assert_eq!(code, 1, "{out:#}");
    assert_stopped(&out, "max-loops-reached", "max_loops", "exited", "none");
    let reason = out["run"]["reason"].as_str().unwrap();
    assert!(reason.contains("failing: plan-hygiene"), "{reason}");

    let r = t.tab(&["context", "r1", "--format", "json"]);
    r.ok();
    let packet: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(packet["attempts"][0]["status"], "failed", "{packet:#}");
    let checks = packet["last_failure"]["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{packet:#}");
    assert_eq!(checks[0]["name"], "plan-hygiene");
    let excerpt = checks[0]["excerpt"].as_str().unwrap();
    assert!(
        excerpt.starts_with("plan-hygiene: ") && excerpt.contains("plans/value-plan.md"),
        "{excerpt}"
    );
    assert_eq!(
        packet["loop"]["history"][0]["failing"],
        serde_json::json!(["plan-hygiene"])
    );

    // After a gated `finish` the run's reason carries the gate, and context shows it too.
    t.start_with_commit("r2", "value.txt", "2\n");
    t.tab(&["finish", "r2"]).code(1);
    let r = t.tab(&["context", "r2", "--format", "json"]);
    r.ok();
    let packet: Value = serde_json::from_str(&r.stdout).unwrap();
    let checks = packet["last_failure"]["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{packet:#}");
    assert_eq!(checks[0]["name"], "plan-hygiene");
    assert!(checks[0]["excerpt"]
        .as_str()
        .unwrap()
        .contains("plans/value-plan.md"));
}

#[test]
fn the_context_path_is_plain_when_git_dir_is_a_linked_worktree() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let wt = t.worktree("r1");
    let git_dir = t.git_out_in(&wt, &["rev-parse", "--absolute-git-dir"]);
    assert!(git_dir.contains("/worktrees/"), "{git_dir}");
    let seen = t.path().join("context-path.txt");
    let a = agent(
        &t,
        "where.py",
        &format!(
            "open({seen:?}, 'w').write(os.environ['TABELLIO_CONTEXT'])\n\
             open('value.txt', 'w').write('2\\n')",
            seen = seen.display().to_string()
        ),
    );
    let r = t.command_with_env(
        BIN,
        &wt,
        &[("GIT_DIR", std::ffi::OsStr::new(&git_dir))],
        &["--json", "loop", "--", a.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let path = std::fs::read_to_string(&seen).unwrap();
    assert!(!path.contains("/../") && !path.contains("/./"), "{path}");
    let want = std::fs::canonicalize(t.repo.join(".git/tabellio/context/r1.md")).unwrap();
    assert_eq!(Path::new(&path), want);
}

#[test]
fn the_stored_argv_loses_option_secrets_and_local_directories() {
    let t = repo_with_check(VALUE_IS_TWO);
    start(&t, "r1");
    let a = agent(&t, "args.py", "open('value.txt', 'w').write('1\\n')");
    let wt = t.worktree("r1");
    let in_worktree = wt.join("notes.txt").display().to_string();
    let in_home = t.home.join("agent.cfg").display().to_string();
    let (code, out) = run_loop(
        &t,
        &[
            "r1",
            "--max-loops",
            "1",
            "--",
            a.to_str().unwrap(),
            "--api-key",
            "abc",
            "--keyboard=us",
            &in_worktree,
            &in_home,
        ],
    );
    assert_eq!(code, 1, "{out:#}");
    let agent = &out["run"]["loop"]["agent"];
    assert_eq!(agent["redacted"], true);
    assert_eq!(
        agent["argv"],
        serde_json::json!([
            a.to_str().unwrap(),
            "--api-key",
            "[REDACTED]",
            "--keyboard=us",
            "<worktree>/notes.txt",
            "~/agent.cfg"
        ])
    );
}

/// docs/loop.md: the finalize commit's message says `loop <n>/stop`, its `loop.phase` is
/// `finalize`.
#[test]
fn the_loops_last_ledger_commit_is_named_stop() {
    let t = TestEnv::new();
    t.write(
        ".tabellio/policy.json",
        r#"{"schema": "tabellio.policy/v1", "checks": {"t": {"argv": ["true"], "timeout_s": 60}}, "required": ["t"]}"#,
    );
    t.git(&["add", "-A"]).ok();
    t.git(&["commit", "-q", "-m", "policy"]).ok();
    t.tab(&["start", "l1", "--task", "idle"]).ok();
    // An agent that changes nothing stops the loop at once with a limit of one idle iteration.
    let r = t.tab(&[
        "--json",
        "loop",
        "l1",
        "--no-progress-limit",
        "1",
        "--",
        "true",
    ]);
    r.code(1);
    assert_eq!(r.json()["run"]["loop"]["phase"], "finalize", "{}", r.desc);
    let subject = t.git_out(&["log", "-1", "--format=%s", "refs/tabellio/runs/l1"]);
    assert_eq!(subject, "tabellio: loop 1/stop l1: looping -> blocked");
}
