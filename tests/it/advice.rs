//! Advice a person can follow: every hint and next command is right for where it is given and
//! can be pasted as printed; status and start say when this clone and its remote disagree; and
//! nothing exported or handed to an agent names a local directory.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

/// `git tabellio <args…>` as printed in a hint, run in `cwd` as a person would paste it (split
/// on spaces: the commands these tests paste quote nothing). `git -C <dir> tabellio …` too.
fn paste(t: &TestEnv, cwd: &Path, command: &str) -> Run {
    let words: Vec<&str> = command.split(' ').collect();
    assert_eq!(words[0], "git", "{command}");
    t.git_in(cwd, &words[1..])
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap().display().to_string()
}

#[test]
fn loop_without_a_policy_asks_for_one_not_for_a_check_after_the_dashes() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let before = t.snapshot();
    let r = t.tab(&["--json", "loop", "r1", "--", "true"]);
    r.code(2);
    let e = &r.json()["error"];
    let hint = e["hint"].as_str().unwrap();
    assert!(
        !hint.contains("check command after"),
        "the argv after -- is the agent for loop: {hint}"
    );
    assert!(hint.contains(".tabellio/policy.json"), "{hint}");
    assert!(hint.contains("the agent, not a check"), "{hint}");
    assert!(hint.contains("git tabellio loop r1 -- "), "{hint}");
    assert_eq!(t.snapshot(), before, "a refused loop writes nothing");
    // The advice works: with the policy committed on the run branch, the loop runs.
    let wt = t.worktree("r1");
    write_file(
        &wt.join(".tabellio/policy.json"),
        &policy(&[("ok", &["true"])]),
    );
    t.commit_all_in(&wt, "policy");
    t.tab(&["loop", "r1", "--max-loops", "1", "--", "true"])
        .ok();
}

#[test]
fn local_edits_on_the_checked_out_target_are_stashed_not_committed() {
    let t = TestEnv::new();
    t.completed_run("r1", "a.txt");
    t.write("README.md", "my own edit\n");
    let r = t.tab(&["--json", "promote", "r1"]);
    r.code(3);
    let hint = r.json()["error"]["hint"].as_str().unwrap().to_string();
    assert!(!hint.contains("commit or stash"), "{hint}");
    assert!(hint.contains("do not commit there"), "{hint}");
    let repo = canonical(&t.repo);
    let stash = format!("git -C {repo} stash");
    let pop = format!("git -C {repo} stash pop");
    assert!(hint.contains(&format!("`{stash}`")), "{hint}");
    assert!(hint.contains(&format!("`{pop}`")), "{hint}");
    // Followed word for word, from anywhere: the promotion goes through, the edit survives.
    paste(&t, t.path(), &stash).ok();
    t.tab(&["promote", "r1"]).ok();
    paste(&t, t.path(), &pop).ok();
    assert_eq!(
        std::fs::read_to_string(t.repo.join("README.md")).unwrap(),
        "my own edit\n"
    );
    assert_eq!(
        t.git_out(&["rev-parse", "main"]),
        t.git_out(&["rev-parse", "tabellio/r1"])
    );
}

