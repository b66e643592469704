//! Promotion: ref-only and checked-out targets, every refusal, forged ledgers, racing promoters.

use crate::util::*;

/// Move `main` behind the run's back (from the `elsewhere` checkout): commit `file` on it.
fn advance_main(t: &TestEnv, file: &str, content: &str, message: &str) {
    t.git(&["switch", "-q", "main"]).ok();
    t.write(file, content);
    t.commit_all(message);
    t.git(&["switch", "-q", "elsewhere"]).ok();
}

#[test]
fn ref_only_promotion_moves_target_and_ledger_together() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let base = t.git_out(&["rev-parse", "main"]);
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    // Dry run writes nothing.
    let before = t.snapshot();
    let (code, dry) = t.tab_json(&["promote", "r1", "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(before, t.snapshot());

    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["mode"], "ref");
    assert_eq!(j["run"]["state"], "promoted");
    assert_eq!(j["run"]["promotion"]["mode"], "ref");
    assert_eq!(j["run"]["promotion"]["old"], base);
    assert_eq!(j["run"]["promotion"]["new"], head);
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    let reflog = t.git_out(&["reflog", "show", "-1", "--format=%gs", "main"]);
    assert_eq!(reflog, "tabellio: promote r1");
    // Promoting again is a no-op success that says so.
    let (code, again) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0);
    assert_eq!(again["already_promoted"], true);
    t.fsck();
}

#[test]
fn checked_out_promotion_moves_index_and_files() {
    let t = TestEnv::new();
    t.write("gone.txt", "to be deleted\n");
    t.write("dir/keep.txt", "keep\n");
    t.commit_all("more files");
    let wt = t.start_with_commit("r1", "new/file.txt", "new\n");
    write_file(&wt.join("dir/keep.txt"), "changed\n");
    std::fs::remove_file(wt.join("gone.txt")).unwrap();
    t.commit_all_in(&wt, "change and delete");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    // An untracked file that is not in the way does not matter.
    t.write("notes-to-self.txt", "mine\n");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["mode"], "worktree");
    assert_eq!(j["run"]["promotion"]["mode"], "worktree");
    assert_eq!(
        t.git_out(&["rev-parse", "HEAD"]),
        t.git_out(&["rev-parse", "tabellio/r1"])
    );
    assert_eq!(
        std::fs::read_to_string(t.repo.join("new/file.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.repo.join("dir/keep.txt")).unwrap(),
        "changed\n"
    );
    assert!(!t.repo.join("gone.txt").exists());
    assert_eq!(
        t.git_out(&["status", "--porcelain"]),
        "?? notes-to-self.txt"
    );
    assert_eq!(
        t.git_out(&["diff-files", "--name-only"]),
        "",
        "index stat data out of sync"
    );
    assert_eq!(
        t.git_out(&["diff-index", "--cached", "--name-only", "HEAD"]),
        ""
    );
    t.fsck();
}

#[track_caller]
fn refused(t: &TestEnv, args: &[&str], code: i32, needle: &str) {
    let before = t.snapshot();
    let files_before = t.git_out(&["status", "--porcelain", "--untracked-files=all"]);
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = t.tab(&all);
    r.code(code);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
    assert_eq!(
        before,
        t.snapshot(),
        "refused promote changed refs or worktrees"
    );
    assert_eq!(
        files_before,
        t.git_out(&["status", "--porcelain", "--untracked-files=all"])
    );
}

#[test]
fn tracked_change_in_the_target_worktree_is_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    t.write("README.md", "local edit\n");
    refused(&t, &["promote", "r1"], 3, "README.md");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("README.md")).unwrap(),
        "local edit\n"
    );
}

#[test]
fn untracked_file_in_the_way_is_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    t.write("a.txt", "my own untracked file\n");
    refused(&t, &["promote", "r1"], 3, "a.txt");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("a.txt")).unwrap(),
        "my own untracked file\n"
    );
}

