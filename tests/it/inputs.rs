//! Declared inputs: evidence keyed to the part of the tree a check reads (`not_applicable`
//! records standing on passing ones), enforced by running the check in a worktree of only its
//! inputs, and judged at every gate by the target tip's policy.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tabellio::model::evidence::CheckStatus;
use tabellio::model::inputs::Inputs;
use tabellio::model::EvidenceRecord;
use tabellio::store::scoped::Materialise;
use tabellio::store::Store;

use crate::util::*;

const SHA1: &[&str] = &["init", "-q", "-b", "main"];
const SHA256: &[&str] = &["init", "-q", "-b", "main", "--object-format=sha256"];

/// A check that appends a line to `<counts>/<name>` each time it runs, then runs `code`.
fn counted(counts: &Path, name: &str, code: &str) -> Value {
    let file = counts.join(name).display().to_string();
    serde_json::json!({
        "argv": ["python3", "-c", format!("open({file:?}, 'a').write('x\\n')\n{code}")],
        "timeout_s": 60,
    })
}

/// `t_a` (inputs `a_inputs`, fails when `a/x` says `bad` or `a/bad` and `a/1` both exist), `t_b` (inputs `b/**`) required;
/// `t_sneaky` (inputs `a/**`, reads `c/secret`) defined; `main` protected.
fn policy_text(counts: &Path, a_inputs: &[&str]) -> String {
    let mut t_a = counted(
        counts,
        "t_a",
        "import os, sys\nbad = os.path.exists('a/x') and open('a/x').read().strip() == 'bad'\n\
         sys.exit(1 if bad or os.path.exists('a/bad') and os.path.exists('a/1') else 0)",
    );
    t_a["inputs"] = serde_json::json!(a_inputs);
    let mut t_b = counted(counts, "t_b", "open('b/x').read()");
    t_b["inputs"] = serde_json::json!(["b/**"]);
    let mut sneaky = counted(counts, "t_sneaky", "open('c/secret').read()");
    sneaky["inputs"] = serde_json::json!(["a/**"]);
    serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {"t_a": t_a, "t_b": t_b, "t_sneaky": sneaky},
        "required": ["t_a", "t_b"],
        "protect": ["refs/heads/main"],
    })
    .to_string()
}

/// A repository whose `main` holds `a/`, `b/`, `c/secret`, `docs/` and the policy, validated
/// (one execution of each required check); `main` checked out nowhere.
fn scoped_repo(init: &[&str]) -> (TestEnv, PathBuf) {
    let t = TestEnv::with_init(init);
    let counts = t.path().join("counts");
    std::fs::create_dir_all(&counts).unwrap();
    for (file, content) in [
        ("a/x", "1\n"),
        ("b/x", "1\n"),
        ("c/secret", "s\n"),
        ("docs/d.md", "d\n"),
    ] {
        t.write(file, content);
    }
    t.commit_policy(&policy_text(&counts, &["a/**"]));
    t.tab(&["validate", "main"]).ok();
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    assert_eq!(executions(&counts), (1, 1));
    (t, counts)
}

fn count(counts: &Path, name: &str) -> usize {
    std::fs::read_to_string(counts.join(name)).map_or(0, |s| s.lines().count())
}

/// Executions of `t_a` and `t_b` so far.
fn executions(counts: &Path) -> (usize, usize) {
    (count(counts, "t_a"), count(counts, "t_b"))
}

/// Start `id` from main, write `files`, commit, finish with the policy's checks.
fn finished(t: &TestEnv, id: &str, files: &[(&str, &str)]) -> PathBuf {
    let wt = t.started_run(id, files[0].0);
    for (file, content) in files {
        write_file(&wt.join(file), content);
    }
    t.commit_all_in(&wt, &format!("work of {id}"));
    t.tab(&["finish", id]).ok();
    wt
}

/// The readable evidence records noted on `rev`.
fn records_on(t: &TestEnv, rev: &str) -> Vec<EvidenceRecord> {
    let r = t.git(&["notes", "--ref=tabellio/evidence", "show", rev]);
    r.stdout
        .lines()
        .filter_map(|l| EvidenceRecord::from_line(l).ok())
        .collect()
}