#[test]
fn cleanup_is_suggested_runnable_from_inside_the_run_worktree() {
    let t = TestEnv::new();
    let wt = t.completed_run("r1", "a.txt");
    t.tab(&["promote", "r1"]).ok();
    let repo = canonical(&t.repo);
    let from_inside = format!("git -C {repo} tabellio cleanup r1");

    // From the main worktree the plain command; from inside the worktree it names the main one.
    let st = t.tab(&["--json", "status", "r1"]);
    assert_eq!(
        st.json()["next_action"]["command"],
        "git tabellio cleanup r1"
    );
    let st = t.tab_in(&wt, &["--json", "status"]);
    assert_eq!(st.json()["next_action"]["command"], from_inside.as_str());
    let human = t.tab_in(&wt, &["status"]);
    assert!(human.stdout.contains(&from_inside), "{}", human.stdout);
    // The refusal inside the worktree says the same.
    let r = t.tab_in(&wt, &["--json", "cleanup", "r1"]);
    r.code(3);
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains(&from_inside),
        "{}",
        r.stdout
    );
    // And pasted where it was printed, it works.
    paste(&t, &wt, &from_inside).ok();
    assert!(!wt.exists());

    // `abandon` run inside the worktree points at the same runnable command.
    t.tab(&["start", "r2", "--task", "t"]).ok();
    let wt2 = t.worktree("r2");
    let r = t.tab_in(&wt2, &["abandon", "r2"]);
    r.ok();
    let cmd = format!("git -C {repo} tabellio cleanup r2");
    assert!(r.stdout.contains(&cmd), "{}", r.stdout);
    let r = t.tab_in(&wt2, &["--json", "abandon", "r2"]);
    r.code(3);
    assert!(
        r.json()["error"]["hint"].as_str().unwrap().contains(&cmd),
        "{}",
        r.stdout
    );
    paste(&t, &wt2, &cmd).ok();
    assert!(!wt2.exists());
}

#[test]
fn readme_tour_recommends_cleanup_from_the_main_worktree() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let tour = readme
        .split("## A 60-second tour")
        .nth(1)
        .expect("the tour")
        .split("\n## ")
        .next()
        .unwrap();
    let lines: Vec<&str> = tour.lines().collect();
    let cleanup = lines
        .iter()
        .position(|l| l.starts_with("git tabellio cleanup"))
        .expect("the tour cleans up");
    let into = lines
        .iter()
        .position(|l| l.starts_with("cd .tabellio/worktrees/"))
        .expect("the tour goes into the run worktree");
    let back = lines
        .iter()
        .position(|l| l.starts_with("cd ../../.."))
        .expect("the tour goes back to the main worktree");
    assert!(into < back && back < cleanup, "{tour}");
}

#[test]
fn restart_after_the_target_moved_is_a_command_that_runs_as_printed() {
    let t = TestEnv::new();
    let task = "Make a.txt say r1\n\nwith a second paragraph";
    t.tab(&["start", "r1", "--task", task, "--base", "main"])
        .ok();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "a.txt", "r1\n");
    t.tab(&["finish", "r1", "--", "true"]).ok();
    // The target moves to a change the run cannot replay onto.
    t.commit_file_in(&t.repo, "a.txt", "main\n");
    let st = t.tab(&["--json", "status", "r1"]).json();
    assert_eq!(st["next_action"]["action"], "restart", "{st:#}");
    let cmd = st["next_action"]["command"].as_str().unwrap().to_string();
    assert_eq!(cmd, "git tabellio start --base main --task-from r1");
    assert!(!cmd.contains('<'), "no placeholder: {cmd}");
    paste(&t, &t.repo, &cmd).ok();
    let (_, list) = t.tab_json(&["list"]);
    let runs = list["runs"].as_array().unwrap();
    let new = runs
        .iter()
        .find(|r| r["run_id"] != "r1")
        .unwrap_or_else(|| panic!("no new run: {list:#}"));
    let id = new["run_id"].as_str().unwrap();
    let (_, st) = t.tab_json(&["status", id]);
    assert_eq!(st["run"]["task"]["text"], task);
    assert_eq!(st["run"]["task"]["sha256"], {
        let (_, old) = t.tab_json(&["status", "r1"]);
        old["run"]["task"]["sha256"].clone()
    });
    assert_eq!(
        st["run"]["base"]["commit"].as_str().unwrap(),
        t.git_out(&["rev-parse", "main"])
    );
    // An unknown run is not found, and nothing is started.
    let before = t.snapshot();
    t.tab(&["start", "--task-from", "nope"]).code(5);
    assert_eq!(t.snapshot(), before);
    t.tab(&["start", "x", "--task", "t", "--task-from", "r1"])
        .code(2);
}

