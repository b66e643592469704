//! Honest verdicts with real processes: every execution of a check is its own evidence record
//! with its attempt number, a tree that passed and failed is a `flaky-pass` that no gate lets
//! onto a protected branch under the default policy, a flaky check over its budget is refused,
//! and failing tests the target already has can be inherited where the policy allows it.
//!
//! The flaky check is `tests/support/flaky_check.py`: FLAKE is its chance of a spurious failure
//! (seeded by SEED and the execution's number), CULPRITS the files that make it really fail, and
//! FLAKE_COUNTER a file outside the repository with one line per execution.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util::*;

const FLAKY_CHECK: &str = include_str!("../support/flaky_check.py");

/// A repository whose `main` (checked out nowhere) requires `flaky`, the flaky check, with the
/// policy fields `extra` set on it.
fn flaky_repo(extra: Value) -> TestEnv {
    let t = TestEnv::ref_only();
    t.git(&["switch", "-q", "main"]).ok();
    t.write(".tabellio/flaky_check.py", FLAKY_CHECK);
    t.commit_policy(&flaky_policy(extra).to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    t
}

fn flaky_policy(extra: Value) -> Value {
    let mut check = json!({"argv": ["python3", ".tabellio/flaky_check.py"], "timeout_s": 60});
    for (k, v) in extra.as_object().expect("an object of fields") {
        check[k] = v.clone();
    }
    json!({
        "schema": "tabellio.policy/v1",
        "checks": {"flaky": check},
        "required": ["flaky"],
        "protect": ["refs/heads/main"],
    })
}

/// `git tabellio <args>` in the repository with `env` set.
fn tab_env(t: &TestEnv, env: &[(&str, &str)], args: &[&str]) -> Run {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect();
    t.command_with_env(BIN, &t.repo, &env, args)
}

fn json_of(r: &Run) -> Value {
    r.json()
}

/// Start `id` from main, commit `file`, finish it with a check that never fails.
fn finished(t: &TestEnv, id: &str, file: &str) -> PathBuf {
    let wt = t.started_with(id, file, &format!("{id}\n"));
    tab_env(t, &[("FLAKE", "0")], &["finish", id]).ok();
    wt
}

/// Commit `file` on main (checked out nowhere) through a temporary worktree-free plumbing.
fn move_main(t: &TestEnv, file: &str) {
    t.git(&["switch", "-q", "main"]).ok();
    t.write(file, "moved\n");
    t.commit_all(&format!("move main: {file}"));
    t.git(&["switch", "-q", "elsewhere"]).ok();
}

/// The evidence records noted on `object`.
fn records_on(t: &TestEnv, object: &str) -> Vec<Value> {
    let r = t.git(&["notes", "--ref=tabellio/evidence", "show", object]);
    if r.code != 0 {
        return Vec::new();
    }
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// Every line of the counter file has a record of its own: per tree, the executions the check
/// counted are the records noted on the tree that ran (not reused), attempts 1, 2, … in the
/// order they ran, with the same outcomes. Returns how many executions there were.
#[track_caller]
fn every_execution_has_its_record(t: &TestEnv, counter: &Path) -> usize {
    let text = std::fs::read_to_string(counter).unwrap_or_default();
    let mut by_tree: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in text.lines() {
        let (tree, outcome) = line.split_once(' ').expect("<tree> <outcome>");
        by_tree.entry(tree).or_default().push(outcome);
    }
    for (tree, outcomes) in &by_tree {
        let mut executed: Vec<(u64, String)> = records_on(t, tree)
            .into_iter()
            .filter(|r| r["tree"] == *tree && r["check"]["name"] == "flaky")
            .filter(|r| r.get("reused_from").is_none())
            .map(|r| {
                let attempt = r["attempt"].as_u64().expect("an attempt number");
                (attempt, r["status"].as_str().unwrap().to_string())
            })
            .collect();
        executed.sort();
        let attempts: Vec<u64> = executed.iter().map(|(n, _)| *n).collect();
        let want: Vec<u64> = (1..=outcomes.len() as u64).collect();
        assert_eq!(attempts, want, "attempts on {tree}");
        let statuses: Vec<&str> = executed
            .iter()
            .map(|(_, s)| if s == "passed" { "pass" } else { "fail" })
            .collect();
        assert_eq!(&statuses, outcomes, "outcomes on {tree}");
    }
    text.lines().count()
}

/// A `flaky_prone` check accepting flaky passes, six runs `r0…r5` (run `i` adds `f<i>.txt`)
/// finished on `main`, which then moved (every tree `land` validates is new) and was
/// validated.
fn six_finished() -> (TestEnv, Vec<String>) {
    let t = flaky_repo(json!({"flaky_prone": true, "flaky": "accept"}));
    let ids: Vec<String> = (0..6).map(|i| format!("r{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        finished(&t, id, &format!("f{i}.txt"));
    }
    move_main(&t, "moved.txt");
    tab_env(&t, &[("FLAKE", "0")], &["validate", "main"]).ok();
    (t, ids)
}

#[test]
fn every_execution_of_a_flaky_check_is_a_record_with_its_attempt_number() {
    let seeds: u64 = std::env::var("TABELLIO_FLAKY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut retried = 0;
    for seed in 0..seeds {
        let (t, ids) = six_finished();
        let counter = t.path().join(format!("counter-{seed}"));
        let seed_text = seed.to_string();
        let env = [
            ("FLAKE", "0.3"),
            ("SEED", seed_text.as_str()),
            ("CULPRITS", "f3.txt"),
            ("FLAKE_COUNTER", counter.to_str().unwrap()),
        ];
        let mut args = vec!["--json", "land"];
        args.extend(ids.iter().map(String::as_str));
        let r = tab_env(&t, &env, &args);
        let j = json_of(&r);
        let executions = every_execution_has_its_record(&t, &counter);
        assert!(executions > 0, "{j}");
        assert_eq!(j["checks_run"], executions, "{j}");
        let listed = j["executions"].as_array().expect("executions listed");
        assert_eq!(listed.len(), executions, "{j}");
        assert!(
            listed.iter().all(|e| e["attempt"].as_u64().is_some()),
            "{j}"
        );
        retried += listed.iter().filter(|e| e["attempt"] != 1).count();
        // The real culprit never lands, whatever the flakes did.
        let culprit = j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == "r3")
            .expect("r3 is reported");
        assert_ne!(culprit["result"], "landed", "{j}");
        if culprit["result"] == "validation_failed" {
            // Explained from the notes alone.
            let reason = culprit["reason"].as_str().unwrap();
            assert!(
                reason.contains("flaky: new on this tree")
                    || reason.contains("flaky: proven flaky since "),
                "{reason}"
            );
        }
        assert!(
            t.git(&["cat-file", "-e", "main:f3.txt"]).code != 0,
            "the culprit's file reached main: {j}"
        );
        // Whatever landed is verified by main's policy, flaky passes accepted there.
        t.tab(&["verify", "main"]).ok();
        // The records of one tree list every attempt, failures first: a later pass hides none.
        let verify = json_of(&t.tab(&["--json", "verify", "main"]));
        let on_main = verify["commits"][0]["executions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!on_main.is_empty(), "{verify}");
        t.fsck();
    }
    // The seeds exercise retries: some tree was executed more than once.
    assert!(retried > 0 || seeds < 3, "no seed retried anything");
}

/// The counter file's lines: (tree, `pass` or `fail`), in the order the check ran.
fn counted(counter: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (tree, outcome) = l.split_once(' ').expect("<tree> <outcome>");
            (tree.to_string(), outcome.to_string())
        })
        .collect()
}

/// [`six_finished`]'s runs landed with the flaky check's `SEED`, `FLAKE` and `CULPRITS`: the
/// `land --json` output and the executions in order.
fn land_six(seed: &str, flake: &str, culprits: &str) -> (TestEnv, Value, Vec<(String, String)>) {
    let (t, ids) = six_finished();
    let counter = t.path().join("counter");
    let env = [
        ("FLAKE", flake),
        ("SEED", seed),
        ("CULPRITS", culprits),
        ("FLAKE_COUNTER", counter.to_str().unwrap()),
    ];
    let mut args = vec!["--json", "land"];
    args.extend(ids.iter().map(String::as_str));
    let j = json_of(&tab_env(&t, &env, &args));
    let executions = every_execution_has_its_record(&t, &counter);
    assert_eq!(j["checks_run"], executions, "{j}");
    let ran = counted(&counter);
    (t, j, ran)
}

/// The result `land --json` gives `run`.
fn result_of<'j>(j: &'j Value, run: &str) -> &'j Value {
    &j["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["run_id"] == run)
        .unwrap_or_else(|| panic!("{run} is reported: {j}"))["result"]
}

#[test]
fn a_failed_stack_is_re_run_once_as_soon_as_a_probe_below_it_passes() {
    let outcomes = |ran: &[(String, String)]| -> Vec<String> {
        ran.iter().map(|(_, o)| o.clone()).collect::<Vec<_>>()
    };
    // A flake on the stack's top (SEED 5 fails the first execution and passes the next five):
    // the probe of r0..r2 passes, so the top is re-run at once, passes, and everything lands —
    // 3 executions, not the 5 of a bisection down to the top.
    let (t, j, ran) = land_six("5", "0.1", "");
    assert_eq!(outcomes(&ran), ["fail", "pass", "pass"], "{j}");
    assert_eq!(ran[0].0, ran[2].0, "the top is the tree re-run: {ran:?}");
    for i in 0..6 {
        assert_eq!(result_of(&j, &format!("r{i}")), "landed", "{j}");
    }
    t.tab(&["verify", "main"]).ok();
    t.fsck();

    // r4 really fails: the top fails again on its re-run, so its failure is confirmed, and the
    // prefix bisection isolates below it (r0..r4) is blamed without being re-run itself.
    let (t, j, ran) = land_six("0", "0", "f4.txt");
    assert_eq!(
        outcomes(&ran),
        ["fail", "pass", "fail", "pass", "fail", "pass"],
        "{j}"
    );
    assert_eq!(ran[0].0, ran[2].0, "the top is the tree re-run: {ran:?}");
    let isolated = &ran[4].0;
    assert_eq!(
        ran.iter().filter(|(tree, _)| tree == isolated).count(),
        1,
        "the isolated prefix ran once: {ran:?}"
    );
    assert_eq!(result_of(&j, "r4"), "validation_failed", "{j}");
    for i in [0, 1, 2, 3, 5] {
        assert_eq!(result_of(&j, &format!("r{i}")), "landed", "{j}");
    }
    t.fsck();

    // r5, the top's own run, really fails: the bisection isolates the top, whose failure was
    // confirmed already — it is not run a third time.
    let (t, j, ran) = land_six("0", "0", "f5.txt");
    assert_eq!(
        outcomes(&ran),
        ["fail", "pass", "fail", "pass", "pass"],
        "{j}"
    );
    assert_eq!(
        ran.iter().filter(|(tree, _)| *tree == ran[0].0).count(),
        2,
        "the top ran twice: {ran:?}"
    );
    assert_eq!(result_of(&j, "r5"), "validation_failed", "{j}");
    t.fsck();
}

#[test]
fn a_flaky_pass_never_reaches_a_protected_branch_under_the_default_policy() {
    let t = flaky_repo(json!({}));
    t.started_with("r1", "a.txt", "a\n");
    // The same tree fails, then passes: both records stay, attempts 1 and 2.
    tab_env(&t, &[("FLAKE", "1")], &["finish", "r1"]).code(1);
    let r = tab_env(&t, &[("FLAKE", "0")], &["--json", "finish", "r1"]);
    r.ok();
    let finish = json_of(&r);
    let attempts: Vec<(u64, String)> = finish["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["attempt"].as_u64().unwrap(),
                e["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [(1, "failed".to_string()), (2, "passed".to_string())],
        "{finish}"
    );
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    let main = t.git_out(&["rev-parse", "main"]);
    let before = t.git_out(&["for-each-ref"]);

    // verify: flaky-pass, not verified.
    let r = t.tab(&["--json", "verify", &head]);
    assert_eq!(r.code, 1, "{}", r.desc);
    let v = json_of(&r);
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "flaky-pass", "{v}");
    assert_eq!(v["commits"][0]["executions"].as_array().unwrap().len(), 2);
    // status: the flaky pass is shown and explained, never counted as satisfied.
    let s = json_of(&t.tab(&["--json", "status", "r1"]));
    assert_eq!(s["satisfied_evidence"], json!([]), "{s}");
    assert_eq!(s["missing_evidence"], json!(["flaky (flaky-pass)"]), "{s}");
    assert_eq!(s["failures"][0]["kind"], "proven_flaky", "{s}");
    // log --html says flaky-pass.
    let page = t.path().join("report.html");
    t.tab(&["log", "--html", page.to_str().unwrap(), "r1"]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("data-verdict=\"flaky-pass\""), "{html}");

    // promote: refused, naming the verdict.
    let r = t.tab(&["promote", "r1"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("flaky-pass"), "{}", r.desc);
    // land: refused, nothing blamed on the run.
    let r = t.tab(&["--json", "land", "r1"]);
    assert_eq!(r.code, 1, "{}", r.desc);
    let j = json_of(&r);
    assert_eq!(j["runs"][0]["result"], "refused", "{j}");
    assert!(
        j["runs"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("flaky-pass"),
        "{j}"
    );
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    assert_eq!(t.git_out(&["for-each-ref"]), before);

    // The hooks: reference-transaction (local), pre-push (client) and pre-receive (server).
    let server = t.origin_with_hook(&["main", "refs/notes/tabellio/evidence"]);
    t.tab(&["hooks", "install"]).ok();
    let r = t.git(&["update-ref", "refs/heads/main", &head]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("flaky (flaky-pass)"), "{}", r.desc);
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    let r = t.git(&[
        "push",
        "--atomic",
        "origin",
        &format!("{head}:refs/heads/main"),
        "refs/notes/tabellio/evidence",
    ]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("flaky (flaky-pass)"), "{}", r.desc);
    // Without the client's hook, the server's pre-receive refuses it the same way.
    std::fs::remove_file(t.repo.join(".git/hooks/pre-push")).ok();
    let r = t.git(&[
        "push",
        "--atomic",
        "--no-verify",
        "origin",
        &format!("{head}:refs/heads/main"),
        "refs/notes/tabellio/evidence",
    ]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("pre-receive hook declined"), "{}", r.desc);
    assert!(r.stderr.contains("flaky (flaky-pass)"), "{}", r.desc);
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), main);

    // A policy that accepts flaky passes for the check lets the same tree through.
    t.git(&["switch", "-q", "-c", "accepting", "main"]).ok();
    t.commit_policy(&flaky_policy(json!({"flaky": "accept"})).to_string());
    let r = t.tab(&["--json", "verify", &head, "--policy-from", "accepting"]);
    r.ok();
    assert_eq!(
        json_of(&r)["commits"][0]["checks"][0]["verdict"],
        "flaky-pass"
    );
    t.fsck();
}

#[test]
fn land_never_moves_main_to_a_tree_that_passed_only_on_a_retry_under_the_default_policy() {
    // flaky_prone: one retry; `flaky` unset: refuse.
    let t = flaky_repo(json!({"flaky_prone": true}));
    finished(&t, "r1", "a.txt");
    move_main(&t, "moved.txt");
    tab_env(&t, &[("FLAKE", "0")], &["validate", "main"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let counter = t.path().join("counter");
    // Seed 2 draws a spurious failure, then a pass.
    let env = [
        ("FLAKE", "0.5"),
        ("SEED", "2"),
        ("FLAKE_COUNTER", counter.to_str().unwrap()),
    ];
    let r = tab_env(&t, &env, &["--json", "land", "r1"]);
    assert_eq!(r.code, 1, "{}", r.desc);
    let j = json_of(&r);
    assert_eq!(every_execution_has_its_record(&t, &counter), 2, "{j}");
    let statuses: Vec<&str> = j["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "passed"], "{j}");
    assert_eq!(j["runs"][0]["result"], "refused", "{j}");
    let reason = j["runs"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("flaky (flaky-pass)"), "{reason}");
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    assert_eq!(
        t.ledger_record("refs/tabellio/runs/r1")["state"],
        "completed"
    );
    // Accepted by the policy, the same retry lands the run, and says it was a flaky pass.
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&flaky_policy(json!({"flaky_prone": true, "flaky": "accept"})).to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    tab_env(&t, &[("FLAKE", "0")], &["validate", "main"]).ok();
    let counter = t.path().join("counter-2");
    let env = [
        ("FLAKE", "0.5"),
        ("SEED", "2"),
        ("FLAKE_COUNTER", counter.to_str().unwrap()),
    ];
    let r = tab_env(&t, &env, &["--json", "land", "r1"]);
    r.ok();
    let j = json_of(&r);
    assert_eq!(j["runs"][0]["result"], "landed", "{j}");
    assert_eq!(j["verdicts"][0]["verdict"], "flaky-pass", "{j}");
    every_execution_has_its_record(&t, &counter);
    t.fsck();
}

#[test]
fn a_check_over_its_flake_budget_is_refused_with_its_measured_rate() {
    let t = flaky_repo(json!({"flaky_prone": true, "flaky": "accept", "max_flake_rate": 0.2}));
    let counter = t.path().join("counter");
    let env = [
        ("FLAKE", "0.5"),
        ("SEED", "7"),
        ("FLAKE_COUNTER", counter.to_str().unwrap()),
    ];
    // A history: commits validated until they pass (a failure then a pass is a flake).
    t.git(&["switch", "-q", "-c", "history", "main"]).ok();
    for i in 0..8 {
        t.write(&format!("h{i}.txt"), "h\n");
        t.commit_all(&format!("history {i}"));
        for _ in 0..20 {
            if tab_env(&t, &env, &["validate", "HEAD"]).code == 0 {
                break;
            }
        }
    }
    t.git(&["switch", "-q", "elsewhere"]).ok();
    let stats = json_of(&t.tab(&["--json", "checks", "--at", "main"]));
    let flaky = &stats["checks"][0];
    assert_eq!(flaky["name"], "flaky", "{stats}");
    assert!(flaky["measured"] == true, "{stats}");
    assert!(flaky["flake_rate"].as_f64().unwrap() > 0.2, "{stats}");
    assert_eq!(flaky["over_budget"], true, "{stats}");
    assert_eq!(
        flaky["executions"],
        every_execution_has_its_record_anywhere(&counter),
        "{stats}"
    );

    finished(&t, "r1", "a.txt");
    let main = t.git_out(&["rev-parse", "main"]);
    let r = tab_env(&t, &env, &["--json", "land", "r1"]);
    assert_eq!(r.code, 1, "{}", r.desc);
    let j = json_of(&r);
    let reason = j["runs"][0]["reason"].as_str().unwrap();
    assert_eq!(j["runs"][0]["result"], "refused", "{j}");
    assert!(reason.contains("flake budget exceeded"), "{reason}");
    assert!(reason.contains("max_flake_rate 0.2"), "{reason}");
    assert!(reason.contains("flake rate 0."), "{reason}");
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    // Not blamed: the run stays completed.
    let run = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(run["state"], "completed", "{run}");
}

/// Lines in the counter file.
fn every_execution_has_its_record_anywhere(counter: &Path) -> usize {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .count()
}

/// A suite that writes a JUnit report of `tests.txt` (passing) and `failing.txt` (failing) and
/// fails when any test fails.
const SUITE: &str = r#"
import os, sys
def names(f):
    return [l.strip() for l in open(f)] if os.path.exists(f) else []
passing, failing = names("tests.txt"), names("failing.txt")
if os.path.exists("trigger.txt"):
    failing += names("maybe.txt")
cases = "".join('<testcase classname="suite" name="%s"/>' % n for n in passing)
cases += "".join('<testcase classname="suite" name="%s"><failure/></testcase>' % n for n in failing)
open("report.xml", "w").write('<testsuites><testsuite name="suite">%s</testsuite></testsuites>' % cases)
sys.exit(1 if failing else 0)
"#;

fn suite_policy(baseline: bool) -> String {
    let mut check = json!({
        "argv": ["python3", ".tabellio/suite.py"],
        "timeout_s": 60,
        "report": {"format": "junit", "path": "report.xml"},
    });
    if baseline {
        check["baseline"] = "allow".into();
    }
    json!({
        "schema": "tabellio.policy/v1",
        "checks": {"suite": check},
        "required": ["suite"],
        "protect": ["refs/heads/main"],
    })
    .to_string()
}

/// A repository whose `main` fails `t_old` (its own evidence says so), with `baseline` or not.
fn baseline_repo(baseline: bool) -> TestEnv {
    let t = TestEnv::ref_only();
    t.git(&["switch", "-q", "main"]).ok();
    t.write(".tabellio/suite.py", SUITE);
    t.write(".gitignore", "report.xml\n");
    t.write("tests.txt", "t_a\n");
    t.write("failing.txt", "t_old\n");
    t.commit_policy(&suite_policy(baseline));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    t.tab(&["validate", "main"]).code(1);
    t
}

#[test]
fn failing_tests_the_target_already_has_are_inherited_only_where_the_policy_allows() {
    for baseline in [true, false] {
        let t = baseline_repo(baseline);
        let main = t.git_out(&["rev-parse", "main"]);
        // A run adding a passing test, and one adding a failing test.
        t.started_with("good", "tests.txt", "t_a\nt_good\n");
        let good = t.tab(&["--json", "finish", "good"]);
        t.started_with("bad", "failing.txt", "t_old\nt_new\n");
        let bad = t.tab(&["--json", "finish", "bad"]);
        assert_eq!(bad.code, 1, "{}", bad.desc);
        // finish explains the failure: by its new test where a baseline is allowed, else as
        // what the target fails too.
        let explained = &bad.json()["failures"][0];
        if baseline {
            assert_eq!(
                explained["explanation"], "new failures suite::t_new",
                "{explained}"
            );
            assert_eq!(explained["kind"], "new_on_this_tree", "{explained}");
        } else {
            assert_eq!(explained["kind"], "also_failing_on_target", "{explained}");
        }
        // status says the same, from the notes alone.
        let status = t.tab(&["--json", "status", "bad"]);
        assert_eq!(&status.json()["failures"][0], explained, "{}", status.desc);
        let human = t.tab(&["status", "bad"]).stdout;
        let line = if baseline {
            "history: suite: new failures suite::t_new\n"
        } else {
            "history: suite: also failing on the target\n"
        };
        assert!(human.contains(line), "{human}");
        let bad_head = t.git_out(&["rev-parse", "tabellio/bad"]);
        let good_head = t.git_out(&["rev-parse", "tabellio/good"]);
        // The records name the failing tests.
        let recorded = records_on(&t, &bad_head);
        assert_eq!(
            recorded[0]["tests"]["failing"],
            json!(["suite::t_new", "suite::t_old"]),
            "{recorded:?}"
        );

        // verify by main's policy: the bad run is refused naming t_new, always.
        let r = t.tab(&["--json", "verify", &bad_head, "--policy-from", "main"]);
        assert_eq!(r.code, 1, "{}", r.desc);
        let v = json_of(&r);
        if baseline {
            assert_eq!(
                v["commits"][0]["checks"][0]["new_failures"],
                json!(["suite::t_new"]),
                "{v}"
            );
        }
        let r = t.tab(&["--json", "verify", &good_head, "--policy-from", "main"]);
        let v = json_of(&r);
        if baseline {
            assert_eq!(good.code, 0, "{}", good.desc);
            r.ok();
            let check = &v["commits"][0]["checks"][0];
            assert_eq!(check["verdict"], "no-new-failures", "{v}");
            assert_eq!(check["inherited"], json!(["suite::t_old"]), "{v}");
            // land agrees: it lands, saying what it inherited.
            let r = t.tab(&["--json", "land", "good"]);
            r.ok();
            let j = json_of(&r);
            assert_eq!(j["runs"][0]["result"], "landed", "{j}");
            assert_eq!(j["verdicts"][0]["verdict"], "no-new-failures", "{j}");
            assert_eq!(
                j["verdicts"][0]["inherited"],
                json!(["suite::t_old"]),
                "{j}"
            );
            assert_eq!(t.git_out(&["rev-parse", "main"]), good_head);
            // And the landed tip is verified by its own policy (its first parent's failures).
            t.tab(&["verify", "main"]).ok();
        } else {
            // Without the policy setting nothing changes: a failure is a failure.
            assert_eq!(good.code, 1, "{}", good.desc);
            assert_eq!(r.code, 1, "{}", r.desc);
            assert_eq!(v["commits"][0]["checks"][0]["verdict"], "failed", "{v}");
            let r = t.tab(&["--json", "land", "good"]);
            assert_ne!(r.code, 0, "{}", r.desc);
            assert_eq!(t.git_out(&["rev-parse", "main"]), main);
        }

        // The server's pre-receive agrees with verify and land.
        t.origin_with_hook(&[&format!("{main}:refs/heads/main")]);
        let push = |commit: &str| {
            t.git(&[
                "push",
                "--atomic",
                "origin",
                &format!("{commit}:refs/heads/main"),
                "refs/notes/tabellio/evidence",
            ])
        };
        let r = push(&bad_head);
        assert_ne!(r.code, 0, "{}", r.desc);
        if baseline {
            assert!(r.stderr.contains("suite::t_new"), "{}", r.desc);
        }
        // land agrees on a run whose new failure shows only on the moved target: `late` lists
        // `t_new` in `maybe.txt`, which fails once `trigger.txt` is there; it finished before
        // main gained it, so land is the first to see `t_new` fail.
        t.started_with("late", "maybe.txt", "t_new\n");
        let late = t.tab(&["finish", "late"]);
        assert_eq!(late.code == 0, baseline, "{}", late.desc);
        t.git(&["switch", "-q", "main"]).ok();
        t.write("trigger.txt", "on\n");
        t.commit_all("trigger");
        t.git(&["switch", "-q", "elsewhere"]).ok();
        // The tip's own evidence: it fails t_old alone.
        t.tab(&["validate", "main"]).code(1);
        let tip = t.git_out(&["rev-parse", "main"]);
        let r = t.tab(&["--json", "land", "late"]);
        assert_ne!(r.code, 0, "{}", r.desc);
        assert_eq!(t.git_out(&["rev-parse", "main"]), tip);
        if baseline {
            let j = json_of(&r);
            assert_eq!(j["runs"][0]["result"], "validation_failed", "{j}");
            let reason = j["runs"][0]["reason"].as_str().unwrap();
            assert!(reason.contains("suite::t_new"), "{reason}");
            assert!(!reason.contains("suite::t_old"), "{reason}");
            // verify, by the target's policy, names the same failure on the restacked commit.
            let restacked = j["runs"][0]["commit"].as_str().unwrap().to_string();
            let r = t.tab(&["--json", "verify", &restacked, "--policy-from", "main"]);
            assert_eq!(r.code, 1, "{}", r.desc);
            assert_eq!(
                json_of(&r)["commits"][0]["checks"][0]["new_failures"],
                json!(["suite::t_new"]),
                "{}",
                r.desc
            );
        }
        let r = push(&good_head);
        assert_eq!(r.code == 0, baseline, "{}", r.desc);
        t.fsck();
    }
}