fn record_of(t: &TestEnv, rev: &str, check: &str) -> EvidenceRecord {
    let commit = t.git_out(&["rev-parse", rev]);
    records_on(t, rev)
        .into_iter()
        .filter(|r| r.check.name == check && r.commit == commit)
        .max_by(|a, b| a.finished_at.cmp(&b.finished_at))
        .unwrap_or_else(|| panic!("no {check} record on {rev}"))
}

/// The scoped tree of `rev` under `inputs`, as the library computes it.
fn scoped_tree(t: &TestEnv, rev: &str, inputs: &[&str]) -> String {
    let store = Store::open(&t.repo).expect("open");
    let tree = t.git_out(&["rev-parse", &format!("{rev}^{{tree}}")]);
    let tree = gix::ObjectId::from_hex(tree.as_bytes()).unwrap();
    let inputs: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
    store
        .scoped_tree(tree, &Inputs::new(&inputs).unwrap(), Materialise::HashOnly)
        .unwrap()
        .to_string()
}

/// No temporary worktree of a check is left: none registered, none on disk.
fn no_scratch_left(t: &TestEnv) {
    let listed = t.git_out(&["worktree", "list", "--porcelain"]);
    assert!(!listed.contains("tabellio/tmp"), "{listed}");
    let tmp = t.repo.join(".git/tabellio/tmp");
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n != ".lock")
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", tmp.display());
}

fn verdicts(j: &Value) -> Vec<(String, String)> {
    j["commits"][0]["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {j}"))
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A bare server holding `main` and its evidence, its pre-receive installed; `origin` here.
fn server_for(t: &TestEnv, init: &[&str]) -> PathBuf {
    let server = t.path().join("server.git");
    let mut args = with_ref_format(&["init", "-q", "--bare", "-b", "main"]);
    if init == SHA256 {
        args.push("--object-format=sha256");
    }
    let path = server.to_str().unwrap().to_string();
    args.push(&path);
    t.git_in(t.path(), &args).ok();
    t.git(&["remote", "add", "origin", &path]).ok();
    t.git(&[
        "push",
        "-q",
        "origin",
        "main",
        "refs/notes/tabellio/evidence",
    ])
    .ok();
    t.tab_in(&server, &["hooks", "install", "--server"]).ok();
    server
}

#[test]
fn a_docs_only_run_lands_with_no_execution_on_not_applicable_records() {
    for init in [SHA1, SHA256] {
        let (t, counts) = scoped_repo(init);
        let server = server_for(&t, init);
        let main_before = t.git_out(&["rev-parse", "main"]);
        finished(&t, "docs", &[("docs/d.md", "more\n")]);
        assert_eq!(executions(&counts), (1, 1), "finish ran a check");
        for check in ["t_a", "t_b"] {
            let na = record_of(&t, "tabellio/docs", check);
            let on = record_of(&t, &main_before, check);
            assert_eq!(na.status, CheckStatus::NotApplicable, "{na:?}");
            assert_eq!(na.reused_from.as_deref(), Some(on.digest.as_str()));
            assert_eq!(na.scoped_tree, on.scoped_tree);
            assert!(na.digest_is_valid());
        }
        // The scoped tree is the git tree of only the inputs, in the repository's hash.
        let on = record_of(&t, &main_before, "t_a");
        let scoped = on.scoped_tree.clone().unwrap();
        assert_eq!(scoped, scoped_tree(&t, "main", &["a/**"]));
        assert_eq!(scoped.len(), if init == SHA256 { 64 } else { 40 });
        assert_eq!(
            t.git_out(&["ls-tree", "-r", "--name-only", &scoped]),
            "a/x",
            "{scoped}"
        );
        // The passing record is noted on its scoped tree too: stock git reads it there.
        let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &scoped]);
        assert!(note.contains(&on.digest), "{note}");

        let (code, j) = t.tab_json(&["land", "docs", "--dry-run"]);
        assert_eq!(code, 0, "{j}");
        let run = &j["runs"][0];
        assert_eq!(
            run["checks"]["not_applicable"],
            serde_json::json!(["t_a", "t_b"]),
            "{j}"
        );
        assert_eq!(run["checks"]["run"], serde_json::json!([]), "{j}");
        let (code, j) = t.tab_json(&["land", "docs"]);
        assert_eq!(code, 0, "{j}");
        assert_eq!(j["checks_run"], 0, "{j}");
        assert_eq!(executions(&counts), (1, 1));
        let (code, j) = t.tab_json(&["verify", "main"]);
        assert_eq!(code, 0, "{j}");
        assert_eq!(
            verdicts(&j),
            [
                ("t_a".to_string(), "satisfied".to_string()),
                ("t_b".to_string(), "satisfied".to_string())
            ]
        );
        // The server's pre-receive accepts the not_applicable records arriving with the push.
        t.git(&[
            "push",
            "--atomic",
            "origin",
            "main",
            "refs/notes/tabellio/evidence",
        ])
        .ok();
        assert_eq!(
            t.git_out_in(&server, &["rev-parse", "main"]),
            t.git_out(&["rev-parse", "main"])
        );
        t.tab_in(&server, &["verify", "main"]).ok();
        t.fsck();
    }
}