#[test]
fn target_moved_is_a_conflict_with_a_merge_preview() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    // Someone else moves main, touching the same file the run added.
    advance_main(&t, "a.txt", "theirs\n", "concurrent");
    let tip = t.git_out(&["rev-parse", "main"]);
    refused(&t, &["promote", "r1"], 4, "target moved");
    let r = t.tab(&["--json", "promote", "r1"]);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains(&tip) && msg.contains("conflict") && msg.contains("a.txt"),
        "{msg}"
    );
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["live"]["target_moved"], tip);
    assert_eq!(st["next_action"]["action"], "restart");
    assert_eq!(st["run"]["state"], "completed");
}

#[test]
fn clean_merge_preview_when_target_moved_elsewhere() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    advance_main(&t, "unrelated.txt", "x\n", "unrelated");
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(4);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("merge cleanly"),
        "{}",
        r.desc
    );
}

#[test]
fn run_branch_moved_after_validation_is_refused() {
    let t = TestEnv::ref_only();
    let wt = t.completed_run("r1", "a.txt");
    write_file(&wt.join("late.txt"), "late\n");
    t.commit_all_in(&wt, "after validation");
    refused(
        &t,
        &["promote", "r1"],
        3,
        "run branch changed after validation",
    );
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["live"]["head_changed_since_validation"], true);
    assert_eq!(st["next_action"]["action"], "finish");
}

#[test]
fn a_failed_run_is_refused() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    t.tab(&["finish", "r1", "--", "false"]).code(1);
    refused(&t, &["promote", "r1"], 3, "validation_failed");
    refused(&t, &["promote", "nope"], 5, "nope");
}

/// Append a hand-made ledger commit whose run.json says `completed`, validated at the run's head.
fn forge_completed(t: &TestEnv, id: &str) {
    forge_completed_by(t, id, "test", &"1".repeat(64));
}

/// Forge the ledger of `id` to say its head was validated by one passing attempt of `check`
/// (whose definition has `digest`).
fn forge_completed_by(t: &TestEnv, id: &str, check: &str, digest: &str) {
    let head = t.git_out(&["rev-parse", &format!("tabellio/{id}")]);
    let tree = t.git_out(&["rev-parse", &format!("{head}^{{tree}}")]);
    t.forge_ledger(id, "tabellio: finish forged", |run| {
        run["state"] = "completed".into();
        run["validated"] =
            serde_json::json!({"commit": head, "tree": tree, "evidence_digest": "0".repeat(64)});
        run["attempts"] = serde_json::json!([{"n": 1, "commit": head, "tree": tree, "checks": [{"name": check, "digest": digest, "status": "passed", "exit_code": 0}], "status": "passed", "evidence_digest": "0".repeat(64), "at": "2026-01-01T00:00:00Z"}]);
    });
}

#[test]
fn a_forged_ledger_moves_no_branch() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    forge_completed(&t, "r1");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "completed");
    refused(&t, &["promote", "r1"], 3, "evidence");
    // Also with evidence present for another check only.
    t.started_run("r2", "b.txt");
    t.tab(&["finish", "r2", "--check", "other", "--", "false"])
        .code(1);
    forge_completed(&t, "r2");
    refused(&t, &["promote", "r2"], 3, "evidence");
}

#[test]
fn a_tampered_evidence_note_blocks_promotion() {
    let t = TestEnv::ref_only();
    t.started_run("r1", "a.txt");
    t.tab(&["finish", "r1", "--", "false"]).code(1);
    // Flip the stored record to "passed" by hand and forge the ledger to name exactly that
    // check and definition: only the record's digest, which no longer matches, stands between
    // the forgery and the target.
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    let note = t
        .git_out(&["notes", "--ref=tabellio/evidence", "show", &head])
        .replace("\"status\":\"failed\"", "\"status\":\"passed\"");
    let record: serde_json::Value = serde_json::from_str(note.trim()).expect("one record");
    assert_eq!(record["status"], "passed");
    let check = record["check"]["name"].as_str().expect("a check name");
    let digest = record["check"]["digest"].as_str().expect("a check digest");
    t.forge_evidence(&head, &note);
    forge_completed_by(&t, "r1", check, digest);
    refused(&t, &["promote", "r1"], 3, "tampered");
}

