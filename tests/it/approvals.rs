//! Guarded paths and approvals, end to end: `approve`, and `promote`, the hooks and `verify`
//! refusing a change to guarded paths until a person approved exactly that tree.

use std::path::Path;

use crate::util::*;

/// A policy requiring `readme` and `lint`, protecting `main`, guarding `tests/**`, plus `extra`
/// top-level fields.
fn guarded_policy(required: &[&str], extra: serde_json::Value) -> String {
    let mut p = serde_json::json!({
        "schema": "tabellio.policy/v1",
        "checks": {
            "readme": {"argv": ["test", "-f", "README.md"], "timeout_s": 60},
            "lint": {"argv": ["true"], "timeout_s": 60},
        },
        "required": required,
        "protect": ["refs/heads/main"],
        "guarded": ["tests/**"],
    });
    if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            p.insert(k.clone(), v.clone());
        }
    }
    p.to_string()
}

/// A repository whose `main` has the guarded policy and a test file `tests/a.rs`.
fn guarded_repo(extra: serde_json::Value) -> TestEnv {
    let t = TestEnv::ref_only();
    t.git(&["checkout", "-q", "main"]).ok();
    t.write("tests/a.rs", "#[test] fn a() {}\n");
    t.commit_policy(&guarded_policy(&["readme", "lint"], extra));
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    t
}

/// The verdict on `commit` in `verify --json`'s output `v`.
#[track_caller]
fn verdict_of(v: &serde_json::Value, commit: &str) -> serde_json::Value {
    v["commits"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["commit"] == commit))
        .cloned()
        .unwrap_or_else(|| panic!("{commit} not judged: {v}"))
}

fn head_of(t: &TestEnv, run: &str) -> String {
    t.git_out(&["rev-parse", &format!("refs/heads/tabellio/{run}")])
}

/// Start `run` (with `start_args`), let `change` edit its worktree, commit and finish it.
fn finished_run(t: &TestEnv, run: &str, start_args: &[&str], change: impl FnOnce(&Path)) {
    let mut args = vec!["start", run, "--task", "t", "--base", "main"];
    args.extend_from_slice(start_args);
    t.tab(&args).ok();
    let wt = t.worktree(run);
    change(&wt);
    t.commit_all_in(&wt, "change");
    t.tab(&["finish", run]).ok();
}

/// `promote` is refused with exit 3 naming `paths` and the way out, and nothing moves.
#[track_caller]
fn promote_refused(t: &TestEnv, run: &str, paths: &[&str]) -> String {
    let before = t.snapshot();
    let r = t.tab(&["promote", run]);
    r.code(3);
    for p in paths {
        assert!(r.stderr.contains(p), "{p} not named\n{}", r.desc);
    }
    assert!(
        r.stderr.contains(&format!("git tabellio approve {run}")),
        "{}",
        r.desc
    );
    assert_eq!(t.snapshot(), before, "a refused promote changed refs");
    r.stderr.clone()
}

