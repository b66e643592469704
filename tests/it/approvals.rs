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

#[test]
fn the_approver_must_not_be_the_runs_actor_when_the_policy_says_so() {
    let t = guarded_repo(serde_json::json!({"approval": {"distinct_from_actor": true}}));
    finished_run(
        &t,
        "self",
        &["--actor", "human:committer@example.com"],
        |wt| write_file(&wt.join("tests/b.rs"), "// new\n"),
    );
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