/// A `not_applicable` record of `check` for `commit`, standing on `on` and claiming the scoped
/// tree `scoped`, sealed as a genuine one would be.
fn forged_not_applicable(
    t: &TestEnv,
    on: &EvidenceRecord,
    commit: &str,
    scoped: &str,
) -> EvidenceRecord {
    EvidenceRecord {
        commit: commit.to_string(),
        tree: t.git_out(&["rev-parse", &format!("{commit}^{{tree}}")]),
        status: CheckStatus::NotApplicable,
        exit_code: None,
        duration_ms: 0,
        reused_from: Some(on.digest.clone()),
        scoped_tree: Some(scoped.to_string()),
        ..on.clone()
    }
    .seal()
}

/// Note `records` (replacing what is there) on `commit`, its tree and `also`.
fn note_only(t: &TestEnv, commit: &str, also: &[&str], records: &[EvidenceRecord]) {
    let text: Vec<String> = records.iter().map(EvidenceRecord::to_line).collect();
    let text = text.join("\n") + "\n";
    t.forge_evidence(commit, &text);
    for object in also {
        t.set_note(object, &text);
    }
}

/// Push `forged` onto the server's `main` with the evidence notes (and `flags`): refused for
/// `t_a`'s forged record.
fn refused_push(t: &TestEnv, flags: &[&str]) -> Run {
    let mut args = vec!["push", "--atomic"];
    args.extend_from_slice(flags);
    args.extend(["origin", "forged:main", "refs/notes/tabellio/evidence"]);
    let r = t.git(&args);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr.contains("t_a (not-applicable-refused)"),
        "{}",
        r.desc
    );
    r
}