#[test]
fn a_run_dropping_a_required_check_from_the_policy_needs_an_approval() {
    let t = guarded_repo(serde_json::json!({}));
    finished_run(&t, "weaken", &[], |wt| {
        write_file(
            &wt.join(".tabellio/policy.json"),
            &guarded_policy(&["readme"], serde_json::json!({})),
        );
    });
    promote_refused(&t, "weaken", &[".tabellio/policy.json"]);
    // status says what is missing and what to do.
    let (_, s) = t.tab_json(&["status", "weaken"]);
    assert_eq!(
        s["approval_needed"]["paths"],
        serde_json::json!([".tabellio/policy.json"]),
        "{s}"
    );
    assert_eq!(s["next_action"]["action"], "approve", "{s}");
    // The agent's packet says which of its changes need a person.
    let (_, c) = t.tab_json(&["context", "weaken"]);
    let packet = &c["context"];
    assert_eq!(
        packet["needs_approval"],
        serde_json::json!([".tabellio/policy.json"]),
        "{c}"
    );
    let md = t.tab(&["context", "weaken", "--format", "markdown"]);
    assert!(
        md.stdout
            .contains("needs a person's approval (guarded paths)"),
        "{}",
        md.desc
    );

    let (code, v) = t.tab_json(&["approve", "weaken", "-m", "lint is flaky"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["approval"]["paths"],
        serde_json::json!([".tabellio/policy.json"])
    );
    assert_eq!(v["approval"]["approver"]["id"], "committer@example.com");
    let head = head_of(&t, "weaken");
    let note = t.git_out(&["notes", "--ref=tabellio/approvals", "show", &head]);
    assert!(
        note.contains("\"schema\":\"tabellio.approval/v1\""),
        "{note}"
    );
    assert!(note.contains("lint is flaky"), "{note}");
    // The approval lets the policy change land, but it does not weaken the gate of the run
    // that makes it: the target's required `lint` must still pass on this very tree.
    let r = t.tab(&["promote", "weaken"]);
    r.code(3);
    assert!(r.stderr.contains("lint (missing)"), "{}", r.desc);
    t.tab(&["finish", "weaken", "--check", "readme", "--check", "lint"])
        .ok();
    t.tab(&["promote", "weaken"]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    t.fsck();
}

#[test]
fn deleting_a_guarded_test_is_refused_until_approved_and_again_after_a_change() {
    let t = guarded_repo(serde_json::json!({}));
    finished_run(&t, "del", &[], |wt| {
        std::fs::remove_file(wt.join("tests/a.rs")).unwrap();
    });
    promote_refused(&t, "del", &["tests/a.rs"]);
    t.tab(&["approve", "del"]).ok();
    // The tree changes after the approval: it no longer counts.
    let wt = t.worktree("del");
    t.commit_file_in(&wt, "src.txt", "more\n");
    t.tab(&["finish", "del"]).ok();
    let err = promote_refused(&t, "del", &["tests/a.rs"]);
    assert!(err.contains("changed after it"), "{err}");
    t.tab(&["approve", "del"]).ok();
    t.tab(&["promote", "del"]).ok();
    t.fsck();
}

#[test]
fn a_run_that_touches_no_guarded_path_needs_no_approval_and_cannot_get_one() {
    let t = guarded_repo(serde_json::json!({}));
    finished_run(&t, "plain", &[], |wt| {
        write_file(&wt.join("src.txt"), "x\n")
    });
    let before = t.snapshot();
    t.tab(&["approve", "plain"]).code(3);
    assert_eq!(t.snapshot(), before);
    t.tab(&["promote", "plain"]).ok();
}

/// A repository under `distinct_from_actor` with run `run`, whose actor is the committer (the
/// default approver), finished after writing `file`.
fn run_by_the_committer(run: &str, file: &str) -> TestEnv {
    let t = guarded_repo(serde_json::json!({"approval": {"distinct_from_actor": true}}));
    finished_run(&t, run, &["--actor", "human:committer@example.com"], |wt| {
        write_file(&wt.join(file), "// changed\n")
    });
    t
}

#[test]
fn the_approver_must_not_be_the_runs_actor_when_the_policy_says_so() {
    let t = run_by_the_committer("self", "tests/b.rs");
    let before = t.snapshot();
    let r = t.tab(&["approve", "self"]);
    r.code(3);
    assert!(r.stderr.contains("own actor"), "{}", r.desc);
    assert_eq!(t.snapshot(), before, "a refused approve wrote something");
    t.tab(&["approve", "self", "--actor", "human:ada"]).ok();
    t.tab(&["promote", "self"]).ok();
}

/// An ed25519 key in the test directory: (private key path, public key line).
fn keygen(t: &TestEnv, name: &str) -> (std::path::PathBuf, String) {
    let key = t.path().join(name);
    t.command(
        "ssh-keygen",
        t.path(),
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            name,
            "-f",
            key.to_str().unwrap(),
        ],
    )
    .ok();
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

#[test]
fn under_trust_only_an_approval_signed_by_an_allowed_signer_counts() {
    let t = TestEnv::ref_only();
    let (ada_key, ada_pub) = keygen(&t, "ada");
    let (eve_key, _) = keygen(&t, "eve");
    t.git(&["checkout", "-q", "main"]).ok();
    t.write(
        ".tabellio/allowed_signers",
        &format!("ada@example.com namespaces=\"tabellio\" {ada_pub}\n"),
    );
    t.write("tests/a.rs", "#[test] fn a() {}\n");
    t.commit_policy(&guarded_policy(
        &["readme"],
        serde_json::json!({"trust": {"allowed_signers": ".tabellio/allowed_signers", "require_signed": []}}),
    ));
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    finished_run(&t, "signed", &[], |wt| {
        write_file(&wt.join("tests/a.rs"), "#[test] fn a() { assert!(true) }\n")
    });
    // Unsigned: shown, does not count.
    t.tab(&["approve", "signed", "--no-sign"]).ok();
    let err = promote_refused(&t, "signed", &["tests/a.rs"]);
    assert!(err.contains("unsigned"), "{err}");
    // Signed by a key the allowed signers do not hold.
    t.tab(&["approve", "signed", "--sign-key", eve_key.to_str().unwrap()])
        .ok();
    let err = promote_refused(&t, "signed", &["tests/a.rs"]);
    assert!(err.contains("unknown-signer"), "{err}");
    // Signed by an allowed signer.
    let (code, v) = t.tab_json(&[
        "approve",
        "signed",
        "--actor",
        "human:ada@example.com",
        "--sign-key",
        ada_key.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["approval"]["signature"]["principal"], "ada@example.com");
    t.tab(&["promote", "signed"]).ok();
    t.fsck();
}

#[test]
fn the_reference_transaction_hook_refuses_an_unapproved_guarded_change() {
    let t = guarded_repo(serde_json::json!({}));
    t.tab(&["hooks", "install"]).ok();
    finished_run(&t, "hooked", &[], |wt| {
        write_file(&wt.join("tests/a.rs"), "// emptied\n")
    });
    let head = head_of(&t, "hooked");
    let before = t.snapshot();
    let r = t.git(&["update-ref", "refs/heads/main", &head]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("tests/a.rs"), "{}", r.desc);
    assert!(r.stderr.contains("git tabellio approve"), "{}", r.desc);
    assert_eq!(t.snapshot(), before);
    // verify says the same of the branch's history, for CI.
    let (code, v) = t.tab_json(&["verify", &format!("main..{head}")]);
    assert_ne!(code, 0, "{v}");
    assert_eq!(
        v["commits"][0]["approval"]["verdict"], "unapproved-guarded-change",
        "{v}"
    );
    t.tab(&["approve", "hooked"]).ok();
    let (code, v) = t.tab_json(&["verify", &format!("main..{head}")]);
    assert_eq!(code, 0, "{v}");
    t.git(&["update-ref", "refs/heads/main", &head]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
}

#[test]
fn land_refuses_an_unapproved_guarded_run_and_lands_the_others() {
    let t = guarded_repo(serde_json::json!({}));
    finished_run(&t, "a-guarded", &[], |wt| {
        write_file(&wt.join("tests/a.rs"), "// emptied\n")
    });
    finished_run(&t, "b-plain", &[], |wt| {
        write_file(&wt.join("b.txt"), "b\n")
    });
    let guarded_head = head_of(&t, "a-guarded");
    let (code, j) = t.tab_json(&["land", "--target", "main"]);
    assert_ne!(code, 0, "{j}");
    let results = j["runs"].as_array().unwrap_or_else(|| panic!("{j}"));
    let of = |id: &str| {
        results
            .iter()
            .find(|r| r["run_id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {j}"))
            .clone()
    };
    assert_eq!(of("b-plain")["result"], "landed", "{j}");
    let refused = of("a-guarded");
    assert_eq!(refused["result"], "refused", "{j}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("git tabellio approve a-guarded"),
        "{j}"
    );
    assert_eq!(head_of(&t, "a-guarded"), guarded_head);
    t.fsck();
}

#[test]
fn a_bare_server_reads_the_approvals_the_push_carries() {
    let t = guarded_repo(serde_json::json!({}));
    let server = t.path().join("server.git");
    let server_s = server.to_str().unwrap();
    t.git_in(t.path(), &["init", "-q", "--bare", "-b", "main", server_s])
        .ok();
    t.git(&["remote", "add", "origin", server_s]).ok();
    t.git(&["push", "-q", "origin", "main"]).ok();
    t.tab_in(&server, &["hooks", "install", "--server"]).ok();
    finished_run(&t, "pushed", &[], |wt| {
        write_file(&wt.join("tests/a.rs"), "// emptied\n")
    });
    let head = head_of(&t, "pushed");
    let server_main = t.git_out_in(&server, &["rev-parse", "main"]);
    let refspec = format!("{head}:refs/heads/main");
    let evidence = "refs/notes/tabellio/evidence";
    let approvals = "refs/notes/tabellio/approvals";
    // Evidence but no approval: refused, naming the path.
    let r = t.git(&["push", "--atomic", "origin", &refspec, evidence]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("tests/a.rs"), "{}", r.desc);
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), server_main);
    // Approved here, but the push does not carry the approval: the client's pre-push says so,
    // the server refuses.
    t.tab(&["approve", "pushed"]).ok();
    t.tab(&["hooks", "install"]).ok();
    let r = t.git(&["push", "--atomic", "origin", &refspec, evidence]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr
            .contains("does not carry refs/notes/tabellio/approvals"),
        "{}",
        r.desc
    );
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), server_main);
    // The approval carried in the same atomic push: accepted.
    t.git(&["push", "--atomic", "origin", &refspec, evidence, approvals])
        .ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), head);
    let note = t.git_out_in(
        &server,
        &["notes", "--ref=tabellio/approvals", "show", &head],
    );
    assert!(note.contains("tabellio.approval/v1"), "{note}");
    // CI on the server: the protected branch's history verifies, approval included.
    t.tab_in(&server, &["verify", &format!("{server_main}..main")])
        .ok();
}