#[test]
fn racing_promoters_exactly_one_wins_each_round() {
    let t = TestEnv::ref_only();
    for round in 0..3 {
        let ids: Vec<String> = (0..8).map(|i| format!("race{round}-{i}")).collect();
        for id in &ids {
            t.completed_run(id, &format!("{id}.txt"));
        }
        let exits = race(ids.iter().map(|id| t.spawn_tab(&["promote", id])).collect());
        let results: Vec<(String, i32)> = ids
            .iter()
            .cloned()
            .zip(exits.iter().map(|e| e.code))
            .collect();
        let winners: Vec<&String> = results
            .iter()
            .filter(|(_, c)| *c == 0)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert!(
            results.iter().all(|(_, c)| *c == 0 || *c == 4),
            "round {round}: {results:?}"
        );
        let mut promoted = 0;
        for id in &ids {
            let (_, st) = t.tab_json(&["status", id]);
            if st["state"] == "promoted" {
                promoted += 1;
                assert_eq!(id, winners[0]);
            } else {
                assert_eq!(st["state"], "completed");
            }
        }
        assert_eq!(promoted, 1);
        assert_eq!(
            t.git_out(&["rev-parse", "main"]),
            t.git_out(&["rev-parse", &format!("tabellio/{}", winners[0])])
        );
        // Stock git's view of the refs agrees with every ledger.
        for id in &ids {
            let ledger = format!("refs/tabellio/runs/{id}");
            let listed = t.git_out(&["for-each-ref", "--format=%(objectname)", &ledger]);
            assert_eq!(listed, t.git_out(&["rev-parse", &ledger]), "{id}");
            let run = t.git_out(&["show", &format!("{ledger}:run.json")]);
            let run: serde_json::Value = serde_json::from_str(&run).unwrap();
            let want = if id == winners[0] {
                "promoted"
            } else {
                "completed"
            };
            assert_eq!(run["state"], want, "{id}");
        }
        // The next round starts from the new tip.
        for id in &ids {
            if id != winners[0] {
                t.tab(&["abandon", id]).ok();
            }
        }
    }
    t.fsck();
}

#[test]
fn promotion_in_bare_and_sha256_repositories() {
    let src = TestEnv::new();
    let bare = src.bare_clone();
    src.tab_in(&bare, &["start", "r1", "--task", "t"]).ok();
    let wt = bare.join("tabellio/worktrees/r1");
    write_file(&wt.join("x"), "x");
    src.commit_all_in(&wt, "x");
    src.tab_in(&bare, &["finish", "r1", "--", "true"]).ok();
    let r = src.tab_in(&bare, &["--json", "promote", "r1"]);
    r.ok();
    assert_eq!(r.json()["mode"], "ref");
    let head = src.git_out(&[
        "--git-dir",
        bare.to_str().unwrap(),
        "rev-parse",
        "tabellio/r1",
    ]);
    assert_eq!(
        src.git_out(&["--git-dir", bare.to_str().unwrap(), "rev-parse", "main"]),
        head
    );
    src.git_in(&bare, &["fsck", "--strict", "--no-progress"])
        .ok();

    let t = TestEnv::with_init(&["init", "-q", "-b", "main", "--object-format=sha256"]);
    t.completed_run("r1", "a.txt");
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(t.git_out(&["rev-parse", "HEAD"]).len(), 64);
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.fsck();
}