#[test]
fn a_forged_not_applicable_for_changed_inputs_is_refused_at_every_gate() {
    for init in [SHA1, SHA256] {
        let (t, counts) = scoped_repo(init);
        let server = server_for(&t, init);
        t.tab(&["hooks", "install"]).ok();
        let main = t.git_out(&["rev-parse", "main"]);
        let (on_a, on_b) = (record_of(&t, "main", "t_a"), record_of(&t, "main", "t_b"));

        // A commit that changes a/ (so t_a applies), carrying forged not_applicable records
        // for t_a: one claiming main's scoped tree, one its own; t_b's is genuine.
        t.git(&["switch", "-q", "-c", "forged", "main"]).ok();
        t.write("a/x", "bad\n");
        t.commit_all("change a");
        let x = t.git_out(&["rev-parse", "HEAD"]);
        let own = scoped_tree(&t, &x, &["a/**"]);
        assert_ne!(Some(own.clone()), on_a.scoped_tree);
        let b_na = forged_not_applicable(&t, &on_b, &x, on_b.scoped_tree.as_deref().unwrap());
        for claimed in [on_a.scoped_tree.clone().unwrap(), own.clone()] {
            let a_na = forged_not_applicable(&t, &on_a, &x, &claimed);
            note_only(&t, &x, &[&own], &[a_na, b_na.clone()]);

            // verify
            let (code, j) = t.tab_json(&["verify", &x]);
            assert_eq!(code, 1, "{j}");
            assert_eq!(
                verdicts(&j),
                [
                    ("t_a".to_string(), "not-applicable-refused".to_string()),
                    ("t_b".to_string(), "satisfied".to_string())
                ],
                "{j}"
            );
            // reference-transaction
            let r = t.git(&["update-ref", "refs/heads/main", &x]);
            assert_ne!(r.code, 0, "{}", r.desc);
            assert!(
                r.stderr.contains("t_a (not-applicable-refused)"),
                "{}",
                r.desc
            );
            // pre-push (refused before the server is asked), then pre-receive.
            let r = refused_push(&t, &[]);
            assert!(
                !r.stderr.contains("pre-receive hook declined"),
                "{}",
                r.desc
            );
            let r = refused_push(&t, &["--no-verify"]);
            assert!(r.stderr.contains("pre-receive hook declined"), "{}", r.desc);
            assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), main);
            assert_eq!(t.git_out(&["rev-parse", "main"]), main);
        }
        t.git(&["switch", "-q", "elsewhere"]).ok();

        // promote and land: a completed run whose t_a evidence is swapped for a forgery.
        finished(&t, "r", &[("a/x", "2\n")]);
        let head = t.git_out(&["rev-parse", "tabellio/r"]);
        let own = scoped_tree(&t, &head, &["a/**"]);
        let a_na = forged_not_applicable(&t, &on_a, &head, on_a.scoped_tree.as_deref().unwrap());
        let b_na = forged_not_applicable(&t, &on_b, &head, on_b.scoped_tree.as_deref().unwrap());
        note_only(&t, &head, &[&own], &[a_na, b_na]);
        let before = t.snapshot();
        let (code, j) = t.tab_json(&["promote", "r"]);
        assert_ne!(code, 0, "{j}");
        assert!(j.to_string().contains("not-applicable-refused"), "{j}");
        let runs_before = count(&counts, "t_a");
        let (code, j) = t.tab_json(&["land", "r"]);
        assert_ne!(code, 0, "{j}");
        assert!(j.to_string().contains("t_a"), "{j}");
        assert_eq!(count(&counts, "t_a"), runs_before);
        assert_eq!(t.snapshot(), before);
        assert_eq!(t.git_out(&["rev-parse", "main"]), main);
        t.fsck();
    }
}

#[test]
fn a_run_narrowing_its_inputs_is_judged_by_the_target_tips_inputs() {
    for init in [SHA1, SHA256] {
        let (t, counts) = scoped_repo(init);
        let server = server_for(&t, init);
        t.tab(&["hooks", "install"]).ok();
        let main = t.git_out(&["rev-parse", "main"]);
        // The run narrows t_a to a/keep/** and breaks a/x, which t_a (on main) refuses.
        t.tab(&["start", "narrow", "--task", "narrow", "--base", "main"])
            .ok();
        let wt = t.worktree("narrow");
        write_file(
            &wt.join(".tabellio/policy.json"),
            &policy_text(&counts, &["a/keep/**"]),
        );
        write_file(&wt.join("a/x"), "bad\n");
        write_file(&wt.join("a/keep/k"), "k\n");
        t.commit_all_in(&wt, "narrow t_a");
        // By its own policy it completes: t_a reads only a/keep/ there.
        t.tab(&["finish", "narrow"]).ok();
        let head = t.git_out(&["rev-parse", "tabellio/narrow"]);
        let r = t.tab(&["verify", &head, "--policy-from", "main"]);
        assert_eq!(r.code, 1, "{}", r.desc);
        let (code, j) = t.tab_json(&["promote", "narrow"]);
        assert_ne!(code, 0, "{j}");
        // reference-transaction: main may not move there here either.
        let r = t.git(&["update-ref", "refs/heads/main", &head]);
        assert_ne!(r.code, 0, "{}", r.desc);
        assert!(r.stderr.contains("t_a ("), "{}", r.desc);
        // pre-push refuses before the server is asked; pre-receive refuses without it.
        for flags in [&[][..], &["--no-verify"][..]] {
            let mut args = vec!["push", "--atomic"];
            args.extend_from_slice(flags);
            let to_main = format!("{head}:refs/heads/main");
            args.extend(["origin", &to_main, "refs/notes/tabellio/evidence"]);
            let r = t.git(&args);
            assert_ne!(r.code, 0, "{}", r.desc);
            assert!(r.stderr.contains("t_a ("), "{}", r.desc);
            assert_eq!(
                r.stderr.contains("pre-receive hook declined"),
                !flags.is_empty(),
                "{}",
                r.desc
            );
        }
        assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), main);
        // land judges by main's t_a (all of a/): the run's evidence does not hold there.
        let (code, j) = t.tab_json(&["land", "narrow"]);
        assert_eq!(code, 1, "{j}");
        assert_eq!(j["runs"][0]["result"], "refused", "{j}");
        let reason = j["runs"][0]["reason"].as_str().unwrap();
        assert!(reason.contains("t_a (stale-check)"), "{reason}");
        assert_eq!(t.git_out(&["rev-parse", "main"]), main);
        t.fsck();
    }
}