/// The approval record noted on `commit`.
fn approval_on(t: &TestEnv, commit: &str) -> serde_json::Value {
    let note = t.git_out(&["notes", "--ref=tabellio/approvals", "show", commit]);
    serde_json::from_str(note.lines().next().unwrap()).unwrap()
}

/// Replace the approvals notes on `commit` and its tree with `rec`, digest recomputed from its
/// content, as someone with write access and the source would.
fn forge_approval(t: &TestEnv, commit: &str, mut rec: serde_json::Value) {
    rec["digest"] = tabellio::trust::signed_digest(&rec).unwrap().into();
    let file = t.path().join("approval.txt");
    write_file(
        &file,
        &format!("{}\n", serde_json::to_string(&rec).unwrap()),
    );
    let tree = t.git_out(&["rev-parse", &format!("{commit}^{{tree}}")]);
    for object in [commit, tree.as_str()] {
        t.git(&[
            "notes",
            "--ref=tabellio/approvals",
            "add",
            "-f",
            "-F",
            file.to_str().unwrap(),
            object,
        ])
        .ok();
    }
}

/// `approval.distinct_from_actor` holds wherever a commit is judged, not only in `approve`:
/// an approval whose approver is the run's actor (written by hand, past `approve`'s refusal)
/// does not count for the reference-transaction hook, `verify`, `promote` or a server's
/// pre-receive. The run's actor is known from the approval record itself (signed with it) and
/// from the run's ledger and its evidence; where none names it (records of older tools), the
/// approval cannot be shown to be someone else's and does not count either (unit-tested).
#[test]
fn an_approval_by_the_runs_own_actor_counts_nowhere() {
    let t = run_by_the_committer("selfie", "tests/a.rs");
    let head = head_of(&t, "selfie");
    t.tab(&["approve", "selfie", "--actor", "human:ada@example.com"])
        .ok();
    let good = approval_on(&t, &head);
    assert_eq!(good["run_actor"]["id"], "committer@example.com", "{good}");
    assert_eq!(
        good["base"],
        t.git_out(&["rev-parse", "main"]).as_str(),
        "{good}"
    );

    // The actor approves itself: the record says so, the ledger says so.
    let mut own = good.clone();
    own["approver"]["id"] = "committer@example.com".into();
    // As an older tool wrote it: no `run_actor`; the ledger still names the actor.
    let mut own_old = own.clone();
    own_old.as_object_mut().unwrap().remove("run_actor");
    // The record lies about the run's actor: the ledger still names the real one.
    let mut lying = own.clone();
    lying["run_actor"]["id"] = "someone-else@example.com".into();

    t.tab(&["hooks", "install"]).ok();
    for (case, rec) in [("own", &own), ("own_old", &own_old), ("lying", &lying)] {
        forge_approval(&t, &head, rec.clone());
        let (code, v) = t.tab_json(&["verify", &format!("main..{head}")]);
        assert_ne!(code, 0, "{case}: {v}");
        let approval = &v["commits"][0]["approval"];
        assert_eq!(
            approval["verdict"], "unapproved-guarded-change",
            "{case}: {v}"
        );
        assert!(
            approval["not_counted"].to_string().contains("own actor"),
            "{case}: {v}"
        );
        let before = t.snapshot();
        let r = t.git(&["update-ref", "refs/heads/main", &head]);
        assert_ne!(r.code, 0, "{case}: {}", r.desc);
        assert!(r.stderr.contains("own actor"), "{case}: {}", r.desc);
        let err = promote_refused(&t, "selfie", &["tests/a.rs"]);
        assert!(err.contains("own actor"), "{case}: {err}");
        assert_eq!(t.snapshot(), before, "{case}");
    }

    // A server has no ledger: it judges by the record alone.
    let server = t.path().join("server.git");
    let server_s = server.to_str().unwrap();
    t.git_in(t.path(), &["init", "-q", "--bare", "-b", "main", server_s])
        .ok();
    t.git(&["remote", "add", "origin", server_s]).ok();
    t.git(&["push", "-q", "--no-verify", "origin", "main"]).ok();
    t.tab_in(&server, &["hooks", "install", "--server"]).ok();
    let server_main = t.git_out_in(&server, &["rev-parse", "main"]);
    let push = |t: &TestEnv| {
        t.git(&[
            "push",
            "--no-verify",
            "--atomic",
            "--force",
            "origin",
            &format!("{head}:refs/heads/main"),
            "refs/notes/tabellio/evidence",
            "refs/notes/tabellio/approvals",
        ])
    };
    // Without `run_actor` the server still knows the actor: the evidence the push carries
    // names it.
    for (case, rec, why) in [
        ("own", &own, "own actor"),
        ("own, named by the evidence", &own_old, "own actor"),
    ] {
        forge_approval(&t, &head, rec.clone());
        let r = push(&t);
        assert_ne!(r.code, 0, "{case}: {}", r.desc);
        assert!(r.stderr.contains(why), "{case}: {}", r.desc);
        assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), server_main);
    }
    // The genuine approval names the actor, who is not the approver: accepted everywhere.
    forge_approval(&t, &head, good.clone());
    push(&t).ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), head);
    t.tab(&["verify", &format!("main..{head}")]).ok();
    t.tab(&["promote", "selfie"]).ok();
}

