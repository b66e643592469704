//! `land --lanes` with `worker`s: candidate stacks in refs, claims, parallel bisection, and a
//! lander that runs no check itself. Real processes: the workers run beside the lander on the
//! same repository (the compare-and-swap on claims is all that keeps them apart).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::*;

/// A repository whose `main` requires `count`: a check that appends a line to `<dir>/count`
/// (its worktree and the `.txt` files there) and fails when `bad.txt` and `f0.txt` are both in
/// the tree; `n` runs queued, `r<i>` adding `f<i>.txt`, and the run `culprit` adding `bad.txt`.
fn queued_repo(n: usize, culprit: Option<usize>) -> (TestEnv, PathBuf) {
    queued_repo_with(n, culprit, "")
}

/// [`queued_repo`] whose check runs `before` (Python) first, after it counted itself.
fn queued_repo_with(n: usize, culprit: Option<usize>, before: &str) -> (TestEnv, PathBuf) {
    let t = TestEnv::ref_only();
    let count = t.path().join("count");
    let code = format!(
        "import os\nopen({:?}, 'a').write(os.getcwd() + ' ' + ','.join(sorted(x for x in os.listdir('.') if x.endswith('.txt'))) + '\\n')\n{before}\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)",
        count.display().to_string()
    );
    t.git(&["switch", "-q", "main"]).ok();
    let mut p: Value =
        serde_json::from_str(&policy(&[("count", &["python3", "-c", &code])])).unwrap();
    // A check that holds (`before`) is not cut short while the test holds it.
    p["checks"]["count"]["timeout_s"] = serde_json::json!(600);
    t.commit_policy(&p.to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("r{i}");
        let wt = t.started_run(&id, &format!("f{i}.txt"));
        if Some(i) == culprit {
            t.commit_file_in(&wt, "bad.txt", "bad\n");
        }
        t.tab(&["finish", &id]).ok();
        ids.push(id);
    }
    let mut args = vec!["enqueue"];
    args.extend(ids.iter().map(String::as_str));
    t.tab(&args).ok();
    std::fs::remove_file(&count).ok();
    (t, count)
}

/// How long any lander or worker of these tests may take before it is killed and the test
/// fails with what it printed: generous, so only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(300);

/// Wait for `child` (`what` names it) until [`DEADLINE`]; past it, kill it and fail with what
/// it printed. Its output is read meanwhile, so a full pipe never blocks it.
#[track_caller]
pub(crate) fn finish(mut child: Child, what: &str) -> Exit {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let mut bytes = Vec::new();
                p.read_to_end(&mut bytes).ok();
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    }
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let until = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() >= until {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) => Exit {
            code: s.code().unwrap_or(-1),
            stdout,
            stderr,
        },
        None => panic!(
            "{what} still ran after {DEADLINE:?}: killed\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
    }
}

/// `git-tabellio --json <args>` in `t`, bounded by [`DEADLINE`]: its exit code and JSON.
#[track_caller]
pub(crate) fn tab_json_within(t: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let exit = finish(t.spawn_tab(&all), &all.join(" "));
    let json = serde_json::from_str(exit.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", exit.stdout, exit.stderr));
    (exit.code, json)
}

/// Background workers, killed when dropped (a test that fails leaves none running).
pub(crate) struct Kids(pub(crate) Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for k in &mut self.0 {
            k.kill().ok();
            k.wait().ok();
        }
    }
}

/// SIGTERM to each of `kids`, as a person stops a worker, then wait for them (bounded).
pub(crate) fn terminate(mut kids: Kids) {
    for k in &kids.0 {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &k.id().to_string()])
            .status();
    }
    for k in std::mem::take(&mut kids.0) {
        finish(k, "a stopped worker");
    }
}

fn executions(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |s| s.lines().count())
}

fn workers(t: &TestEnv, n: usize) -> Kids {
    Kids(
        (0..n)
            .map(|i| {
                t.spawn_tab(&[
                    "worker",
                    "--poll",
                    "0.05",
                    "--lease",
                    "60",
                    "--id",
                    &format!("w{i}"),
                ])
            })
            .collect(),
    )
}

/// Stop the workers as a person would (SIGTERM): they release their claims and end.
/// First they finish the checks they hold (bounded): a check a stop interrupts has run, but
/// has no record, and the tests count both.
fn stop(t: &TestEnv, kids: Kids) {
    let until = Instant::now() + Duration::from_secs(60);
    while !claims_of(t).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    terminate(kids);
    let claims = claims_of(t);
    assert_eq!(claims, "", "a stopped worker left its claims");
}

