//! `land`: restacking completed runs onto a moved target, validating the stack, bisecting
//! failures, reusing evidence of identical trees, and racing `land` processes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// A repository (main checked out nowhere) whose `main` requires `count`: a check that appends a
/// line to `<test dir>/count` on every run and fails when `bad.txt` and `f0.txt` both exist.
fn counting_repo() -> (TestEnv, PathBuf) {
    let t = TestEnv::ref_only();
    let count = t.path().join("count");
    let code = format!(
        "import os\nopen({:?}, 'a').write('x\\n')\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)",
        count.display().to_string()
    );
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("count", &["python3", "-c", &code])]));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    (t, count)
}

fn runs_counted(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |s| s.lines().count())
}

/// Start `id` from main, commit `file`, finish with the policy's checks.
pub fn finished(t: &TestEnv, id: &str, file: &str, content: &str) -> PathBuf {
    let wt = t.started_with(id, file, content);
    t.tab(&["finish", id]).ok();
    wt
}

pub fn run_json(t: &TestEnv, id: &str) -> Value {
    t.ledger_record(&format!("refs/tabellio/runs/{id}"))
}

pub fn result_of<'a>(j: &'a Value, id: &str) -> &'a Value {
    j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {j}"))
}

/// The target's tip has passing evidence for every required check.
#[track_caller]
fn tip_verified(t: &TestEnv) {
    let r = t.tab(&["verify", "main"]);
    assert_eq!(r.code, 0, "main is not verified\n{}", r.desc);
}

#[test]
fn six_runs_one_culprit_lands_five_within_five_validations() {
    let (t, count) = counting_repo();
    for i in 0..6 {
        let id = format!("r{i}");
        let wt = finished(&t, &id, &format!("f{i}.txt"), &format!("{i}\n"));
        if i == 3 {
            // Passes on its own base; fails once r0's f0.txt is under it.
            t.commit_file_in(&wt, "bad.txt", "bad\n");
            t.tab(&["finish", &id]).ok();
        }
    }
    let before = runs_counted(&count);
    let ids = ["r0", "r1", "r2", "r3", "r4", "r5"];
    let mut args = vec!["land"];
    args.extend(ids);
    let (code, j) = t.tab_json(&args);
    assert_eq!(code, 1, "{j}");
    let ran = runs_counted(&count) - before;
    assert!(ran <= 5, "the check ran {ran} times: {j}");
    assert_eq!(j["checks_run"], ran, "{j}");
    assert!(j["validations"].as_u64().unwrap() <= 5, "{j}");
    for id in ["r0", "r1", "r2", "r4", "r5"] {
        assert_eq!(result_of(&j, id)["result"], "landed", "{j}");
        let run = run_json(&t, id);
        assert_eq!(run["state"], "promoted");
        let landed = run["landed"].as_str().unwrap();
        let is_ancestor = t.git(&["merge-base", "--is-ancestor", landed, "main"]);
        assert_eq!(is_ancestor.code, 0, "{id} landed as {landed}, not on main");
        assert_eq!(
            t.git_out(&["rev-parse", &format!("refs/heads/tabellio/{id}")]),
            landed
        );
        assert_eq!(run["restack"]["head_after"], landed);
        assert_eq!(run["promotion"]["new"], t.git_out(&["rev-parse", "main"]));
    }
    let culprit = run_json(&t, "r3");
    assert_eq!(culprit["state"], "validation_failed", "{culprit}");
    let reason = culprit["reason"].as_str().unwrap();
    assert!(reason.starts_with("fails on "), "{reason}");
    assert!(!main_has_file(&t, "bad.txt"));
    // The culprit's failing evidence is on its replayed commit.
    let failing = result_of(&j, "r3");
    assert_eq!(failing["result"], "validation_failed");
    let commit = failing["commit"].as_str().unwrap();
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", commit]);
    assert!(note.contains("\"status\":\"failed\""), "{note}");
    tip_verified(&t);
    t.fsck();
}