/// `land` restacks an approved run whose target moved: its approval carries over to the
/// restacked commit when the guarded part of the change is exactly the one approved (same
/// content before and after at every guarded path the restack changes). The approval is noted
/// on the landed commit, so the reference-transaction hook that judges the landing and `verify`
/// on the branch's history accept it too.
/// With the hooks installed: run `a-guarded` changes the guarded `tests/a.rs` in two commits
/// and is approved; run `b-plain` lands first, so `a-guarded` must be restacked. The test
/// environment and `main` before `a-guarded` lands.
fn approved_run_behind_a_moved_target() -> (TestEnv, String) {
    let t = guarded_repo(serde_json::json!({}));
    t.tab(&["hooks", "install"]).ok();
    // Two commits, both changing the guarded file: every replayed step is covered.
    finished_run(&t, "a-guarded", &[], |wt| {
        write_file(&wt.join("tests/a.rs"), "// emptying\n");
        t.commit_all_in(wt, "first step");
        write_file(&wt.join("tests/a.rs"), "// emptied, with a reason\n")
    });
    finished_run(&t, "b-plain", &[], |wt| {
        write_file(&wt.join("b.txt"), "b\n")
    });
    t.tab(&["approve", "a-guarded", "-m", "a is obsolete"]).ok();
    t.tab(&["land", "b-plain", "--target", "main"]).ok();
    let before = t.git_out(&["rev-parse", "main"]);
    (t, before)
}

