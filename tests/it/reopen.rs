//! A run `land` refused finds its way back: the refusal recorded in its ledger and shown by
//! `status`, `context` and `log`; `finish` does not quietly complete it again; `reopen` (and
//! `land --reopen`, the policy's `on_refuse`) moves it onto the new tip with its conflicts
//! written out; `start --task-from` carries its change into a new run and retires it.

use serde_json::Value;

use crate::land::{finished, result_of, run_json};
use crate::util::*;

/// A repository (main checked out nowhere) whose `main` requires `check`: fails when
/// `bad.txt` and `f0.txt` both exist. With `land` in the policy when given.
fn repo(land: Option<Value>) -> TestEnv {
    let t = TestEnv::ref_only();
    let code = "import os\nraise SystemExit(1 if os.path.exists('bad.txt') and os.path.exists('f0.txt') else 0)";
    let mut p: Value =
        serde_json::from_str(&policy(&[("check", &["python3", "-c", code])])).unwrap();
    if let Some(land) = land {
        p["land"] = land;
    }
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&p.to_string());
    t.git(&["switch", "-q", "elsewhere"]).ok();
    t
}

/// Four runs onto main: `a-first` and `r0` land, `b-clash` conflicts with `a-first` in
/// README.md, `r3` (bad.txt) fails once r0's f0.txt is under it.
fn refused_pair(t: &TestEnv) -> Value {
    finished(t, "a-first", "README.md", "first\n");
    finished(t, "b-clash", "README.md", "clash\n");
    finished(t, "r0", "f0.txt", "0\n");
    finished(t, "r3", "bad.txt", "bad\n");
    let (code, j) = t.tab_json(&["land", "a-first", "b-clash", "r0", "r3"]);
    assert_eq!(code, 1, "{j}");
    assert_eq!(result_of(&j, "b-clash")["result"], "conflict", "{j}");
    assert_eq!(result_of(&j, "r3")["result"], "validation_failed", "{j}");
    j
}

#[test]
fn a_refusal_is_recorded_and_shown_everywhere() {
    let t = repo(None);
    refused_pair(&t);
    let tip = t.git_out(&["rev-parse", "main"]);

    // The conflict: the tip, the head, the paths and the hunks with their markers.
    let clash = run_json(&t, "b-clash");
    let attempt = &clash["land_attempts"][0];
    assert_eq!(attempt["result"], "conflict", "{clash}");
    assert_eq!(
        attempt["head"],
        t.git_out(&["rev-parse", "refs/heads/tabellio/b-clash"])
    );
    assert_eq!(attempt["paths"], serde_json::json!(["README.md"]));
    let hunk = attempt["hunks"][0]["text"].as_str().unwrap();
    assert!(
        hunk.starts_with("<<<<<<< target") && hunk.contains("clash") && hunk.contains("first"),
        "{hunk}"
    );
    // The culprit: the failing record's digest, noted on the commit named, isolated.
    let culprit = run_json(&t, "r3");
    let attempt = &culprit["land_attempts"][0];
    assert_eq!(attempt["result"], "validation_failed", "{culprit}");
    assert_eq!(attempt["isolated"], true, "{culprit}");
    assert_eq!(attempt["failed"][0]["check"], "check", "{culprit}");
    let digest = attempt["failed"][0]["evidence"].as_str().unwrap();
    let commit = attempt["commit"].as_str().unwrap();
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", commit]);
    assert!(note.contains(digest), "{note}");
    assert!(tip.len() == 40 && attempt["onto"].as_str().unwrap().len() == 40);

    // status: repair, with the command that starts it, for both.
    for (id, why) in [
        ("b-clash", "conflict in README.md"),
        ("r3", "validation failed"),
    ] {
        let (_, st) = t.tab_json(&["status", id]);
        assert_eq!(st["next_action"]["action"], "repair", "{st}");
        assert_eq!(
            st["next_action"]["command"],
            format!("git tabellio reopen {id}")
        );
        let reason = st["next_action"]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{reason}");
        let allowed = st["allowed_actions"].as_array().unwrap();
        assert!(allowed.contains(&"reopen".into()), "{st}");
        assert!(!allowed.contains(&"finish".into()), "{st}");
        let human = t.tab(&["status", id]);
        assert!(human.stdout.contains("reopen"), "{}", human.desc);
    }

    // context: the refusal with its hunk, and the failing record's excerpt.
    let (_, ctx) = t.tab_json(&["context", "b-clash"]);
    assert_eq!(
        ctx["context"]["land_refusal"]["result"], "conflict",
        "{ctx}"
    );
    let md = t.tab(&["context", "b-clash", "--format", "markdown"]);
    assert!(md.stdout.contains("## Land refusal"), "{}", md.stdout);
    assert!(md.stdout.contains("<<<<<<< target"), "{}", md.stdout);
    let (_, ctx) = t.tab_json(&["context", "r3"]);
    let failed = &ctx["context"]["land_refusal"]["failed"][0];
    assert_eq!(failed["evidence"], digest, "{ctx}");
    assert!(failed["excerpt"].is_string(), "{ctx}");

    // log, log --graph, log --html, --json.
    let log = t.tab(&["log", "b-clash"]);
    assert!(
        log.stdout.contains("refused: conflict in README.md"),
        "{}",
        log.stdout
    );
    let log = t.tab(&["log", "r3"]);
    assert!(
        log.stdout
            .contains("refused: validation failed: check (isolated to this run) onto "),
        "{}",
        log.stdout
    );
    let graph = t.tab(&["log", "--graph", "r3"]);
    assert!(
        graph
            .stdout
            .contains("refused: validation failed: check (isolated"),
        "{}",
        graph.stdout
    );
    let page = t.path().join("r3.html");
    t.tab(&["log", "--html", page.to_str().unwrap(), "r3"]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("validation failed"), "html lacks the refusal");
    let (_, j) = t.tab_json(&["log", "r3"]);
    assert!(j.to_string().contains("validation failed"), "{j}");
    // Stock git reads the ledger transitions.
    let stock = t.git_out(&["log", "--format=%B", "refs/tabellio/runs/r3"]);
    assert!(
        stock.contains("land r3: completed -> validation_failed\n\nrefused: validation failed"),
        "{stock}"
    );
    t.fsck();
}

