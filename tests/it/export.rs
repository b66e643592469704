//! `export`: the `tabellio` document and the in-toto statement of a run, their integrity
//! digests recomputed independently, no local path in either, and every refusal.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::*;

/// The task of [`promoted_run`]: several lines, the later ones not for an attestation.
const TASK: &str = "Add a.txt\n\nInternal detail: the customer is ACME-4711.";

/// Start `r1` with [`TASK`], commit `a.txt` in its worktree, checkpoint it, finish it with a
/// check printing its working directory (the worktree path, scrubbed when sealed) and promote
/// it onto `main`.
fn promoted_run(t: &TestEnv) {
    t.tab(&["start", "r1", "--task", TASK, "--base", "main"])
        .ok();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "a.txt", "a\n");
    t.tab(&["checkpoint", "r1", "-m", "a.txt added"]).ok();
    t.tab(&["finish", "r1", "--", "pwd"]).ok();
    t.tab(&["promote", "r1"]).ok();
}

/// SHA-256 of the canonical JSON of `v`, computed by python3 (its `json.dumps` with sorted keys
/// and no whitespace is RFC 8785 for these values): independent of the tool's own encoder.
fn canonical_sha256(v: &Value) -> String {
    let script = "import json,sys,hashlib\nd=json.load(sys.stdin)\nprint(hashlib.sha256(json.dumps(d,sort_keys=True,separators=(',',':'),ensure_ascii=False).encode()).hexdigest())";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(v.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The integrity a document should carry: the canonical digest without `integrity`.
fn expected_integrity(doc: &Value) -> String {
    let mut v = doc.clone();
    v.as_object_mut().unwrap().remove("integrity");
    canonical_sha256(&v)
}

/// No spelling of the test's temp dir (which holds the repository, its worktrees and HOME).
#[track_caller]
fn assert_no_local_path(t: &TestEnv, text: &str) {
    let real = std::fs::canonicalize(t.path()).unwrap();
    for p in [t.path().to_path_buf(), real] {
        let p = p.display().to_string();
        assert!(!text.contains(&p), "{p} in\n{text}");
    }
}

#[test]
fn tabellio_format_of_a_promoted_run() {
    let t = TestEnv::new();
    promoted_run(&t);
    let r = t.tab(&["export", "r1"]);
    r.ok();
    assert_no_local_path(&t, &r.stdout);
    let doc: Value = serde_json::from_str(&r.stdout).expect("the document is the output");

    assert_eq!(doc["schema"], "tabellio.export/v1");
    assert_eq!(doc["repository"], "local/repo");
    assert!(doc["tool"].as_str().unwrap().starts_with("git-tabellio/"));
    // The run record as the ledger holds it (read with stock git), the task verbatim.
    let run_json = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(doc["run"], run_json);
    assert_eq!(doc["run"]["task"]["text"], TASK);

    // The ledger, oldest first, one entry per ledger commit.
    let commits = t.git_out(&["rev-list", "--reverse", "refs/tabellio/runs/r1"]);
    let ledger = doc["ledger"].as_array().unwrap();
    let got: Vec<&str> = ledger
        .iter()
        .map(|e| e["commit"].as_str().unwrap())
        .collect();
    assert_eq!(got, commits.lines().collect::<Vec<_>>());
    let states: Vec<&str> = ledger
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["active", "active", "completed", "promoted"]);
    assert_eq!(ledger[0]["previous_state"], Value::Null);
    assert_eq!(ledger[3]["previous_state"], "completed");
    assert_eq!(
        ledger[3]["message"],
        "tabellio: promote r1: completed -> promoted"
    );

    // The evidence from the notes, digest checked; the path `pwd` printed was scrubbed.
    let main = t.git_out(&["rev-parse", "main"]);
    let evidence = doc["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 1, "{evidence:?}");
    assert_eq!(evidence[0]["valid"], true);
    assert_eq!(evidence[0]["paths_scrubbed"], false);
    let record = &evidence[0]["record"];
    assert_eq!(record["commit"], main.as_str());
    assert_eq!(record["check"]["argv"], serde_json::json!(["pwd"]));
    assert_eq!(record["output"]["excerpt"], "<worktree>\n");
    let mut without = record.clone();
    without.as_object_mut().unwrap().remove("digest");
    assert_eq!(
        canonical_sha256(&without),
        record["digest"].as_str().unwrap()
    );
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &main]);
    assert_eq!(serde_json::from_str::<Value>(&note).unwrap(), *record);

    let checkpoints = doc["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 1);
    assert_eq!(checkpoints[0]["valid"], true);
    assert_eq!(checkpoints[0]["record"]["summary"], "a.txt added");
    assert_eq!(checkpoints[0]["record"]["commit"], main.as_str());

    // The integrity digest verifies independently, and any change to the content breaks it.
    let integrity = doc["integrity"].as_str().unwrap();
    assert_eq!(expected_integrity(&doc), integrity);
    let mut forged = doc.clone();
    forged["run"]["task"]["text"] = "something else".into();
    assert_ne!(expected_integrity(&forged), integrity);

    // --json wraps the same document; exporting again gives the same bytes.
    let (code, j) = t.tab_json(&["export", "r1", "--format", "tabellio"]);
    assert_eq!(code, 0);
    assert_eq!(j["ok"], true);
    assert_eq!(j["format"], "tabellio");
    assert_eq!(j["document"], doc);
    t.fsck();
}

#[test]
fn in_toto_format_of_a_promoted_run() {
    let t = TestEnv::new();
    promoted_run(&t);
    let r = t.tab(&["export", "r1", "--format", "in-toto"]);
    r.ok();
    assert_no_local_path(&t, &r.stdout);
    // The task text is not in the statement; its first line and its digest are.
    assert!(!r.stdout.contains("ACME-4711"), "{}", r.stdout);
    let st: Value = serde_json::from_str(&r.stdout).unwrap();

    let main = t.git_out(&["rev-parse", "main"]);
    let tree = t.git_out(&["rev-parse", "main^{tree}"]);
    assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(st["predicateType"], "https://git-tabellio.dev/evidence/v1");
    let subjects = st["subject"].as_array().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0]["name"], format!("local/repo@{main}"));
    assert_eq!(
        subjects[0]["digest"],
        serde_json::json!({"gitCommit": main, "gitTree": tree})
    );

    let p = &st["predicate"];
    let run_json = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(p["run_id"], "r1");
    assert_eq!(p["state"], "promoted");
    assert_eq!(
        p["task"],
        serde_json::json!({"summary": "Add a.txt", "sha256": run_json["task"]["sha256"]})
    );
    assert_eq!(p["base"], run_json["base"]);
    assert_eq!(p["branch"], "refs/heads/tabellio/r1");
    assert_eq!(p["validated"], run_json["validated"]);
    assert_eq!(p["promotion"], run_json["promotion"]);
    assert_eq!(p["promotion"]["new"], main.as_str());
    assert!(p["tool"].as_str().unwrap().starts_with("git-tabellio/"));

    // One check, pointing at the evidence record in the notes by its digest.
    let note: Value =
        serde_json::from_str(&t.git_out(&["notes", "--ref=tabellio/evidence", "show", &main]))
            .unwrap();
    let checks = p["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1);
    let attempt_check = &run_json["attempts"][0]["checks"][0];
    assert_eq!(
        checks[0],
        serde_json::json!({
            "name": "adhoc",
            "digest": attempt_check["digest"],
            "status": "passed",
            "exit_code": 0,
            "evidence_digest": note["digest"],
            "started_at": note["started_at"],
            "finished_at": note["finished_at"],
        })
    );

    // With --json the statement is wrapped; --out reports the canonical digest of the statement.
    let (code, j) = t.tab_json(&["export", "r1", "--format", "in-toto"]);
    assert_eq!(code, 0);
    assert_eq!(j["format"], "in-toto");
    assert_eq!(j["document"], st);
    let out = t.path().join("r1.intoto.json");
    let (code, j) = t.tab_json(&[
        "export",
        "r1",
        "--format",
        "in-toto",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, st);
    assert_eq!(j["integrity"], canonical_sha256(&st));
}

#[test]
fn in_toto_refuses_a_run_without_a_validated_commit() {
    let t = TestEnv::new();
    t.started_run("r1", "a.txt");
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["export", "r1", "--format", "in-toto"]);
    assert_eq!(code, 3, "{j}");
    assert_eq!(j["ok"], false);
    assert_eq!(j["error"]["code"], "refused");
    assert!(j["error"]["message"].as_str().unwrap().contains("active"));
    assert!(j["error"]["hint"].as_str().unwrap().contains("finish r1"));
    assert_eq!(t.snapshot(), before, "a refused export wrote something");
    // A failed validation names no validated commit either.
    t.tab(&["finish", "r1", "--", "false"]).code(1);
    let r = t.tab(&["export", "r1", "--format", "in-toto"]);
    r.code(3);
    assert!(r.stderr.contains("validation_failed"), "{}", r.stderr);
    // The whole run exports in any state; nothing is written.
    let (code, j) = t.tab_json(&["export", "r1"]);
    assert_eq!(code, 0);
    assert_eq!(j["document"]["run"]["state"], "validation_failed");
    assert_eq!(j["document"]["evidence"][0]["record"]["status"], "failed");
    t.fsck();
}