#[test]
fn land_carries_an_approval_over_a_restack_that_keeps_the_guarded_change() {
    let (t, before) = approved_run_behind_a_moved_target();
    let approved_head = head_of(&t, "a-guarded");

    let (code, j) = t.tab_json(&["land", "a-guarded", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let landing = &j["runs"][0];
    assert_eq!(landing["result"], "landed", "{j}");
    assert_eq!(landing["restack"], "replay", "{j}");
    let landed = t.git_out(&["rev-parse", "main"]);
    assert_eq!(landing["landed"], landed.as_str(), "{j}");
    assert_ne!(landed, approved_head);
    // The approval of the run's head is noted on the landed commit, unchanged.
    let carried = approval_on(&t, &landed);
    assert_eq!(carried["commit"], approved_head.as_str(), "{carried}");
    assert_eq!(carried["reason"], "a is obsolete", "{carried}");
    // CI on the protected branch agrees.
    // (The run's middle commit has no evidence of its own; its guarded step is approved.)
    let (_, v) = t.tab_json(&["verify", &format!("{before}..main")]);
    let commits = v["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2, "{v}");
    assert_eq!(commits[0]["verified"], true, "{v}");
    for c in commits {
        assert_eq!(c["approval"]["verdict"], "approved", "{v}");
    }
    // So does the reference-transaction hook, asked to make the same move with stock git.
    t.git(&[
        "-c",
        "core.hooksPath=/dev/null",
        "update-ref",
        "refs/heads/main",
        &before,
    ])
    .ok();
    t.git(&["update-ref", "refs/heads/main", &landed]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), landed);
    t.fsck();
}

/// A restack that changes the guarded content the approval saw does not carry it over: `land`
/// refuses the run naming the path and the rule, and nothing moves.
#[test]
fn land_refuses_a_restack_that_changes_the_approved_guarded_content() {
    let t = guarded_repo(serde_json::json!({}));
    let lines: String = (1..=10).map(|i| format!("// line {i}\n")).collect();
    t.git(&["checkout", "-q", "main"]).ok();
    t.write("tests/m.rs", &lines);
    t.commit_all("a guarded file of ten lines");
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    let edited = |line: usize| {
        let text = lines.replace(
            &format!("// line {line}\n"),
            &format!("// line {line} edited\n"),
        );
        move |wt: &Path| write_file(&wt.join("tests/m.rs"), &text)
    };
    finished_run(&t, "c-first-line", &[], edited(1));
    finished_run(&t, "e-last-line", &[], edited(10));
    t.tab(&["approve", "c-first-line"]).ok();
    t.tab(&["approve", "e-last-line"]).ok();
    t.tab(&["land", "e-last-line", "--target", "main"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let c_head = head_of(&t, "c-first-line");
    // The restack merges cleanly, but tests/m.rs now holds both edits: not what was approved.
    let (code, j) = t.tab_json(&["land", "c-first-line", "--target", "main"]);
    assert_eq!(code, 1, "{j}");
    let landing = &j["runs"][0];
    assert_eq!(landing["result"], "refused", "{j}");
    assert_eq!(landing["state"], "completed", "{j}");
    let reason = landing["reason"].as_str().unwrap();
    assert!(reason.contains("tests/m.rs"), "{reason}");
    assert!(reason.contains("not the one it approved"), "{reason}");
    assert!(
        reason.contains("git tabellio approve c-first-line"),
        "{reason}"
    );
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);
    assert_eq!(head_of(&t, "c-first-line"), c_head);
}

/// The same rule when `land` squashes the restacked run into one commit.
#[test]
fn land_carries_an_approval_over_a_squash() {
    let (t, before) = approved_run_behind_a_moved_target();
    let (code, j) = t.tab_json(&["land", "a-guarded", "--target", "main", "--squash"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["restack"], "squash", "{j}");
    let (code, v) = t.tab_json(&["verify", &format!("{before}..main")]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["commits"][0]["approval"]["verdict"], "approved", "{v}");
}

/// `verify a..b` where `a` is reachable from `b` only through a merge's second parent: `a` is
/// not on `b`'s first-parent line, so the whole range is one step judged at `b` (from `a`'s
/// tree to `b`'s), and the commits below `b` are not steps of their own.
#[test]
fn verify_judges_a_range_whose_start_is_off_the_first_parent_line_as_one_step() {
    let t = guarded_repo(serde_json::json!({}));
    t.git(&["checkout", "-q", "-b", "side", "main"]).ok();
    t.write("tests/a.rs", "// emptied\n");
    t.git(&["commit", "-q", "-am", "empty the test"]).ok();
    let emptied = t.git_out(&["rev-parse", "HEAD"]);
    t.git(&["checkout", "-q", "-b", "moved", "main"]).ok();
    t.write("README.md", "moved on\n");
    t.git(&["commit", "-q", "-am", "unguarded change"]).ok();
    t.git(&["checkout", "-q", "side"]).ok();
    t.git(&["merge", "-q", "--no-ff", "-m", "merge moved", "moved"])
        .ok();
    let merge = t.git_out(&["rev-parse", "HEAD"]);
    let before = t.snapshot();
    let (code, v) = t.tab_json(&["verify", "moved..side"]);
    assert_ne!(code, 0, "{v}");
    let verdict = |c: &str| verdict_of(&v, c);
    assert_eq!(
        verdict(&merge)["approval"]["verdict"],
        "unapproved-guarded-change",
        "{v}"
    );
    assert!(verdict(&emptied).get("approval").is_none(), "{v}");
    assert_eq!(t.snapshot(), before, "verify wrote something");
}

/// A range whose commits drop `guarded` from the policy is still judged by the policy at its
/// start: the first step changes the policy file, which that policy guards, and the later
/// steps are unguarded. `verify` of a range that no policy guards at all (the range after
/// that) judges no step.
#[test]
fn verify_of_a_range_that_drops_the_guard_is_judged_by_the_policy_it_starts_from() {
    let t = guarded_repo(serde_json::json!({}));
    let start = t.git_out(&["rev-parse", "main"]);
    t.git(&["checkout", "-q", "-b", "unguard", "main"]).ok();
    let mut policy: serde_json::Value =
        serde_json::from_str(&guarded_policy(&["readme", "lint"], serde_json::json!({}))).unwrap();
    policy.as_object_mut().unwrap().remove("guarded");
    t.commit_policy(&policy.to_string());
    let dropped = t.git_out(&["rev-parse", "HEAD"]);
    t.write("tests/a.rs", "// emptied\n");
    t.git(&["commit", "-q", "-am", "empty the test, now unguarded"])
        .ok();
    let emptied = t.git_out(&["rev-parse", "HEAD"]);
    let before = t.snapshot();
    let (code, v) = t.tab_json(&["verify", &format!("{start}..unguard")]);
    assert_ne!(code, 0, "{v}");
    let verdict = |c: &str| verdict_of(&v, c);
    let approval = &verdict(&dropped)["approval"];
    assert_eq!(approval["verdict"], "unapproved-guarded-change", "{v}");
    assert_eq!(
        approval["paths"],
        serde_json::json!([".tabellio/policy.json"]),
        "{v}"
    );
    assert!(verdict(&emptied).get("approval").is_none(), "{v}");
    // From the commit that dropped it on, nothing is guarded: no step is judged.
    let (_, v) = t.tab_json(&["verify", &format!("{dropped}..unguard")]);
    let commits = v["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{v}");
    assert!(commits[0].get("approval").is_none(), "{v}");
    assert_eq!(t.snapshot(), before, "verify wrote something");
}
