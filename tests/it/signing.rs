//! Signing that cannot loop: under a target whose policy requires signed evidence, `finish` and
//! `validate` refuse before any check runs when the records they would write could not count
//! (no key, `--no-sign`, or a key the allowed signers there do not grant), naming the set-up
//! steps; following those steps, `finish`, `promote`/`land` and `verify` pass. `promote`'s
//! refusal of unsigned evidence names the set-up steps, and `finish` only once a key counts.

use std::path::{Path, PathBuf};

use crate::util::*;

use crate::trust::{keygen, public};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A repository whose `main` requires `count`, signed: the check appends a line to a counter
/// file outside the repository, so a check that ran shows there. `ci` is the only allowed
/// signer, `old` expired in 2020; both keys live outside the repository.
struct Signed {
    t: TestEnv,
    counter: PathBuf,
    old: PathBuf,
}

/// The policy requiring `count` (appending to `counter`), with `trust` when `signed`.
fn count_policy(counter: &Path, signed: bool) -> String {
    let script = format!("echo ran >> '{}'", counter.display());
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("count", &["sh", "-c", &script])])).unwrap();
    if signed {
        p["trust"] = serde_json::json!({
            "allowed_signers": ".tabellio/allowed_signers",
            "require_signed": ["count"],
        });
    }
    p.to_string()
}

fn signed_repo() -> Signed {
    let t = TestEnv::new();
    let keys = t.path().join("keys");
    let (ci, old) = (keygen(&keys, "ci"), keygen(&keys, "old"));
    t.write(
        ".tabellio/allowed_signers",
        &format!(
            "ci@example.com namespaces=\"tabellio\" {}\nold@example.com valid-before=\"20200101\" {}\n",
            public(&ci),
            public(&old)
        ),
    );
    let counter = t.path().join("counter");
    t.commit_policy(&count_policy(&counter, true));
    Signed { t, counter, old }
}

/// How many times the check ran.
fn runs(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |c| c.lines().count())
}

/// `--json <args>` is refused with exit 3 before any check ran and without writing anything;
/// the error.
#[track_caller]
fn refused_before_running(sg: &Signed, args: &[&str]) -> serde_json::Value {
    let before = sg.t.snapshot();
    let ran = runs(&sg.counter);
    let (code, j) = sg.t.tab_json(args);
    assert_eq!(code, 3, "{args:?}: {j}");
    assert_eq!(runs(&sg.counter), ran, "{args:?}: a check ran: {j}");
    assert_eq!(sg.t.snapshot(), before, "{args:?} wrote something: {j}");
    j["error"].clone()
}

/// The set-up steps a refusal names, as commands.
#[track_caller]
fn assert_names_the_set_up(error: &serde_json::Value) {
    let hint = error["hint"].as_str().unwrap_or_default();
    for step in [
        "ssh-keygen -t ed25519 -f ",
        " -N ''",
        "git config user.signingKey ",
        "git config gpg.format ssh",
        "namespaces=\"tabellio\"",
        ".tabellio/allowed_signers",
        "git commit",
    ] {
        assert!(hint.contains(step), "the hint lacks {step:?}: {error}");
    }
}

/// Run, in the main checkout, the commands of a hint's set-up steps (its indented lines), as a
/// reader would paste them.
fn follow(t: &TestEnv, hint: &str) {
    let script: Vec<&str> = hint
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert!(script.len() >= 5, "no steps in {hint}");
    t.command("bash", &t.repo, &["-e", "-c", &script.join("\n")])
        .ok();
}

