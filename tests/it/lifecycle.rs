//! The whole life of a run, from the outside, and what stock git sees afterwards.

use crate::util::*;

#[test]
fn start_commit_checkpoint_finish_then_stock_git_reads_it() {
    let t = TestEnv::new();
    let (code, start) = t.tab_json(&[
        "start",
        "r1",
        "--task",
        "Make it say hi\nwith details",
        "--actor",
        "agent:bot",
    ]);
    assert_eq!(code, 0);
    assert_eq!(start["ok"], true);
    assert_eq!(start["run"]["schema"], "tabellio.run/v1");
    assert_eq!(start["run"]["state"], "active");
    assert_eq!(start["run"]["task"]["text"], "Make it say hi\nwith details");
    assert_eq!(start["run"]["actor"]["type"], "agent");
    let wt = t.worktree("r1");
    assert_eq!(start["workspace"], wt.display().to_string());
    assert!(t.git_out(&["worktree", "list"]).contains("[tabellio/r1]"));
    assert!(std::fs::read_to_string(t.repo.join(".git/info/exclude"))
        .unwrap()
        .contains("/.tabellio/worktrees/"));
    // The run worktree is not an untracked directory of the main worktree.
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");

    write_file(&wt.join("hi.txt"), "hi\n");
    t.commit_all_in(&wt, "say hi");
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);

    // From inside the worktree the run id is inferred.
    let cp = t.tab_in(&wt, &["--json", "checkpoint", "-m", "first step"]);
    cp.ok();
    assert_eq!(cp.json()["run"]["checkpoints"][0]["summary"], "first step");
    // Idempotent for the same commit.
    let again = t.tab_in(&wt, &["--json", "checkpoint"]);
    again.ok();
    assert_eq!(again.json()["recorded"], false);

    let fin = t.tab_in(
        &wt,
        &[
            "--json", "finish", "--check", "exists", "--", "test", "-f", "hi.txt",
        ],
    );
    fin.ok();
    let f = fin.json();
    assert_eq!(f["run"]["state"], "completed");
    assert_eq!(f["run"]["validated"]["commit"], head);
    assert_eq!(f["evidence"][0]["status"], "passed");
    assert_eq!(f["evidence"][0]["check"]["name"], "exists");

    // Stock git reads the notes and the ledger.
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    let rec: serde_json::Value = serde_json::from_str(note.lines().next().unwrap()).unwrap();
    assert_eq!(rec["schema"], "tabellio.evidence/v1");
    assert_eq!(rec["commit"], head);
    let tree = t.git_out(&["rev-parse", &format!("{head}^{{tree}}")]);
    assert_eq!(
        t.git_out(&["notes", "--ref=tabellio/evidence", "show", &tree]),
        note
    );
    let log = t.git_out(&["log", "--notes=tabellio/checkpoints", "-1", &head]);
    assert!(
        log.contains("Notes (tabellio/checkpoints):") && log.contains("first step"),
        "{log}"
    );
    let ledger_log = t.git_out(&["log", "--format=%s", "refs/tabellio/runs/r1"]);
    assert_eq!(
        ledger_log.lines().collect::<Vec<_>>(),
        [
            "tabellio: finish r1: active -> completed",
            "tabellio: checkpoint r1: active -> active",
            "tabellio: start r1: (none) -> active"
        ]
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&t.git_out(&["show", "refs/tabellio/runs/r1:run.json"])).unwrap();
    assert_eq!(run_json["state"], "completed");

    // Status says what to do next.
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "completed");
    assert_eq!(st["previous_state"], "active");
    assert_eq!(st["next_action"]["action"], "promote");
    assert_eq!(st["satisfied_evidence"], serde_json::json!(["exists"]));
    assert_eq!(st["missing_evidence"], serde_json::json!([]));
    assert!(st["allowed_actions"]
        .as_array()
        .unwrap()
        .contains(&"promote".into()));

    let (_, evidence) = t.tab_json(&["evidence", &head]);
    assert_eq!(evidence["records"][0]["valid"], true);
    let (_, list) = t.tab_json(&["list", "--state", "completed"]);
    assert_eq!(list["runs"][0]["run_id"], "r1");
    let (_, log) = t.tab_json(&["log", "r1"]);
    assert_eq!(log["log"].as_array().unwrap().len(), 3);

    // A check that prints where it runs: the stored excerpt names no local path.
    let wt_pwd = t.tab_in(&wt, &["--json", "finish", "--check", "where", "--", "pwd"]);
    wt_pwd.ok();
    assert_eq!(
        wt_pwd.json()["evidence"][0]["output"]["excerpt"],
        "<worktree>\n"
    );

    t.fsck();
    assert_no_local_paths(&t);
}