#[test]
fn the_runs_after_a_culprit_lead_the_next_batch() {
    // 9 runs, batches of 4, r1 the culprit: the batch r0..r3 isolates r1 in 2 executions (r0
    // lands as it finished: its evidence is reused); r2 and r3 then lead the next batch
    // (r2..r5), and r6..r8 make the last. Validating r2 and r3 on their own first would cost a
    // batch more: 5 executions instead of 4.
    let (t, count) = counting_repo();
    for i in 0..9 {
        let id = format!("r{i}");
        let wt = finished(&t, &id, &format!("f{i}.txt"), &format!("{i}\n"));
        if i == 1 {
            // Passes on its own base; fails once r0's f0.txt is under it.
            t.commit_file_in(&wt, "bad.txt", "bad\n");
            t.tab(&["finish", &id]).ok();
        }
    }
    let before = runs_counted(&count);
    let ids: Vec<String> = (0..9).map(|i| format!("r{i}")).collect();
    let mut args = vec!["land", "--batch", "4"];
    args.extend(ids.iter().map(String::as_str));
    let (code, j) = t.tab_json(&args);
    assert_eq!(code, 1, "{j}");
    let ran = runs_counted(&count) - before;
    assert_eq!(ran, 4, "the check ran {ran} times: {j}");
    assert_eq!(j["checks_run"], ran, "{j}");
    assert_eq!(result_of(&j, "r1")["result"], "validation_failed", "{j}");
    for id in ids.iter().filter(|id| *id != "r1") {
        assert_eq!(result_of(&j, id)["result"], "landed", "{j}");
    }
    assert!(!main_has_file(&t, "bad.txt"));
    // r2 and r3 landed in the same move as r4 and r5, after r0's.
    let new_of = |id: &str| run_json(&t, id)["promotion"]["new"].clone();
    assert_eq!(new_of("r2"), new_of("r5"));
    assert_ne!(new_of("r0"), new_of("r2"));
    assert_ne!(new_of("r5"), new_of("r8"));
    tip_verified(&t);
    t.fsck();
}

fn main_has_file(t: &TestEnv, file: &str) -> bool {
    t.git(&["cat-file", "-e", &format!("main:{file}")]).code == 0
}

#[test]
fn restacked_tree_with_evidence_runs_no_check() {
    let (t, count) = counting_repo();
    // Two runs making the same change: the second, replayed onto the first, has its tree.
    finished(&t, "a", "same.txt", "same\n");
    finished(&t, "b", "same.txt", "same\n");
    finished(&t, "c", "same.txt", "same\n");
    let (code, j) = t.tab_json(&["land", "a"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["checks_run"], 0, "{j}");
    assert_eq!(result_of(&j, "a")["restack"], "none");
    let before = runs_counted(&count);
    let (code, j) = t.tab_json(&["land", "b"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "b")["restack"], "replay", "{j}");
    assert_eq!(j["checks_run"], 0, "{j}");
    assert_eq!(j["checks_reused"], 1, "{j}");
    assert_eq!(runs_counted(&count), before);
    // The landed commit carries a record of its own that names the reused one.
    let landed = run_json(&t, "b")["landed"].as_str().unwrap().to_string();
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &landed]);
    assert!(note.contains("\"reused_from\":"), "{note}");
    tip_verified(&t);
    // `--no-reuse` runs it again.
    let (code, j) = t.tab_json(&["land", "c", "--no-reuse"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["checks_run"], 1, "{j}");
    t.fsck();
}