/// The names of the refs under `prefixes` in `t`, one a line.
fn refnames(t: &TestEnv, prefixes: &[&str]) -> String {
    let mut args = vec!["for-each-ref", "--format=%(refname)"];
    args.extend_from_slice(prefixes);
    t.git_out(&args)
}

/// The claim refs there are, one a line.
fn claims_of(t: &TestEnv) -> String {
    refnames(t, &["refs/tabellio/claims/"])
}

/// The candidate refs there are, one a line.
fn candidate_refs(t: &TestEnv) -> String {
    refnames(t, &["refs/tabellio/candidates/"])
}

/// Start a lander with `lanes` lanes and no worker, and kill it once it has published `n`
/// candidates.
fn published_then_killed(t: &TestEnv, lanes: &str, n: usize) {
    let mut lander = t.spawn_tab(&["land", "--lanes", lanes, "--target", "main"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while candidate_refs(t).lines().count() < n && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    lander.kill().ok();
    lander.wait().ok();
}

/// Of the 8 queued runs, `culprit` failed validation and every other one landed.
#[track_caller]
fn culprit_refused_others_landed(t: &TestEnv, culprit: usize, said: &str) {
    for (i, state) in states(t, 8).iter().enumerate() {
        let want = if i == culprit {
            "validation_failed"
        } else {
            "promoted"
        };
        assert_eq!(state, want, "r{i}: {said}");
    }
}

fn states(t: &TestEnv, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            t.ledger_record(&format!("refs/tabellio/runs/r{i}"))["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn eight_runs_no_culprit_four_lanes_land_in_one_round_of_candidates() {
    let (t, count) = queued_repo(8, None);
    let kids = workers(&t, 2);
    let (code, j) = tab_json_within(&t, &["land", "--lanes", "4", "--target", "main"]);
    stop(&t, kids);
    assert_eq!(code, 0, "{j}");
    assert!(states(&t, 8).iter().all(|s| s == "promoted"), "{j}");
    // One round: the four prefixes 2, 4, 6, 8 (and the tip, which has no evidence yet: the
    // first run alone on it is what `land` asks first when it bisects; here nothing fails).
    assert!(executions(&count) <= 4, "{} executions", executions(&count));
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    // The lander notes the new tip's verification summary, as `land` does.
    let summary = t.git(&["notes", "--ref=tabellio/vsa", "show", "main"]);
    assert_eq!(
        summary.code, 0,
        "no summary of the new tip: {}",
        summary.desc
    );
    assert!(
        summary.stdout.contains("application/vnd.in-toto+json"),
        "{}",
        summary.stdout
    );
    // Every check ran in a worker's temporary worktree, none in the lander's.
    assert!(t
        .git_out(&["for-each-ref", "refs/tabellio/queue/"])
        .is_empty());
    t.fsck();
}

#[test]
fn one_culprit_among_eight_is_isolated_in_two_rounds_and_the_other_seven_land() {
    let (t, count) = queued_repo(8, Some(4));
    let kids = workers(&t, 2);
    let (code, j) = tab_json_within(&t, &["land", "--lanes", "4", "--target", "main"]);
    stop(&t, kids);
    assert_eq!(code, 1, "{j}");
    culprit_refused_others_landed(&t, 4, &j.to_string());
    // Round one: the prefixes of 3, 5, 7 and 8 runs (r0 alone passed in `finish`); its
    // verdicts all in, round two: the prefix of 4 and the queue without r3, without r4. Each
    // stacked tree once, whichever worker took it.
    let log = std::fs::read_to_string(&count).unwrap_or_default();
    assert_eq!(
        executions(&count),
        7,
        "each line: a worktree, its files\n{log}"
    );
    let mut trees: Vec<&str> = log.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    trees.sort_unstable();
    trees.dedup();
    assert_eq!(trees.len(), 7, "a tree validated twice\n{log}");
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    let (_, q) = t.tab_json(&["queue"]);
    assert_eq!(q["entries"][0]["run"], "r4", "{q}");
    assert_eq!(q["entries"][0]["state"], "blocked", "{q}");
    t.fsck();
}

#[test]
fn the_next_round_does_not_wait_for_a_verdict_that_could_not_change_it() {
    // The whole queue's candidate (the only stack with f3, f7 and bad.txt) holds its worker
    // until `block` is gone (at most 300 s): it stays without a verdict all along.
    let scratch = tempfile::tempdir().unwrap();
    let block = scratch.path().join("block");
    write_file(&block, "");
    let hold = format!(
        "import time\nuntil = time.time() + 300\nwhile all(os.path.exists(f) for f in ('f3.txt', 'f7.txt', 'bad.txt')) and os.path.exists({:?}) and time.time() < until:\n    time.sleep(0.05)",
        block.display().to_string()
    );
    let (t, count) = queued_repo_with(8, Some(4), &hold);
    let kids = workers(&t, 2);
    let lander = t.spawn_tab(&["--json", "land", "--lanes", "4", "--target", "main"]);
    // Round one: the prefixes of 3, 5, 7 and 8 runs. The prefix of 5 fails and that of 3
    // passes, so the culprit is r3 or r4 whatever the whole queue gives (a stack that begins
    // with a failing prefix fails): round two goes out, and lands, while it is still held.
    let until = Instant::now() + Duration::from_secs(120);
    let mut lander = Some(lander);
    while let Some(mut l) = lander.take() {
        if l.try_wait().expect("wait").is_some() {
            lander = Some(l);
            break;
        }
        if Instant::now() > until {
            l.kill().ok();
            l.wait().ok();
            std::fs::remove_file(&block).ok();
            panic!("the lander waited for the whole queue's verdict, which changes nothing");
        }
        lander = Some(l);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_file(&block).ok();
    let exit = finish(lander.expect("the lander"), "the lander");
    stop(&t, kids);
    assert_eq!(exit.code, 1, "{}\n{}", exit.stdout, exit.stderr);
    culprit_refused_others_landed(&t, 4, &exit.stdout);
    // Three of round one, three of round two, and the held one once it was let go (if a
    // worker had claimed it before the landing retired it).
    let ran = executions(&count);
    assert!((6..=7).contains(&ran), "{ran} executions");
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    t.fsck();
}

#[test]
fn candidates_are_refs_stock_git_reads_and_a_restarted_lander_continues_from_them() {
    let (t, _) = queued_repo(3, None);
    // No worker: the lander publishes and waits; stop it once the candidates are there (r0
    // alone is not one: it lands as `finish` validated it, whose evidence is on its tree).
    published_then_killed(&t, "2", 2);
    let list = || candidate_refs(&t);
    let names = list();
    assert_eq!(names.lines().count(), 2, "{names}");
    for name in names.lines() {
        assert!(name.starts_with("refs/tabellio/candidates/main/"), "{name}");
        let body = t.git_out(&["log", "-1", "--format=%b", name]);
        let rec: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(rec["schema"], "tabellio.candidate/v1");
        assert_eq!(rec["target"], "refs/heads/main");
        assert_eq!(rec["tip"], t.git_out(&["rev-parse", "main"]).as_str());
        // The candidate's tree is the stacked tree: its parent's.
        assert_eq!(
            t.git_out(&["rev-parse", &format!("{name}^{{tree}}")]),
            t.git_out(&["rev-parse", &format!("{name}^1^{{tree}}")])
        );
    }
    // One worker pass validates both; its claims are gone afterwards.
    let (code, w) = tab_json_within(&t, &["worker", "--once", "--id", "solo"]);
    assert_eq!(code, 0, "{w}");
    assert_eq!(w["validated"].as_array().unwrap().len(), 2, "{w}");
    assert_eq!(w["validated"][0]["passed"], true, "{w}");
    assert!(t
        .git_out(&["for-each-ref", "refs/tabellio/claims/"])
        .is_empty());
    // The lander, run again, lands from what the refs and notes say: it runs nothing.
    let (code, j) = tab_json_within(&t, &["land", "--lanes", "2", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["checks_run"], 0, "{j}");
    assert_eq!(j["runs"].as_array().unwrap().len(), 3, "{j}");
    assert!(list().is_empty(), "candidates on the old tip are retired");
    t.fsck();
}

#[test]
fn through_a_bare_server_workers_in_two_clones_validate_and_the_lander_lands_there() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    let c = TestEnv::clone_of(&server);
    let count = a.path().join("count");
    let code = format!(
        "import os\nopen({:?}, 'a').write(os.getcwd() + '\\n')",
        count.display().to_string()
    );
    a.commit_policy(&policy(&[("count", &["python3", "-c", &code])]));
    a.git(&["push", "-q"]).ok();
    for id in ["s0", "s1", "s2"] {
        a.start_with_commit(id, &format!("{id}.txt"), "x\n");
        a.tab(&["finish", id]).ok();
    }
    a.tab(&["enqueue", "s0", "s1", "s2"]).ok();
    a.tab(&["sync"]).ok();
    std::fs::remove_file(&count).ok();
    let kids = remote_workers(&[&b, &c]);
    let (code, j) = tab_json_within(
        &a,
        &[
            "land", "--lanes", "2", "--remote", "origin", "--target", "main",
        ],
    );
    stop_remote_workers(kids);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["mode"], "remote", "{j}");
    let files = server.git_out(&["ls-tree", "--name-only", "main"]);
    for f in ["s0.txt", "s1.txt", "s2.txt"] {
        assert!(files.contains(f), "{files}");
    }
    // The workers ran the checks, in their own clones; the lander's clone ran none.
    let log = std::fs::read_to_string(&count).unwrap_or_default();
    assert!(!log.is_empty(), "no check ran");
    let (in_b, in_c) = (
        b.path().display().to_string(),
        c.path().display().to_string(),
    );
    for line in log.lines() {
        assert!(line.starts_with(&in_b) || line.starts_with(&in_c), "{line}");
    }
    assert_eq!(j["checks_run"], 0, "{j}");
    // A worker fetches the candidates, claims, branches and notes it validates by, never the
    // remote's ledgers or queue: what it fetches does not grow with the runs there are.
    for w in [&b, &c] {
        let tracked = refnames(
            w,
            &[
                "refs/tabellio/remotes/origin/runs/",
                "refs/tabellio/remotes/origin/queue/",
            ],
        );
        assert_eq!(tracked, "", "a worker fetched ledgers or the queue");
        let notes = w.git_out(&["for-each-ref", "refs/notes/tabellio/remotes/origin/"]);
        assert!(!notes.is_empty(), "a worker fetched no notes");
        // The temporary worktrees its checks ran in are gone once their evidence is out.
        let worktrees = w.git_out(&["worktree", "list", "--porcelain"]);
        assert_eq!(
            worktrees
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count(),
            1,
            "{worktrees}"
        );
    }
    let server_refs = refnames(
        &server,
        &[
            "refs/tabellio/candidates/",
            "refs/tabellio/claims/",
            "refs/tabellio/queue/",
        ],
    );
    assert_eq!(server_refs, "", "left on the server");
    let r = a.tab(&["verify", "origin/main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}

/// A server with four queued runs made in clone `a`, whose branches clone `b` has too, and a
/// worker in each clone.
pub(crate) fn fleet() -> (TestEnv, TestEnv, TestEnv, Kids) {
    let (server, a, b) = TestEnv::server_and_two_clones();
    a.commit_policy(&policy(&[("ok", &["true"])]));
    a.git(&["push", "-q"]).ok();
    let ids = ["q0", "q1", "q2", "q3"];
    for id in ids {
        a.start_with_commit(id, &format!("{id}.txt"), "x\n");
        a.tab(&["finish", id]).ok();
    }
    a.tab(&["enqueue", "q0", "q1", "q2", "q3"]).ok();
    a.tab(&["sync"]).ok();
    a.git(&[
        "push",
        "-q",
        "origin",
        "refs/heads/tabellio/*:refs/heads/tabellio/*",
    ])
    .ok();
    b.git(&[
        "fetch",
        "-q",
        "origin",
        "refs/heads/tabellio/*:refs/heads/tabellio/*",
    ])
    .ok();
    b.tab(&["sync"]).ok();
    let kids = remote_workers(&[&a, &b]);
    (server, a, b, kids)
}

/// A `worker --remote origin` in each of `clones` (ids `w0`, `w1`, …), polling often.
pub(crate) fn remote_workers(clones: &[&TestEnv]) -> Kids {
    Kids(
        clones
            .iter()
            .enumerate()
            .map(|(i, w)| remote_worker(w, &format!("w{i}"), &[]))
            .collect(),
    )
}

/// A `worker --remote origin` in `clone` named `id`, polling often, with `extra` arguments.
pub(crate) fn remote_worker(clone: &TestEnv, id: &str, extra: &[&str]) -> Child {
    let mut args = vec![
        "worker", "--remote", "origin", "--poll", "0.05", "--lease", "30", "--id", id,
    ];
    args.extend_from_slice(extra);
    clone.spawn_tab(&args)
}

fn stop_remote_workers(kids: Kids) {
    terminate(kids);
}

#[test]
fn a_lander_killed_anywhere_is_continued_by_another_clone_from_the_refs() {
    const LAND: [&str; 7] = [
        "land", "--lanes", "2", "--remote", "origin", "--target", "main",
    ];
    // How long an uninterrupted landing takes here.
    let span = {
        let (_server, a, _b, kids) = fleet();
        let started = std::time::Instant::now();
        assert_eq!(finish(a.spawn_tab(&LAND), "the lander").code, 0);
        stop_remote_workers(kids);
        (started.elapsed().as_millis() as u64).max(1)
    };
    for round in 0..crate::crash::crash_trials(2) {
        let (server, a, b, kids) = fleet();
        let base = server.git_out(&["rev-parse", "main"]);
        let mut lander = a.spawn_tab(&LAND);
        std::thread::sleep(crate::crash::random_delay_up_to(round, span * 3 / 2));
        let _ = lander.kill();
        let _ = lander.wait();
        let after_kill = server.git_out(&["rev-parse", "main"]);
        eprintln!(
            "round {round}: killed with main {}",
            if after_kill == base {
                "unmoved"
            } else {
                "moved"
            }
        );
        // Another clone continues: it brings what the remote knows, then lands.
        b.tab(&["sync"]).ok();
        let (code, j) = tab_json_within(&b, &LAND);
        stop_remote_workers(kids);
        assert_eq!(code, 0, "round {round}: {j}");
        converged(&server, &base, &format!("round {round}"));
    }
}

/// The four runs of [`fleet`] all landed on the server's `main` (from `base`), each once, every
/// ledger `promoted` with its landed commit on `main`, nothing left in the queue, candidates or
/// claims, and `git fsck --strict` clean.
pub(crate) fn converged(server: &TestEnv, base: &str, what: &str) {
    let main = server.git_out(&["rev-parse", "main"]);
    for id in ["q0", "q1", "q2", "q3"] {
        let rec = server.ledger_record(&format!("refs/tabellio/runs/{id}"));
        assert_eq!(rec["state"], "promoted", "{what}: {id}: {rec}");
        let landed = rec["landed"]
            .as_str()
            .or_else(|| rec["promotion"]["new"].as_str())
            .unwrap_or_else(|| panic!("{what}: {id}: {rec}"));
        assert_eq!(
            server
                .git(&["merge-base", "--is-ancestor", landed, &main])
                .code,
            0,
            "{what}: {id}'s {landed} is not on main"
        );
        let touching = server.git_out(&[
            "log",
            "--format=%H",
            &format!("{base}..{main}"),
            "--",
            &format!("{id}.txt"),
        ]);
        assert_eq!(touching.lines().count(), 1, "{what}: {id} landed twice");
    }
    let left = server.git_out(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/tabellio/candidates/",
        "refs/tabellio/claims/",
        "refs/tabellio/queue/",
    ]);
    assert_eq!(left, "", "{what}: left on the server");
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}

#[test]
fn a_worker_killed_mid_check_leaves_a_claim_another_takes_over_when_its_lease_runs_out() {
    let t = TestEnv::ref_only();
    let dir = t.path().to_path_buf();
    let (hang, pid, log) = (dir.join("hang"), dir.join("pid"), dir.join("log"));
    // The first execution hangs (a worker to kill mid-check); the others pass at once.
    let code = format!(
        "import os, time\nopen({log:?}, 'a').write('start\\n')\nif os.path.exists({hang:?}):\n    os.remove({hang:?})\n    open({pid:?}, 'w').write(str(os.getpid()))\n    time.sleep(120)",
        log = log.display().to_string(),
        hang = hang.display().to_string(),
        pid = pid.display().to_string()
    );
    queue_two(&t, &code);
    write_file(&hang, "");
    let mut lander = Kids(vec![
        t.spawn_tab(&["land", "--lanes", "1", "--target", "main"])
    ]);
    let mut doomed = Kids(vec![
        t.spawn_tab(&["worker", "--lease", "2", "--poll", "0.05", "--id", "doomed"])
    ]);
    wait_for_file(&pid);
    let claims = || {
        t.git_out(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/tabellio/claims/",
        ])
    };
    let claim = claims();
    assert_eq!(claim.lines().count(), 1, "{claim}");
    let mut dead = doomed.0.remove(0);
    dead.kill().ok();
    dead.wait().ok();
    let mut check_pid = String::new();
    while check_pid.trim().is_empty() {
        check_pid = std::fs::read_to_string(&pid).unwrap();
    }
    let _ = std::process::Command::new("kill")
        .args(["-KILL", check_pid.trim()])
        .status();
    // The dead worker's claim stays until its lease runs out; then another takes it over.
    assert_eq!(claims(), claim);
    let held = t.git_out(&["show", &format!("{}:claim.json", claim.trim())]);
    assert!(held.contains("\"worker\": \"doomed\""), "{held}");
    let mut took_over = None;
    for _ in 0..200 {
        let (code, w) = tab_json_within(&t, &["worker", "--once", "--id", "heir", "--lease", "60"]);
        assert_eq!(code, 0, "{w}");
        if let Some(v) = w["validated"].as_array().and_then(|v| v.first()) {
            took_over = Some(v.clone());
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let v = took_over.expect("the heir never validated the candidate");
    assert_eq!(v["took_over"], true, "{v}");
    assert_eq!(v["passed"], true, "{v}");
    let exit = finish(lander.0.remove(0), "the lander");
    assert_eq!(exit.code, 0, "{}", exit.stderr);
    assert_eq!(claims(), "");
    // Only the heir ran it (the lander's record refers to the heir's): the dead worker noted
    // nothing.
    let main = t.git_out(&["rev-parse", "main^{tree}"]);
    let notes = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &main]);
    let ran: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("\"name\":\"slow\"") && !l.contains("reused_from"))
        .collect();
    assert_eq!(ran.len(), 1, "{notes}");
    assert!(
        notes.lines().all(|l| l.contains("\"status\":\"passed\"")),
        "{notes}"
    );
    t.fsck();
}

#[test]
fn stats_count_executions_reuse_and_the_work_a_moved_target_wasted() {
    let (t, count) = queued_repo(3, None);
    // Candidates validated by a worker, then the target moves under them (a run promoted
    // directly): those executions can never land.
    published_then_killed(&t, "2", 2);
    let (code, w) = tab_json_within(&t, &["worker", "--once"]);
    assert_eq!(code, 0, "{w}");
    assert_eq!(w["validated"].as_array().unwrap().len(), 2, "{w}");
    t.started_run("x", "x.txt");
    t.tab(&["finish", "x"]).ok();
    t.tab(&["promote", "x"]).ok();
    let kids = workers(&t, 1);
    let (code, j) = tab_json_within(&t, &["land", "--lanes", "2", "--target", "main"]);
    stop(&t, kids);
    assert_eq!(code, 0, "{j}");
    let before = t.snapshot();
    let (code, s) = t.tab_json(&["land", "--stats", "--target", "main"]);
    assert_eq!(code, 0, "{s}");
    assert_eq!(t.snapshot(), before, "--stats wrote something");
    assert_eq!(s["landed"], 4, "{s}");
    assert_eq!(s["wasted_executions"], 2, "{s}");
    assert_eq!(s["flaky_passes"], 0, "{s}");
    // Every execution of the check is a record that reused nothing; the runs' own `finish`
    // executions count too.
    assert_eq!(
        s["executions"].as_u64().unwrap() as usize,
        executions(&count) + 3,
        "{s}"
    );
    assert!(s["reused"].as_u64().unwrap() > 0, "{s}");
    assert!(s["time_in_queue_s"]["p95"].is_u64(), "{s}");
    assert_eq!(t.tab(&["land", "--stats", "r0"]).code, 2);
}

/// The commands the worker and lander jobs of docs/ci.md run, in their order, each job in a
/// fresh clone of a bare repository (as a CI runner has): the agents' clone pushes its runs,
/// the lander job lands what the worker jobs validate.
#[test]
fn the_ci_recipe_commands_land_the_queue_through_a_bare_repository() {
    let server = TestEnv::bare_server();
    let agents = TestEnv::clone_of(&server);
    agents.commit_policy(&policy(&[("ok", &["true"])]));
    agents.git(&["push", "-q"]).ok();
    for id in ["c0", "c1", "c2"] {
        agents.start_with_commit(id, &format!("{id}.txt"), "x\n");
        agents.tab(&["finish", id]).ok();
    }
    agents.tab(&["enqueue", "c0", "c1", "c2"]).ok();
    agents.tab(&["sync"]).ok();
    agents
        .git(&["push", "-q", "origin", "refs/heads/tabellio/*"])
        .ok();

    // The lander job.
    let lander = TestEnv::clone_of(&server);
    lander.tab(&["sync", "origin"]).ok();
    lander
        .git(&[
            "fetch",
            "-q",
            "origin",
            "refs/heads/tabellio/*:refs/heads/tabellio/*",
        ])
        .ok();
    let mut landing = Kids(vec![lander.spawn_tab(&[
        "--json", "land", "--lanes", "4", "--remote", "origin", "--target", "main",
    ])]);
    // The worker jobs, on a schedule: one pass each, until the lander is done.
    let worker = TestEnv::clone_of(&server);
    let key = crate::trust::keygen(worker.path(), "worker_key");
    let pid = landing.0[0].id().to_string();
    let mut passes = 0;
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && passes < 600 {
        let pass = worker.spawn_tab(&[
            "worker",
            "--remote",
            "origin",
            "--once",
            "--lanes",
            "2",
            "--sign-key",
            key.to_str().unwrap(),
        ]);
        let w = finish(pass, "a worker pass");
        assert_eq!(w.code, 0, "{}\n{}", w.stdout, w.stderr);
        passes += 1;
        // A zombie (ended, not yet waited for) still has /proc/<pid>: look at its state.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            break;
        }
    }
    let exit = finish(landing.0.remove(0), "the lander");
    assert_eq!(exit.code, 0, "{}\n{}", exit.stdout, exit.stderr);
    let files = server.git_out(&["ls-tree", "--name-only", "main"]);
    for f in ["c0.txt", "c1.txt", "c2.txt"] {
        assert!(files.contains(f), "{files}");
    }
    // The evidence the lander landed on is the worker's, signed with its key.
    let tree = server.git_out(&["rev-parse", "main^{tree}"]);
    let notes = server.git_out(&["notes", "--ref=tabellio/evidence", "show", &tree]);
    assert!(notes.contains("\"signature\""), "{notes}");
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}

/// `main` requiring the check `slow` (python `code`), and the runs `k0` and `k1` queued.
fn queue_two(t: &TestEnv, code: &str) {
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("slow", &["python3", "-c", code])]));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    for id in ["k0", "k1"] {
        t.started_run(id, &format!("{id}.txt"));
        t.tab(&["finish", id]).ok();
    }
    t.tab(&["enqueue", "k0", "k1"]).ok();
}

