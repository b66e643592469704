//! `land --lanes` with `worker`s: candidate stacks in refs, claims, parallel bisection, and a
//! lander that runs no check itself. Real processes: the workers run beside the lander on the
//! same repository (the compare-and-swap on claims is all that keeps them apart).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// A repository whose `main` requires `count`: a check that appends a line to `<dir>/count`
/// and fails when `bad.txt` and `f0.txt` are both in the tree; `n` runs queued, `r<i>` adding
/// `f<i>.txt`, and the run `culprit` adding `bad.txt` too.
fn queued_repo(n: usize, culprit: Option<usize>) -> (TestEnv, PathBuf) {
    let t = TestEnv::ref_only();
    let count = t.path().join("count");
    let code = format!(
        "import os\nopen({:?}, 'a').write(os.getcwd() + '\\n')\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)",
        count.display().to_string()
    );
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("count", &["python3", "-c", &code])]));
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

fn executions(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |s| s.lines().count())
}

fn workers(t: &TestEnv, n: usize) -> Vec<std::process::Child> {
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
        .collect()
}

/// Stop the workers as a person would (SIGTERM): they release their claims and end.
fn stop(t: &TestEnv, kids: Vec<std::process::Child>) {
    for k in &kids {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &k.id().to_string()])
            .status();
    }
    for k in kids {
        wait(k);
    }
    let claims = t.git_out(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/tabellio/claims/",
    ]);
    assert_eq!(claims, "", "a stopped worker left its claims");
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
    let (code, j) = t.tab_json(&["land", "--lanes", "4", "--target", "main"]);
    stop(&t, kids);
    assert_eq!(code, 0, "{j}");
    assert!(states(&t, 8).iter().all(|s| s == "promoted"), "{j}");
    // One round: the four prefixes 2, 4, 6, 8 (and the tip, which has no evidence yet: the
    // first run alone on it is what `land` asks first when it bisects; here nothing fails).
    assert!(executions(&count) <= 4, "{} executions", executions(&count));
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
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
    let (code, j) = t.tab_json(&["land", "--lanes", "4", "--target", "main"]);
    stop(&t, kids);
    assert_eq!(code, 1, "{j}");
    let s = states(&t, 8);
    for (i, state) in s.iter().enumerate() {
        let want = if i == 4 {
            "validation_failed"
        } else {
            "promoted"
        };
        assert_eq!(state, want, "r{i}: {j}");
    }
    assert!(executions(&count) <= 8, "{} executions", executions(&count));
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    let (_, q) = t.tab_json(&["queue"]);
    assert_eq!(q["entries"][0]["run"], "r4", "{q}");
    assert_eq!(q["entries"][0]["state"], "blocked", "{q}");
    t.fsck();
}

#[test]
fn candidates_are_refs_stock_git_reads_and_a_restarted_lander_continues_from_them() {
    let (t, _) = queued_repo(3, None);
    // No worker: the lander publishes and waits; stop it once the candidates are there (r0
    // alone is not one: it lands as `finish` validated it, whose evidence is on its tree).
    let mut lander = t.spawn_tab(&["land", "--lanes", "2", "--target", "main"]);
    let list = || {
        t.git_out(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/tabellio/candidates/",
        ])
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while list().lines().count() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    lander.kill().ok();
    lander.wait().ok();
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
    let (code, w) = t.tab_json(&["worker", "--once", "--id", "solo"]);
    assert_eq!(code, 0, "{w}");
    assert_eq!(w["validated"].as_array().unwrap().len(), 2, "{w}");
    assert_eq!(w["validated"][0]["passed"], true, "{w}");
    assert!(t
        .git_out(&["for-each-ref", "refs/tabellio/claims/"])
        .is_empty());
    // The lander, run again, lands from what the refs and notes say: it runs nothing.
    let (code, j) = t.tab_json(&["land", "--lanes", "2", "--target", "main"]);
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
    let kids: Vec<_> = [&b, &c]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            w.spawn_tab(&[
                "worker",
                "--remote",
                "origin",
                "--poll",
                "0.1",
                "--id",
                &format!("w{i}"),
            ])
        })
        .collect();
    let (code, j) = a.tab_json(&[
        "land", "--lanes", "2", "--remote", "origin", "--target", "main",
    ]);
    for k in &kids {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &k.id().to_string()])
            .status();
    }
    for k in kids {
        wait(k);
    }
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
    let server_refs = server.git_out(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/tabellio/candidates/",
        "refs/tabellio/claims/",
        "refs/tabellio/queue/",
    ]);
    assert_eq!(server_refs, "", "left on the server");
    let r = a.tab(&["verify", "origin/main"]);
    assert_eq!(r.code, 0, "{}", r.desc);
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}
