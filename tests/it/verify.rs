//! `validate` and `verify`: evidence for any commit, and judging commits by the notes alone.

use std::path::Path;

use serde_json::{json, Value};

use crate::util::*;

/// A repository with the readme policy whose `HEAD` is validated; and that commit.
fn validated_head() -> (TestEnv, String) {
    let t = TestEnv::with_readme_policy();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    t.tab(&["validate"]).ok();
    (t, head)
}

/// Commit `file` with `content` in the main worktree; the new commit.
fn commit_file(t: &TestEnv, file: &str, content: &str) -> String {
    t.commit_file_in(&t.repo, file, content);
    t.git_out(&["rev-parse", "HEAD"])
}

fn verify_json(t: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    t.tab_json(&all)
}

/// The single check verdict of the single commit of a verify answer.
fn only_verdict(v: &Value) -> String {
    assert_eq!(v["commits"].as_array().unwrap().len(), 1, "{v}");
    v["commits"][0]["checks"][0]["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

fn tree_of(t: &TestEnv, commit: &str) -> String {
    t.git_out(&["rev-parse", &format!("{commit}^{{tree}}")])
}

fn note(t: &TestEnv, object: &str) -> String {
    t.git_out(&["notes", "--ref=tabellio/evidence", "show", object])
}

fn scratch_dir(t: &TestEnv) -> std::path::PathBuf {
    t.repo.join(".git").join("tabellio").join("tmp")
}

fn scratch_entries(t: &TestEnv) -> Vec<String> {
    std::fs::read_dir(scratch_dir(t))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("validate-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The evidence ref is `refs/notes/tabellio/evidence` and nothing else: with it gone, a copy
/// planted where git's revision lookup would look next (outside `refs/`, or a tag of that name)
/// is not read as the evidence.
#[test]
fn evidence_is_read_from_its_own_ref_only_never_from_a_look_alike() {
    let (t, head) = validated_head();
    let notes = "refs/notes/tabellio/evidence";
    let evidence = t.git_out(&["rev-parse", notes]);
    assert_eq!(only_verdict(&verify_json(&t, &[&head]).1), "satisfied");
    t.git(&["update-ref", "-d", notes]).ok();
    t.git(&["tag", "refs/notes/tabellio/evidence", &evidence])
        .ok();
    for dir in ["tags", "heads", "remotes"] {
        let planted = t.repo.join(".git").join(dir).join(notes);
        write_file(&planted, &format!("{evidence}\n"));
        let (code, v) = verify_json(&t, &[&head]);
        assert_eq!(code, 1, "{dir}: {v}");
        assert_eq!(only_verdict(&v), "missing", "{dir}: {v}");
        std::fs::remove_file(&planted).unwrap();
    }
    t.git(&["update-ref", notes, &evidence]).ok();
    assert_eq!(only_verdict(&verify_json(&t, &[&head]).1), "satisfied");
}

#[test]
fn validated_commit_verifies_and_an_unvalidated_one_does_not() {
    let t = TestEnv::with_readme_policy();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let (code, v) = verify_json(&t, &[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["verified"], false);
    assert_eq!(v["commits"][0]["commit"], head);
    assert_eq!(v["commits"][0]["verified"], false);
    assert_eq!(
        v["commits"][0]["checks"],
        json!([{"name": "readme", "verdict": "missing", "record": null}])
    );

    let (code, val) = t.tab_json(&["validate"]);
    assert_eq!(code, 0, "{val}");
    assert_eq!(val["verdict"], "passed");
    assert_eq!(val["commit"], head);
    assert_eq!(val["evidence"][0]["check"]["name"], "readme");
    assert_eq!(val["evidence"][0]["run_id"], Value::Null);
    let digest = val["evidence"][0]["digest"].clone();

    let (code, mut v) = verify_json(&t, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["verified"], true);
    assert_eq!(v["policy_from"], Value::Null);
    // Every execution on the tree is listed, with its attempt number.
    let executions = v["commits"][0]
        .as_object_mut()
        .and_then(|c| c.remove("executions"))
        .unwrap_or_default();
    assert_eq!(executions[0]["attempt"], 1, "{executions}");
    assert_eq!(executions[0]["record"], digest, "{executions}");
    assert_eq!(
        v["commits"],
        json!([{"commit": head, "tree": tree_of(&t, &head), "verified": true,
                "checks": [{"name": "readme", "verdict": "satisfied", "record": digest}]}])
    );
    // Human output says the same.
    let r = t.tab(&["verify", "HEAD"]);
    r.ok();
    assert!(
        r.stdout.starts_with("verified") && r.stdout.contains("readme: satisfied"),
        "{}",
        r.desc
    );

    // A new commit has no evidence.
    let next = commit_file(&t, "a.txt", "a\n");
    let (code, v) = verify_json(&t, &[&next]);
    assert_eq!((code, only_verdict(&v)), (1, "missing".into()), "{v}");
    let r = t.tab(&["verify", &next]);
    r.code(1);
    assert!(
        r.stdout.contains("NOT VERIFIED") && r.stdout.contains("readme: missing"),
        "{}",
        r.desc
    );

    // Stock git reads the notes validate wrote, on the commit and on its tree.
    let rec: Value = serde_json::from_str(&note(&t, &head)).unwrap();
    assert_eq!(rec["commit"], head);
    assert_eq!(note(&t, &tree_of(&t, &head)), note(&t, &head));
    t.fsck();
}

#[test]
fn a_hand_edited_record_is_tampered_whatever_field_changed() {
    let (t, head) = validated_head();
    let original = note(&t, &head);
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: [(&str, Edit); 6] = [
        (
            "duration_ms",
            Box::new(|r| r["duration_ms"] = json!(r["duration_ms"].as_u64().unwrap() + 1000)),
        ),
        (
            "output.excerpt",
            Box::new(|r| r["output"]["excerpt"] = json!("all good")),
        ),
        (
            "check.argv",
            Box::new(|r| r["check"]["argv"] = json!(["true"])),
        ),
        ("tree", Box::new(|r| r["tree"] = json!("0".repeat(40)))),
        (
            "unknown extra field",
            Box::new(|r| r["extra"] = json!(true)),
        ),
        (
            "schema",
            Box::new(|r| r["schema"] = json!("tabellio.evidence/v9")),
        ),
    ];
    for (what, edit) in edits {
        let mut rec: Value = serde_json::from_str(&original).unwrap();
        edit(&mut rec);
        let line = serde_json::to_string(&rec).unwrap();
        t.forge_evidence(&head, &line);
        let (code, v) = verify_json(&t, &[&head]);
        assert_eq!(
            (code, only_verdict(&v)),
            (1, "tampered".into()),
            "edit of {what}: {v}"
        );
    }
    // Edited into something unreadable: no longer JSON, or no check name left.
    let cut = original.trim_end().trim_end_matches('}').to_string();
    let mut renamed: Value = serde_json::from_str(&original).unwrap();
    let check = renamed["check"].take();
    renamed["chekc"] = check;
    for (what, line) in [
        ("cut", cut),
        ("renamed key", serde_json::to_string(&renamed).unwrap()),
    ] {
        t.forge_evidence(&head, &line);
        let (code, v) = verify_json(&t, &[&head]);
        assert_eq!(
            (code, only_verdict(&v)),
            (1, "tampered".into()),
            "{what}: {v}"
        );
    }
    // A failed record edited to say "passed" is tampered, not satisfied.
    let next = commit_file(&t, "b.txt", "b\n");
    t.tab(&["validate", &next, "--check", "readme", "--", "false"])
        .code(1);
    let line = note(&t, &next).replace("\"status\":\"failed\"", "\"status\":\"passed\"");
    t.forge_evidence(&next, &line);
    let (code, v) = verify_json(&t, &[&next, "--check", "readme"]);
    assert_eq!((code, only_verdict(&v)), (1, "tampered".into()), "{v}");
}

#[test]
fn a_record_copied_onto_another_commit_is_mismatched() {
    let (t, validated) = validated_head();
    let other = commit_file(&t, "c.txt", "c\n");
    t.set_note(&other, &note(&t, &validated));
    let (code, v) = verify_json(&t, &[&other]);
    assert_eq!(
        (code, only_verdict(&v)),
        (1, "mismatched-object".into()),
        "{v}"
    );
    // The original still verifies.
    assert_eq!(verify_json(&t, &[&validated]).0, 0);
}

#[test]
fn an_amended_commit_with_the_same_tree_keeps_its_evidence() {
    let (t, before) = validated_head();
    t.git(&["commit", "-q", "--amend", "-m", "reworded"]).ok();
    let after = t.git_out(&["rev-parse", "HEAD"]);
    assert_ne!(before, after);
    assert!(
        t.git(&["notes", "--ref=tabellio/evidence", "show", &after])
            .code
            != 0,
        "no note on the new commit itself"
    );
    let (code, v) = verify_json(&t, &[&after]);
    assert_eq!((code, only_verdict(&v)), (0, "satisfied".into()), "{v}");
}

#[test]
fn a_changed_check_definition_makes_old_evidence_stale() {
    let (t, validated) = validated_head();
    // The same check, now with another timeout: a different definition.
    let changed = policy(&[("readme", &["test", "-f", "README.md"])])
        .replace("\"timeout_s\":60", "\"timeout_s\":61");
    let newer = commit_file(&t, ".tabellio/policy.json", &changed);
    let (code, v) = verify_json(&t, &[&validated, "--policy-from", &newer]);
    assert_eq!((code, only_verdict(&v)), (1, "stale-check".into()), "{v}");
    assert_eq!(v["policy_from"], newer);
    // Under its own policy it still verifies.
    assert_eq!(verify_json(&t, &[&validated]).0, 0);
}

#[test]
fn a_failed_record_never_verifies() {
    let t = TestEnv::new();
    // No policy: any passing record would do, but the only record failed.
    let r = t.tab(&["--json", "validate", "--check", "unit", "--", "false"]);
    r.code(1);
    let j = r.json();
    assert_eq!(j["verdict"], "failed");
    assert_eq!(j["evidence"][0]["status"], "failed");
    assert_eq!(j["evidence"][0]["exit_code"], 1);
    let (code, v) = verify_json(&t, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        v["commits"][0]["checks"],
        json!([{"name": "unit", "verdict": "failed", "record": j["evidence"][0]["digest"]}])
    );
    let (code, v) = verify_json(&t, &["--check", "unit"]);
    assert_eq!((code, only_verdict(&v)), (1, "failed".into()));
    // Without any record the any-check requirement is missing.
    let fresh = commit_file(&t, "x", "x");
    let (_, v) = verify_json(&t, &[&fresh]);
    assert_eq!(
        v["commits"][0]["checks"],
        json!([{"name": "*", "verdict": "missing", "record": null}])
    );
    // A passing record next to the failed one verifies.
    t.tab(&["validate", "--check", "unit", "--", "true"]).ok();
    let (code, v) = verify_json(&t, &["--check", "unit"]);
    assert_eq!((code, only_verdict(&v)), (0, "satisfied".into()), "{v}");
}

#[test]
fn ranges_list_every_commit_newest_first() {
    let t = TestEnv::with_readme_policy();
    let base = t.git_out(&["rev-parse", "HEAD"]);
    let mut commits = Vec::new();
    for i in 0..4 {
        t.write(&format!("f{i}"), &format!("{i}\n"));
        t.git(&["add", "-A"]).ok();
        // Distinct commit dates, so newest-first is well defined.
        let date = format!("GIT_COMMITTER_DATE=2026-01-0{}T00:00:00Z", i + 2);
        t.command(
            "env",
            &t.repo,
            &[&date, "git", "commit", "-q", "-m", &format!("c{i}")],
        )
        .ok();
        commits.push(t.git_out(&["rev-parse", "HEAD"]));
    }
    for c in &commits[..3] {
        t.tab(&["validate", c]).ok();
    }
    let range = format!("{base}..{}", commits[3]);
    let (code, v) = verify_json(&t, &[&range]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["verified"], false);
    let listed: Vec<(&str, bool)> = v["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["commit"].as_str().unwrap(),
                c["verified"].as_bool().unwrap(),
            )
        })
        .collect();
    let want: Vec<(&str, bool)> = commits
        .iter()
        .rev()
        .map(|c| (c.as_str(), c != &commits[3]))
        .collect();
    assert_eq!(listed, want);

    t.tab(&["validate", &commits[3]]).ok();
    let (code, v) = verify_json(&t, &[&range]);
    assert_eq!((code, v["verified"].clone()), (0, json!(true)), "{v}");
    // The base is not in the range; alone it does not verify.
    assert_eq!(verify_json(&t, &[&base]).0, 1);
    // A range and single revisions together: each commit once.
    let (_, v) = verify_json(&t, &[&range, &commits[3], "HEAD"]);
    assert_eq!(v["commits"].as_array().unwrap().len(), 4);
    // `a..` means a..HEAD; an empty range verifies vacuously.
    let (_, v) = verify_json(&t, &[&format!("{}..", commits[1])]);
    assert_eq!(v["commits"].as_array().unwrap().len(), 2);
    let (code, v) = verify_json(&t, &["HEAD..HEAD"]);
    assert_eq!((code, v["commits"].clone()), (0, json!([])));
}

#[test]
fn verify_usage_errors() {
    let t = TestEnv::with_readme_policy();
    let (code, v) = verify_json(&t, &["no-such-rev"]);
    assert_eq!(code, 5, "{v}");
    assert_eq!(v["ok"], false);
    assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    let (code, _) = verify_json(&t, &["HEAD~1...HEAD"]);
    assert_eq!(code, 2);
    let (code, _) = verify_json(&t, &["--check", "bad name"]);
    assert_eq!(code, 2);
    // An invalid policy names the commit and the file.
    let bad = commit_file(
        &t,
        ".tabellio/policy.json",
        "{\"schema\":\"tabellio.policy/v1\",\"required\":[\"nope\"]}",
    );
    let (code, v) = verify_json(&t, &[&bad]);
    assert_eq!(code, 2, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&bad) && msg.contains(".tabellio/policy.json"),
        "{msg}"
    );
}

#[test]
fn validate_never_touches_the_checkout_or_index_and_removes_its_worktree() {
    let t = TestEnv::with_readme_policy();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    // A dirty checkout: staged, unstaged and untracked changes.
    t.write("staged.txt", "staged\n");
    t.git(&["add", "staged.txt"]).ok();
    t.write("README.md", "changed, not staged\n");
    t.write("untracked.txt", "u\n");
    let status = t.git_out(&["status", "--porcelain"]);
    let index = std::fs::read(t.repo.join(".git/index")).unwrap();
    let worktrees = t.git_out(&["worktree", "list", "--porcelain"]);
    let marker = t.path().join("cwd.txt");
    let script = format!("pwd > {}; test -f .tabellio/policy.json && ! test -e staged.txt && ! test -e untracked.txt", marker.display());
    let r = t.tab(&[
        "--json", "validate", "--check", "clean", "--", "sh", "-c", &script,
    ]);
    r.ok();
    let cwd = std::fs::read_to_string(&marker).unwrap().trim().to_string();
    assert!(
        cwd.starts_with(&scratch_dir(&t).display().to_string()),
        "checks ran in {cwd}"
    );
    assert!(
        !Path::new(&cwd).exists(),
        "the temporary worktree {cwd} is gone"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), status);
    assert_eq!(std::fs::read(t.repo.join(".git/index")).unwrap(), index);
    assert_eq!(t.git_out(&["rev-parse", "HEAD"]), head);
    assert_eq!(t.git_out(&["worktree", "list", "--porcelain"]), worktrees);
    assert!(scratch_entries(&t).is_empty(), "{:?}", scratch_entries(&t));

    // After a failing check too.
    std::fs::remove_file(&marker).unwrap();
    let script = format!("pwd > {}; exit 3", marker.display());
    let r = t.tab(&[
        "--json", "validate", "--check", "failing", "--", "sh", "-c", &script,
    ]);
    r.code(1);
    assert_eq!(r.json()["evidence"][0]["exit_code"], 3);
    let cwd = std::fs::read_to_string(&marker).unwrap().trim().to_string();
    assert!(
        !Path::new(&cwd).exists(),
        "the temporary worktree {cwd} is gone"
    );
    assert_eq!(t.git_out(&["worktree", "list", "--porcelain"]), worktrees);
    assert!(scratch_entries(&t).is_empty());
    assert_eq!(t.git_out(&["status", "--porcelain"]), status);

    // A check that leaves files behind fails as workspace_mutated, and is still cleaned up.
    let r = t.tab(&[
        "--json",
        "validate",
        "--check",
        "messy",
        "--",
        "touch",
        "litter.txt",
    ]);
    r.code(1);
    assert_eq!(
        r.json()["evidence"][0]["stopped"]["tabellio"],
        "workspace_mutated"
    );
    assert!(scratch_entries(&t).is_empty());
    t.fsck();
}

#[test]
fn validate_refusals_write_nothing() {
    let t = TestEnv::with_readme_policy();
    let before = t.snapshot();
    let (code, v) = t.tab_json(&["validate", "--check", "undefined"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("readme"),
        "{v}"
    );
    let (code, _) = t.tab_json(&["validate", "no-such-commit"]);
    assert_eq!(code, 5);
    assert_eq!(t.snapshot(), before);
    assert!(scratch_entries(&t).is_empty());
}

#[test]
fn validate_with_policy_from_uses_that_policy() {
    let t = TestEnv::with_readme_policy();
    let main_policy = t.git_out(&["rev-parse", "HEAD"]);
    t.git(&["checkout", "-q", "-b", "pr"]).ok();
    // The pull request weakens its own check definition.
    let weak = policy(&[("readme", &["true"])]);
    let pr = commit_file(&t, ".tabellio/policy.json", &weak);
    t.tab(&["validate", &pr]).ok();
    // Judged by main's policy, evidence made with the weakened definition is stale.
    let (code, v) = verify_json(&t, &[&pr, "--policy-from", &main_policy]);
    assert_eq!((code, only_verdict(&v)), (1, "stale-check".into()), "{v}");
    // Validating with main's definitions fixes that.
    t.tab(&["validate", &pr, "--policy-from", &main_policy])
        .ok();
    let (code, _) = verify_json(&t, &[&pr, "--policy-from", &main_policy]);
    assert_eq!(code, 0);
}

#[test]
fn sigint_during_validate_removes_the_worktree_and_writes_nothing() {
    let t = TestEnv::with_readme_policy();
    let before = t.snapshot();
    let marker = t.path().join("started");
    let script = format!(
        "echo $$ > {m}.tmp && mv {m}.tmp {m} && exec sleep 60",
        m = marker.display()
    );
    let child = t.spawn_tab(&[
        "validate",
        "--check",
        "slow",
        "--timeout",
        "120",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    // Wait (bounded) until the check runs: the marker is written by the check itself.
    wait_for_file(&marker);
    let check_pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        scratch_entries(&t).len(),
        1,
        "the temporary worktree exists while the check runs"
    );
    assert_ne!(t.snapshot(), before, "git worktree list shows it meanwhile");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGINT),
        "validate ends by the signal: {out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(scratch_entries(&t).is_empty(), "{:?}", scratch_entries(&t));
    assert_eq!(t.snapshot(), before, "no evidence, no worktree left");
    // The check was stopped too (it was in its own process group).
    let alive = unsafe { libc::kill(check_pid, 0) } == 0;
    assert!(!alive, "the check {check_pid} still runs");
    t.fsck();
}

#[test]
fn sixteen_concurrent_validates_keep_all_records() {
    let t = TestEnv::new();
    let mut commits = Vec::new();
    for i in 0..16 {
        commits.push(commit_file(&t, &format!("f{i}.txt"), &format!("{i}\n")));
    }
    let validates = commits
        .iter()
        .map(|c| t.spawn_tab(&["--json", "validate", c, "--check", "unit", "--", "true"]));
    for out in race(validates.collect()) {
        assert!(out.code == 0, "{}\n{}", out.stdout, out.stderr);
    }
    for c in &commits {
        let lines = note(&t, c);
        assert_eq!(lines.lines().count(), 1, "{c}: {lines}");
        assert_eq!(note(&t, &tree_of(&t, c)), lines);
    }
    let (code, v) = verify_json(&t, &[&format!("{}~1..{}", commits[0], commits[15])]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["commits"].as_array().unwrap().len(), 16);
    assert!(scratch_entries(&t).is_empty());
    assert_eq!(t.git_out(&["worktree", "list"]).lines().count(), 1);
    t.fsck();
}

#[test]
fn an_intact_record_of_a_newer_schema_is_ignored_not_tampered() {
    let (t, head) = validated_head();
    // A newer tool's record: its own shape, digest intact under the canonical rule.
    let mut rec = json!({"schema": "tabellio.evidence/v2", "checks": [{"name": "readme"}], "status": "passed"});
    let bytes = {
        // canonical JSON of this small object: sorted keys, no whitespace
        serde_json::to_string(&rec).unwrap()
    };
    let digest = {
        use std::io::Write;
        let mut child = std::process::Command::new("python3")
            .args(["-c", "import sys,hashlib,json; v=json.loads(sys.stdin.read()); print(hashlib.sha256(json.dumps(v,sort_keys=True,separators=(',',':'),ensure_ascii=False).encode()).hexdigest())"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(bytes.as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    rec["digest"] = json!(digest);
    t.forge_evidence(&head, &serde_json::to_string(&rec).unwrap());
    let (code, v) = verify_json(&t, &[&head]);
    assert_eq!((code, only_verdict(&v)), (1, "missing".into()), "{v}");
}

#[test]
fn packed_objects_judge_the_same_whatever_the_delta_base_cache() {
    let (t, head) = validated_head();
    // A second validated commit whose records and tree are close to the first: after `gc` the
    // notes and trees are packed against each other, read through the delta-base cache.
    let second = commit_file(&t, "README.md", "readme, second\n");
    t.tab(&["validate"]).ok();
    t.git(&["gc", "-q"]).ok();
    let range = format!("{head}~1..{second}");
    let (code, unset) = verify_json(&t, &[&range]);
    assert_eq!(code, 0, "{unset}");
    for limit in ["0", "1", "1m", "96m"] {
        t.git(&["config", "core.deltaBaseCacheLimit", limit]).ok();
        let (code, v) = verify_json(&t, &[&range]);
        assert_eq!((code, &v), (0, &unset), "core.deltaBaseCacheLimit={limit}");
    }
}

/// With no policy any passing record verifies a commit; a note line that is no record at all
/// is an alarm (`tampered`), not an absence (`missing`).
#[test]
fn a_non_json_note_line_without_a_policy_is_tampered() {
    let t = TestEnv::new();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let (code, v) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "missing", "{v}");
    t.git(&[
        "notes",
        "--ref=tabellio/evidence",
        "add",
        "-m",
        "not json",
        &head,
    ])
    .ok();
    let (code, v) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["commits"][0]["checks"][0]["verdict"], "tampered", "{v}");
}

/// docs/verify.md: Ctrl-C during `validate` run through `git tabellio` ends git by SIGINT too,
/// so a shell shows 130 (128 + 2), as for the binary run directly.
#[test]
fn ctrl_c_through_git_tabellio_ends_git_by_the_signal() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Command;
    let t = TestEnv::new();
    let marker = t.path().join("started");
    let script = format!(
        "echo $$ > {m}.tmp && mv {m}.tmp {m} && exec sleep 60",
        m = marker.display()
    );
    let mut cmd = Command::new("git");
    cmd.args([
        "tabellio", "validate", "--check", "slow", "--", "sh", "-c", &script,
    ])
    .current_dir(&t.repo)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    // A terminal's Ctrl-C signals the foreground process group: git and its child.
    .process_group(0);
    hermetic(&mut cmd, &t.home);
    let child = cmd.spawn().unwrap();
    wait_for_file(&marker);
    let group = i32::try_from(child.id()).unwrap();
    // SAFETY: signalling a process group this test created.
    unsafe { libc::killpg(group, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // What a shell shows: 128 + the signal when the process died of it, else its exit code.
    let shown = out
        .status
        .signal()
        .map_or(out.status.code(), |s| Some(128 + s));
    assert_eq!(shown, Some(130), "{out:?}");
}

#[test]
fn an_excerpt_limit_above_one_mib_is_a_policy_error() {
    let t = TestEnv::new();
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["output"] = serde_json::json!({"excerpt_bytes": 50_000_000});
    t.commit_policy(&p.to_string());
    let before = t.snapshot();
    let r = t.tab(&["--json", "validate"]);
    r.code(2);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("output.excerpt_bytes") && message.contains("1 MiB"),
        "{}",
        r.desc
    );
    assert!(r.json()["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("policy.json"));
    assert_eq!(t.snapshot(), before, "a refused validate wrote something");
    // Exactly 1 MiB is allowed.
    p["output"] = serde_json::json!({"excerpt_bytes": 1_048_576});
    t.commit_policy(&p.to_string());
    t.tab(&["validate"]).ok();
}

/// Each commit of one `verify` is judged by the policy committed at it: a newer policy that
/// requires one more check asks it of the commits under it only.
#[test]
fn each_commit_of_a_range_is_judged_by_its_own_policy() {
    let (t, validated) = validated_head();
    let more = policy(&[
        ("readme", &["test", "-f", "README.md"]),
        ("other", &["true"]),
    ]);
    commit_file(&t, ".tabellio/policy.json", &more);
    let newer = commit_file(&t, "b.txt", "b\n");
    t.tab(&["validate", &newer]).ok();
    let (code, v) = verify_json(&t, &[&newer, &validated]);
    assert_eq!(code, 0, "{v}");
    let names = |i: usize| -> Vec<String> {
        let mut names: Vec<String> = v["commits"][i]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(v["commits"][0]["commit"], newer, "{v}");
    assert_eq!(
        (names(0), names(1)),
        (
            vec!["other".to_string(), "readme".into()],
            vec!["readme".to_string()]
        ),
        "{v}"
    );
}