/// Two runs queued on `main`, whose check, once `<dir>/slow` exists (it does), logs
/// `start <the worker's pid>` to `<dir>/log` and sleeps `secs`; the log's path.
fn slow_check_queue(secs: u32) -> (TestEnv, PathBuf) {
    let t = TestEnv::ref_only();
    let dir = t.path().to_path_buf();
    let (slow, log) = (dir.join("slow"), dir.join("log"));
    let code = format!(
        "import os, time\nif os.path.exists({slow:?}):\n    open({log:?}, 'a').write('start %d\\n' % os.getppid())\n    time.sleep({secs})",
        log = log.display().to_string(),
        slow = slow.display().to_string(),
    );
    queue_two(&t, &code);
    write_file(&slow, "");
    (t, log)
}

/// A worker with a 2 s lease, polling often.
fn leased_worker(t: &TestEnv, id: &str) -> Child {
    t.spawn_tab(&["worker", "--lease", "2", "--poll", "0.05", "--id", id])
}

#[test]
fn a_slow_live_worker_renews_its_lease_and_is_not_taken_over() {
    let (t, log) = slow_check_queue(6);
    let lander = t.spawn_tab(&["land", "--lanes", "1", "--target", "main"]);
    let worker = |id: &str| leased_worker(&t, id);
    let mut kids = Kids(vec![worker("slow")]);
    wait_for_file(&log);
    // The heir polls all along: it would take the claim over the moment its lease ran out.
    kids.0.push(worker("heir"));
    // The claim is renewed while the check runs: a new claim commit on the old one.
    let claim = claims_of(&t);
    assert_eq!(claim.lines().count(), 1, "{claim}");
    let until = Instant::now() + Duration::from_secs(30);
    let first = t.git_out(&["rev-parse", claim.trim()]);
    let renewed = loop {
        let now = t.git(&["rev-parse", "-q", "--verify", claim.trim()]);
        let held = t.git(&["show", &format!("{}:claim.json", claim.trim())]);
        if now.code == 0 && now.stdout.trim() != first {
            assert!(
                held.stdout.contains("\"worker\": \"slow\""),
                "{}",
                held.stdout
            );
            break true;
        }
        if Instant::now() > until || claims_of(&t).is_empty() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(renewed, "the claim was never renewed");
    let exit = finish(lander, "the lander");
    assert_eq!(exit.code, 0, "{}", exit.stderr);
    let slow_pid = kids.0[0].id().to_string();
    terminate(kids);
    // One execution, by the slow worker; the heir took nothing over.
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        ran.lines().collect::<Vec<_>>(),
        [format!("start {slow_pid}")],
        "{ran}"
    );
    assert_eq!(claims_of(&t), "");
    t.fsck();
}