/// Working through a symlink: a shell's `$PWD` is the logical spelling, which names no
/// directory the repository knows. The check still sees where it runs, and the logical
/// spelling of known directories is scrubbed too.
#[test]
fn a_symlinked_working_directory_leaves_no_path_in_evidence() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let link = t.path().join("link");
    std::os::unix::fs::symlink(t.path(), &link).unwrap();
    let logical = link
        .join("repo")
        .join(".tabellio")
        .join("worktrees")
        .join("r1");
    let in_link =
        |args: &[&str]| t.command_with_env(BIN, &logical, &[("PWD", logical.as_os_str())], args);

    let r = in_link(&[
        "--json", "finish", "--check", "pwd", "--", "printenv", "PWD",
    ]);
    r.ok();
    assert_eq!(r.json()["evidence"][0]["output"]["excerpt"], "<worktree>\n");

    let file = logical.join("a.txt").display().to_string();
    let readme = link.join("repo").join("README.md").display().to_string();
    let r = in_link(&[
        "--json", "finish", "--check", "echo", "--", "echo", &file, &readme,
    ]);
    r.ok();
    let evidence = &r.json()["evidence"][0];
    assert_eq!(
        evidence["output"]["excerpt"],
        "<worktree>/a.txt <repository>/README.md\n"
    );
    assert_eq!(
        evidence["check"]["argv"],
        serde_json::json!(["echo", "<worktree>/a.txt", "<repository>/README.md"])
    );
    assert_no_local_paths(&t);
}

/// No object reachable from our refs mentions the test machine's paths.
pub fn assert_no_local_paths(t: &TestEnv) {
    let objects = t.git_out(&[
        "rev-list",
        "--objects",
        "--no-object-names",
        "--glob=refs/tabellio/*",
        "--glob=refs/notes/tabellio/*",
    ]);
    let root = t.path().to_str().unwrap().to_string();
    for oid in objects.lines() {
        let kind = t.git_out(&["cat-file", "-t", oid]);
        if kind == "tree" {
            continue;
        }
        let body = t.git_out(&["cat-file", "-p", oid]);
        assert!(
            !body.contains(&root) && !body.contains("/tmp/"),
            "object {oid} holds a local path:\n{body}"
        );
    }
}

#[test]
fn failing_then_passing_finish_with_a_policy() {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("hi", &["test", "-f", "hi.txt"])]));
    let wt = t.start_with_commit("r1", "other.txt", "x\n");
    let fail = t.tab(&["--json", "finish", "r1"]);
    fail.code(1);
    let j = fail.json();
    assert_eq!(j["run"]["state"], "validation_failed");
    assert_eq!(j["verdict"], "failed");
    assert_eq!(j["evidence"][0]["exit_code"], 1);
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["missing_evidence"], serde_json::json!(["hi"]));

    write_file(&wt.join("hi.txt"), "hi\n");
    t.commit_all_in(&wt, "fix");
    let pass = t.tab(&["--json", "finish", "r1"]);
    pass.ok();
    let j = pass.json();
    assert_eq!(j["run"]["state"], "completed");
    assert_eq!(j["run"]["previous_state"], "validation_failed");
    assert_eq!(j["run"]["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(j["run"]["attempts"][0]["status"], "failed");
    assert_eq!(j["run"]["attempts"][1]["status"], "passed");
    t.fsck();
}

#[test]
fn abandon_and_cleanup() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab(&["abandon", "r1", "-m", "wrong approach"]).ok();
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "abandoned");
    assert_eq!(st["run"]["reason"], "wrong approach");
    assert_eq!(st["next_action"]["action"], "cleanup");
    // Unmerged commits of an abandoned run need --force.
    let before = t.snapshot();
    t.tab(&["cleanup", "r1"]).code(3);
    assert_eq!(before, t.snapshot());
    t.tab(&["cleanup", "r1", "--force"]).ok();
    assert!(!wt.exists());
    assert!(
        t.git(&["rev-parse", "--verify", "-q", "refs/heads/tabellio/r1"])
            .code
            != 0
    );
    // The ledger stays: history is kept.
    t.git_out(&["rev-parse", "refs/tabellio/runs/r1"]);
    t.tab(&["abandon", "r1"]).code(3);
    t.fsck();
}