#[test]
fn the_demo_shows_a_whole_run_and_leaves_a_sound_repository() {
    let t = TestEnv::new();
    let r = t.tab_in(t.path(), &["--json", "demo", "--keep"]);
    r.ok();
    let lines = r.json_lines();
    let steps: Vec<&str> = lines.iter().map(|l| l["step"].as_str().unwrap()).collect();
    assert_eq!(
        steps,
        [
            "setup",
            "start",
            "edit",
            "checkpoint",
            "finish",
            "fix",
            "finish",
            "promote",
            "log",
            "done"
        ]
    );
    assert_eq!(lines[4]["data"]["state"], "validation_failed");
    assert_eq!(lines[6]["data"]["state"], "completed");
    assert!(lines[8]["data"]["git_log"]
        .as_str()
        .unwrap()
        .contains("Notes (tabellio/evidence):"));
    let repo = std::path::PathBuf::from(lines[9]["repository"].as_str().unwrap());
    let fsck = t.git_in(&repo, &["fsck", "--strict", "--no-progress"]);
    fsck.ok();
    assert_eq!(t.git_in(&repo, &["status", "--porcelain"]).stdout, "");
    std::fs::remove_dir_all(repo.parent().unwrap()).unwrap();
    // Without --keep nothing is left behind, and the human output has a line per step.
    let r = t.tab_in(t.path(), &["demo"]);
    r.ok();
    assert!(r.stdout.contains("8. promote"), "{}", r.stdout);
}

/// The demo with a `PATH` holding only git and the binary: it needs nothing else.
#[test]
fn the_demo_needs_only_git_and_the_binary() {
    let t = TestEnv::new();
    let bin = t.path().join("only-git");
    std::fs::create_dir_all(&bin).unwrap();
    let git = std::env::split_paths(&path_with_binary())
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    std::os::unix::fs::symlink(&git, bin.join("git")).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("git-tabellio")).unwrap();
    let r = t.command_with_env(
        "git",
        t.path(),
        &[("PATH", bin.as_os_str())],
        &["tabellio", "--json", "demo"],
    );
    r.ok();
    let lines = r.json_lines();
    assert_eq!(lines[4]["data"]["state"], "validation_failed", "{}", r.desc);
    assert_eq!(lines[4]["data"]["attempt"]["checks"][0]["exit_code"], 1);
    assert_eq!(lines[6]["data"]["state"], "completed", "{}", r.desc);
}

/// `demo | head -1` and `--json demo | head -c 250`: the reader going away is not an error.
#[test]
fn a_closed_stdout_ends_the_demo_quietly() {
    use std::io::{BufRead, Read};
    let t = TestEnv::new();
    for args in [&["demo"][..], &["--json", "demo"][..]] {
        let mut child = t.spawn_tab_in(t.path(), args);
        let stdout = child.stdout.take().unwrap();
        let mut reader = std::io::BufReader::new(stdout);
        if args.contains(&"--json") {
            let mut first = [0u8; 250];
            reader.read_exact(&mut first).unwrap();
        } else {
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            assert!(first.starts_with("1. setup"), "{first}");
        }
        // The later steps write to a pipe nobody reads.
        drop(reader);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn checked_out_promotion_turns_files_into_directories_and_back() {
    let t = TestEnv::new();
    t.write("a.txt", "a file\n");
    t.write("d/one", "in a dir\n");
    t.commit_all("shapes");
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    t.git_in(&wt, &["rm", "-q", "a.txt", "d/one"]).ok();
    write_file(&wt.join("a.txt/z"), "now a dir\n");
    write_file(&wt.join("d"), "now a file\n");
    t.commit_all_in(&wt, "swap shapes");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("a.txt/z")).unwrap(),
        "now a dir\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.repo.join("d")).unwrap(),
        "now a file\n"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.fsck();
}

#[test]
fn a_locked_index_in_the_target_worktree_is_a_conflict_that_changes_nothing() {
    let t = TestEnv::new();
    t.completed_run("r1", "f.txt");
    let lock = t.repo.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    refused(&t, &["promote", "r1"], 4, "index.lock");
    assert!(!t.repo.join("f.txt").exists());
    std::fs::remove_file(&lock).unwrap();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn a_target_in_the_middle_of_a_rebase_is_not_moved() {
    let t = TestEnv::new();
    t.write("b.txt", "b\n");
    t.commit_all("second");
    t.completed_run("r1", "f.txt");
    // An interactive rebase stopped at "edit": HEAD is detached, main is reserved.
    let editor = std::ffi::OsStr::new("sed -i -e s/^pick/edit/");
    let args = ["rebase", "-q", "-i", "HEAD~1"];
    t.command_with_env("git", &t.repo, &[("GIT_SEQUENCE_EDITOR", editor)], &args)
        .ok();
    refused(&t, &["promote", "r1"], 3, "rebased");
    t.git(&["rebase", "--continue"]).ok();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn sparse_checkouts_and_vanished_worktrees_are_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "f.txt");
    t.git(&["sparse-checkout", "set", "--no-cone", "/README.md"])
        .ok();
    refused(&t, &["promote", "r1"], 3, "sparse");
    t.git(&["sparse-checkout", "disable"]).ok();

    // main checked out in a linked worktree whose directory was deleted by hand.
    let t = TestEnv::ref_only();
    t.completed_run("r2", "g.txt");
    let gone = t.path().join("gone-main");
    t.git(&["worktree", "add", "-q", gone.to_str().unwrap(), "main"])
        .ok();
    std::fs::remove_dir_all(&gone).unwrap();
    let r = t.tab(&["--json", "promote", "r2"]);
    r.code(3);
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("git worktree prune"),
        "{}",
        r.desc
    );
    t.git(&["worktree", "prune"]).ok();
    t.tab(&["promote", "r2"]).ok();
}