#[test]
fn conflicting_run_is_refused_with_paths_and_the_rest_land() {
    let (t, _count) = counting_repo();
    finished(&t, "a-first", "README.md", "first\n");
    finished(&t, "b-clash", "README.md", "clash\n");
    finished(&t, "c-other", "other.txt", "other\n");
    let clash_branch = t.git_out(&["rev-parse", "refs/heads/tabellio/b-clash"]);
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(code, 1, "{j}");
    assert_eq!(result_of(&j, "a-first")["result"], "landed", "{j}");
    assert_eq!(result_of(&j, "c-other")["result"], "landed", "{j}");
    let clash = result_of(&j, "b-clash");
    assert_eq!(clash["result"], "conflict", "{j}");
    assert_eq!(clash["paths"], serde_json::json!(["README.md"]));
    // Nothing of it was written but the attempt in its own ledger.
    assert_eq!(
        t.git_out(&["rev-parse", "refs/heads/tabellio/b-clash"]),
        clash_branch
    );
    let run = run_json(&t, "b-clash");
    assert_eq!(run["state"], "completed");
    assert_eq!(
        run["land_attempts"][0]["paths"],
        serde_json::json!(["README.md"])
    );
    assert!(run.get("landed").is_none());
    tip_verified(&t);
    t.fsck();
}

#[test]
fn checked_out_target_moves_its_files() {
    let (t, _count) = counting_repo();
    finished(&t, "x", "x.txt", "x\n");
    finished(&t, "y", "y.txt", "y\n");
    t.git(&["switch", "-q", "main"]).ok();
    let (code, j) = t.tab_json(&["land", "x", "y"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["mode"], "worktree", "{j}");
    assert_eq!(run_json(&t, "y")["promotion"]["mode"], "worktree");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("y.txt")).unwrap(),
        "y\n"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    // The run worktree moved with its restacked branch.
    assert_eq!(
        t.git_out_in(&t.worktree("y"), &["status", "--porcelain"]),
        ""
    );
    tip_verified(&t);
    t.fsck();
}

#[test]
fn refuses_runs_in_other_states_up_front() {
    let (t, _count) = counting_repo();
    finished(&t, "ok", "ok.txt", "ok\n");
    t.tab(&["start", "busy", "--task", "t", "--base", "main"])
        .ok();
    let before = t.snapshot();
    let r = t.tab(&["land", "ok", "busy"]);
    assert_eq!(r.code, 3, "{}", r.desc);
    assert!(r.stderr.contains("busy is active"), "{}", r.desc);
    assert_eq!(before, t.snapshot());
    // Dry run: the plan, nothing written.
    let (code, j) = t.tab_json(&["land", "ok", "--dry-run"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "ok")["result"], "would_land");
    assert_eq!(result_of(&j, "ok")["satisfied"], true);
    assert_eq!(before, t.snapshot());
    let (code, _) = t.tab_json(&["land", "ok"]);
    assert_eq!(code, 0);
    let (code, j) = t.tab_json(&["land", "ok"]);
    assert_eq!(code, 0);
    assert_eq!(result_of(&j, "ok")["result"], "already_landed");
    // `list` shows the commit it landed as.
    let landed = run_json(&t, "ok")["landed"].as_str().unwrap().to_string();
    let (_, list) = t.tab_json(&["list"]);
    let entry = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "ok")
        .unwrap();
    assert_eq!(entry["landed"], landed.as_str());
    let human = t.tab(&["list"]).stdout;
    assert!(
        human.contains(&format!("(landed as {})", &landed[..12])),
        "{human}"
    );
}

/// Ledger transitions to `promoted` of `id`.
fn promotions(t: &TestEnv, id: &str) -> usize {
    t.git_out(&["log", "--format=%s", &format!("refs/tabellio/runs/{id}")])
        .lines()
        .filter(|l| l.ends_with("-> promoted"))
        .count()
}

