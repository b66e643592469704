//! Retention: `gc` archives runs that ended into `refs/tabellio/archive/<month>`, removes their
//! branches and worktrees, and keeps them readable (`log`, `status`, `export`, `list --state`,
//! `verify`); the archive travels with `sync`; a `gc` killed anywhere loses nothing and the
//! next one finishes; a bare server archives the same way.

use crate::crash::{land_trials, random_delay_up_to};
use crate::util::*;

/// The month refs of the archive, by name.
fn archive_refs(t: &TestEnv) -> Vec<String> {
    t.git_out(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/tabellio/archive/",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// `<month> <archive commit>` of every archive month, as the archive index lists what it
/// covers.
fn months_listing(t: &TestEnv) -> String {
    archive_refs(t)
        .iter()
        .map(|name| {
            let month = name.trim_start_matches("refs/tabellio/archive/");
            format!("{month} {}\n", t.git_out(&["rev-parse", name]))
        })
        .collect()
}

/// What the archive index says it covers (`months` in its tree).
fn index_months(t: &TestEnv) -> String {
    let mut out = t.git_out(&["show", "refs/tabellio/archive-index:months"]);
    out.push('\n');
    out
}

/// `r1` promoted onto `main` (with evidence), `r2` abandoned with a commit of its own, `r3`
/// active: the ledger tips of r1 and r2.
fn two_ended_runs_and_one_active(t: &TestEnv) -> (String, String) {
    t.completed_run("r1", "one.txt");
    t.tab(&["promote", "r1"]).ok();
    t.started_run("r2", "two.txt");
    t.tab(&["abandon", "r2", "-m", "not needed"]).ok();
    t.tab(&["start", "r3", "--task", "still going"]).ok();
    (
        t.git_out(&["rev-parse", "refs/tabellio/runs/r1"]),
        t.git_out(&["rev-parse", "refs/tabellio/runs/r2"]),
    )
}

#[test]
fn gc_archives_ended_runs_which_stay_readable() {
    let t = TestEnv::new();
    let (r1_tip, r2_tip) = two_ended_runs_and_one_active(&t);
    let r1_log = t.tab(&["log", "r1"]).ok().stdout.clone();
    let r1_export = t.tab_json(&["export", "r1"]).1;

    let (code, out) = t.tab_json(&["gc", "--archive-after", "0"]);
    assert_eq!(code, 0, "{out}");
    let archived: Vec<&str> = out["archived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(archived, ["r1", "r2"], "{out}");

    // The live refs of the ended runs are gone; the active run is untouched.
    let refs = t.git_out(&["for-each-ref", "--format=%(refname)"]);
    for gone in [
        "refs/tabellio/runs/r1",
        "refs/tabellio/runs/r2",
        "refs/heads/tabellio/r1",
        "refs/heads/tabellio/r2",
    ] {
        assert!(!refs.lines().any(|l| l == gone), "{gone} left:\n{refs}");
    }
    assert!(refs.contains("refs/tabellio/runs/r3"), "{refs}");
    assert!(!t.worktree("r1").exists() && !t.worktree("r2").exists());
    assert!(t.worktree("r3").exists());
    let months = archive_refs(&t);
    assert_eq!(months.len(), 1, "{months:?}");

    // Stock git reads the archive: the ledgers' whole chains, each run's entry.
    let log = t.git_out(&["log", "--format=%s", &months[0]]);
    for subject in [
        "tabellio: start r1: (none) -> active",
        "tabellio: promote r1: completed -> promoted",
        "tabellio: abandon r2: active -> abandoned",
    ] {
        assert!(log.contains(subject), "{subject} not in\n{log}");
    }
    let tree = t.git_out(&["ls-tree", "-r", "--name-only", &months[0]]);
    let entry_path = tree.lines().find(|l| l.ends_with("/r1.json")).unwrap();
    let entry: serde_json::Value =
        serde_json::from_str(&t.git_out(&["show", &format!("{}:{entry_path}", months[0])]))
            .unwrap();
    assert_eq!(entry["schema"], "tabellio.archived-run/v1");
    assert_eq!(entry["ledger"], r1_tip.as_str());
    assert_eq!(entry["state"], "promoted");

    // The commands that read runs read archived ones.
    assert_eq!(t.tab(&["log", "r1"]).ok().stdout, r1_log);
    let mut export = t.tab_json(&["export", "r1"]).1;
    let mut before = r1_export.clone();
    for doc in [&mut export, &mut before] {
        doc.as_object_mut().unwrap().remove("integrity");
        doc.as_object_mut().unwrap().remove("exported_at");
    }
    assert_eq!(export["ledger"], before["ledger"]);
    assert_eq!(export["run"], before["run"]);
    let (code, st) = t.tab_json(&["status", "r2"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["state"], "abandoned");
    assert_eq!(st["archived"], months[0].as_str());
    assert_eq!(st["run"]["run_id"], "r2");
    let listed = t.tab_json(&["list"]).1;
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r3"], "plain list shows live runs: {listed}");
    let promoted = t.tab_json(&["list", "--state", "promoted"]).1;
    assert_eq!(promoted["runs"][0]["run_id"], "r1", "{promoted}");
    assert_eq!(promoted["runs"][0]["archived"], months[0].as_str());
    let all = t.tab_json(&["list", "--state", "archived"]).1;
    assert_eq!(all["runs"].as_array().unwrap().len(), 2, "{all}");
    t.tab(&["verify", "main"]).ok();

    // Archived runs are read-only, and their ids stay taken.
    t.tab(&["finish", "r2", "--", "true"]).code(3);
    t.tab(&["start", "r1", "--task", "again"]).code(2);
    assert_ne!(r2_tip, "");
    t.fsck();
}

/// The archive index (`refs/tabellio/archive-index`) holds every archived run's entry, the very
/// blob of its month, at `runs/<xx>/<yy>/<id>.json`, and lists the month tips it covers. An
/// index behind the months (an older one put back) is not trusted: the months are searched,
/// and the next `gc` brings it up to date.
#[test]
fn the_archive_index_finds_archived_runs_and_one_behind_the_months_is_not_trusted() {
    let t = TestEnv::new();
    t.completed_run("r1", "one.txt");
    t.tab(&["promote", "r1"]).ok();
    t.tab(&["gc", "--archive-after", "0"]).ok();
    let first = t.git_out(&["rev-parse", "refs/tabellio/archive-index"]);
    assert_eq!(index_months(&t), months_listing(&t));
    t.started_run("r2", "two.txt");
    t.tab(&["abandon", "r2"]).ok();
    t.tab(&["gc", "--archive-after", "0"]).ok();
    assert_eq!(index_months(&t), months_listing(&t));
    let month = archive_refs(&t)[0].clone();
    let index = t.git_out(&["ls-tree", "-r", "refs/tabellio/archive-index"]);
    for id in ["r1", "r2"] {
        let line = index
            .lines()
            .find(|l| l.ends_with(&format!("/{id}.json")))
            .unwrap_or_else(|| panic!("{id} not in the index:\n{index}"));
        let (meta, path) = line.split_once('\t').unwrap();
        let parts: Vec<&str> = path.split('/').collect();
        assert_eq!(parts.len(), 4, "{path}");
        assert_eq!((parts[0], parts[1].len(), parts[2].len()), ("runs", 2, 2));
        let in_month = t.git_out(&["rev-parse", &format!("{month}:runs/{}/{id}.json", parts[1])]);
        assert!(meta.ends_with(&in_month), "{line} against {in_month}");
    }
    let current = t.git_out(&["rev-parse", "refs/tabellio/archive-index"]);

    // The first index, which knows r1 only, put back: r2 is still found, its id still taken.
    t.git(&["update-ref", "refs/tabellio/archive-index", &first])
        .ok();
    let (code, st) = t.tab_json(&["status", "r2"]);
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["archived"], month.as_str(), "{st}");
    t.tab(&["start", "r2", "--task", "again"]).code(2);
    t.tab(&["log", "r2"]).ok();
    // Nothing to archive, but gc brings the index up to date: the same tree as before.
    t.tab(&["gc", "--archive-after", "0"]).ok();
    assert_eq!(index_months(&t), months_listing(&t));
    assert_eq!(
        t.git_out(&["rev-parse", "refs/tabellio/archive-index^{tree}"]),
        t.git_out(&["rev-parse", &format!("{current}^{{tree}}")])
    );
    // Without an index at all, the same.
    t.git(&["update-ref", "-d", "refs/tabellio/archive-index"])
        .ok();
    t.tab(&["start", "r1", "--task", "again"]).code(2);
    t.tab(&["gc", "--archive-after", "0"]).ok();
    assert_eq!(index_months(&t), months_listing(&t));
    t.fsck();
}

#[test]
fn gc_dry_run_and_bad_ages_write_nothing() {
    let t = TestEnv::new();
    two_ended_runs_and_one_active(&t);
    let before = t.snapshot();
    let (code, out) = t.tab_json(&["gc", "--archive-after", "0", "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["archived"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(t.snapshot(), before);
    for bad in ["90", "3m", "-1d", ""] {
        let (code, out) = t.tab_json(&["gc", "--archive-after", bad]);
        assert_eq!(code, 2, "{bad}: {out}");
        assert!(out["error"]["hint"].as_str().is_some(), "{out}");
    }
    assert_eq!(t.snapshot(), before);
    // Runs that ended within the age stay.
    let (code, out) = t.tab_json(&["gc", "--archive-after", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["archived"].as_array().unwrap().len(), 0, "{out}");
    assert_eq!(t.snapshot(), before);
}

#[test]
fn a_run_with_uncommitted_work_is_kept_and_says_why() {
    let t = TestEnv::new();
    t.started_run("r1", "one.txt");
    t.tab(&["abandon", "r1"]).ok();
    write_file(&t.worktree("r1").join("wip.txt"), "not committed\n");
    let before = t.snapshot();
    let (code, out) = t.tab_json(&["gc", "--archive-after", "0"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["archived"].as_array().unwrap().len(), 0, "{out}");
    assert_eq!(out["kept"][0]["run_id"], "r1");
    assert!(
        out["kept"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("uncommitted changes"),
        "{out}"
    );
    assert_eq!(t.snapshot(), before);
    assert!(t.worktree("r1").join("wip.txt").exists());
}

#[test]
fn the_policy_sets_the_age_and_prunes_notes_nothing_reaches() {
    let t = TestEnv::new();
    t.commit_policy(
        &serde_json::json!({
            "schema": "tabellio.policy/v1",
            "checks": {"ok": {"argv": ["true"], "timeout_s": 30}},
            "required": ["ok"],
            "retention": {"archive_after": "0", "notes": "prune"}
        })
        .to_string(),
    );
    t.started_run("kept", "kept.txt");
    t.tab(&["finish", "kept"]).ok();
    t.tab(&["promote", "kept"]).ok();
    let promoted = t.git_out(&["rev-parse", "main"]);
    t.started_run("dropped", "dropped.txt");
    t.tab(&["finish", "dropped"]).ok();
    let dropped = t.git_out(&["rev-parse", "tabellio/dropped"]);
    t.tab(&["abandon", "dropped"]).ok();
    let (code, out) = t.tab_json(&["gc"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["archive_after"], "0", "{out}");
    assert_eq!(out["archived"].as_array().unwrap().len(), 2, "{out}");
    assert!(
        out["notes"]["pruned"]["refs/notes/tabellio/evidence"].as_u64() >= Some(1),
        "{out}"
    );
    // The abandoned run's commit is reached by nothing: its notes went (commit and tree).
    t.git(&["notes", "--ref=tabellio/evidence", "show", &dropped])
        .code(1);
    // The promoted commit is on main: its evidence stays, and main still verifies.
    t.git(&["notes", "--ref=tabellio/evidence", "show", &promoted])
        .ok();
    t.tab(&["verify", "main"]).ok();
    t.fsck();
    // An invalid age in the policy is refused where the policy is read.
    let mut bad =
        serde_json::json!({"schema": "tabellio.policy/v1", "retention": {"archive_after": "soon"}});
    t.commit_policy(&bad.to_string());
    let (code, out) = t.tab_json(&["gc"]);
    assert_eq!(code, 2, "{out}");
    assert!(out["error"]["message"]
        .as_str()
        .unwrap()
        .contains("retention.archive_after"));
    bad["retention"] = serde_json::json!({"archive_after": "1d"});
    t.commit_policy(&bad.to_string());
    t.tab(&["gc"]).ok();
}

/// Both clones archive runs of the same month; `sync` merges the two archives (every run of
/// both, both chains reachable), the server receives the archive, and a run one side archived
/// is not brought back to life by the other's live copy. The server archives too (`gc` in the
/// bare repository, as docs/hooks.md tells a server to run it), and its pre-receive hook
/// refuses a push that would drop archived runs.
#[test]
fn the_archive_travels_with_sync_and_a_server_archives_the_same_way() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    for t in [&a, &b] {
        t.tab(&["init"]).ok();
    }
    a.tab(&["start", "a1", "--task", "t"]).ok();
    a.tab(&["abandon", "a1"]).ok();
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    b.tab(&["start", "b1", "--task", "t"]).ok();
    b.tab(&["abandon", "b1"]).ok();
    a.tab(&["gc", "--archive-after", "0"]).ok();
    b.tab(&["gc", "--archive-after", "0"]).ok();
    a.tab(&["sync"]).ok();
    let (code, out) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["archives"][0]["action"], "merged", "{out}");
    a.tab(&["sync"]).ok();
    for t in [&a, &b] {
        let all = t.tab_json(&["list", "--state", "archived"]).1;
        let ids: Vec<&str> = all["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a1", "b1"], "{all}");
        let live = t.git_out(&["for-each-ref", "refs/tabellio/runs/"]);
        assert_eq!(live, "", "an archived run came back to life");
        t.tab(&["log", "b1"]).ok();
        t.fsck();
    }
    let month = archive_refs(&a)[0].clone();
    assert_eq!(
        server.git_out(&["rev-parse", &month]),
        a.git_out(&["rev-parse", &month])
    );
    // Each clone's index covers the months sync merged; the ids stay taken on both.
    for t in [&a, &b] {
        assert_eq!(index_months(t), months_listing(t));
        for id in ["a1", "b1"] {
            t.tab(&["start", id, "--task", "again"]).code(2);
        }
    }

    // The server still has the live ledger a1 pushed before it was archived: its own gc
    // archives it (already in its archive at that very tip), with nothing else to do.
    assert_ne!(server.git_out(&["for-each-ref", "refs/tabellio/runs/"]), "");
    server.tab(&["hooks", "install", "--server"]).ok();
    let (code, out) = server.tab_json(&["gc", "--archive-after", "0"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(server.git_out(&["for-each-ref", "refs/tabellio/runs/"]), "");
    server.fsck();
    // A push that rewinds the archive (dropping archived runs) is refused by the server.
    let first = a.git_out(&["rev-parse", &format!("{month}^1")]);
    let r = a.git(&["push", "origin", &format!("+{first}:{month}")]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("would drop archived runs"), "{}", r.desc);
}

/// Five ended runs, each with a worktree and a commit of its own: their ledger tips.
fn five_ended_runs(t: &TestEnv) -> Vec<(String, String)> {
    let mut tips = Vec::new();
    for i in 0..5 {
        let id = format!("r{i}");
        t.started_run(&id, &format!("f{i}.txt"));
        t.tab(&["abandon", &id]).ok();
        tips.push((
            id.clone(),
            t.git_out(&["rev-parse", &format!("refs/tabellio/runs/{id}")]),
        ));
    }
    tips
}

/// `gc` killed (SIGKILL) at random points: renaming worktrees, writing the archive, inside its
/// transaction. `gc` again (removing a stale lock it names) finishes: every run is archived at
/// its very ledger tip, no ledger, branch or worktree of them is left, and `git fsck --strict`
/// is clean.
#[test]
fn gc_killed_anywhere_loses_nothing_and_gc_again_finishes() {
    let span = {
        let t = TestEnv::new();
        five_ended_runs(&t);
        let started = std::time::Instant::now();
        t.tab(&["gc", "--archive-after", "0"]).ok();
        started.elapsed().as_millis() as u64
    };
    for round in 0..land_trials() {
        let t = TestEnv::new();
        let tips = five_ended_runs(&t);
        let mut child = t.spawn_tab(&["gc", "--archive-after", "0"]);
        std::thread::sleep(random_delay_up_to(round, span + span / 4 + 1));
        let _ = child.kill();
        let _ = child.wait();
        // Right after the kill: every run is live at its tip or archived at it.
        for (id, tip) in &tips {
            let live = t.git(&[
                "rev-parse",
                "-q",
                "--verify",
                &format!("refs/tabellio/runs/{id}"),
            ]);
            let archived = t.tab_json(&["status", id]).1;
            assert!(
                live.stdout.trim() == tip || archived["archived"].is_string(),
                "run {id} is neither live nor archived after the kill: {archived}"
            );
        }
        // The documented repair: gc again, after the one `rm` of the stale locks it names.
        let r = t.tab(&["--json", "gc", "--archive-after", "0"]);
        if r.code != 0 {
            assert_eq!(r.code, 4, "{}", r.desc);
            let hint = r.json()["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let rm = hint
                .split_once("`rm ")
                .and_then(|(_, rest)| rest.split_once('`'))
                .unwrap_or_else(|| panic!("no rm in the hint: {}", r.desc))
                .0;
            for lock in rm.split(' ') {
                std::fs::remove_file(lock).unwrap_or_else(|e| panic!("rm {lock}: {e}"));
            }
            let again = t.tab(&["--json", "gc", "--archive-after", "0"]);
            assert_eq!(again.code, 0, "gc after the rm: {}", again.desc);
        }
        for (id, tip) in &tips {
            let (code, st) = t.tab_json(&["status", id]);
            assert_eq!(code, 0, "{st}");
            assert!(st["archived"].is_string(), "{id} not archived: {st}");
            let month = st["archived"].as_str().unwrap();
            // The archived ledger is the very tip the run had, reachable from the archive.
            t.git(&["merge-base", "--is-ancestor", tip, month]).ok();
            assert!(!t.worktree(id).exists(), "worktree of {id} left");
        }
        assert_eq!(
            t.git_out(&[
                "for-each-ref",
                "refs/tabellio/runs/",
                "refs/heads/tabellio/"
            ]),
            ""
        );
        // The index covers every month again, so lookups are one path away.
        assert_eq!(index_months(&t), months_listing(&t));
        let listed = t.git_out(&["worktree", "list", "--porcelain"]);
        assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
        let root = t.repo.join(".tabellio/worktrees");
        let left: Vec<_> = std::fs::read_dir(&root)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "left in the worktree root: {left:?}");
        t.fsck();
    }
}

/// `gc` keeps a multi-pack index over the repository's packs, which git reads and checks as
/// its own; written once per set of packs, again after `git gc` replaced them, never with
/// `--dry-run`, where `core.multiPackIndex` is off, or where a held lock or git's own bitmap
/// says it is someone else's.
#[test]
fn gc_keeps_a_multi_pack_index_git_reads() {
    let t = TestEnv::new();
    two_ended_runs_and_one_active(&t);
    let midx = t.repo.join(".git/objects/pack/multi-pack-index");
    let lock = t.repo.join(".git/objects/pack/multi-pack-index.lock");
    // Without a pack there is nothing to index.
    let (code, out) = t.tab_json(&["gc", "--archive-after", "1000w"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["multi_pack_index"], serde_json::Value::Null, "{out}");
    t.git(&["gc", "-q"]).ok();
    // Three more packs beside git's one, as fetches leave them.
    for i in 0..3 {
        t.commit_file_in(&t.repo, &format!("f{i}.txt"), &format!("{i}\n"));
        t.git(&["repack", "-q"]).ok();
    }
    let packs = std::fs::read_dir(t.repo.join(".git/objects/pack"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "pack")
        })
        .count();
    assert!(packs >= 2, "{packs} packs");

    let (code, out) = t.tab_json(&["gc", "--dry-run", "--archive-after", "0"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["multi_pack_index"], serde_json::Value::Null, "{out}");
    assert!(!midx.exists(), "--dry-run wrote the multi-pack index");

    let (code, out) = t.tab_json(&["gc", "--archive-after", "0"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["multi_pack_index"],
        serde_json::json!({"packs": packs, "written": true}),
        "{out}"
    );
    t.git(&["multi-pack-index", "verify"]).ok();
    t.fsck();
    // Every command reads through it: the archived runs and the live one.
    t.tab(&["log", "r1"]).ok();
    t.tab(&["status", "r3"]).ok();
    let written = std::fs::read(&midx).unwrap();
    let (_, out) = t.tab_json(&["gc"]);
    assert_eq!(
        out["multi_pack_index"],
        serde_json::json!({"packs": packs, "written": false}),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&midx).unwrap(),
        written,
        "rewritten unchanged"
    );

    // `git gc` replaces the packs it covers and removes it; the next `gc` writes it again.
    t.git(&["gc", "-q"]).ok();
    assert!(
        !midx.exists(),
        "git gc kept a multi-pack index of removed packs"
    );
    std::fs::write(&lock, "").unwrap();
    let (code, out) = t.tab_json(&["gc"]);
    assert_eq!(code, 0, "a held lock fails the gc: {out}");
    let warning = out["multi_pack_index"]["warning"].as_str().unwrap();
    assert!(
        warning.contains("multi-pack-index.lock") && warning.contains("remove"),
        "{warning}"
    );
    assert!(
        !midx.exists() && lock.exists(),
        "the lock was not respected"
    );
    std::fs::remove_file(&lock).unwrap();
    let (_, out) = t.tab_json(&["gc"]);
    assert_eq!(out["multi_pack_index"]["written"], true, "{out}");
    t.git(&["multi-pack-index", "verify"]).ok();

    // Off where the repository says so.
    std::fs::remove_file(&midx).unwrap();
    t.git(&["config", "core.multiPackIndex", "false"]).ok();
    let (_, out) = t.tab_json(&["gc"]);
    assert_eq!(out["multi_pack_index"], serde_json::Value::Null, "{out}");
    assert!(!midx.exists());
    t.git(&["config", "--unset", "core.multiPackIndex"]).ok();

    // Git's own maintenance writes it with a bitmap tied to it: left as git wrote it.
    t.git(&["repack", "-q", "-a", "-d", "-b", "--write-midx"])
        .ok();
    let by_git = std::fs::read(&midx).unwrap();
    let (_, out) = t.tab_json(&["gc"]);
    assert_eq!(out["multi_pack_index"], serde_json::Value::Null, "{out}");
    assert_eq!(std::fs::read(&midx).unwrap(), by_git);
    t.fsck();
}