#[test]
fn racing_promoters_into_a_checked_out_target_lose_with_exit_4() {
    let t = TestEnv::new();
    for round in 0..2 {
        let ids: Vec<String> = (0..6).map(|i| format!("co{round}-{i}")).collect();
        for id in &ids {
            t.completed_run(id, &format!("{id}.txt"));
        }
        let exits = race(ids.iter().map(|id| t.spawn_tab(&["promote", id])).collect());
        let codes: Vec<i32> = exits.iter().map(|e| e.code).collect();
        assert_eq!(
            codes.iter().filter(|c| **c == 0).count(),
            1,
            "round {round}: {codes:?}"
        );
        assert!(
            codes.iter().all(|c| *c == 0 || *c == 4),
            "round {round}: {codes:?} {:?}",
            exits.iter().map(|e| e.stderr.as_str()).collect::<Vec<_>>()
        );
        assert_eq!(t.git_out(&["status", "--porcelain"]), "", "round {round}");
        for (id, code) in ids.iter().zip(&codes) {
            if *code != 0 {
                t.tab(&["abandon", id]).ok();
            }
        }
    }
    t.fsck();
}

#[test]
fn status_previews_the_merge_and_notices_a_deleted_target() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    advance_main(&t, "a.txt", "theirs\n", "concurrent");
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["live"]["merge_preview"]["clean"], false, "{st}");
    assert_eq!(
        st["live"]["merge_preview"]["conflicts"],
        serde_json::json!(["a.txt"])
    );
    assert!(
        st["next_action"]["reason"]
            .as_str()
            .unwrap()
            .contains("conflict in a.txt"),
        "{st}"
    );
    t.git(&["branch", "-D", "main"]).ok();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["live"]["target_deleted"], true);
    assert_eq!(st["next_action"]["action"], "restart");
}

#[test]
fn status_survives_a_broken_policy_and_says_so() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    write_file(&wt.join(".tabellio/policy.json"), "{not json");
    t.commit_all_in(&wt, "break the policy");
    let (code, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["next_action"]["action"], "fix-policy");
    assert!(st["live"]["policy_error"]
        .as_str()
        .unwrap()
        .contains("policy.json"));
    assert_eq!(st["missing_evidence"], serde_json::json!(["policy"]));
}