#[test]
fn racing_land_processes_land_every_run_once() {
    for (round, processes) in [(0, 2), (1, 4), (2, 4)] {
        let (t, _count) = counting_repo();
        let ids: Vec<String> = (0..5).map(|i| format!("q{round}-{i}")).collect();
        for (i, id) in ids.iter().enumerate() {
            finished(&t, id, &format!("q{i}.txt"), &format!("{i}\n"));
        }
        let children = (0..processes)
            .map(|p| {
                // Overlapping queues, in different orders.
                let mut queue: Vec<&str> = ids.iter().map(String::as_str).collect();
                queue.rotate_left(p % ids.len());
                queue.truncate(4);
                let mut args = vec!["--json", "land"];
                args.extend(queue);
                t.spawn_tab(&args)
            })
            .collect();
        for exit in race(children) {
            assert!(
                exit.code == 0 || exit.code == 4,
                "exit {}: {}{}",
                exit.code,
                exit.stdout,
                exit.stderr
            );
        }
        // Whatever lost every race lands now.
        let mut all = vec!["land"];
        all.extend(ids.iter().map(String::as_str));
        t.tab(&all).ok();
        let history = t.git_out(&["rev-list", "--first-parent", "main"]);
        for id in &ids {
            assert_eq!(promotions(&t, id), 1, "{id} landed more than once");
            let run = run_json(&t, id);
            let landed = run["landed"].as_str().unwrap();
            assert!(history.contains(landed), "{id}: {landed} not on main");
            let new = run["promotion"]["new"].as_str().unwrap();
            assert!(
                history.contains(new),
                "{id}: promotion.new {new} not on main"
            );
        }
        // Each run's file is on main exactly once.
        let files = t.git_out(&["ls-tree", "--name-only", "main"]);
        for i in 0..5 {
            assert!(files.contains(&format!("q{i}.txt")), "{files}");
        }
        tip_verified(&t);
        t.fsck();
    }
}

#[test]
fn the_policy_can_ask_for_squashed_landings() {
    let t = TestEnv::ref_only();
    let mut p: Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["land"] = serde_json::json!({"squash": true});
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&p.to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let wt = finished(&t, "s1", "one.txt", "1\n");
    t.commit_file_in(&wt, "two.txt", "2\n");
    t.tab(&["finish", "s1"]).ok();
    finished(&t, "s2", "three.txt", "3\n");
    let base = t.git_out(&["rev-parse", "main"]);
    let (code, j) = t.tab_json(&["land", "s1", "s2"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "s1")["restack"], "squash", "{j}");
    // One commit per run on main, each naming its run.
    let log = t.git_out(&["log", "--format=%B%x00", &format!("{base}..main")]);
    assert_eq!(log.matches('\0').count(), 2, "{log}");
    assert!(
        log.contains("Tabellio-Run: s1") && log.contains("Tabellio-Run: s2"),
        "{log}"
    );
    let files = t.git_out(&["ls-tree", "--name-only", "main"]);
    assert!(
        files.contains("two.txt") && files.contains("three.txt"),
        "{files}"
    );
    tip_verified(&t);
    t.fsck();
}