#[test]
fn an_undeclared_input_fails_every_time_and_is_named() {
    for init in [SHA1, SHA256] {
        let (t, counts) = scoped_repo(init);
        // c/secret is in the tree, but not in t_sneaky's inputs: its worktree does not hold it.
        for _ in 0..3 {
            let r = t.tab(&["validate", "main", "--check", "t_sneaky"]);
            assert_eq!(r.code, 1, "{}", r.desc);
            assert!(
                r.stdout.contains("undeclared input: c/secret"),
                "{}",
                r.desc
            );
        }
        assert_eq!(count(&counts, "t_sneaky"), 3);
        let rec = record_of(&t, "main", "t_sneaky");
        assert_eq!(rec.status, CheckStatus::Failed);
        assert_eq!(rec.undeclared_inputs, ["c/secret"]);
        // Another tree, differing only in c/: t_sneaky runs (and fails) again, nothing reused.
        t.git(&["switch", "-q", "-c", "secret", "main"]).ok();
        t.write("c/secret", "other\n");
        t.commit_all("another secret");
        let r = t.tab(&["validate", "HEAD", "--check", "t_sneaky"]);
        assert_eq!(r.code, 1, "{}", r.desc);
        assert_eq!(count(&counts, "t_sneaky"), 4);
        assert!(records_on(&t, "HEAD")
            .iter()
            .all(|r| r.reused_from.is_none() && r.status == CheckStatus::Failed));
        no_scratch_left(&t);
        // In a run's own worktree, where c/secret is on disk, `finish` fails it the same way.
        let wt = t.started_run("sneaky", "c/secret");
        let r = t.tab_in(&wt, &["finish", "--check", "t_sneaky"]);
        assert_eq!(r.code, 1, "{}", r.desc);
        assert!(
            r.stdout.contains("undeclared input: c/secret"),
            "{}",
            r.desc
        );
        assert_eq!(count(&counts, "t_sneaky"), 5);
        let rec = record_of(&t, "tabellio/sneaky", "t_sneaky");
        assert_eq!(rec.status, CheckStatus::Failed);
        assert_eq!(rec.undeclared_inputs, ["c/secret"]);
        assert_eq!(rec.reused_from, None);
        t.fsck();
    }
}

#[test]
fn runs_in_disjoint_scopes_land_independently() {
    for init in [SHA1, SHA256] {
        let (t, counts) = scoped_repo(init);
        // a2 passes on its own base, and fails once a1's a/1 is under it.
        for (id, file) in [
            ("a1", "a/1"),
            ("a2", "a/bad"),
            ("a3", "a/3"),
            ("b1", "b/1"),
            ("b2", "b/2"),
        ] {
            finished(&t, id, &[(file, "x\n")]);
        }
        assert_eq!(executions(&counts), (4, 3));
        let ids = ["a1", "a2", "a3", "b1", "b2"];
        let mut args = vec!["land", "--dry-run"];
        args.extend(ids);
        let (code, j) = t.tab_json(&args);
        assert_eq!(code, 0, "{j}");
        let b2 = j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == "b2")
            .unwrap();
        assert_eq!(
            b2["checks"]["not_applicable"],
            serde_json::json!(["t_a"]),
            "{j}"
        );
        assert_eq!(b2["checks"]["run"], serde_json::json!(["t_b"]), "{j}");
        args.remove(1);
        let (code, j) = t.tab_json(&args);
        assert_eq!(code, 1, "{j}");
        for id in ["a1", "a3", "b1", "b2"] {
            let r = j["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["run_id"] == id)
                .unwrap();
            assert_eq!(r["result"], "landed", "{id}: {j}");
        }
        let a2 = j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == "a2")
            .unwrap();
        assert_eq!(a2["result"], "validation_failed", "{j}");
        // t_b ran once for the b/ lane; the a/ culprit and its bisection cost t_a alone.
        let (a, b) = executions(&counts);
        assert_eq!(b - 3, 1, "t_b ran {} times: {j}", b - 3);
        assert!(a - 4 <= 3, "t_a ran {} times: {j}", a - 4);
        assert_eq!(j["checks_run"], (a - 4) + (b - 3), "{j}");
        // Two lanes, two landings: the b/ runs were not stacked behind the a/ ones.
        let new_of = |id: &str| {
            t.ledger_record(&format!("refs/tabellio/runs/{id}"))["promotion"]["new"].clone()
        };
        assert_eq!(new_of("b1"), new_of("b2"));
        assert_eq!(new_of("a1"), new_of("a3"));
        assert_ne!(new_of("a1"), new_of("b1"));
        let r = t.tab(&["verify", "main"]);
        assert_eq!(r.code, 0, "{}", r.desc);
        no_scratch_left(&t);
        t.fsck();
    }
}

