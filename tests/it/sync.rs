//! Sharing through a remote: a local bare repository plays the server, clones play the
//! machines. `init`, `sync` (notes union merge, ledgers, atomic leased push) and
//! `promote --remote`, with real processes racing where the issue asks for races.

use std::collections::BTreeSet;
use std::path::Path;

use crate::util::*;

/// Start run `id`, commit `file`, finish it with a passing ad-hoc check; the validated commit.
fn finished_run(t: &TestEnv, id: &str, file: &str, content: &str) -> String {
    t.start_with_commit(id, file, content);
    t.tab(&["finish", id, "--check", "ok", "--", "true"]).ok();
    t.git_out(&["rev-parse", &format!("refs/heads/tabellio/{id}")])
}

fn rev(t: &TestEnv, r: &str) -> String {
    t.git_out(&["rev-parse", r])
}

fn try_rev(t: &TestEnv, r: &str) -> Option<String> {
    let out = t.git(&["rev-parse", "--verify", "-q", r]);
    (out.code == 0).then(|| out.stdout.trim().to_string())
}

fn refs_under(t: &TestEnv, prefix: &str) -> Vec<String> {
    t.git_out(&["for-each-ref", "--format=%(refname)", prefix])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The state in `run.json` at `ledger_ref` of `t`.
fn ledger_json(t: &TestEnv, ledger_ref: &str) -> serde_json::Value {
    serde_json::from_str(&t.git_out(&["show", &format!("{ledger_ref}:run.json")])).unwrap()
}

/// The run ids of the evidence records noted on `rev` (stock git reads them).
fn evidence_runs(t: &TestEnv, rev: &str) -> BTreeSet<String> {
    let r = t.git(&["notes", "--ref=tabellio/evidence", "show", rev]);
    if r.code != 0 {
        return BTreeSet::new();
    }
    r.stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["run_id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The note blobs of every object in a notes ref: `git notes list` (fanout-independent).
fn notes_list(t: &TestEnv, notes_ref: &str) -> String {
    t.git_out(&["notes", &format!("--ref={notes_ref}"), "list"])
}

/// No object on the server mentions a temp directory of any machine.
#[track_caller]
fn assert_no_local_paths(server: &TestEnv, machines: &[&TestEnv]) {
    let all = server.git(&["cat-file", "--batch-all-objects", "--batch"]);
    all.ok();
    for m in machines.iter().chain(std::iter::once(&server)) {
        let dir = m.path().display().to_string();
        assert!(
            !all.stdout.contains(&dir),
            "an object on the server contains the local path {dir}"
        );
    }
}

/// `git fast-import` with `stream` on stdin, in `t`.
fn fast_import(t: &TestEnv, stream: &str) {
    let args = ["fast-import", "--quiet"];
    let out = t.command_with_input("git", &t.repo, &[], &args, stream);
    assert!(out.code == 0, "fast-import failed: {}", out.stderr);
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_default()
}

#[test]
fn init_is_idempotent_plain_fetch_tracks_and_plain_push_is_unchanged() {
    let (server, a, b) = TestEnv::server_and_two_clones();

    let (code, first) = a.tab_json(&["init"]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["side"], "client");
    assert_eq!(first["changed"], true);
    assert_eq!(first["remotes"][0]["remote"], "origin");
    let fetch = a.git_out(&["config", "--get-all", "remote.origin.fetch"]);
    assert_eq!(
        fetch.lines().collect::<Vec<_>>(),
        [
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tabellio/runs/*:refs/tabellio/remotes/origin/runs/*",
            "+refs/tabellio/archive/*:refs/tabellio/remotes/origin/archive/*",
            "+refs/notes/tabellio/*:refs/notes/tabellio/remotes/origin/*",
            "^refs/notes/tabellio/remotes/*",
            "+refs/tabellio/queue/*:refs/tabellio/remotes/origin/queue/*",
        ]
    );

    // Twice: nothing changes, byte for byte.
    let git_dir = a.repo.join(".git");
    let (config, exclude, snap) = (
        read(&git_dir.join("config")),
        read(&git_dir.join("info/exclude")),
        a.snapshot(),
    );
    let (code, second) = a.tab_json(&["init"]);
    assert_eq!(code, 0, "{second}");
    assert_eq!(second["changed"], false, "{second}");
    assert_eq!(second["config_writer"], "none");
    assert_eq!(second["remotes"][0]["added"], serde_json::json!([]));
    assert_eq!(read(&git_dir.join("config")), config);
    assert_eq!(read(&git_dir.join("info/exclude")), exclude);
    assert_eq!(a.snapshot(), snap);
    // `init` never configures what a plain `git push` sends.
    a.git(&["config", "--get-all", "remote.origin.push"])
        .code(1);

    // A name that is no remote: exit 5, nothing written.
    a.tab(&["init", "--remote", "nope"]).code(5);
    assert_eq!(read(&git_dir.join("config")), config);

    // B publishes a run with evidence.
    finished_run(&b, "rb", "b.txt", "b\n");
    b.tab(&["sync"]).ok();

    // A plain `git fetch` now brings B's ledger and notes into the tracking namespaces, and
    // never touches A's own notes or ledgers.
    a.git(&["fetch", "-q"]).ok();
    assert_eq!(
        refs_under(&a, "refs/tabellio/"),
        ["refs/tabellio/remotes/origin/runs/rb"]
    );
    let notes = refs_under(&a, "refs/notes/");
    assert!(
        notes.contains(&"refs/notes/tabellio/remotes/origin/evidence".to_string()),
        "{notes:?}"
    );
    assert!(notes
        .iter()
        .all(|n| n.starts_with("refs/notes/tabellio/remotes/origin/")));

    // A plain `git push` sends the branch and nothing of tabellio's.
    a.tab(&["start", "ra", "--task", "local only"]).ok();
    a.write("more.txt", "more\n");
    a.git(&["add", "more.txt"]).ok();
    a.git(&["commit", "-q", "-m", "more"]).ok();
    a.git(&["push", "-q"]).ok();
    assert_eq!(rev(&server, "main"), rev(&a, "main"));
    assert_eq!(
        refs_under(&server, "refs/tabellio/"),
        ["refs/tabellio/runs/rb"]
    );

    // In the bare server, init is the server side: no tracking refspecs.
    let (code, s) = server.tab_json(&["init"]);
    assert_eq!(code, 0, "{s}");
    assert_eq!(s["side"], "server");
    assert_eq!(s["remotes"], serde_json::json!([]));
    server
        .git(&["config", "--get-all", "remote.origin.fetch"])
        .code(1);

    for t in [&server, &a, &b] {
        t.fsck();
    }
}

#[test]
fn init_never_reformats_the_config_file() {
    let server = TestEnv::bare_server();
    let url = server.repo.display().to_string();
    // gix keeps this file's odd formatting byte for byte; the second puts a value on the
    // section's header line, which gix would rewrite, so init hands over to `git config`.
    for (config, writer) in [
        (
            format!("[core]\n\trepositoryformatversion = 0 ; note\n  bare=false\n[remote \"origin\"]\n url = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"),
            "gix",
        ),
        (
            format!("[core]\n\trepositoryformatversion = 0\n[remote \"origin\"] url = {url}\n"),
            "git_cli",
        ),
    ] {
        let a = TestEnv::clone_of(&server);
        let path = a.repo.join(".git/config");
        std::fs::write(&path, &config).unwrap();
        let (code, v) = a.tab_json(&["init"]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["config_writer"], writer, "{v}");
        let after = String::from_utf8(read(&path)).unwrap();
        assert!(
            after.starts_with(&config) || after.lines().filter(|l| config.contains(*l)).count() == config.lines().count(),
            "the original lines changed:\n{after}"
        );
        let fetch = a.git_out(&["config", "--get-all", "remote.origin.fetch"]);
        assert!(fetch.contains("+refs/tabellio/runs/*:refs/tabellio/remotes/origin/runs/*"), "{fetch}");
        let (code, again) = a.tab_json(&["init"]);
        assert_eq!(code, 0, "{again}");
        assert_eq!(again["changed"], false, "{again}");
        assert_eq!(String::from_utf8(read(&path)).unwrap(), after);
        // And it works: sync uses the remote as configured.
        a.tab(&["sync"]).ok();
    }
}

#[test]
fn init_with_hooks_installs_the_client_shims_once() {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    let (code, v) = a.tab_json(&["init", "--remote", "origin", "--hooks"]);
    assert_eq!(code, 0, "{v}");
    let names: Vec<&str> = v["hooks"]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reference-transaction", "pre-push"]);
    let (code, again) = a.tab_json(&["init", "--remote", "origin", "--hooks"]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["changed"], false, "{again}");
    // With the hooks in place, sync still works (they gate protected branches only).
    a.tab(&["start", "r", "--task", "t"]).ok();
    a.tab(&["sync"]).ok();
    assert!(try_rev(&server, "refs/tabellio/runs/r").is_some());

    // A foreign hook in the way: init refuses and writes nothing, not even the refspecs.
    let b = TestEnv::clone_of(&server);
    write_file(&b.repo.join(".git/hooks/pre-push"), "#!/bin/sh\nexit 0\n");
    let config = read(&b.repo.join(".git/config"));
    let r = b.tab(&["init", "--hooks"]);
    r.code(3);
    assert_eq!(read(&b.repo.join(".git/config")), config);
    assert!(!b.repo.join(".git/hooks/reference-transaction").exists());
}

#[test]
fn two_clones_validate_the_same_commit_and_both_records_reach_everyone() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    let ca = finished_run(&a, "ra", "same.txt", "same\n");
    let cb = finished_run(&b, "rb", "same.txt", "same\n");
    assert_eq!(
        ca, cb,
        "fixed identity and dates make the same change the same commit"
    );
    // The commit itself reaches the server the ordinary way (a branch push), so stock git there
    // can name it.
    a.git(&["push", "-q", "origin", "tabellio/ra"]).ok();

    let (code, ra) = a.tab_json(&["sync"]);
    assert_eq!(code, 0, "{ra}");
    assert_eq!(ra["outcome"], "complete");
    assert_eq!(ra["ledgers"]["published"], serde_json::json!(["ra"]));

    let (code, rb) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{rb}");
    assert_eq!(rb["ledgers"]["created"], serde_json::json!(["ra"]));
    assert_eq!(rb["ledgers"]["published"], serde_json::json!(["rb"]));
    let evidence_step = rb["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ref"] == "refs/notes/tabellio/evidence" && n["action"] == "merged")
        .unwrap_or_else(|| panic!("evidence was not merged: {rb}"));
    assert!(evidence_step["objects"].as_u64().unwrap() >= 1, "{rb}");
    // The merge commit has both parents: ours, then theirs.
    let parents = b.git_out(&[
        "rev-list",
        "--parents",
        "-1",
        "refs/notes/tabellio/evidence",
    ]);
    assert_eq!(parents.split(' ').count(), 3, "{parents}");
    assert_eq!(
        parents.split(' ').nth(2).unwrap(),
        evidence_step["remote"].as_str().unwrap_or(""),
        "{rb}"
    );

    let (code, ra2) = a.tab_json(&["sync"]);
    assert_eq!(code, 0, "{ra2}");

    let both: BTreeSet<String> = ["ra".to_string(), "rb".to_string()].into();
    // Stock git on the server shows both lines.
    let on_server = server.git_out(&["notes", "--ref=tabellio/evidence", "show", &ca]);
    assert_eq!(on_server.lines().count(), 2, "{on_server}");
    assert_eq!(evidence_runs(&server, &ca), both);
    assert_eq!(evidence_runs(&a, &ca), both);
    assert_eq!(evidence_runs(&b, &ca), both);
    // Everyone ends at the same notes commit and has both ledgers.
    let tip = rev(&server, "refs/notes/tabellio/evidence");
    assert_eq!(rev(&a, "refs/notes/tabellio/evidence"), tip);
    assert_eq!(rev(&b, "refs/notes/tabellio/evidence"), tip);
    for t in [&server, &a, &b] {
        assert_eq!(
            refs_under(t, "refs/tabellio/runs/"),
            ["refs/tabellio/runs/ra", "refs/tabellio/runs/rb"]
        );
    }
    // A second sync has nothing left to do.
    let (code, again) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["pushed"], serde_json::json!([]), "{again}");
    assert_eq!(again["notes"], serde_json::json!([]), "{again}");

    assert_no_local_paths(&server, &[&a, &b]);
    for t in [&server, &a, &b] {
        t.fsck();
    }
}

/// Build the same situation twice — once merged by `git notes merge -s cat_sort_uniq`, once by
/// our sync — and compare: same notes for every object, same tree, parents ours then theirs.
fn compare_with_git_notes_merge(b: &TestEnv) {
    let ours = rev(b, "refs/notes/tabellio/evidence");
    b.git(&[
        "fetch",
        "-q",
        "origin",
        "+refs/notes/tabellio/evidence:refs/notes/theirs",
    ])
    .ok();
    let theirs = rev(b, "refs/notes/theirs");
    b.git(&["update-ref", "refs/notes/gitmerge", &ours]).ok();
    b.git(&[
        "notes",
        "--ref=gitmerge",
        "merge",
        "-q",
        "-s",
        "cat_sort_uniq",
        "refs/notes/theirs",
    ])
    .ok();

    let (code, report) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{report}");
    let merged = rev(b, "refs/notes/tabellio/evidence");
    assert_eq!(
        b.git_out(&["rev-list", "--parents", "-1", &merged]),
        format!("{merged} {ours} {theirs}")
    );
    assert_eq!(
        b.git_out(&["rev-list", "--parents", "-1", "refs/notes/gitmerge"])
            .split_once(' ')
            .unwrap()
            .1,
        format!("{ours} {theirs}")
    );
    let (git_list, our_list) = (
        notes_list(b, "refs/notes/gitmerge"),
        notes_list(b, "refs/notes/tabellio/evidence"),
    );
    assert_eq!(our_list, git_list, "note blobs differ from git's merge");
    assert_eq!(
        rev(b, "refs/notes/tabellio/evidence^{tree}"),
        rev(b, "refs/notes/gitmerge^{tree}"),
        "the notes tree differs from git's (fanout?)"
    );
}

#[test]
fn notes_union_merge_is_what_git_notes_merge_cat_sort_uniq_makes() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    // Annotated objects both clones have: blobs of the same content.
    let object = |t: &TestEnv, name: &str| {
        write_file(&t.path().join(name), &format!("object {name}\n"));
        t.git_out(&["hash-object", "-w", t.path().join(name).to_str().unwrap()])
    };
    let [w, v, x, y, z] = ["w", "v", "x", "y", "z"].map(|n| {
        let oa = object(&a, n);
        assert_eq!(object(&b, n), oa);
        oa
    });

    // The common base: notes on w and v, shared through the server.
    a.set_note(&w, "w1\n");
    a.set_note(&v, "v1\n");
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    assert_eq!(
        rev(&b, "refs/notes/tabellio/evidence"),
        rev(&a, "refs/notes/tabellio/evidence")
    );

    // A: adds x (unsorted lines) and y, removes v; shares it.
    a.set_note(&x, "b\na\n");
    a.set_note(&y, "zz\naa\n");
    a.git(&["notes", "--ref=tabellio/evidence", "remove", &v])
        .ok();
    a.tab(&["sync"]).ok();
    // B, concurrently: adds x with an overlapping line, z, and appends to w.
    b.set_note(&x, "c\na\n");
    b.set_note(&z, "q\n");
    b.git(&["notes", "--ref=tabellio/evidence", "append", "-m", "w2", &w])
        .ok();

    compare_with_git_notes_merge(&b);
    let show = |o: &str| b.git_out(&["notes", "--ref=tabellio/evidence", "show", o]);
    assert_eq!(show(&x), "a\nb\nc");
    assert_eq!(
        show(&y),
        "zz\naa",
        "a note only one side changed is kept as it is"
    );
    assert_eq!(show(&z), "q");
    assert_eq!(show(&w), "w1\n\nw2");
    b.git(&["notes", "--ref=tabellio/evidence", "show", &v])
        .code(1);
    for t in [&server, &a, &b] {
        t.fsck();
    }
}

#[test]
fn notes_merge_matches_git_across_fanout_trees() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    // 600 commits to annotate, identical in both clones (fixed dates), so that the notes trees
    // fan out (git switches to `ab/cdef…` paths past a few hundred notes).
    let mut commits = String::new();
    for i in 1..=600 {
        commits.push_str(&format!(
            "commit refs/heads/objects\nmark :{i}\ncommitter T <t@example.com> 1700000000 +0000\ndata {}\nc{i:04}\n{}",
            6,
            if i > 1 { format!("from :{}\n", i - 1) } else { String::new() }
        ));
    }
    fast_import(&a, &commits);
    fast_import(&b, &commits);
    let ids: Vec<String> = a
        .git_out(&["rev-list", "--reverse", "objects"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), 600);
    assert_eq!(rev(&b, "objects"), rev(&a, "objects"));
    let notes_commit = |from_existing: bool, notes: &[(usize, String)]| {
        let mut s = String::from(
            "commit refs/notes/tabellio/evidence\ncommitter T <t@example.com> 1700000000 +0000\ndata 6\nnotes\n",
        );
        if from_existing {
            s.push_str("from refs/notes/tabellio/evidence^0\n");
        }
        for (i, text) in notes {
            s.push_str(&format!(
                "N inline {}\ndata {}\n{text}\n",
                ids[*i],
                text.len()
            ));
        }
        s
    };

    let base: Vec<(usize, String)> = (0..300).map(|i| (i, format!("base-{i}\n"))).collect();
    fast_import(&a, &notes_commit(false, &base));
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();

    let ours_a: Vec<(usize, String)> = (300..450)
        .map(|i| (i, format!("a-{i}\n")))
        .chain((0..20).map(|i| (i, format!("a-extra\nbase-{i}\n"))))
        .collect();
    fast_import(&a, &notes_commit(true, &ours_a));
    a.tab(&["sync"]).ok();
    let ours_b: Vec<(usize, String)> = (450..600)
        .map(|i| (i, format!("b-{i}\n")))
        .chain((10..30).map(|i| (i, format!("b-extra\nbase-{i}\n"))))
        .collect();
    fast_import(&b, &notes_commit(true, &ours_b));
    assert!(
        b.git_out(&["ls-tree", "--name-only", "refs/notes/tabellio/evidence"])
            .lines()
            .all(|n| n.len() == 2),
        "the test needs a fanned-out notes tree"
    );

    compare_with_git_notes_merge(&b);
    // Every record of both sides is there.
    let show = |i: usize| b.git_out(&["notes", "--ref=tabellio/evidence", "show", &ids[i]]);
    assert_eq!(show(15), "a-extra\nb-extra\nbase-15");
    assert_eq!(show(5), "a-extra\nbase-5");
    assert_eq!(show(25), "b-extra\nbase-25");
    assert_eq!(show(400), "a-400");
    assert_eq!(show(500), "b-500");
    assert_eq!(show(200), "base-200");
    server.fsck();
    b.fsck();
}

#[test]
fn concurrent_syncs_lose_no_record_and_every_clone_converges() {
    let server = TestEnv::bare_server();
    let clones: Vec<TestEnv> = (0..4).map(|_| TestEnv::clone_of(&server)).collect();
    let mut validated = Vec::new();
    for (i, c) in clones.iter().enumerate() {
        c.tab(&["init"]).ok();
        let id = format!("r{i}");
        let commit = finished_run(c, &id, &format!("f{i}.txt"), &format!("{i}\n"));
        c.tab(&["checkpoint", &id, "-m", "done"]).ok();
        validated.push((id, commit));
    }
    // Everyone at once, real processes.
    let syncs = clones.iter().map(|c| c.spawn_tab(&["--json", "sync"]));
    for exit in race(syncs.collect()) {
        let Exit {
            code,
            stdout,
            stderr,
        } = exit;
        assert_eq!(code, 0, "a concurrent sync failed:\n{stdout}\n{stderr}");
    }
    // A final sync each, then a second pass must find nothing to do anywhere.
    for c in &clones {
        c.tab(&["sync"]).ok();
    }
    for c in &clones {
        let (code, v) = c.tab_json(&["sync"]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["pushed"], serde_json::json!([]), "{v}");
    }
    let all_runs: Vec<String> = validated
        .iter()
        .map(|(id, _)| format!("refs/tabellio/runs/{id}"))
        .collect();
    let evidence = rev(&server, "refs/notes/tabellio/evidence");
    let checkpoints = rev(&server, "refs/notes/tabellio/checkpoints");
    for c in &clones {
        assert_eq!(refs_under(c, "refs/tabellio/runs/"), all_runs);
        assert_eq!(rev(c, "refs/notes/tabellio/evidence"), evidence);
        assert_eq!(rev(c, "refs/notes/tabellio/checkpoints"), checkpoints);
        for (id, commit) in &validated {
            assert_eq!(
                rev(c, &format!("refs/tabellio/runs/{id}")),
                rev(&server, &format!("refs/tabellio/runs/{id}"))
            );
            // The record of every run is on every clone (notes list names the object).
            let list = notes_list(c, "refs/notes/tabellio/evidence");
            assert!(list.contains(commit.as_str()), "{id}'s evidence missing");
        }
        c.fsck();
    }
    // Each validated commit has exactly its own run's record, on the server too.
    let list = notes_list(&server, "refs/notes/tabellio/evidence");
    for (_, commit) in &validated {
        assert!(list.contains(commit.as_str()));
    }
    assert_no_local_paths(&server, &clones.iter().collect::<Vec<_>>());
    server.fsck();
}

#[test]
fn diverged_ledgers_are_reported_per_run_and_never_overwritten() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    a.tab(&["start", "shared", "--task", "one run, two machines"])
        .ok();
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    assert_eq!(
        rev(&b, "refs/tabellio/runs/shared"),
        rev(&a, "refs/tabellio/runs/shared")
    );
    // Both machines move the same run.
    a.tab(&["abandon", "shared", "-m", "from a"]).ok();
    b.tab(&["abandon", "shared", "-m", "from b"]).ok();
    // B also has a run of its own, which must still be shared.
    b.tab(&["start", "other", "--task", "b's own"]).ok();
    let (code, ra) = a.tab_json(&["sync"]);
    assert_eq!(code, 0, "{ra}");
    assert_eq!(ra["ledgers"]["left"], serde_json::json!(["shared"]));

    let (a_tip, b_tip) = (
        rev(&a, "refs/tabellio/runs/shared"),
        rev(&b, "refs/tabellio/runs/shared"),
    );
    let (code, rb) = b.tab_json(&["sync"]);
    assert_eq!(code, 4, "{rb}");
    assert_eq!(rb["ok"], false);
    assert_eq!(rb["error"]["code"], "conflict");
    assert!(
        rb["error"]["message"].as_str().unwrap().contains("shared"),
        "{rb}"
    );
    assert_eq!(rb["outcome"], "diverged");
    let d = &rb["ledgers"]["diverged"][0];
    assert_eq!(d["run"], "shared");
    assert_eq!(d["local"], b_tip.as_str());
    assert_eq!(d["remote"], a_tip.as_str());
    assert_eq!(d["local_state"], "abandoned");
    assert_eq!(d["remote_state"], "abandoned");
    // Nothing overwritten on either side; the other run went through.
    assert_eq!(rev(&b, "refs/tabellio/runs/shared"), b_tip);
    assert_eq!(rev(&server, "refs/tabellio/runs/shared"), a_tip);
    assert_eq!(
        ledger_json(&b, "refs/tabellio/runs/shared")["reason"],
        "from b"
    );
    assert_eq!(
        ledger_json(&server, "refs/tabellio/runs/shared")["reason"],
        "from a"
    );
    assert!(try_rev(&server, "refs/tabellio/runs/other").is_some());
    // The human form says it too, on stderr, with exit 4.
    let r = b.tab(&["sync"]);
    r.code(4);
    assert!(
        r.stderr.contains("diverged") && r.stderr.contains("shared"),
        "{}",
        r.desc
    );
    for t in [&server, &a, &b] {
        t.fsck();
    }
}

#[test]
fn remote_promotion_pushes_target_ledger_and_evidence_in_one_push() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    let base = rev(&a, "main");
    let validated = finished_run(&a, "ra", "a.txt", "a\n");

    // A dry run checks and writes nothing.
    let snap = a.snapshot();
    let (code, dry) = a.tab_json(&["promote", "ra", "--remote", "origin", "--dry-run"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(a.snapshot(), snap);
    assert_eq!(rev(&server, "main"), base);

    let (code, p) = a.tab_json(&["promote", "ra", "--remote", "origin"]);
    assert_eq!(code, 0, "{p}");
    assert_eq!(p["mode"], "remote");
    assert_eq!(p["run"]["state"], "promoted");
    assert_eq!(p["run"]["promotion"]["mode"], "remote");
    assert_eq!(p["run"]["promotion"]["remote"], "origin");
    assert_eq!(p["run"]["promotion"]["old"], base.as_str());
    assert_eq!(p["run"]["promotion"]["new"], validated.as_str());
    // The server has the target, the ledger (the same commit as ours) and the evidence.
    assert_eq!(rev(&server, "main"), validated);
    assert_eq!(
        rev(&server, "refs/tabellio/runs/ra"),
        rev(&a, "refs/tabellio/runs/ra")
    );
    assert_eq!(
        ledger_json(&server, "refs/tabellio/runs/ra")["state"],
        "promoted"
    );
    assert_eq!(
        evidence_runs(&server, &validated),
        ["ra".to_string()].into()
    );
    // Promoting again is a no-op.
    let (code, again) = a.tab_json(&["promote", "ra", "--remote", "origin"]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["already_promoted"], true);

    // B's run started from the old base: the remote target moved, exit 4, nothing written.
    let _ = finished_run(&b, "rb", "b.txt", "b\n");
    let snap = b.snapshot();
    let r = b.tab(&["--json", "promote", "rb", "--remote", "origin"]);
    r.code(4);
    let v = r.json();
    assert_eq!(v["error"]["code"], "conflict");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("target moved"),
        "{v}"
    );
    assert_eq!(b.snapshot(), snap);
    assert_eq!(rev(&server, "main"), validated);
    // An unknown remote: exit 5.
    b.tab(&["promote", "rb", "--remote", "nope"]).code(5);

    assert_no_local_paths(&server, &[&a, &b]);
    for t in [&server, &a, &b] {
        t.fsck();
    }
}

#[test]
fn remote_promotion_race_has_exactly_one_winner() {
    promotion_race(false);
}

/// The same race, with both pushes held inside the server's pre-receive until both arrived: the
/// server's own compare-and-swap decides, and the loser learns it from the push itself.
#[test]
fn remote_promotion_race_decided_inside_the_server() {
    promotion_race(true);
}

fn promotion_race(both_reach_the_server: bool) {
    let (server, a, b) = TestEnv::server_and_two_clones();
    let base = rev(&a, "main");
    let va = finished_run(&a, "ra", "a.txt", "a\n");
    let vb = finished_run(&b, "rb", "b.txt", "b\n");
    // Both ledgers are on the server before the race, so "still completed remotely" is visible.
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    let gate = server.path().join("arrived");
    if both_reach_the_server {
        // A test-only hook: each push waits (bounded) until two pushes are inside the server.
        std::fs::create_dir_all(&gate).unwrap();
        let hook = server.repo.join("hooks/pre-receive");
        let script = format!(
            "#!/bin/sh\ntouch '{g}'/$$\nn=0\nwhile [ $(ls '{g}' | wc -l) -lt 2 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\nexit 0\n",
            g = gate.display()
        );
        write_file(&hook, &script);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    let ca = a.spawn_tab(&["--json", "promote", "ra", "--remote", "origin"]);
    let cb = b.spawn_tab(&["--json", "promote", "rb", "--remote", "origin"]);
    let [ra, rb]: [Exit; 2] = race(vec![ca, cb]).try_into().unwrap();
    let codes = [ra.code, rb.code];
    assert!(
        codes == [0, 4] || codes == [4, 0],
        "exactly one promotion must win:\nA: {ra:?}\nB: {rb:?}"
    );
    if both_reach_the_server {
        let arrived = std::fs::read_dir(&gate).unwrap().count();
        assert_eq!(
            arrived, 2,
            "both pushes must have reached the server's hook"
        );
    }
    let (winner, w_run, w_commit, loser, l_run, l_out) = if ra.code == 0 {
        (&a, "ra", &va, &b, "rb", &rb)
    } else {
        (&b, "rb", &vb, &a, "ra", &ra)
    };
    let err: serde_json::Value = serde_json::from_str(l_out.stdout.trim()).unwrap();
    assert_eq!(err["error"]["code"], "conflict", "{err}");
    assert_eq!(rev(&server, "main"), *w_commit);
    assert_ne!(rev(&server, "main"), base);
    let ledger = |r: &str| format!("refs/tabellio/runs/{r}");
    assert_eq!(ledger_json(&server, &ledger(w_run))["state"], "promoted");
    assert_eq!(ledger_json(winner, &ledger(w_run))["state"], "promoted");
    // The loser is still completed, here and there.
    assert_eq!(ledger_json(loser, &ledger(l_run))["state"], "completed");
    assert_eq!(ledger_json(&server, &ledger(l_run))["state"], "completed");
    let (code, status) = loser.tab_json(&["status", l_run]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["state"], "completed");
    for t in [&server, &a, &b] {
        t.fsck();
    }
}

#[test]
fn remote_promotion_into_a_hooked_server_needs_passing_evidence() {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    // The protected branch requires the `ci` check.
    a.commit_policy(&policy(&[("ci", &["true"])]));
    a.git(&["push", "-q"]).ok();
    let (code, s) = server.tab_json(&["init", "--hooks"]);
    assert_eq!(code, 0, "{s}");
    assert_eq!(s["side"], "server");
    assert_eq!(s["hooks"]["hooks"][0]["name"], "pre-receive");
    assert!(server.repo.join("hooks/pre-receive").exists());

    // A run that weakens the policy in its own commit validates against its own policy, but a
    // promotion is judged by the policy at the target's tip, as the server judges the push: no
    // `ci` evidence, refused before anything is pushed.
    a.tab(&["start", "weak", "--task", "weaken the gate"]).ok();
    let wt = a.worktree("weak");
    write_file(
        &wt.join(".tabellio/policy.json"),
        &policy(&[("lint", &["true"])]),
    );
    a.git_in(&wt, &["commit", "-q", "-am", "weaker policy"])
        .ok();
    a.tab(&["finish", "weak"]).ok();
    let before = rev(&server, "main");
    let r = a.tab(&["--json", "promote", "weak", "--remote", "origin"]);
    r.code(3);
    let v = r.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "refused", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("ci (missing)"), "{v}");
    assert_eq!(rev(&server, "main"), before);
    assert_eq!(
        ledger_json(&a, "refs/tabellio/runs/weak")["state"],
        "completed"
    );
    assert!(try_rev(&server, "refs/tabellio/runs/weak").is_none());

    // A run with passing `ci` evidence is accepted: the evidence travels in the same push.
    let good = finished_run_policy(&a, "good", "good.txt");
    let (code, p) = a.tab_json(&["promote", "good", "--remote", "origin"]);
    assert_eq!(code, 0, "{p}");
    assert_eq!(rev(&server, "main"), good);
    assert_eq!(
        ledger_json(&server, "refs/tabellio/runs/good")["state"],
        "promoted"
    );
    server.fsck();
    a.fsck();
}

/// Start run `id` from main, commit `file`, finish with the policy's required checks.
fn finished_run_policy(t: &TestEnv, id: &str, file: &str) -> String {
    t.start_with_commit(id, file, "x\n");
    t.tab(&["finish", id]).ok();
    t.git_out(&["rev-parse", &format!("refs/heads/tabellio/{id}")])
}

#[test]
fn sync_needs_a_remote_and_names_the_missing_one() {
    let t = TestEnv::new();
    let (code, v) = t.tab_json(&["sync"]);
    assert_eq!(code, 5, "{v}");
    assert!(v["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("git remote add"));
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    let snap = a.snapshot();
    let (code, v) = a.tab_json(&["sync", "upstream"]);
    assert_eq!(code, 5, "{v}");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("origin"),
        "{v}"
    );
    assert_eq!(a.snapshot(), snap);
    // A URL is not a remote name: its refs could not be tracked under a name.
    let url = server.repo.display().to_string();
    a.tab(&["sync", &url]).code(2);
}

#[test]
fn sync_and_remote_promotion_work_without_a_packed_refs_file() {
    let server = TestEnv::bare_server();
    // `git init` + `git remote add` + `git fetch` (how CI checkouts set up a repository)
    // leaves no packed-refs file.
    let t = TestEnv::new();
    t.git(&["remote", "add", "origin", server.repo.to_str().unwrap()])
        .ok();
    t.git(&["fetch", "-q", "origin"]).ok();
    t.git(&["reset", "-q", "--hard", "origin/main"]).ok();
    t.git(&["branch", "-q", "--set-upstream-to=origin/main"])
        .ok();
    assert!(!t.repo.join(".git/packed-refs").exists());
    t.tab(&["init"]).ok();
    let r = t.tab(&["--json", "sync"]);
    r.ok();
    t.start_with_commit("np1", "np.txt", "np\n");
    t.tab(&["finish", "np1", "--", "true"]).ok();
    let r = t.tab(&["--json", "promote", "np1", "--remote", "origin"]);
    r.ok();
    let head = t.git_out(&["rev-parse", "tabellio/np1"]);
    assert_eq!(server.git_out(&["rev-parse", "main"]), head);
}

#[test]
fn pre_push_does_not_warn_when_the_remote_already_has_our_evidence() {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    a.write(".tabellio/policy.json", &policy(&[("ci", &["true"])]));
    a.git(&["add", "-A"]).ok();
    a.git(&["commit", "-q", "-m", "policy"]).ok();
    a.git(&["push", "-q"]).ok();
    a.tab(&["init", "--hooks"]).ok();
    let head = finished_run_policy(&a, "r1", "r.txt");
    // `sync` takes the evidence to the remote and keeps the tracking copy: a push of main
    // without the notes has nothing to warn about.
    a.tab(&["sync"]).ok();
    let r = a.git(&["push", "origin", &format!("{head}:refs/heads/main")]);
    r.ok();
    assert!(!r.stderr.contains("does not carry"), "{}", r.desc);
}

#[test]
fn a_diverged_ledger_is_resolved_with_the_documented_commands() {
    let (server, a, b) = TestEnv::server_and_two_clones();
    a.tab(&["start", "dv", "--task", "t"]).ok();
    a.tab(&["sync"]).ok();
    b.tab(&["sync"]).ok();
    a.tab(&["abandon", "dv", "-m", "from a"]).ok();
    b.tab(&["abandon", "dv", "-m", "from b"]).ok();
    a.tab(&["sync"]).ok();
    let (code, rb) = b.tab_json(&["sync"]);
    assert_eq!(code, 4, "{rb}");
    let d = &rb["ledgers"]["diverged"][0];
    let (ours, theirs) = (
        d["local"].as_str().unwrap().to_string(),
        d["remote"].as_str().unwrap().to_string(),
    );
    // Keep theirs (docs/sync.md, "Conflicts").
    b.git(&[
        "update-ref",
        "refs/tabellio/runs/dv",
        "refs/tabellio/remotes/origin/runs/dv",
        &ours,
    ])
    .ok();
    let (code, rb) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{rb}");
    assert_eq!(rev(&b, "refs/tabellio/runs/dv"), theirs);
    assert_eq!(rev(&server, "refs/tabellio/runs/dv"), theirs);
}

#[test]
fn init_warns_about_a_refspec_that_overwrites_our_notes() {
    let (_server, a, _b) = TestEnv::server_and_two_clones();
    a.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/notes/*:refs/notes/*",
    ])
    .ok();
    let (code, j) = a.tab_json(&["init"]);
    assert_eq!(code, 0, "{j}");
    let w = j["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("+refs/notes/*:refs/notes/*") && w.contains("--fixed-value"),
        "{w}"
    );
    // The suggested command removes exactly that refspec.
    a.git(&[
        "config",
        "--unset",
        "--fixed-value",
        "remote.origin.fetch",
        "+refs/notes/*:refs/notes/*",
    ])
    .ok();
    let (_, j) = a.tab_json(&["init"]);
    assert_eq!(j["warnings"], serde_json::json!([]));
}

#[test]
fn init_warns_about_a_mirror_refspec_too() {
    let (_server, a, _b) = TestEnv::server_and_two_clones();
    a.git(&["config", "--add", "remote.origin.fetch", "+refs/*:refs/*"])
        .ok();
    let (_, j) = a.tab_json(&["init"]);
    assert!(
        j["warnings"][0]
            .as_str()
            .unwrap()
            .contains("+refs/*:refs/*"),
        "{j}"
    );
}

/// The ledgers of `ids` on `t` (the server's or a clone's), as `<ref> <tip>` lines.
fn ledgers_of(t: &TestEnv, ids: &[String]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let name = format!("refs/tabellio/runs/{id}");
            format!("{name} {}", try_rev(t, &name).unwrap_or_default())
        })
        .collect()
}

/// Runs `r0`..`r<n>` started (and so ledgers to push) in `t`: their ids.
fn started_runs(t: &TestEnv, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("r{i}");
            t.tab(&["start", &id, "--task", "t"]).ok();
            id
        })
        .collect()
}

/// `tabellio.syncPushBytes` bounds what one push carries: with a budget of one byte every ref
/// is its own atomic push; with the default, one push. `--json` says how many and how long.
#[test]
fn sync_pushes_in_chunks_under_the_byte_budget() {
    let (server, a, _b) = TestEnv::server_and_two_clones();
    let ids = started_runs(&a, 3);
    a.git(&["config", "tabellio.syncPushBytes", "1"]).ok();
    let (code, out) = a.tab_json(&["sync"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["pushes"], 3, "{out}");
    assert_eq!(ledgers_of(&server, &ids), ledgers_of(&a, &ids));
    for key in ["fetch_ms", "merge_ms", "push_ms", "total_ms"] {
        assert!(out["took"][key].is_u64(), "{key}: {out}");
    }
    a.git(&["config", "--unset", "tabellio.syncPushBytes"]).ok();
    a.tab(&["start", "r9", "--task", "t"]).ok();
    a.tab(&["start", "r8", "--task", "t"]).ok();
    let (code, out) = a.tab_json(&["sync"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["pushes"], 1, "{out}");
    let human = a.tab(&["sync"]).ok().stdout.clone();
    assert!(human.contains("took "), "{human}");
    server.fsck();
}

/// A sync pushing chunk by chunk, killed (SIGKILL) at random points: nothing on the server is
/// half a chunk, and the next sync pushes only what is not there yet, until every ledger is.
#[test]
fn a_sync_killed_between_chunks_resumes_where_it_stopped() {
    let span = {
        let (_server, a, _b) = TestEnv::server_and_two_clones();
        started_runs(&a, 8);
        a.git(&["config", "tabellio.syncPushBytes", "1"]).ok();
        let started = std::time::Instant::now();
        a.tab(&["sync"]).ok();
        started.elapsed().as_millis() as u64
    };
    for round in 0..crate::crash::land_trials() {
        let (server, a, _b) = TestEnv::server_and_two_clones();
        let ids = started_runs(&a, 8);
        a.git(&["config", "tabellio.syncPushBytes", "1"]).ok();
        let mut child = a.spawn_tab(&["sync"]);
        std::thread::sleep(crate::crash::random_delay_up_to(round, span + span / 4 + 1));
        let _ = child.kill();
        let _ = child.wait();
        // Every ledger on the server is the very tip we have: a chunk lands whole or not.
        let there: Vec<String> = ledgers_of(&server, &ids)
            .into_iter()
            .filter(|l| !l.ends_with(' '))
            .collect();
        let ours = ledgers_of(&a, &ids);
        for l in &there {
            assert!(ours.contains(l), "{l} is not ours: {ours:?}");
        }
        // The killed sync's own `git push` may still land a chunk after the kill; whatever is
        // there is up to date for the next sync, which pushes only the rest.
        // The documented repair: sync again, removing a lock the kill left (a tracking ref is
        // written after each chunk) when sync names it.
        let out = crate::crash::with_stale_locks_removed(&a, &["sync"]).json();
        let published: Vec<String> = out["ledgers"]["published"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| format!("refs/tabellio/runs/{}", p.as_str().unwrap()))
            .collect();
        for l in &there {
            let name = l.split(' ').next().unwrap().to_string();
            assert!(!published.contains(&name), "{name} pushed again: {out}");
        }
        let up_to_date = out["ledgers"]["up_to_date"].as_u64().unwrap() as usize;
        assert_eq!(published.len() + up_to_date, ids.len(), "{out}");
        assert_eq!(
            out["pushes"].as_u64().unwrap() as usize,
            published.len(),
            "{out}"
        );
        assert_eq!(ledgers_of(&server, &ids), ours);
        server.fsck();
        a.fsck();
    }
}

/// A lock a killed process left on a tracking ref: `sync` names it (exit 4, the `rm` to run),
/// writes nothing, and passes once it is removed.
#[test]
fn a_stale_lock_on_a_tracking_ref_is_named_with_the_way_out() {
    if ref_format() == "reftable" {
        // Reftable has one lock for the whole stack; git waits on it and the ref write tests
        // name it. A per-ref lock file is the files backend's.
        return;
    }
    let (_server, a, b) = TestEnv::server_and_two_clones();
    a.tab(&["start", "r1", "--task", "t"]).ok();
    a.tab(&["sync"]).ok();
    let lock = b
        .repo
        .join(".git/refs/tabellio/remotes/origin/runs/r1.lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, "").unwrap();
    let before = b.snapshot();
    let (code, out) = b.tab_json(&["sync"]);
    assert_eq!(code, 4, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("refs/tabellio/remotes/origin/runs/r1 is locked: "),
        "{out}"
    );
    assert!(
        out["error"]["hint"].as_str().unwrap().contains("rm "),
        "{out}"
    );
    assert_eq!(b.snapshot(), before);
    std::fs::remove_file(&lock).unwrap();
    let (code, out) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{out}");
    assert!(b.tab(&["status", "r1"]).ok().stdout.contains("r1"));
}