#[test]
fn a_worker_stalled_past_its_lease_loses_the_claim_and_its_result_is_not_noted() {
    let (t, log) = slow_check_queue(3);
    let lander = t.spawn_tab(&["land", "--lanes", "1", "--target", "main"]);
    let worker = |id: &str| leased_worker(&t, id);
    let mut kids = Kids(vec![worker("stalled")]);
    wait_for_file(&log);
    // The worker stops (SIGSTOP) mid-check: its check runs on, its lease runs out, and the
    // heir takes the claim over and runs the check itself.
    let stalled = kids.0[0].id().to_string();
    let signal = |sig: &str| {
        let _ = std::process::Command::new("kill")
            .args([sig, &stalled])
            .status();
    };
    signal("-STOP");
    kids.0.push(worker("heir"));
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&log).unwrap().lines().count() < 2 {
        assert!(Instant::now() < until, "the heir never took the claim over");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-CONT");
    let exit = finish(lander, "the lander");
    assert_eq!(exit.code, 0, "{}", exit.stderr);
    // Each worker finishes the check it holds before it is stopped.
    stop(&t, kids);
    // Both ran the check; only the heir's record is noted: the claim was no longer the
    // stalled worker's when it came back.
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(ran.lines().count(), 2, "{ran}");
    let main = t.git_out(&["rev-parse", "main^{tree}"]);
    let notes = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &main]);
    let executed: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("\"name\":\"slow\"") && !l.contains("reused_from"))
        .collect();
    assert_eq!(executed.len(), 1, "{notes}");
    assert_eq!(claims_of(&t), "");
    t.fsck();
}