#[test]
fn finish_after_a_refusal_stops_and_land_leaves_the_run_waiting() {
    let t = repo(None);
    refused_pair(&t);
    // status -> finish -> land -> status: a clear stop each time, nothing written.
    for id in ["b-clash", "r3"] {
        let (_, before) = t.tab_json(&["status", id]);
        let refs = t.snapshot();
        let r = t.tab(&["finish", id]);
        assert_eq!(r.code, 3, "{}", r.desc);
        assert!(r.stderr.contains("nothing changed since"), "{}", r.desc);
        assert!(
            r.stderr.contains(&format!("git tabellio reopen {id}")),
            "{}",
            r.desc
        );
        assert_eq!(t.snapshot(), refs, "finish wrote something");
        let (code, j) = t.tab_json(&["land", "--target", "main"]);
        assert_eq!(code, 0, "{j}");
        assert_eq!(t.snapshot(), refs, "land wrote something");
        let (_, after) = t.tab_json(&["status", id]);
        assert_eq!(before["next_action"], after["next_action"]);
        assert_eq!(after["next_action"]["action"], "repair");
    }
    // The conflicting run (still completed) is named as waiting, not tried again.
    let (_, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(j["waiting"][0]["run_id"], "b-clash", "{j}");
    assert_eq!(j["waiting"][0]["command"], "git tabellio reopen b-clash");
    assert!(j["runs"].as_array().unwrap().is_empty(), "{j}");
    let human = t.tab(&["land", "--target", "main"]);
    assert!(human.stdout.contains("waiting b-clash"), "{}", human.desc);
    // Named, it is tried again (and refused again).
    let (code, j) = t.tab_json(&["land", "b-clash"]);
    assert_eq!(
        (code, &result_of(&j, "b-clash")["result"]),
        (1, &"conflict".into())
    );
    // A fix committed on the old base is new work: finish validates it.
    let wt = t.worktree("r3");
    t.git_in(&wt, &["rm", "-q", "bad.txt"]).ok();
    t.commit_file_in(&wt, "good.txt", "good\n");
    let (code, j) = t.tab_json(&["finish", "r3"]);
    assert_eq!((code, &j["run"]["state"]), (0, &"completed".into()), "{j}");
}

#[test]
fn reopen_writes_the_conflict_out_and_the_repaired_run_lands() {
    let t = repo(None);
    refused_pair(&t);
    let tip = t.git_out(&["rev-parse", "main"]);
    let old_base = run_json(&t, "b-clash")["base"]["commit"].clone();
    let (code, j) = t.tab_json(&["reopen", "b-clash"]);
    assert_eq!(code, 0, "{j}");
    let run = &j["run"];
    assert_eq!(run["state"], "reopened", "{j}");
    assert_eq!(run["base"]["commit"], tip);
    assert_eq!(run["reopens"][0]["base_before"], old_base);
    assert_eq!(run["reopens"][0]["mode"], "conflict");
    assert_eq!(
        run["reopens"][0]["conflicts"],
        serde_json::json!(["README.md"])
    );
    assert_eq!(run["land_attempts"].as_array().unwrap().len(), 1, "kept");
    assert_eq!(run["attempts"].as_array().unwrap().len(), 1, "kept");
    // The branch is at the new tip; the change, with markers, is in the worktree.
    assert_eq!(
        t.git_out(&["rev-parse", "refs/heads/tabellio/b-clash"]),
        tip
    );
    let wt = t.worktree("b-clash");
    let readme = std::fs::read_to_string(wt.join("README.md")).unwrap();
    assert!(
        readme.contains("<<<<<<< target") && readme.contains(">>>>>>> run"),
        "{readme}"
    );
    assert_eq!(t.git_out_in(&wt, &["status", "--porcelain"]), "M README.md");
    let (_, st) = t.tab_json(&["status", "b-clash"]);
    assert_eq!(st["next_action"]["action"], "repair", "{st}");
    assert!(st["next_action"]["reason"]
        .as_str()
        .unwrap()
        .contains("resolve the conflict markers"));
    let (_, ctx) = t.tab_json(&["context", "b-clash"]);
    let reopened = &ctx["context"]["reopened"];
    assert_eq!(
        reopened["conflicts"],
        serde_json::json!(["README.md"]),
        "{ctx}"
    );
    assert!(reopened["landed_since"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s.as_str().unwrap().ends_with("edit README.md")));
    // Markers committed as they are do not validate.
    t.commit_all_in(&wt, "as it is");
    let (code, j) = t.tab_json(&["finish", "b-clash"]);
    assert_eq!(code, 1, "{j}");
    assert!(j["run"]["reason"]
        .as_str()
        .unwrap()
        .contains("conflict markers remain in README.md"));
    // Resolved, it validates on the new base and lands.
    t.commit_file_in(&wt, "README.md", "first\nclash\n");
    let (code, j) = t.tab_json(&["finish", "b-clash"]);
    assert_eq!((code, &j["run"]["state"]), (0, &"completed".into()), "{j}");
    let (code, j) = t.tab_json(&["land", "b-clash"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(result_of(&j, "b-clash")["restack"], "none", "{j}");
    let stock = t.git_out(&["log", "--format=%s", "refs/tabellio/runs/b-clash"]);
    assert!(
        stock.contains("reopen b-clash: completed -> reopened"),
        "{stock}"
    );

    // The culprit replays cleanly: its commits on the new tip, validated there.
    let (code, j) = t.tab_json(&["reopen", "r3"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["reopen"]["mode"], "replay", "{j}");
    let head = t.git_out(&["rev-parse", "refs/heads/tabellio/r3"]);
    assert_eq!(
        t.git_out(&["rev-parse", &format!("{head}^")]),
        t.git_out(&["rev-parse", "main"])
    );
    let (code, _) = t.tab_json(&["finish", "r3"]);
    assert_eq!(code, 1, "still the culprit on the new base");
    let wt = t.worktree("r3");
    t.git_in(&wt, &["rm", "-q", "bad.txt"]).ok();
    t.commit_all_in(&wt, "fix");
    t.tab(&["finish", "r3"]).ok();
    let (code, j) = t.tab_json(&["land", "r3"]);
    assert_eq!(code, 0, "{j}");
    t.tab(&["verify", "main"]).ok();
    t.fsck();
}

#[test]
fn reopen_refuses_bad_input_and_writes_nothing() {
    let t = repo(None);
    finished(&t, "calm", "calm.txt", "x\n");
    refused_pair(&t);
    let cases: [(&[&str], i32, &str); 3] = [
        (&["reopen", "nope"], 5, "no run"),
        (&["reopen", "a-first"], 3, "is promoted"),
        (&["reopen", "bad/id"], 2, ""),
    ];
    for (args, code, said) in cases {
        let refs = t.snapshot();
        let r = t.tab(args);
        assert_eq!(r.code, code, "{}", r.desc);
        assert!(r.stderr.contains(said), "{}", r.desc);
        assert_eq!(t.snapshot(), refs);
    }
    // A dirty worktree is refused before anything moves.
    let wt = t.worktree("b-clash");
    write_file(&wt.join("stray.txt"), "x\n");
    let refs = t.snapshot();
    let r = t.tab(&["reopen", "b-clash"]);
    assert_eq!(r.code, 3, "{}", r.desc);
    assert!(r.stderr.contains("uncommitted changes"), "{}", r.desc);
    assert_eq!(t.snapshot(), refs);
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "clash\n"
    );
}

#[test]
fn land_reopens_what_it_refuses_by_flag_or_by_policy() {
    for by_policy in [false, true] {
        let t = repo(by_policy.then(|| serde_json::json!({"on_refuse": "reopen"})));
        finished(&t, "a-first", "README.md", "first\n");
        finished(&t, "b-clash", "README.md", "clash\n");
        let mut args = vec!["land", "a-first", "b-clash"];
        if !by_policy {
            args.push("--reopen");
        }
        let (code, j) = t.tab_json(&args);
        assert_eq!(code, 1, "{j}");
        assert_eq!(result_of(&j, "b-clash")["state"], "reopened", "{j}");
        assert_eq!(j["reopened"][0]["run_id"], "b-clash", "{j}");
        assert_eq!(j["reopened"][0]["mode"], "conflict", "{j}");
        let run = run_json(&t, "b-clash");
        assert_eq!(run["state"], "reopened");
        assert_eq!(run["reopens"][0]["by"], "land");
        t.fsck();
    }
    // A refused run waiting from before is reopened by `land --reopen` too.
    let t = repo(None);
    refused_pair(&t);
    let (_, j) = t.tab_json(&["land", "--target", "main", "--reopen"]);
    assert_eq!(j["reopened"][0]["run_id"], "b-clash", "{j}");
    assert_eq!(run_json(&t, "b-clash")["state"], "reopened");
}

#[test]
fn restart_carries_the_refused_change_and_retires_the_old_run() {
    let t = repo(None);
    refused_pair(&t);
    let tip = t.git_out(&["rev-parse", "main"]);
    let (code, j) = t.tab_json(&[
        "start",
        "b-again",
        "--base",
        "main",
        "--task-from",
        "b-clash",
    ]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["superseded"], "b-clash", "{j}");
    assert_eq!(j["run"]["supersedes"], "b-clash");
    assert_eq!(j["run"]["base"]["commit"], tip);
    let old = run_json(&t, "b-clash");
    assert_eq!(old["state"], "superseded", "{old}");
    assert_eq!(old["superseded_by"], "b-again");
    // The conflict is written out in the new run's worktree.
    let wt = t.worktree("b-again");
    let readme = std::fs::read_to_string(wt.join("README.md")).unwrap();
    assert!(readme.contains("<<<<<<< target"), "{readme}");
    // The old run left the queue: a bare land has nothing waiting.
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    assert!(j.get("waiting").is_none(), "{j}");
    let (_, st) = t.tab_json(&["status", "b-clash"]);
    assert_eq!(st["next_action"]["action"], "cleanup", "{st}");
    t.commit_file_in(&wt, "README.md", "first\nclash\n");
    t.tab(&["finish", "b-again"]).ok();
    let (code, j) = t.tab_json(&["land", "b-again"]);
    assert_eq!(code, 0, "{j}");

    // The culprit's change replays: committed on the new base in the new run.
    let (code, j) = t.tab_json(&["start", "r3-again", "--base", "main", "--task-from", "r3"]);
    assert_eq!(code, 0, "{j}");
    let head = t.git_out(&["rev-parse", "refs/heads/tabellio/r3-again"]);
    assert_eq!(
        t.git_out(&["rev-parse", &format!("{head}^")]),
        t.git_out(&["rev-parse", "main"])
    );
    assert_eq!(t.git_out(&["show", &format!("{head}:bad.txt")]), "bad");
    assert_eq!(run_json(&t, "r3")["state"], "superseded");
    // A task taken from a run that was never refused carries nothing and retires nothing.
    let (code, j) = t.tab_json(&[
        "start",
        "c-copy",
        "--base",
        "main",
        "--task-from",
        "a-first",
    ]);
    assert_eq!(code, 0, "{j}");
    assert!(j["superseded"].is_null(), "{j}");
    assert_eq!(
        t.git_out(&["rev-parse", "refs/heads/tabellio/c-copy"]),
        t.git_out(&["rev-parse", "main"])
    );
    t.fsck();
}