/// `status` of run `id`: its `checks` (run, not_applicable, reused) and its text.
fn status_checks(t: &TestEnv, id: &str) -> (Value, String) {
    let (code, j) = t.tab_json(&["status", id]);
    assert_eq!(code, 0, "{j}");
    let r = t.tab(&["status", id]);
    assert_eq!(r.code, 0, "{}", r.desc);
    (j["checks"].clone(), r.stdout)
}

/// `land --dry-run <id>`'s `checks` for the run.
fn dry_run_checks(t: &TestEnv, id: &str) -> Value {
    let (code, j) = t.tab_json(&["land", "--dry-run", id]);
    assert_eq!(code, 0, "{j}");
    j["runs"][0]["checks"].clone()
}

#[test]
fn status_before_finish_lists_the_checks_that_apply_and_the_not_applicable_ones() {
    let (t, counts) = scoped_repo(SHA1);
    // Started and committed, not finished: nothing ran for either run yet.
    t.started_run("b", "b/x");
    t.started_run("docs", "docs/d.md");
    let (checks, text) = status_checks(&t, "b");
    assert_eq!(
        checks,
        serde_json::json!({"run": ["t_b"], "not_applicable": ["t_a"], "reused": []}),
        "{text}"
    );
    assert!(
        text.contains("checks onto main: t_b to run; t_a not_applicable (inputs untouched)"),
        "{text}"
    );
    let (code, j) = t.tab_json(&["status", "b"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["missing_evidence"], serde_json::json!(["t_b"]), "{j}");
    let (checks, text) = status_checks(&t, "docs");
    assert_eq!(
        checks,
        serde_json::json!({"run": [], "not_applicable": ["t_a", "t_b"], "reused": []}),
        "{text}"
    );
    assert_eq!(executions(&counts), (1, 1), "status ran a check");
    // Finished: what status says is what `land --dry-run` says, before and after the target
    // moved under the run.
    for id in ["b", "docs"] {
        t.tab(&["finish", id]).ok();
        assert_eq!(status_checks(&t, id).0, dry_run_checks(&t, id), "{id}");
    }
    assert_eq!(
        status_checks(&t, "b").0,
        serde_json::json!({"run": [], "not_applicable": ["t_a"], "reused": ["t_b"]})
    );
    t.tab(&["land", "docs"]).ok();
    let (checks, text) = status_checks(&t, "b");
    assert_eq!(checks, dry_run_checks(&t, "b"), "{text}");
    assert_eq!(
        checks,
        serde_json::json!({"run": ["t_b"], "not_applicable": ["t_a"], "reused": []}),
        "{text}"
    );
    // Landed: nothing left to plan.
    t.tab(&["land", "b"]).ok();
    let (checks, text) = status_checks(&t, "b");
    assert_eq!(checks, Value::Null, "{text}");
    assert!(!text.contains("checks onto"), "{text}");
}

#[test]
fn invalid_inputs_are_refused_naming_the_field_and_nothing_is_written() {
    let (t, counts) = scoped_repo(SHA1);
    t.git(&["switch", "-q", "-c", "bad", "main"]).ok();
    for (inputs, needle) in [
        (serde_json::json!([]), "checks.t_a.inputs: is empty"),
        (serde_json::json!(["../x"]), "checks.t_a.inputs[0]"),
        (serde_json::json!(["!a/**"]), "only exclusions"),
        (serde_json::json!("a/**"), "checks.t_a.inputs"),
    ] {
        let mut policy: Value = serde_json::from_str(&policy_text(&counts, &["a/**"])).unwrap();
        policy["checks"]["t_a"]["inputs"] = inputs;
        t.commit_policy(&policy.to_string());
        let before = t.snapshot();
        let r = t.tab(&["validate", "HEAD"]);
        assert_eq!(r.code, 2, "{}", r.desc);
        assert!(r.stderr.contains(needle), "{}", r.desc);
        assert_eq!(t.snapshot(), before);
    }
    assert_eq!(executions(&counts), (1, 1));
}

/// Runs under `a/` and `b/` finished on a `main` whose checks declare their inputs (`t_a`:
/// `a/**`, fails when `a/bad` and `a/1` are both there; `t_b`: `b/**`), with quick checks:
/// `a1` (`a/1`), `a2` (`a/bad`, the culprit once `a1` is under it), `a3`, `b1`, `b2`. `main`
/// is checked out in the main worktree in odd rounds, nowhere in even ones.
fn scoped_runs_to_land(round: u32) -> TestEnv {
    let t = TestEnv::new();
    let mut t_a = serde_json::json!({
        "argv": ["test", "!", "-e", "a/bad", "-o", "!", "-e", "a/1"], "timeout_s": 60,
    });
    t_a["inputs"] = serde_json::json!(["a/**"]);
    let t_b = serde_json::json!({"argv": ["test", "-d", "b"], "timeout_s": 60, "inputs": ["b/**"]});
    let policy = serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {"t_a": t_a, "t_b": t_b},
        "required": ["t_a", "t_b"],
        "protect": ["refs/heads/main"],
    });
    t.write("a/x", "1\n");
    t.write("b/x", "1\n");
    t.commit_policy(&policy.to_string());
    t.tab(&["validate", "main"]).ok();
    if round.is_multiple_of(2) {
        t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    }
    for (id, file) in SCOPED_RUNS {
        t.tab(&["start", id, "--task", "t", "--base", "main"]).ok();
        t.commit_file_in(&t.worktree(id), file, &format!("{id}\n"));
        t.tab(&["finish", id]).ok();
    }
    t
}

