//! Records from a newer version of the tool: a ledger or evidence record with a schema or a
//! field this version does not know is refused naming it, with a hint to upgrade.

use serde_json::Value;

use crate::util::*;

/// A repository with a policy and run `r1` started.
fn repo_with_a_run() -> TestEnv {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("test", &["grep", "-qx", "2", "value.txt"])]));
    t.tab(&["start", "r1", "--task", "make value.txt say 2"])
        .ok();
    t
}

/// Append a commit to `r1`'s ledger whose `run.json` (as stored now, `tabellio.run/v2`) is
/// changed by `edit`, the rest of the tree kept: a ledger a newer version wrote.
fn ledger_from_the_future(t: &TestEnv, edit: impl FnOnce(&mut Value)) {
    let ledger = "refs/tabellio/runs/r1";
    let mut run: Value =
        serde_json::from_str(&t.git_out(&["show", &format!("{ledger}:run.json")])).unwrap();
    assert_eq!(run["schema"], "tabellio.run/v2");
    edit(&mut run);
    let json = serde_json::to_string_pretty(&run).unwrap();
    let blob = t.command_with_input(
        "git",
        &t.repo,
        &[],
        &["hash-object", "-w", "--stdin"],
        &json,
    );
    blob.ok();
    let mut entries: String = t
        .git_out(&["ls-tree", ledger])
        .lines()
        .filter(|l| !l.ends_with("\trun.json"))
        .map(|l| format!("{l}\n"))
        .collect();
    entries.push_str(&format!("100644 blob {}\trun.json\n", blob.stdout.trim()));
    let tree = t.command_with_input("git", &t.repo, &[], &["mktree"], &entries);
    tree.ok();
    let parent = t.git_out(&["rev-parse", ledger]);
    let commit = t.git_out(&[
        "commit-tree",
        tree.stdout.trim(),
        "-p",
        &parent,
        "-m",
        "future",
    ]);
    t.git(&["update-ref", ledger, &commit, &parent]).ok();
}

/// A command on a run whose ledger a newer version wrote is refused, naming the schema (and
/// the field it does not know), with the hint to upgrade, and writes nothing.
#[track_caller]
fn refused_as_from_a_newer_version(t: &TestEnv, wants: &[&str]) {
    let before = t.git_out(&["for-each-ref"]);
    let r = t.tab(&["--json", "checkpoint", "r1"]);
    r.code(3);
    let e = &r.json()["error"];
    let message = e["message"].as_str().unwrap();
    for want in wants {
        assert!(message.contains(want), "{want}: {}", r.desc);
    }
    assert!(
        e["hint"].as_str().unwrap().contains("upgrade git-tabellio"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out(&["for-each-ref"]), before);
    // `status` reports it (exit 0) with the same words.
    let (code, v) = t.tab_json(&["status", "r1"]);
    assert_eq!(code, 0, "{v}");
    let reason = v["unreadable_refs"][0]["message"].as_str().unwrap();
    for want in wants {
        assert!(reason.contains(want), "{want}: {v}");
    }
}

#[test]
fn a_ledger_from_a_newer_version_is_refused_naming_its_schema() {
    let t = repo_with_a_run();
    let good = t.git_out(&["rev-parse", "refs/tabellio/runs/r1"]);
    // An addition this version does not know, in the schema it does.
    ledger_from_the_future(&t, |run| {
        run["merge_train"] = serde_json::json!({"slot": 3})
    });
    refused_as_from_a_newer_version(
        &t,
        &[
            "tabellio.run/v2",
            "`merge_train`",
            "written by a newer version",
        ],
    );
    // A schema this version does not know.
    t.git(&["update-ref", "refs/tabellio/runs/r1", &good]).ok();
    ledger_from_the_future(&t, |run| run["schema"] = "tabellio.run/v3".into());
    refused_as_from_a_newer_version(&t, &["\"tabellio.run/v3\"", "upgrade git-tabellio"]);
}

#[test]
fn evidence_from_a_newer_version_is_named_with_a_hint_to_upgrade() {
    let t = repo_with_a_run();
    let wt = t.worktree("r1");
    t.commit_file_in(&wt, "value.txt", "2\n");
    t.tab_in(&wt, &["finish"]).ok();
    let head = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    let line = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    let mut record: Value = serde_json::from_str(&line).unwrap();
    let mut v2 = record.clone();
    v2["schema"] = "tabellio.evidence/v2".into();
    record["attestation"] = "future".into();
    let cases = [
        (v2, vec!["unknown schema \"tabellio.evidence/v2\""]),
        (
            record,
            vec![
                "tabellio.evidence/v1",
                "`attestation`",
                "written by a newer version",
            ],
        ),
    ];
    for (future, wants) in cases {
        t.forge_evidence(&head, &format!("{future}\n"));
        let r = t.tab(&["evidence", &head]);
        r.ok();
        for want in &wants {
            assert!(r.stdout.contains(want), "{want}: {}", r.desc);
        }
        assert!(
            r.stdout.contains("hint: ") && r.stdout.contains("upgrade"),
            "{}",
            r.desc
        );
        let (_, v) = t.tab_json(&["evidence", &head]);
        let problem = v["records"][0]["problem"].as_str().unwrap();
        assert!(problem.contains(wants[0]), "{v}");
    }
}