#[test]
fn evidence_the_notes_do_not_back() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    let head = t.git_out(&["rev-parse", "refs/heads/tabellio/r1"]);
    let line = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    let forged = line.replace("\"exit_code\":0", "\"exit_code\":7");
    assert_ne!(forged, line);
    t.forge_evidence(&head, &format!("{forged}\n"));

    // The document says the record is not what was sealed …
    let (code, j) = t.tab_json(&["export", "r1"]);
    assert_eq!(code, 0);
    let evidence = j["document"]["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0]["valid"], false);
    assert_eq!(evidence[0]["record"]["exit_code"], 7);
    // … and no statement attests it.
    let (code, j) = t.tab_json(&["export", "r1", "--format", "in-toto"]);
    assert_eq!(code, 3, "{j}");
    assert!(j["error"]["hint"].as_str().unwrap().contains("verify"));

    // Unreadable lines are kept as they are, with what was found.
    t.forge_evidence(&head, "not json\n");
    let (code, j) = t.tab_json(&["export", "r1"]);
    assert_eq!(code, 0);
    let e = &j["document"]["evidence"][0];
    assert_eq!(e["valid"], false);
    assert_eq!(e["record"], Value::Null);
    assert_eq!(e["raw"], "not json");
    assert!(e["problem"].as_str().unwrap().contains("not valid JSON"));
}