#[test]
fn without_a_key_finish_and_validate_refuse_before_running_and_the_hint_leads_to_verify() {
    let sg = signed_repo();
    let t = &sg.t;
    t.git(&["config", "user.email", "dev@example.com"]).ok();
    t.started_run("r1", "r1.txt");
    let err = refused_before_running(&sg, &["finish", "r1"]);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("count"), "{err}");
    assert!(message.contains("main"), "{err}");
    assert_names_the_set_up(&err);
    let hint = err["hint"].as_str().unwrap();
    assert!(hint.contains("`git tabellio finish r1`"), "{err}");
    assert!(hint.contains("`git tabellio land r1`"), "{err}");
    let err = refused_before_running(&sg, &["validate", "main"]);
    assert_names_the_set_up(&err);
    // `--no-sign` asks for records that cannot count: refused the same way.
    let err = refused_before_running(&sg, &["finish", "r1", "--no-sign"]);
    assert!(
        err["message"].as_str().unwrap().contains("--no-sign"),
        "{err}"
    );

    // Follow the hint: make a key, configure git, allow the key on main.
    let hint = refused_before_running(&sg, &["finish", "r1"])["hint"]
        .as_str()
        .unwrap()
        .to_string();
    let main = t.git_out(&["rev-parse", "main"]);
    follow(t, &hint);
    assert_ne!(t.git_out(&["rev-parse", "main"]), main, "nothing committed");
    assert!(t
        .git_out(&["show", "main:.tabellio/allowed_signers"])
        .contains("dev@example.com namespaces=\"tabellio\" ssh-ed25519 "));

    // The refused run finishes now; main moved under it, so it lands (restacked, signed).
    let (code, j) = t.tab_json(&["finish", "r1"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(runs(&sg.counter), 1);
    let (code, j) = t.tab_json(&["land", "r1", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(
        j["commits"][0]["checks"][0]["signer"]["principal"], "dev@example.com",
        "{j}"
    );

    // A run started after the set-up finishes and promotes.
    t.started_run("r2", "r2.txt");
    let (code, j) = t.tab_json(&["finish", "r2"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["promote", "r2"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");

    // `validate` the same: a commit nobody validated yet gets signed evidence that verifies.
    t.commit_file_in(&t.repo, "later.txt", "later\n");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 1, "{j}");
    let (code, j) = t.tab_json(&["validate", "main"]);
    assert_eq!(code, 0, "{j}");
    assert!(j["evidence"][0]["signature"]["sig"].is_string(), "{j}");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");
}

#[test]
fn a_key_the_allowed_signers_do_not_grant_is_refused_before_running() {
    let sg = signed_repo();
    let t = &sg.t;
    let other = keygen(&t.path().join("keys"), "other");
    let other_b64 = public(&other).split(' ').nth(1).unwrap().to_string();
    t.started_run("r1", "r1.txt");
    for args in [
        vec!["finish", "r1", "--sign-key", s(&other)],
        vec!["validate", "main", "--sign-key", s(&other)],
    ] {
        let err = refused_before_running(&sg, &args);
        assert!(
            err["message"].as_str().unwrap().contains("unknown-signer"),
            "{err}"
        );
        // The line that would allow this very key, and the steps for another one.
        let hint = err["hint"].as_str().unwrap();
        assert!(
            hint.contains(&format!("namespaces=\"tabellio\" ssh-ed25519 {other_b64}")),
            "{err}"
        );
        assert_names_the_set_up(&err);
    }
    // An expired key counts no more than an unknown one.
    let err = refused_before_running(&sg, &["finish", "r1", "--sign-key", s(&sg.old)]);
    assert!(
        err["message"].as_str().unwrap().contains("signer-expired"),
        "{err}"
    );
    // The key configured in git, by its public half as git's documentation does it.
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&[
        "config",
        "user.signingKey",
        &format!("{}.pub", other.display()),
    ])
    .ok();
    let err = refused_before_running(&sg, &["finish", "r1"]);
    assert!(err["hint"].as_str().unwrap().contains(&other_b64), "{err}");

    // Allowing exactly the line the hint names lets the same key finish.
    let line = err["hint"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::trim)
        .find(|l| l.contains(&other_b64))
        .unwrap()
        .to_string();
    let signers = t.repo.join(".tabellio/allowed_signers");
    let mut text = std::fs::read_to_string(&signers).unwrap();
    text.push_str(&format!("{line}\n"));
    t.write(".tabellio/allowed_signers", &text);
    t.commit_all("allow the other key");
    let (code, j) = t.tab_json(&["finish", "r1"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["land", "r1", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");
}

/// Checks the policy does not require signed need no key: `finish` runs them.
#[test]
fn checks_outside_require_signed_need_no_key() {
    let t = TestEnv::new();
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("a", &["true"]), ("b", &["true"])])).unwrap();
    p["trust"] = serde_json::json!({
        "allowed_signers": ".tabellio/allowed_signers",
        "require_signed": ["b"],
    });
    t.write(".tabellio/allowed_signers", "");
    t.commit_policy(&p.to_string());
    t.started_run("r1", "r1.txt");
    let (code, j) = t.tab_json(&["finish", "r1", "--check", "a"]);
    // Runs `a` (the run does not complete: `b` is still required), never refused for a key.
    assert_eq!(code, 1, "{j}");
    assert_eq!(j["evidence"][0]["check"]["name"], "a", "{j}");
    let (code, j) = t.tab_json(&["finish", "r1", "--check", "b"]);
    assert_eq!(code, 3, "{j}");
}

/// Evidence made before the target required signatures: `promote` refuses it as `unsigned`
/// and does not send the user back to a `finish` that would write the same record. With a key
/// that counts configured, it says `finish` now signs.
#[test]
fn promote_refusing_unsigned_evidence_names_the_set_up_not_the_same_finish() {
    let t = TestEnv::new();
    let counter = t.path().join("counter");
    t.commit_policy(&count_policy(&counter, false));
    t.started_run("r1", "r1.txt");
    t.tab(&["finish", "r1"]).ok();
    // Main starts to require signatures.
    let key = keygen(&t.path().join("keys"), "dev");
    t.write(
        ".tabellio/allowed_signers",
        &format!("dev@example.com namespaces=\"tabellio\" {}\n", public(&key)),
    );
    t.commit_policy(&count_policy(&counter, true));
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 3, "{j}");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("count (unsigned)"),
        "{j}"
    );
    assert_names_the_set_up(&j["error"]);
    let hint = j["error"]["hint"].as_str().unwrap();
    assert!(
        !hint.starts_with("run the checks again"),
        "the hint loops back to finish: {hint}"
    );
    assert!(hint.contains("refuses to run without one"), "{hint}");
    // With the allowed key configured, finishing again is the way out, and it works.
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&["config", "user.signingKey", s(&key)]).ok();
    let (code, j) = t.tab_json(&["promote", "r1"]);
    assert_eq!(code, 3, "{j}");
    let hint = j["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("is allowed at main"), "{hint}");
    assert!(hint.contains("`git tabellio finish r1`"), "{hint}");
    t.tab(&["finish", "r1"]).ok();
    let (code, j) = t.tab_json(&["land", "r1", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");
}

/// CI's key comes from a secret: a private key file with no `.pub` beside it. Its public half
/// is read from the file, so the records claim the principal the allowed signers grant it, and
/// verify.
#[test]
fn a_private_key_file_alone_signs_as_its_allowed_principal() {
    let sg = signed_repo();
    let t = &sg.t;
    let ci = t.path().join("keys/ci");
    let secret = t.path().join("secret_key");
    std::fs::copy(&ci, &secret).unwrap();
    let (code, j) = t.tab_json(&["validate", "main", "--sign-key", s(&secret)]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(
        j["evidence"][0]["signature"]["principal"], "ci@example.com",
        "{j}"
    );
    let (code, j) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{j}");
}

/// `land` under a policy requiring signed evidence: a landing that must run checks (the target
/// moved, so the run is restacked onto a new tree) with no key that counts is refused before
/// any check runs, naming the set-up and `land` again; with the key it lands. A landing that
/// runs no check needs no key.
#[test]
fn land_refuses_before_running_checks_whose_records_could_not_count() {
    let sg = signed_repo();
    let t = &sg.t;
    let ci = t.path().join("keys/ci");
    t.started_run("moved", "moved.txt");
    t.tab(&["finish", "moved", "--sign-key", s(&ci)]).ok();
    t.started_run("plain", "plain.txt");
    t.tab(&["finish", "plain", "--sign-key", s(&ci)]).ok();
    // `plain` lands as it was validated: no check runs, no key is needed.
    let ran = runs(&sg.counter);
    t.tab(&["land", "plain", "--target", "main"]).ok();
    assert_eq!(runs(&sg.counter), ran);
    // `moved` must be restacked onto the new tip: its checks would run, unsigned.
    let err = refused_before_running(&sg, &["land", "moved", "--target", "main"]);
    assert!(
        err["message"].as_str().unwrap().contains("nothing was run"),
        "{err}"
    );
    assert_names_the_set_up(&err);
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("`git tabellio land --target main` again"),
        "{err}"
    );
    let (code, j) = t.tab_json(&["land", "moved", "--target", "main", "--sign-key", s(&ci)]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(runs(&sg.counter), ran + 1);
    t.tab(&["verify", "main"]).ok();
}

/// `loop --promote` under a policy requiring signed evidence is refused before the agent or a
/// check runs (the loop never signs, so its promotion could not succeed); the hint's way, a
/// signed `finish` and `promote`, works.
#[test]
fn loop_promote_is_refused_before_running_when_the_loop_could_not_sign() {
    let sg = signed_repo();
    let t = &sg.t;
    t.started_run("looped", "looped.txt");
    let err = refused_before_running(&sg, &["loop", "looped", "--promote", "--", "true"]);
    let hint = err["hint"].as_str().unwrap();
    assert!(
        hint.contains("git tabellio finish looped --sign-key"),
        "{err}"
    );
    let ci = t.path().join("keys/ci");
    t.tab(&["finish", "looped", "--sign-key", s(&ci)]).ok();
    t.tab(&["promote", "looped"]).ok();
    t.tab(&["verify", "main"]).ok();
}

/// A `worker` whose records could not count under the target tip's policy is refused before it
/// runs a check of a candidate (exit 3, the set-up steps), and releases its claim; with a key
/// that counts it validates the candidate.
#[test]
fn a_worker_that_could_not_sign_is_refused_before_running() {
    let sg = signed_repo();
    let t = &sg.t;
    let ci = t.path().join("keys/ci");
    for id in ["w1", "w2"] {
        t.started_run(id, &format!("{id}.txt"));
        t.tab(&["finish", id, "--sign-key", s(&ci)]).ok();
    }
    // A lander publishes the stack (w2 restacked onto w1: its checks must run) and is stopped.
    let mut lander = t.spawn_tab(&["land", "--lanes", "1", "--target", "main"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let candidates = || {
        t.git_out(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/tabellio/candidates/",
        ])
    };
    while candidates().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    lander.kill().ok();
    lander.wait().ok();
    assert!(
        !candidates().is_empty(),
        "the lander published no candidate"
    );
    let err = refused_before_running(&sg, &["worker", "--once", "--id", "keyless"]);
    assert_names_the_set_up(&err);
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("`git tabellio worker` again"),
        "{err}"
    );
    let ran = runs(&sg.counter);
    let (code, w) = t.tab_json(&["worker", "--once", "--id", "ci", "--sign-key", s(&ci)]);
    assert_eq!(code, 0, "{w}");
    assert!(runs(&sg.counter) > ran, "{w}");
}