/// The common end of a run: promoted, then cleaned up without `--force`. With reftable the
/// worktree is removed by git (gix cannot read its `HEAD`): once this exited 70 there.
#[test]
fn a_promoted_run_is_cleaned_up_without_force() {
    let t = TestEnv::ref_only();
    t.completed_run("r1", "a.txt");
    t.tab(&["promote", "r1"]).ok();
    let wt = t.worktree("r1");
    assert!(wt.exists());
    t.tab(&["cleanup", "r1"]).ok();
    assert!(!wt.exists(), "the worktree is removed");
    assert!(!t.git_out(&["worktree", "list"]).contains("[tabellio/r1]"));
    assert!(
        t.git(&["rev-parse", "--verify", "-q", "refs/heads/tabellio/r1"])
            .code
            != 0,
        "the run branch is deleted"
    );
    t.git_out(&["rev-parse", "refs/tabellio/runs/r1"]);
    t.fsck();
}

#[test]
fn works_without_any_configured_identity() {
    let t = TestEnv::new();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["--json", "start", "r1", "--task", "t"])
        .current_dir(&t.repo);
    hermetic(&mut cmd, &t.home);
    for k in [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
    ] {
        cmd.env_remove(k);
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let author = t.git_out(&["log", "-1", "--format=%an <%ae>", "refs/tabellio/runs/r1"]);
    assert_eq!(author, "tabellio <tabellio@localhost>");
}

#[test]
fn git_dash_c_and_custom_branch() {
    let t = TestEnv::new();
    let outside = t.path().to_path_buf();
    let r = t.tab_in(
        &outside,
        &[
            "--json", "start", "r2", "--task", "t", "--branch", "work/r2",
        ],
    );
    // Not a repository here: not found.
    assert_eq!(r.code, 5, "{}", r.desc);
    // Through git itself, from outside, with -C.
    let r = t.command(
        "git",
        &outside,
        &[
            "-C",
            t.repo.to_str().unwrap(),
            "tabellio",
            "--json",
            "start",
            "r2",
            "--task",
            "t",
            "--branch",
            "work/r2",
        ],
    );
    r.ok();
    assert_eq!(r.json()["run"]["branch"], "refs/heads/work/r2");
    let wt = t.worktree("r2");
    write_file(&wt.join("f"), "x");
    t.commit_all_in(&wt, "f");
    // Inferred from a custom branch too.
    let st = t.tab_in(&wt, &["--json", "status"]);
    st.ok();
    assert_eq!(st.json()["run"]["run_id"], "r2");
}

/// A teammate's newer ledger schema (fetched by sync) is reported, not fatal to the listing.
#[test]
fn list_reports_an_unreadable_ledger_and_lists_the_rest() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "first"]).ok();
    t.tab(&["start", "r2", "--task", "second"]).ok();
    t.forge_ledger("r2", "edited by hand", |run| {
        run["schema"] = "tabellio.run/v9".into()
    });
    for args in [&["list"][..], &["list", "--state", "active"]] {
        let (code, j) = t.tab_json(args);
        assert_eq!(code, 0, "{j}");
        let ids: Vec<&str> = j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["r1"], "{j}");
        let unreadable = j["unreadable"].as_array().unwrap();
        assert_eq!(unreadable.len(), 1, "{j}");
        assert_eq!(unreadable[0]["run_id"], "r2");
        let message = unreadable[0]["message"].as_str().unwrap();
        assert!(message.contains("\"tabellio.run/v9\""), "{message}");
    }
    let r = t.tab(&["list"]);
    r.ok();
    assert!(r.stdout.lines().any(|l| l.starts_with("r1 ")), "{}", r.desc);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("r2 ") && l.contains("unreadable") && l.contains("v9")),
        "{}",
        r.desc
    );
}