#[test]
fn a_local_path_in_a_stored_record_is_scrubbed_and_flagged() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    let head = t.git_out(&["rev-parse", "refs/heads/tabellio/r1"]);
    // A genuine record (its digest right) naming the repository's path, as a record written
    // by an older tool might.
    let mut record: Value =
        serde_json::from_str(&t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]))
            .unwrap();
    record["output"]["excerpt"] = format!("{}/src/x.rs:1: error", t.repo.display()).into();
    record.as_object_mut().unwrap().remove("digest");
    record["digest"] = canonical_sha256(&record).into();
    t.forge_evidence(&head, &format!("{record}\n"));

    let r = t.tab(&["--json", "export", "r1"]);
    r.ok();
    assert_no_local_path(&t, &r.stdout);
    let e = &r.json()["document"]["evidence"][0];
    assert_eq!(e["valid"], true, "the stored record is intact");
    assert_eq!(e["paths_scrubbed"], true, "the exported copy is not");
    assert_eq!(
        e["record"]["output"]["excerpt"],
        "<repository>/src/x.rs:1: error"
    );
}

#[test]
fn out_writes_the_file_atomically() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    let (_, shown) = t.tab_json(&["export", "r1"]);
    let dir = t.path().join("exports");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("r1.json");
    let out_s = out.to_str().unwrap();
    let (code, j) = t.tab_json(&["export", "r1", "--out", out_s]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["ok"], true);
    assert_eq!(j["format"], "tabellio");
    assert_eq!(j["out"], out_s);
    assert!(j.get("document").is_none());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with("}\n"));
    let written: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(written, shown["document"]);
    assert_eq!(j["integrity"], written["integrity"]);
    assert_eq!(
        expected_integrity(&written),
        j["integrity"].as_str().unwrap()
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["r1.json"], "no temporary file is left");

    // An existing file is replaced; the human output names the file.
    std::fs::write(&out, "old").unwrap();
    let r = t.tab(&["export", "r1", "--out", out_s]);
    r.ok();
    assert!(r.stdout.contains(out_s), "{}", r.stdout);
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(&out).unwrap()).unwrap(),
        written
    );

    // A path that cannot be written is a usage error and leaves nothing behind.
    let missing = t.path().join("no-such-dir").join("r1.json");
    let (code, j) = t.tab_json(&["export", "r1", "--out", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{j}");
    assert_eq!(j["error"]["code"], "usage");
    assert!(j["error"]["hint"].as_str().unwrap().contains("--out"));
    assert!(!t.path().join("no-such-dir").exists());
    let (code, _) = t.tab_json(&["export", "r1", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "a directory is not a file");
    assert!(dir.join("r1.json").exists());
    assert!(!t.path().join("exports.tmp").exists());
}

#[test]
fn unknown_and_malformed_runs() {
    let t = TestEnv::new();
    let (code, j) = t.tab_json(&["export", "nope"]);
    assert_eq!(code, 5, "{j}");
    assert_eq!(j["error"]["code"], "not_found");
    let (code, j) = t.tab_json(&["export", "nope", "--format", "in-toto"]);
    assert_eq!(code, 5, "{j}");
    let (code, j) = t.tab_json(&["export", "a..b"]);
    assert_eq!(code, 2, "{j}");
    assert_eq!(j["error"]["code"], "usage");
    let (code, j) = t.tab_json(&["export", "r1", "--format", "spdx"]);
    assert_eq!(code, 2, "{j}");
    t.tab(&["export"]).code(2);
}