const SCOPED_RUNS: [(&str, &str); 5] = [
    ("a1", "a/1"),
    ("a2", "a/bad"),
    ("a3", "a/3"),
    ("b1", "b/1"),
    ("b2", "b/2"),
];

/// Every run's ledger agrees with `main`: `promoted` exactly when `main` holds the commit it
/// landed as; its change is on `main` at most once.
fn ledgers_agree_with_main(t: &TestEnv, base: &str, round: u32) -> Vec<(String, String)> {
    let main = t.git_out(&["rev-parse", "main"]);
    let mut states = Vec::new();
    for (id, file) in SCOPED_RUNS {
        let rec = t.ledger_record(&format!("refs/tabellio/runs/{id}"));
        let state = rec["state"].as_str().unwrap().to_string();
        let touching = t.git_out(&["log", "--format=%H", &format!("{base}..{main}"), "--", file]);
        let times = touching.lines().count();
        assert!(times <= 1, "round {round}: {id} landed {times} times");
        if state == "promoted" {
            let landed = rec["landed"]
                .as_str()
                .or_else(|| rec["promotion"]["new"].as_str())
                .unwrap_or_else(|| panic!("round {round}: {id} names no landed commit: {rec}"));
            let on_main = t.git(&["merge-base", "--is-ancestor", landed, &main]);
            assert_eq!(on_main.code, 0, "round {round}: {id} promoted, not on main");
            assert_eq!(
                times, 1,
                "round {round}: {id} promoted, its change not on main"
            );
        }
        states.push((id.to_string(), state));
    }
    states
}