#[test]
fn lands_in_bare_and_sha256_repositories() {
    let src = TestEnv::with_readme_policy();
    let bare = src.bare_clone();
    for id in ["b1", "b2"] {
        src.tab_in(&bare, &["start", id, "--task", "t"]).ok();
        let wt = bare.join(format!("tabellio/worktrees/{id}"));
        src.commit_file_in(&wt, &format!("{id}.txt"), "x\n");
        src.tab_in(&bare, &["finish", id]).ok();
    }
    let r = src.tab_in(&bare, &["--json", "land", "--target", "main"]);
    r.ok();
    assert_eq!(r.json()["runs"][1]["restack"], "replay", "{}", r.desc);
    let files = src.git_out(&[
        "--git-dir",
        bare.to_str().unwrap(),
        "ls-tree",
        "--name-only",
        "main",
    ]);
    assert!(
        files.contains("b1.txt") && files.contains("b2.txt"),
        "{files}"
    );
    src.git_in(&bare, &["fsck", "--strict", "--no-progress"])
        .ok();

    let t = TestEnv::with_init(&["init", "-q", "-b", "main", "--object-format=sha256"]);
    t.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    finished(&t, "h1", "h1.txt", "1\n");
    finished(&t, "h2", "h2.txt", "2\n");
    let (code, j) = t.tab_json(&["land", "h1", "h2"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["new"].as_str().unwrap().len(), 64);
    assert_eq!(result_of(&j, "h2")["restack"], "replay");
    tip_verified(&t);
    t.fsck();
}

#[test]
fn lands_on_a_remote_with_the_server_hook_installed() {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    a.commit_policy(&policy(&[("ci", &["test", "-f", "README.md"])]));
    a.git(&["push", "-q"]).ok();
    let (code, s) = server.tab_json(&["init", "--hooks"]);
    assert_eq!(code, 0, "{s}");
    for id in ["m1", "m2"] {
        a.start_with_commit(id, &format!("{id}.txt"), "x\n");
        a.tab(&["finish", id]).ok();
    }
    // Someone else moves the server's main: both runs are restacked onto it.
    let b = TestEnv::clone_of(&server);
    b.commit_file_in(&b.repo.clone(), "other.txt", "other\n");
    b.tab(&["validate"]).ok();
    b.git(&[
        "push",
        "-q",
        "origin",
        "main",
        "refs/notes/tabellio/evidence",
    ])
    .ok();
    let local_main = a.git_out(&["rev-parse", "main"]);
    let (code, j) = a.tab_json(&["land", "m1", "m2", "--remote", "origin"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["mode"], "remote", "{j}");
    assert_eq!(result_of(&j, "m1")["restack"], "replay", "{j}");
    let server_main = server.git_out(&["rev-parse", "main"]);
    assert_eq!(j["new"], server_main.as_str());
    let files = server.git_out(&["ls-tree", "--name-only", "main"]);
    for f in ["m1.txt", "m2.txt", "other.txt"] {
        assert!(files.contains(f), "{files}");
    }
    for id in ["m1", "m2"] {
        let theirs = server.ledger_record(&format!("refs/tabellio/runs/{id}"));
        assert_eq!(theirs["state"], "promoted");
        assert_eq!(theirs["promotion"]["remote"], "origin");
        assert_eq!(run_json(&a, id)["state"], "promoted");
    }
    // The local target stays where it was: it is not what was landed on.
    assert_eq!(a.git_out(&["rev-parse", "main"]), local_main);
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
    a.fsck();
}

#[test]
fn reuse_takes_only_passing_untampered_evidence_of_the_same_check() {
    let t = TestEnv::new();
    let count = t.path().join("count");
    let check = |exit: i32| {
        format!(
            "open({:?}, 'a').write('x\\n'); raise SystemExit({exit})",
            count.display().to_string()
        )
    };
    let (pass, fail) = (check(0), check(1));
    let validate = |extra: &[&str], code: &str| {
        let mut args = vec!["--json", "validate"];
        args.extend_from_slice(extra);
        args.extend(["--", "python3", "-c", code]);
        let r = t.tab(&args);
        (r.code, r.json())
    };
    let (code, first) = validate(&[], &pass);
    assert_eq!(code, 0, "{first}");
    assert_eq!(runs_counted(&count), 1);
    // The same check on the same tree: reused, with a record of its own naming the first.
    let (code, second) = validate(&[], &pass);
    assert_eq!(code, 0, "{second}");
    assert_eq!(runs_counted(&count), 1);
    assert_eq!(
        second["evidence"][0]["reused_from"],
        first["evidence"][0]["digest"]
    );
    // --no-reuse runs it; a changed definition (timeout) is stale, so it runs too.
    validate(&["--no-reuse"], &pass);
    assert_eq!(runs_counted(&count), 2);
    validate(&["--timeout", "30"], &pass);
    assert_eq!(runs_counted(&count), 3);
    // Failing evidence is never reused.
    validate(&["--check", "flaky"], &fail);
    validate(&["--check", "flaky"], &fail);
    assert_eq!(runs_counted(&count), 5);
    // Tampered evidence is never reused.
    let line = first["evidence"][0]
        .to_string()
        .replace("\"duration_ms\":", "\"duration_ms\":1");
    t.forge_evidence("HEAD", &format!("{line}\n"));
    validate(&[], &pass);
    assert_eq!(runs_counted(&count), 6);
}

#[test]
fn status_says_land_when_the_run_replays_cleanly_and_restart_on_conflicts() {
    let (t, _count) = counting_repo();
    finished(&t, "p1", "p1.txt", "1\n");
    finished(&t, "p2", "p2.txt", "2\n");
    finished(&t, "p3", "p1.txt", "clash\n");
    t.tab(&["land", "p1"]).ok();
    let (_, st) = t.tab_json(&["status", "p2"]);
    assert_eq!(st["next_action"]["action"], "land", "{st}");
    assert_eq!(st["next_action"]["command"], "git tabellio land p2");
    assert!(st["allowed_actions"]
        .as_array()
        .unwrap()
        .contains(&"land".into()));
    let (_, st) = t.tab_json(&["status", "p3"]);
    assert_eq!(st["next_action"]["action"], "restart", "{st}");
    let r = t.tab(&["promote", "p2"]);
    assert_eq!(r.code, 4, "{}", r.desc);
    assert!(r.stderr.contains("git tabellio land p2"), "{}", r.desc);
}

#[test]
fn a_tip_that_fails_its_own_checks_blames_no_run() {
    let (t, _count) = counting_repo();
    finished(&t, "innocent", "x.txt", "x\n");
    // Main moves to a commit that fails its own required check.
    t.git(&["switch", "-q", "main"]).ok();
    t.write("f0.txt", "0\n");
    t.write("bad.txt", "bad\n");
    t.commit_all("broken tip");
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let tip = t.git_out(&["rev-parse", "main"]);
    let r = t.tab(&["land", "innocent"]);
    assert_eq!(r.code, 3, "{}", r.desc);
    assert!(
        r.stderr.contains("fails its own required checks"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out(&["rev-parse", "main"]), tip);
    assert_eq!(run_json(&t, "innocent")["state"], "completed");
}

#[test]
fn verify_first_parent_judges_the_commits_the_target_pointed_at() {
    let (t, _count) = counting_repo();
    let old = t.git_out(&["rev-parse", "main"]);
    finished(&t, "fp1", "fp1.txt", "1\n");
    let wt = finished(&t, "fp2", "fp2a.txt", "a\n");
    t.commit_file_in(&wt, "fp2b.txt", "b\n");
    t.tab(&["finish", "fp2"]).ok();
    // One batch: fp1 and both commits of fp2 replayed on main, only the top validated.
    t.tab(&["land", "fp1", "fp2"]).ok();
    let range = format!("{old}..main");
    assert_eq!(t.git_out(&["rev-list", "--count", &range]), "3");
    let plain = t.tab(&["verify", &range]);
    assert_eq!(
        plain.code, 1,
        "the replayed commits have no evidence\n{}",
        plain.desc
    );
    let (code, j) = t.tab_json(&["verify", "--first-parent", &range]);
    assert_eq!(code, 0, "{j}");
    let judged: Vec<&str> = j["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap())
        .collect();
    assert_eq!(judged, [t.git_out(&["rev-parse", "main"])], "{j}");
    let landed = run_json(&t, "fp1")["landed"].as_str().unwrap().to_string();
    let st = t.tab(&["status", "fp1"]);
    assert!(
        st.stdout.contains(&format!("landed as: {}", &landed[..12])),
        "{}",
        st.desc
    );
    assert!(
        st.stdout.contains("promoted: refs/heads/main "),
        "{}",
        st.desc
    );
    // A commit the target points at without evidence fails the range.
    t.git(&["switch", "-q", "main"]).ok();
    t.write("direct.txt", "d\n");
    t.commit_all("pushed without a run");
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let (code, j) = t.tab_json(&["verify", "--first-parent", &range]);
    assert_eq!(code, 1, "{j}");
    assert_eq!(j["commits"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j["commits"][0]["verified"], false, "{j}");
    assert_eq!(j["commits"][1]["verified"], true, "{j}");
    let r = t.tab(&["verify", "--first-parent", &range]);
    assert!(r.stdout.contains("NOT VERIFIED"), "{}", r.desc);
}

/// A run whose own commit weakens a required check does not hold up the queue: the good run
/// lands, the weakening run is refused alone, judged by the target's policy, with a hint that
/// works when followed.
#[test]
fn a_run_that_weakens_its_own_gate_is_refused_alone_and_the_queue_lands() {
    let (t, count) = counting_repo();
    finished(&t, "g", "g.txt", "good\n");
    t.tab(&["start", "w", "--task", "task w", "--base", "main"])
        .ok();
    let wt = t.worktree("w");
    t.commit_file_in(&wt, "w.txt", "weak\n");
    // The run's own policy: `count` becomes `true`, which passes whatever the tree holds.
    t.commit_file_in(
        &wt,
        ".tabellio/policy.json",
        &policy(&[("count", &["true"])]),
    );
    t.tab(&["finish", "w"]).ok();
    let (code, j) = t.tab_json(&["land", "g", "w"]);
    assert_eq!(code, 1, "{j}");
    assert_eq!(result_of(&j, "g")["result"], "landed", "{j}");
    let w = result_of(&j, "w");
    assert_eq!(w["result"], "refused", "{j}");
    assert_eq!(w["state"], "completed", "{j}");
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("its own commits change .tabellio/policy.json")
            && reason.contains("count (stale-check)")
            && reason.contains("git tabellio finish w"),
        "{reason}"
    );
    assert_eq!(run_json(&t, "g")["state"], "promoted");
    tip_verified(&t);
    // The hint, followed: revert the run's policy change, commit, finish, land.
    let base = run_json(&t, "w")["base"]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    t.git_in(&wt, &["checkout", &base, "--", ".tabellio/policy.json"])
        .ok();
    t.commit_all_in(&wt, "revert the policy change");
    let before = runs_counted(&count);
    t.tab(&["finish", "w"]).ok();
    assert!(runs_counted(&count) > before, "the target's check ran");
    let (code, j) = t.tab_json(&["land", "w"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "w")["result"], "landed", "{j}");
    tip_verified(&t);
    t.fsck();
}

/// `land --dry-run` stacks the queue in memory as `land` does: a run that conflicts only with
/// a run before it in the queue is predicted to conflict, and the validations, executions and
/// reuses it predicts are the ones `land` then has, when the checks pass.
#[test]
fn the_dry_run_predicts_the_conflicts_and_the_reuse_that_land_then_meets() {
    let (t, count) = counting_repo();
    finished(&t, "a", "x.txt", "from a\n");
    finished(&t, "b", "x.txt", "from b\n");
    finished(&t, "c", "c.txt", "c\n");
    finished(&t, "d", "d.txt", "d\n");
    let before = t.snapshot();
    let (code, dry) = t.tab_json(&["land", "a", "b", "c", "d", "--batch", "2", "--dry-run"]);
    assert_eq!(before, t.snapshot(), "the dry run wrote nothing");
    assert_eq!(code, 1, "{dry}");
    assert_eq!(result_of(&dry, "a")["result"], "would_land", "{dry}");
    assert_eq!(result_of(&dry, "a")["satisfied"], true, "{dry}");
    // Alone on main, b applies; stacked on a, it conflicts.
    assert_eq!(result_of(&dry, "b")["result"], "conflict", "{dry}");
    assert_eq!(result_of(&dry, "b")["paths"], serde_json::json!(["x.txt"]));
    for id in ["c", "d"] {
        assert_eq!(result_of(&dry, id)["result"], "would_land", "{dry}");
        assert_eq!(result_of(&dry, id)["satisfied"], false, "{dry}");
        assert!(
            result_of(&dry, id)["reason"]
                .as_str()
                .unwrap()
                .contains("cannot be known before it runs"),
            "{dry}"
        );
    }
    let ran_before = runs_counted(&count);
    let (_, real) = t.tab_json(&["land", "a", "b", "c", "d", "--batch", "2"]);
    for id in ["a", "b", "c", "d"] {
        let (predicted, landed) = (result_of(&dry, id), result_of(&real, id));
        let expected = match predicted["result"].as_str().unwrap() {
            "would_land" => "landed",
            other => other,
        };
        assert_eq!(landed["result"], expected, "{id}: {dry}\n{real}");
        assert_eq!(landed["paths"], predicted["paths"], "{id}");
    }
    for field in ["validations", "checks_run", "checks_reused"] {
        assert_eq!(real[field], dry[field], "{field}: {dry}\n{real}");
    }
    assert_eq!(
        runs_counted(&count) - ran_before,
        dry["checks_run"].as_u64().unwrap() as usize
    );
    tip_verified(&t);
}

/// `land` inside a run's worktree lands onto the run's target (not onto the run's own branch),
/// and with nothing to land on its target it names where completed runs wait instead of
/// saying "nothing to land" with exit 0.
#[test]
fn land_in_a_run_worktree_takes_the_runs_target_and_names_runs_waiting_elsewhere() {
    let (t, _count) = counting_repo();
    let wt = finished(&t, "r1", "a.txt", "a\n");
    let (code, j) = {
        let r = t.tab_in(&wt, &["--json", "land"]);
        (r.code, r.json())
    };
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["target"], "refs/heads/main", "{j}");
    assert_eq!(result_of(&j, "r1")["result"], "landed", "{j}");
    // A completed run of another target, and nothing for main.
    t.git(&["branch", "dev", "main"]).ok();
    t.tab(&["start", "d1", "--task", "t", "--base", "dev"]).ok();
    t.commit_file_in(&t.worktree("d1"), "d.txt", "d\n");
    t.tab(&["finish", "d1"]).ok();
    t.git(&["switch", "-q", "main"]).ok();
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["land"]);
    assert_eq!(code, 2, "{j}");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("completed runs wait on other branches: 1 on refs/heads/dev"),
        "{j}"
    );
    assert_eq!(
        j["error"]["hint"],
        "land them onto their target: `git tabellio land --target dev`"
    );
    assert_eq!(before, t.snapshot());
    // The hint, followed.
    let (code, j) = t.tab_json(&["land", "--target", "dev"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "d1")["result"], "landed", "{j}");
}

/// The in-toto statement of a run `land` restacked is about the commit its target points at
/// (the landed commit), with the validated commit beside it; an abandoned run's refusal points
/// at an export that works, not at `finish`.
#[test]
fn in_toto_export_of_a_restacked_run_names_the_landed_commit() {
    let (t, _count) = counting_repo();
    finished(&t, "a", "a.txt", "a\n");
    finished(&t, "b", "b.txt", "b\n");
    t.tab(&["land", "a", "b"]).ok();
    let tip = t.git_out(&["rev-parse", "main"]);
    let rec = run_json(&t, "b");
    assert_eq!(rec["landed"], tip.as_str());
    let validated = rec["validated"]["commit"].as_str().unwrap().to_string();
    assert_ne!(validated, tip, "b was restacked");
    let (code, j) = t.tab_json(&["export", "b", "--format", "in-toto"]);
    assert_eq!(code, 0, "{j}");
    let statement = &j["document"];
    assert_eq!(
        statement["subject"][0]["digest"]["gitCommit"],
        tip.as_str(),
        "{j}"
    );
    assert_eq!(
        statement["subject"][0]["digest"]["gitTree"],
        t.git_out(&["rev-parse", "main^{tree}"]).as_str()
    );
    assert_eq!(statement["predicate"]["landed"]["commit"], tip.as_str());
    assert_eq!(
        statement["predicate"]["validated"]["commit"],
        validated.as_str()
    );
    // An abandoned run: the hint sends to an export that works.
    t.tab(&["start", "z", "--task", "t", "--base", "main"]).ok();
    t.tab(&["abandon", "z"]).ok();
    let (code, j) = t.tab_json(&["export", "z", "--format", "in-toto"]);
    assert_eq!(code, 3, "{j}");
    let hint = j["error"]["hint"].as_str().unwrap();
    assert!(!hint.contains("finish"), "{hint}");
    assert!(
        hint.contains("git tabellio export z --format tabellio"),
        "{hint}"
    );
    t.tab(&["export", "z", "--format", "tabellio"]).ok();
}