#[test]
fn a_priority_run_enqueued_mid_flight_lands_first_and_the_in_flight_evidence_still_counts() {
    let t = TestEnv::ref_only();
    let (slow, log, release) = (
        t.path().join("slow"),
        t.path().join("log"),
        t.path().join("release"),
    );
    // The check reads only `f*.txt` (its declared inputs). Once `slow` exists it logs, then
    // holds until `release` exists (at most 90 s): the queued runs' validations are in flight
    // until the test sees the priority run landed.
    let code = format!(
        "import os, time\nif os.path.exists({slow:?}):\n    open({log:?}, 'a').write('start\\n')\n    until = time.time() + 90\n    while not os.path.exists({release:?}) and time.time() < until:\n        time.sleep(0.05)",
        log = log.display().to_string(),
        slow = slow.display().to_string(),
        release = release.display().to_string(),
    );
    let mut p: Value =
        serde_json::from_str(&policy(&[("count", &["python3", "-c", &code])])).unwrap();
    p["checks"]["count"]["inputs"] = serde_json::json!(["f*.txt"]);
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&p.to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let ids: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        t.started_run(id, &format!("f{i}.txt"));
        t.tab(&["finish", id]).ok();
    }
    // The priority run changes no input of the check.
    t.started_run("p", "p.txt");
    t.tab(&["finish", "p"]).ok();
    let mut enqueue = vec!["enqueue"];
    enqueue.extend(ids.iter().map(String::as_str));
    t.tab(&enqueue).ok();
    write_file(&slow, "");
    // Two workers more than lanes: free to take whatever candidate the lander publishes.
    let kids = workers(&t, 6);
    let lander = t.spawn_tab(&["--json", "land", "--lanes", "4", "--target", "main"]);
    let started = || std::fs::read_to_string(&log).map_or(0, |s| s.lines().count());
    let until = Instant::now() + Duration::from_secs(120);
    while started() < 4 {
        assert!(Instant::now() < until, "four candidates never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.tab(&["enqueue", "p", "--priority"]).ok();
    // The priority run lands while the four validations are still held.
    let state = || t.ledger_record("refs/tabellio/runs/p")["state"].clone();
    let until = Instant::now() + Duration::from_secs(60);
    while state() != "promoted" && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let promoted_first = state() == "promoted";
    let held = started();
    write_file(&release, "");
    let exit = finish(lander, "the lander");
    stop(&t, kids);
    assert!(
        promoted_first,
        "the priority run waited for the queue's validations"
    );
    assert_eq!(exit.code, 0, "{}\n{}", exit.stdout, exit.stderr);
    let landed = |id: &str| {
        let rec = t.ledger_record(&format!("refs/tabellio/runs/{id}"));
        assert_eq!(rec["state"], "promoted", "{id}: {rec}");
        rec["landed"].as_str().unwrap().to_string()
    };
    let first = landed("p");
    for id in &ids {
        let theirs = landed(id);
        let under = t.git(&["merge-base", "--is-ancestor", &first, &theirs]);
        assert_eq!(under.code, 0, "{id} landed before the priority run");
    }
    // The four in-flight validations were kept, not rebuilt on the new tip: the stacks there
    // have their inputs. At most one execution more in all (none started while they were held).
    assert!(
        held <= 5,
        "{held} executions while the in-flight ones were held"
    );
    assert!(started() <= 5, "{} executions", started());
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    t.fsck();
}