/// `evidence` on a tree shows the records noted on it; unreadable lines say what they are.
#[test]
fn evidence_reads_trees_and_names_unreadable_lines() {
    let t = TestEnv::new();
    let wt = t.start_with_commit("r1", "a.txt", "a\n");
    t.tab_in(&wt, &["finish", "--check", "ok", "--", "true"])
        .ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    let tree = t.git_out(&["rev-parse", "tabellio/r1^{tree}"]);
    for rev in ["tabellio/r1^{tree}", tree.as_str()] {
        let (code, j) = t.tab_json(&["evidence", rev]);
        assert_eq!(code, 0, "{j}");
        assert_eq!(j["commit"], serde_json::Value::Null, "{j}");
        assert_eq!(j["tree"], tree);
        assert_eq!(j["records"].as_array().unwrap().len(), 1, "{j}");
        assert_eq!(j["records"][0]["valid"], true);
        assert_eq!(j["records"][0]["record"]["check"]["name"], "ok");
    }
    let r = t.tab(&["evidence", &tree]);
    r.ok();
    assert!(
        r.stdout.starts_with(&format!("tree {tree}: 1 record(s)")),
        "{}",
        r.desc
    );
    // A blob is neither.
    let blob = t.git_out(&["rev-parse", "tabellio/r1:a.txt"]);
    t.tab(&["evidence", &blob]).code(2);

    for line in [r#"{"schema":"tabellio.evidence/v2","x":1}"#, "garbage"] {
        t.git(&[
            "notes",
            "--ref=tabellio/evidence",
            "append",
            "-m",
            line,
            &head,
        ])
        .ok();
    }
    let (code, j) = t.tab_json(&["evidence", &head]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["commit"], head);
    let problems: Vec<&str> = j["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["problem"].as_str())
        .collect();
    assert_eq!(
        problems,
        // Lines are sorted: `garbage` before `{…}`.
        ["not JSON", "unknown schema \"tabellio.evidence/v2\""],
        "{j}"
    );
    let r = t.tab(&["evidence", &head]);
    r.ok();
    assert!(
        r.stdout
            .contains("unreadable record: unknown schema \"tabellio.evidence/v2\"\n")
            && r.stdout.contains("unreadable record: not JSON\n"),
        "{}",
        r.desc
    );
}

/// A relative `tabellio.worktreeRoot` inside the main worktree is excluded like the default.
#[test]
fn a_relative_worktree_root_is_excluded() {
    let t = TestEnv::new();
    t.git(&["config", "tabellio.worktreeRoot", "wts"]).ok();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    assert!(t.repo.join("wts/r1/README.md").is_file());
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    t.tab(&["start", "r2", "--task", "t"]).ok();
    let exclude = std::fs::read_to_string(t.repo.join(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.lines().filter(|l| *l == "/wts/").count(),
        1,
        "{exclude}"
    );
    assert_eq!(t.git_out(&["status", "--porcelain"]), "");
    // A root outside the main worktree adds nothing.
    let outside = t.path().join("elsewhere");
    t.git(&["config", "tabellio.worktreeRoot", outside.to_str().unwrap()])
        .ok();
    t.tab(&["start", "r3", "--task", "t"]).ok();
    assert!(outside.join("r3").is_dir());
    assert_eq!(
        std::fs::read_to_string(t.repo.join(".git/info/exclude")).unwrap(),
        exclude
    );
}

#[test]
fn checks_picked_by_hand_do_not_complete_a_run_whose_policy_requires_others() {
    let t = TestEnv::new();
    t.write(".tabellio/policy.json", &policy(&[("test", &["true"])]));
    t.git(&["add", "-A"]).ok();
    t.git(&["commit", "-q", "-m", "policy"]).ok();
    t.start_with_commit("p2", "a.txt", "a\n");
    let r = t.tab(&["--json", "finish", "p2", "--check", "garbage", "--", "true"]);
    r.code(1);
    let j = r.json();
    assert_eq!(j["run"]["state"], "validation_failed");
    assert!(j["run"]["reason"].as_str().unwrap().contains("test"), "{j}");
    // The required check itself completes it.
    t.tab(&["finish", "p2"]).ok();
}

#[test]
fn a_run_worktree_of_a_thousand_files_sees_changes_as_a_small_one_does() {
    // A worktree under 1,000 index entries is compared in the calling thread, one of 1,000 or
    // more by gix's threaded status: `status`, `checkpoint` and `finish` see the same either way.
    let t = TestEnv::ref_only();
    let small = t.started_run("small", "a.txt");
    let large = t.started_run("large", "a.txt");
    for i in 0..1_000 {
        write_file(&large.join(format!("d/f{i}.txt")), "x\n");
    }
    t.git_in(&large, &["add", "-A"]).ok();
    t.git_in(&large, &["commit", "-q", "-m", "many"]).ok();
    let entries = t.git_out_in(&large, &["ls-files"]).lines().count();
    assert!(entries > 1_000, "{entries} entries");

    for (id, wt) in [("small", &small), ("large", &large)] {
        write_file(&wt.join("a.txt"), "changed\n");
        write_file(&wt.join("staged.txt"), "s\n");
        t.git_in(wt, &["add", "staged.txt"]).ok();
        write_file(&wt.join("new/untracked.txt"), "n\n");
        // Asked in the worktree, in a directory of it, and from the main worktree by the run's
        // name: the same paths, relative to the run worktree's top.
        let asked = [
            t.tab_in(wt, &["--json", "status"]),
            t.tab_in(&wt.join("new"), &["--json", "status"]),
            t.tab(&["--json", "status", id]),
        ];
        for r in asked {
            let live = r.json()["live"].clone();
            assert_eq!(
                (&live["dirty"], &live["untracked"]),
                (
                    &serde_json::json!(["a.txt", "staged.txt"]),
                    &serde_json::json!(["new/untracked.txt"])
                ),
                "{}",
                wt.display()
            );
        }
        let before = t.snapshot();
        t.tab_in(wt, &["checkpoint"]).code(3);
        t.tab_in(wt, &["finish", "--", "true"]).code(3);
        assert_eq!(t.snapshot(), before, "a refused command writes nothing");
        t.git_in(wt, &["add", "-A"]).ok();
        t.git_in(wt, &["commit", "-q", "-m", "all"]).ok();
        t.tab_in(wt, &["checkpoint"]).ok();
    }
}

/// A symbolic ref at the run branch's name (pointing anywhere, or nowhere) is a branch that
/// exists: `start` refuses before writing anything, with the same words on both ref backends.
#[test]
fn start_refuses_a_symbolic_ref_at_the_run_branch_name_and_writes_nothing() {
    let t = TestEnv::new();
    for to in ["refs/heads/main", "refs/heads/nowhere"] {
        t.git(&["symbolic-ref", "refs/heads/tabellio/r1", to]).ok();
        let before = t.snapshot();
        let (code, j) = t.tab_json(&["start", "r1", "--task", "x"]);
        assert_eq!(code, 2, "{j}");
        assert_eq!(
            j["error"]["message"],
            format!("branch refs/heads/tabellio/r1 already exists: it is a symbolic ref to {to}")
        );
        assert!(
            j["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("git symbolic-ref -d refs/heads/tabellio/r1"),
            "{j}"
        );
        assert_eq!(before, t.snapshot());
    }
    // The hint, followed.
    t.git(&["symbolic-ref", "-d", "refs/heads/tabellio/r1"])
        .ok();
    t.tab(&["start", "r1", "--task", "x"]).ok();
}

/// `status` with no run named, outside every run's worktree, is an overview of the runs (like
/// `git status` for the whole repository), not an error; inside a run's worktree it is that run.
#[test]
fn status_outside_a_run_is_an_overview_of_every_run() {
    let t = TestEnv::ref_only();
    let (code, j) = t.tab_json(&["status"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["overview"], true);
    assert_eq!(j["runs"], serde_json::json!([]));
    assert!(t.tab(&["status"]).stdout.contains("no runs yet"));
    let wt1 = t.started_run("r1", "a.txt");
    t.completed_run("r2", "b.txt");
    t.completed_run("r3", "c.txt");
    t.tab(&["promote", "r3"]).ok();
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["status"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(before, t.snapshot(), "status wrote something");
    assert_eq!(
        j["by_state"],
        serde_json::json!({"active": 1, "completed": 1, "promoted": 1})
    );
    let runs = j["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["r1", "r2"], "the runs that have not ended: {j}");
    // Each with the next action `status <run>` gives.
    for r in runs {
        let id = r["run_id"].as_str().unwrap();
        let one = t.tab_json(&["status", id]).1;
        assert_eq!(r["next_action"], one["next_action"], "{id}");
    }
    let human = t.tab(&["status"]).stdout;
    assert!(
        human.contains("runs: 1 active, 1 completed, 1 promoted"),
        "{human}"
    );
    assert!(human.contains("r2  completed"), "{human}");
    // Inside a run's worktree, status is that run.
    let here = t.tab_in(&wt1, &["--json", "status"]).json();
    assert_eq!(here["run"]["run_id"], "r1");
}

#[test]
fn windows_style_origins_never_reach_the_stored_repository_id() {
    for (i, url) in [
        r"C:\Users\agent\secret.git",
        "D:/x/secret.git",
        r"\\server\share\secret.git",
    ]
    .into_iter()
    .enumerate()
    {
        let t = TestEnv::new();
        t.git(&["remote", "add", "origin", url]).ok();
        let id = format!("r{i}");
        t.tab(&["start", &id, "--task", "t"]).ok();
        let run = t.git_out(&["show", &format!("refs/tabellio/runs/{id}:run.json")]);
        let run: serde_json::Value = serde_json::from_str(&run).unwrap();
        let repository = run["repository"].as_str().unwrap();
        assert!(
            repository.starts_with("local/")
                && !repository.contains("secret")
                && !repository.contains("Users")
                && !repository.contains("server"),
            "{url} became {repository}"
        );
    }
}

#[test]
fn a_symbolic_base_resolves_to_the_branch_it_names() {
    let t = TestEnv::ref_only();
    t.git(&["branch", "-m", "main", "trunk"]).ok();
    t.git(&["symbolic-ref", "refs/heads/main", "refs/heads/trunk"])
        .ok();
    let r = t.tab(&["start", "r1", "--task", "t", "--base", "main"]);
    r.ok();
    assert!(
        r.stdout.contains("refs/heads/trunk") && r.stdout.contains("refs/heads/main"),
        "{}",
        r.desc
    );
    let run = t.git_out(&["show", "refs/tabellio/runs/r1:run.json"]);
    let run: serde_json::Value = serde_json::from_str(&run).unwrap();
    assert_eq!(run["base"]["ref"], "refs/heads/trunk");
    let (code, st) = t.tab_json(&["start", "r2", "--task", "t", "--base", "main"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["base_via"], "refs/heads/main", "{st}");
    // The branch it names is what promotion moves; `main` follows it.
    t.commit_file_in(&t.worktree("r1"), "a.txt", "a\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    t.tab(&["promote", "r1"]).ok();
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    assert_eq!(t.git_out(&["rev-parse", "trunk"]), head);
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    assert_eq!(
        t.git_out(&["symbolic-ref", "refs/heads/main"]),
        "refs/heads/trunk"
    );
}

/// Statements of docs/lifecycle.md, docs/storage.md and docs/loop.md that are easy to get wrong.
#[test]
fn generated_ids_default_actor_summary_and_context_keys_are_as_documented() {
    let t = TestEnv::new();
    // Without a run id: `r`, the UTC time as yymmddHHMMSS, `-`, 4 hex digits. Without
    // `--actor`: a human by the canonical id, the committer's email (never `$USER`).
    let long_task = format!("{}\nsecond line", "x".repeat(100));
    let r = t.command_with_env(
        BIN,
        &t.repo,
        &[("USER", std::ffi::OsStr::new(""))],
        &["--json", "start", "--task", &long_task],
    );
    r.ok();
    let run = &r.json()["run"];
    let id = run["run_id"].as_str().unwrap();
    let (stamp, salt) = id[1..].split_once('-').unwrap();
    assert!(
        id.starts_with('r')
            && stamp.len() == 12
            && stamp.bytes().all(|b| b.is_ascii_digit())
            && salt.len() == 4
            && salt.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(run["actor"]["type"], "human");
    assert_eq!(run["actor"]["id"], "committer@example.com");
    assert_eq!(run["initiator"], "committer@example.com");
    // The summary: the first non-empty line, cut at 72 characters, an ellipsis appended.
    assert_eq!(run["task"]["summary"], format!("{}…", "x".repeat(72)));

    // `--json context`: the packet, plus `markdown` unless `--format json`.
    let (_, j) = t.tab_json(&["context", id]);
    assert!(j["context"].is_object() && j["markdown"].is_string(), "{j}");
    let (_, j) = t.tab_json(&["context", id, "--format", "json"]);
    assert!(
        j["context"].is_object() && j.get("markdown").is_none(),
        "{j}"
    );
}

#[test]
fn branch_names_git_refuses_are_refused_before_anything_is_written() {
    let t = TestEnv::new();
    let before = t.snapshot();
    for name in [
        "HEAD",
        "refs/heads/HEAD",
        "-x",
        "a..b",
        "x.lock",
        "a/.b",
        "@",
        "a@{1}",
        "a//b",
        "tail/",
    ] {
        let flag = format!("--branch={name}");
        let r = t.tab(&["--json", "start", "r1", "--task", "t", &flag]);
        r.code(2);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("not a valid branch name"), "{}", r.desc);
        assert_eq!(t.snapshot(), before, "{name:?}: something was written");
        assert!(!t.worktree("r1").exists(), "{name:?}: a worktree was made");
    }
    // Names git accepts still work.
    t.tab(&["start", "r1", "--task", "t", "--branch=feature/x@y"])
        .ok();
    assert_eq!(
        t.git(&["rev-parse", "-q", "--verify", "refs/heads/feature/x@y"])
            .code,
        0
    );
}