/// Stop a real `git rebase` of the branch checked out at `wt`: `--exec false` after its first
/// pick leaves HEAD detached and the rebase state naming the branch, as a conflict would.
fn stopped_rebase(t: &TestEnv, wt: &std::path::Path) {
    let r = t.git_in(wt, &["rebase", "-q", "--root", "--exec", "false"]);
    assert_ne!(r.code, 0, "the rebase should stop: {}", r.desc);
    let head = t.git_out_in(wt, &["rev-parse", "--abbrev-ref", "HEAD"]);
    assert_eq!(head, "HEAD", "a stopped rebase detaches HEAD");
}

#[test]
fn a_real_rebase_of_the_target_in_the_main_worktree_is_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    let repo = t.repo.clone();
    stopped_rebase(&t, &repo);
    refused(
        &t,
        &["promote", "r1"],
        3,
        "refs/heads/main is being rebased",
    );
    t.git(&["rebase", "--abort"]).ok();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn a_real_rebase_of_the_target_in_a_linked_worktree_is_refused_and_named() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    let wt = t.path().join("on-main");
    t.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "main"])
        .ok();
    stopped_rebase(&t, &wt);
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("being rebased") && message.contains("on-main"),
        "{message}"
    );
    // Aborted, the rebase no longer holds main: promote moves that worktree with it.
    t.git_in(&wt, &["rebase", "--abort"]).ok();
    t.tab(&["promote", "r1"]).ok();
}

#[test]
fn an_untracked_directory_where_the_move_writes_a_file_is_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "gen");
    t.write("gen/mine.txt", "my own untracked file\n");
    refused(&t, &["promote", "r1"], 3, "gen/mine.txt");
    assert!(t.repo.join("gen/mine.txt").is_file());
}

#[test]
fn an_untracked_file_where_the_move_needs_a_directory_is_refused() {
    let t = TestEnv::new();
    t.completed_run("r1", "lib/new.txt");
    t.write("lib", "my own untracked file\n");
    refused(&t, &["promote", "r1"], 3, "lib");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("lib")).unwrap(),
        "my own untracked file\n"
    );
}

#[test]
fn an_untracked_symlink_where_the_move_needs_a_directory_is_refused() {
    // The move would write lib/new.txt through the link, outside the worktree.
    let t = TestEnv::new();
    t.completed_run("r1", "lib/new.txt");
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, t.repo.join("lib")).unwrap();
    refused(&t, &["promote", "r1"], 3, "lib");
    assert!(!outside.join("new.txt").exists());
    assert!(t.repo.join("lib").is_symlink());
}

#[test]
fn untracked_files_out_of_the_moves_way_stay_where_they_are() {
    let t = TestEnv::new();
    t.completed_run("r1", "src/a.txt");
    t.write("notes/todo.txt", "mine\n");
    t.write("src/b.txt", "mine too\n");
    t.tab(&["promote", "r1"]).ok();
    assert_eq!(
        t.git_out(&["rev-parse", "main"]),
        t.git_out(&["rev-parse", "tabellio/r1"])
    );
    assert!(t.repo.join("src/a.txt").is_file());
    let left = t.git_out(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(
        left.contains("?? notes/todo.txt") && left.contains("?? src/b.txt"),
        "{left}"
    );
}

#[test]
fn a_run_cannot_weaken_the_policy_that_gates_its_promotion() {
    let t = TestEnv::with_readme_policy();
    t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
    t.tab(&["start", "r1", "--task", "t", "--base", "main"])
        .ok();
    let wt = t.worktree("r1");
    // The run turns its required check into `true` and removes what the check asks for.
    write_file(
        &wt.join(".tabellio/policy.json"),
        &policy(&[("readme", &["true"])]),
    );
    std::fs::remove_file(wt.join("README.md")).unwrap();
    t.commit_all_in(&wt, "weaken the gate");
    t.tab(&["finish", "r1"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("readme"), "{}", r.desc);
    assert_eq!(t.git_out(&["rev-parse", "main"]), main, "main moved");
    // `--dry-run` refuses the same way.
    t.tab(&["promote", "r1", "--dry-run"]).code(3);
}