#[test]
fn a_torn_start_is_repaired_by_the_command_status_prints() {
    let t = TestEnv::new();
    let lock = t.torn_start("r1");
    let st = t.tab(&["--json", "status", "r1"]).json();
    assert_eq!(st["next_action"]["action"], "start", "{st:#}");
    let cmd = st["next_action"]["command"].as_str().unwrap().to_string();
    assert_eq!(cmd, "git tabellio start r1 --task-from r1");
    paste(&t, &t.repo, &cmd).ok();
    assert!(!lock.exists());
    let (_, st) = t.tab_json(&["status", "r1"]);
    assert_eq!(st["state"], "active", "{st:#}");
    assert_eq!(
        st["run"]["task"]["text"], "t",
        "the task it was started with"
    );
}

/// The entries of `status --json`'s `sync_divergence` as `(ref, relation)`.
fn divergence(t: &TestEnv, run: &str) -> Vec<(String, String)> {
    let st = t.tab(&["--json", "status", run]);
    st.ok();
    st.json()["sync_divergence"]
        .as_array()
        .unwrap_or_else(|| panic!("no sync_divergence: {}", st.stdout))
        .iter()
        .map(|d| {
            (
                d["ref"].as_str().unwrap().to_string(),
                d["relation"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn status_shows_where_this_clone_and_the_remote_differ_with_the_fix() {
    let (_server, a, b) = TestEnv::server_and_two_clones();
    a.commit_policy(&policy(&[("ok", &["true"])]));
    a.git(&["push", "-q", "origin", "main"]).ok();
    a.start_with_commit("r1", "a.txt", "a\n");
    a.tab(&["sync"]).ok();
    assert_eq!(divergence(&a, "r1"), vec![]);

    // A local checkpoint: the ledger is ahead of what origin has.
    a.tab(&["checkpoint", "r1", "-m", "one"]).ok();
    let st = a.tab(&["--json", "status", "r1"]).json();
    let d = &st["sync_divergence"][0];
    assert_eq!(d["ref"], "refs/tabellio/runs/r1", "{st:#}");
    assert_eq!(d["remote"], "origin");
    assert_eq!(d["tracking"], "refs/tabellio/remotes/origin/runs/r1");
    assert_eq!(d["relation"], "ahead");
    assert_eq!(d["fix"], "git tabellio sync origin");
    assert_eq!(
        d["local"].as_str().unwrap(),
        a.git_out(&["rev-parse", "refs/tabellio/runs/r1"])
    );
    let human = a.tab(&["status", "r1"]);
    assert!(
        human
            .stdout
            .contains("sync: refs/tabellio/runs/r1 is ahead of origin: git tabellio sync origin"),
        "{}",
        human.stdout
    );
    // The fix, as printed, resolves it.
    paste(&a, &a.repo, "git tabellio sync origin").ok();
    assert_eq!(divergence(&a, "r1"), vec![]);

    // The other clone finishes nothing but fetches: its copy of the evidence notes is behind.
    a.tab(&["finish", "r1"]).ok();
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    assert_eq!(divergence(&b, "r1"), vec![]);
    a.tab(&["promote", "r1", "--remote", "origin"]).ok();
    // After the remote promotion this clone's main is behind origin's.
    let st = a.tab(&["--json", "status", "r1"]).json();
    let main = st["sync_divergence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["ref"] == "refs/heads/main")
        .unwrap_or_else(|| panic!("main not reported: {st:#}"))
        .clone();
    assert_eq!(main["relation"], "behind");
    assert_eq!(main["tracking"], "refs/remotes/origin/main");
    let fix = main["fix"].as_str().unwrap().to_string();
    assert_eq!(
        fix,
        format!("git -C {} pull --ff-only origin main", canonical(&a.repo))
    );
    // In the other clone, after a fetch, the ledger is behind.
    b.git(&[
        "fetch",
        "-q",
        "origin",
        "+refs/tabellio/runs/*:refs/tabellio/remotes/origin/runs/*",
    ])
    .ok();
    assert!(
        divergence(&b, "r1").contains(&("refs/tabellio/runs/r1".into(), "behind".into())),
        "{:?}",
        divergence(&b, "r1")
    );
    // Both moved the run since they last agreed: diverged, and sync is what reports it.
    b.tab(&["abandon", "r1"]).ok();
    let st = b.tab(&["--json", "status", "r1"]).json();
    let d = &st["sync_divergence"][0];
    assert_eq!(d["ref"], "refs/tabellio/runs/r1", "{st:#}");
    assert_eq!(d["relation"], "diverged", "{st:#}");
    assert_eq!(d["fix"], "git tabellio sync origin", "{st:#}");
    paste(&a, &a.repo, &fix).ok();
    assert!(
        !divergence(&a, "r1")
            .iter()
            .any(|(r, _)| r == "refs/heads/main"),
        "{:?}",
        divergence(&a, "r1")
    );
}

#[test]
fn start_warns_when_the_base_is_behind_its_remote() {
    let (_server, a, _b) = TestEnv::server_and_two_clones();
    a.commit_policy(&policy(&[("ok", &["true"])]));
    a.git(&["push", "-q", "origin", "main"]).ok();
    a.start_with_commit("r1", "a.txt", "a\n");
    a.tab(&["finish", "r1"]).ok();
    // Up to date: no warning.
    let r = a.tab(&["--json", "start", "quiet", "--task", "t"]);
    r.ok();
    assert_eq!(r.json()["warnings"], serde_json::json!([]));
    let r = a.tab(&["start", "quiet2", "--task", "t"]);
    r.ok();
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);

    a.tab(&["promote", "r1", "--remote", "origin"]).ok();
    let stale = a.git_out(&["rev-parse", "main"]);
    let r = a.tab(&["start", "r2", "--task", "t"]);
    r.ok();
    for said in [
        "warning: the base refs/heads/main",
        "behind refs/remotes/origin/main",
        "pull --ff-only origin main",
        "git tabellio sync origin",
    ] {
        assert!(r.stderr.contains(said), "{said:?} not in {}", r.stderr);
    }
    let r = a.tab(&["--json", "start", "r3", "--task", "t"]);
    r.ok();
    let j = r.json();
    let w = j["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{j:#}");
    assert!(w[0].as_str().unwrap().contains("git -C"), "{j:#}");
    assert!(
        r.stderr.is_empty(),
        "--json keeps stderr quiet: {}",
        r.stderr
    );
    // The run still starts, from the local (stale) base, as asked.
    assert_eq!(j["run"]["base"]["commit"], stale.as_str());
    // `-q` is quiet.
    let r = a.tab(&["-q", "start", "r4", "--task", "t"]);
    r.ok();
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

#[test]
fn reconcile_commit_after_a_plain_reconcile_commits_the_staged_moves() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    write_file(&wt.join("plans/done.md"), "# Done\n- [x] it\n");
    write_file(&wt.join("plans/open.md"), "# Open\n- [ ] it\n");
    t.commit_all_in(&wt, "plans");
    let r = t.tab_in(&wt, &["--json", "plans", "reconcile"]);
    r.ok();
    assert_eq!(r.json()["moved"][0]["to"], "plans_completed/done.md");
    let head = t.git_out_in(&wt, &["rev-parse", "HEAD"]);

    let r = t.tab_in(&wt, &["--json", "plans", "reconcile", "--commit"]);
    r.ok();
    let j = r.json();
    assert_eq!(
        j["staged"],
        serde_json::json!([{"from": "plans/done.md", "to": "plans_completed/done.md"}]),
        "{j:#}"
    );
    assert_eq!(j["moved"], serde_json::json!([]));
    let commit = j["commit"].as_str().expect("a commit").to_string();
    assert_eq!(t.git_out_in(&wt, &["rev-parse", "HEAD"]), commit);
    assert_eq!(t.git_out_in(&wt, &["rev-parse", "HEAD^"]), head);
    assert_eq!(
        t.git_out_in(&wt, &["diff", "--name-status", "-M", "HEAD^", "HEAD"]),
        "R100\tplans/done.md\tplans_completed/done.md"
    );
    assert_eq!(t.git_out_in(&wt, &["status", "--porcelain"]), "");

    // Someone's own change beside the staged moves is still refused, and named.
    write_file(&wt.join("plans/open.md"), "# Open\n- [x] it\n");
    t.commit_all_in(&wt, "tick");
    t.tab_in(&wt, &["plans", "reconcile"]).ok();
    write_file(&wt.join("a.txt"), "mine\n");
    t.git_in(&wt, &["add", "a.txt"]).ok();
    let before = t.snapshot();
    let r = t.tab_in(&wt, &["--json", "plans", "reconcile", "--commit"]);
    r.code(3);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("a.txt"), "{msg}");
    assert!(!msg.contains("plans/open.md"), "{msg}");
    assert_eq!(t.snapshot(), before);
    // An edited moved plan is not the tool's move either.
    t.git_in(&wt, &["reset", "-q", "a.txt"]).ok();
    std::fs::remove_file(wt.join("a.txt")).unwrap();
    write_file(
        &wt.join("plans_completed/open.md"),
        "# Open\n- [x] it, edited\n",
    );
    let r = t.tab_in(&wt, &["--json", "plans", "reconcile", "--commit"]);
    r.code(3);
    t.fsck();
}

/// Local directories a check prints, and the environment that names some of them.
struct Leaks {
    env: Vec<(&'static str, String)>,
    /// Strings that must not appear in anything exported or handed on.
    forbidden: Vec<String>,
}

fn leaks(t: &TestEnv) -> Leaks {
    let env = vec![
        ("TMPDIR", "/scratch-4711/tmp".to_string()),
        ("CARGO_TARGET_DIR", "/srv/target-4711".to_string()),
        ("MY_CACHE_DIR", "/srv/cache-4711".to_string()),
    ];
    let mut forbidden = vec![
        "/scratch-4711".to_string(),
        "/srv/target-4711".to_string(),
        "/srv/cache-4711".to_string(),
        "/tmp/".to_string(),
        t.home.display().to_string(),
        t.repo.display().to_string(),
    ];
    forbidden.push(canonical(&t.repo));
    Leaks { env, forbidden }
}

/// A check (python3, no shell) printing $HOME, its working directory, the main repository,
/// paths below $TMPDIR and /tmp, and below two variables' directories; then exiting `code`.
fn leaky_check(t: &TestEnv, code: i32) -> Vec<String> {
    let script = format!(
        "import os\n\
         e = os.environ\n\
         print('home', e['HOME'] + '/notes.txt')\n\
         print('cwd', os.getcwd())\n\
         print('repo', {repo:?} + '/src/main.rs:1:1: error')\n\
         print('tmpdir', e['TMPDIR'] + '/build.log')\n\
         print('tmp', '/tmp/tabellio-test-4711.log')\n\
         print('target', e['CARGO_TARGET_DIR'] + '/debug/app')\n\
         print('cache', e['MY_CACHE_DIR'] + '/obj')\n\
         raise SystemExit({code})\n",
        repo = t.repo.display().to_string(),
    );
    vec!["python3".into(), "-c".into(), script]
}

#[track_caller]
fn assert_scrubbed(leaks: &Leaks, what: &str, text: &str) {
    for f in &leaks.forbidden {
        assert!(!text.contains(f.as_str()), "{what} names {f}:\n{text}");
    }
    for label in [
        "~/notes.txt",
        "<worktree>",
        "<repository>/src/main.rs:1:1: error",
        "<tmp>/build.log",
        "<tmp>/tabellio-test-4711.log",
        "<env:CARGO_TARGET_DIR>/debug/app",
        "<env:MY_CACHE_DIR>/obj",
    ] {
        assert!(text.contains(label), "{what} lacks {label}:\n{text}");
    }
}

#[test]
fn context_and_export_name_no_local_directory() {
    let t = TestEnv::new();
    let l = leaks(&t);
    let env: Vec<(&str, &OsStr)> = l.env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect();
    // Asserting success: what it printed.
    let tab = |args: &[&str]| -> String {
        let r = t.command_with_env(BIN, &t.repo, &env, args);
        r.ok();
        r.stdout
    };
    t.commit_policy(&policy(&[("ok", &["true"])]));
    tab(&["start", "r1", "--task", "t", "--base", "main"]);
    t.commit_file_in(&t.worktree("r1"), "a.txt", "a\n");
    // A failing attempt (its excerpt is what `context` shows), then a passing one.
    let argv = leaky_check(&t, 1);
    let mut args = vec!["finish", "r1", "--check", "leaky", "--"];
    args.extend(argv.iter().map(String::as_str));
    let r = t.command_with_env(BIN, &t.repo, &env, &args);
    r.code(1);
    assert_scrubbed(&l, "context", &tab(&["context", "r1"]));
    assert_scrubbed(
        &l,
        "context --format json",
        &tab(&["context", "r1", "--format", "json"]),
    );
    // It passes, but the policy's `ok` is still missing; then that one.
    let argv = leaky_check(&t, 0);
    let mut args = vec!["finish", "r1", "--check", "leaky", "--"];
    args.extend(argv.iter().map(String::as_str));
    t.command_with_env(BIN, &t.repo, &env, &args).code(1);
    tab(&["finish", "r1"]);
    let doc = tab(&["export", "r1"]);
    assert_scrubbed(&l, "export", &doc);
    // The stored records themselves were sealed scrubbed: the export did not have to.
    let j: Value = serde_json::from_str(&doc).unwrap();
    assert!(
        j["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["paths_scrubbed"] == false && e["valid"] == true),
        "{j:#}"
    );
    tab(&["promote", "r1"]);
    let statement = tab(&["export", "r1", "--format", "in-toto"]);
    for f in &l.forbidden {
        assert!(!statement.contains(f.as_str()), "in-toto names {f}");
    }
}

#[test]
fn the_context_a_loop_hands_its_agent_names_no_local_directory() {
    let t = TestEnv::new();
    let l = leaks(&t);
    let env: Vec<(&str, &OsStr)> = l.env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect();
    let argv = leaky_check(&t, 1);
    t.commit_policy(
        &serde_json::json!({"schema": "tabellio.policy/v1",
            "checks": {"leaky": {"argv": argv, "timeout_s": 60}}, "required": ["leaky"]})
        .to_string(),
    );
    t.start_with_commit("r1", "a.txt", "a\n");
    // The agent keeps a copy of each context it was handed, and changes something each time.
    let agent = t.path().join("agent.py");
    let copies = t.path().join("contexts");
    std::fs::create_dir_all(&copies).unwrap();
    write_file(
        &agent,
        &format!(
            "#!/usr/bin/env python3\nimport os, shutil\n\
             n = os.environ['TABELLIO_ITERATION']\n\
             shutil.copy(os.environ['TABELLIO_CONTEXT'], os.path.join({copies:?}, n + '.md'))\n\
             open('work.txt', 'a').write(n + '\\n')\n",
            copies = copies.display().to_string()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = t.command_with_env(
        BIN,
        &t.repo,
        &env,
        &[
            "loop",
            "r1",
            "--max-loops",
            "2",
            "--",
            agent.to_str().unwrap(),
        ],
    );
    let second = std::fs::read_to_string(copies.join("2.md"))
        .unwrap_or_else(|e| panic!("no second iteration ({e}):\n{}", r.desc));
    assert_scrubbed(&l, "the loop's context", &second);
}