/// `land` of runs in two disjoint scopes (each lane landing on its own, the `a/` lane bisecting
/// its culprit) killed (SIGKILL) anywhere; the documented repair is `land` again (after the `rm`
/// of a stale lock it names). Then: every run but the culprit landed, exactly once; the culprit
/// is `validation_failed` and not on `main`; every ledger agrees with `main`; `main` verifies;
/// no lock is left; `git fsck --strict` is clean.
#[test]
fn scoped_landing_killed_anywhere_converges_when_landed_again() {
    let span: Vec<u64> = (0..2)
        .map(|kind| {
            let t = scoped_runs_to_land(kind);
            let started = std::time::Instant::now();
            let r = t.tab(&["land", "--target", "main"]);
            assert_eq!(r.code, 1, "{}", r.desc);
            (started.elapsed().as_millis() as u64).max(1)
        })
        .collect();
    // Trials per ref format: `TABELLIO_CRASH_TRIALS`, else a few (each lands five runs twice).
    for round in 0..crate::crash::crash_trials(4) {
        let t = scoped_runs_to_land(round);
        let base = t.git_out(&["rev-parse", "main"]);
        let mut child = t.spawn_tab(&["land", "--target", "main"]);
        let kind = round as usize % 2;
        std::thread::sleep(crate::crash::random_delay_up_to(round, span[kind] * 3 / 2));
        let _ = child.kill();
        let _ = child.wait();
        let promoted = SCOPED_RUNS
            .iter()
            .filter(|(id, _)| {
                t.ledger_record(&format!("refs/tabellio/runs/{id}"))["state"] == "promoted"
            })
            .count();
        let moved = t.git_out(&["rev-parse", "main"]) != base;
        eprintln!("round {round}: killed with main moved: {moved}, {promoted} of 4 promoted");
        // What the kill left already keeps the gate: main verifies wherever it is.
        let r = t.tab(&["verify", "main"]);
        assert_eq!(r.code, 0, "round {round}: {}", r.desc);
        if ref_format() == "reftable" {
            // One transaction per lane, atomic: no ledger is torn from the target.
            ledgers_agree_with_main(&t, &base, round);
        }
        let r = crate::crash::with_stale_locks_removed(&t, &["land", "--target", "main"]);
        assert!(r.code == 0 || r.code == 1, "round {round}: {}", r.desc);
        let states = ledgers_agree_with_main(&t, &base, round);
        for (id, state) in &states {
            let want = if id == "a2" {
                "validation_failed"
            } else {
                "promoted"
            };
            assert_eq!(state, want, "round {round}: {id}: {states:?}");
        }
        assert_eq!(
            t.git(&["cat-file", "-e", "main:a/bad"]).code,
            128,
            "round {round}: the culprit is on main"
        );
        let r = t.tab(&["verify", "main"]);
        assert_eq!(r.code, 0, "round {round}: {}", r.desc);
        if kind == 1 {
            assert_eq!(
                t.git_out(&["status", "--porcelain", "--untracked-files=no"]),
                "",
                "round {round}: the checked-out target's worktree is where main is"
            );
        }
        crate::crash::no_lock_files_left(&t);
        t.fsck();
    }
}

/// Two lanes landing onto the checked-out `main`, one of them slow to move its files (a slow
/// smudge filter on `b/`): they take turns with the worktree, and neither takes the other's
/// move under way for uncommitted changes or a held `index.lock`.
#[test]
fn lanes_move_a_checked_out_target_one_at_a_time() {
    let t = scoped_runs_to_land(1);
    // Slow, but within the second a reftable transaction waits for the stack's lock: the move
    // holds it (as every move holds its transaction's locks), and the other lane writes notes
    // and ledgers meanwhile.
    t.git(&["config", "filter.slow.smudge", "sleep 0.3; cat"])
        .ok();
    t.git(&["config", "filter.slow.clean", "cat"]).ok();
    write_file(&t.repo.join(".git/info/attributes"), "b/** filter=slow\n");
    let base = t.git_out(&["rev-parse", "main"]);
    let r = t.tab(&["land", "--target", "main"]);
    // The culprit is refused (exit 1); every other run lands.
    assert_eq!(r.code, 1, "{}", r.desc);
    let states = ledgers_agree_with_main(&t, &base, 0);
    for (id, state) in &states {
        let want = if id == "a2" {
            "validation_failed"
        } else {
            "promoted"
        };
        assert_eq!(state, want, "{id}: {states:?}\n{}", r.desc);
    }
    assert_eq!(
        t.git_out(&["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    t.fsck();
}
