//! Signed evidence: under a policy with `trust`, a required check counts only when its record is
//! signed by a key the allowed signers (read from the target's commit) grant. Every other record
//! is refused by `verify`, `promote`, `land`, the reference-transaction hook and pre-receive,
//! with the verdict named and nothing moved.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// An ed25519 key pair `<dir>/<name>` (private) and `<name>.pub`, made with ssh-keygen.
pub(crate) fn keygen(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen runs");
    assert!(out.status.success(), "{out:?}");
    key
}

pub(crate) fn public(key: &Path) -> String {
    std::fs::read_to_string(format!("{}.pub", key.display()))
        .unwrap()
        .trim()
        .to_string()
}

/// A repository whose `main` requires `readme`, signed: `ci` is allowed, `old` expired in 2020,
/// `other` is not in the file. The keys live outside the repository.
struct Trusted {
    t: TestEnv,
    ci: PathBuf,
    old: PathBuf,
    other: PathBuf,
}

fn trusted() -> Trusted {
    let t = TestEnv::new();
    let keys = t.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (ci, old, other) = (
        keygen(&keys, "ci"),
        keygen(&keys, "old"),
        keygen(&keys, "other"),
    );
    t.write(
        ".tabellio/allowed_signers",
        &format!(
            "ci@example.com namespaces=\"tabellio\" {}\nold@example.com valid-before=\"20200101\" {}\n",
            public(&ci),
            public(&old)
        ),
    );
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["trust"] = serde_json::json!({
        "allowed_signers": ".tabellio/allowed_signers",
        "require_signed": ["readme"],
    });
    t.commit_policy(&p.to_string());
    Trusted { t, ci, old, other }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Start `id` from main, commit a file, finish with `finish_args`; the run head.
fn finished(t: &TestEnv, id: &str, finish_args: &[&str]) -> String {
    let wt = t.started_run(id, &format!("{id}.txt"));
    let mut args = vec!["finish", id];
    args.extend_from_slice(finish_args);
    t.tab(&args).ok();
    t.git_out_in(&wt, &["rev-parse", "HEAD"])
}

/// Start `id`, finish it signed by `ci`, then make its record one that does not count, as a
/// tool that signed with whatever key it had (or none) would have written it: the signature
/// taken off (`None`), or made by `key` claiming `principal`. `finish` itself refuses to write
/// such records under `trust`. The run head.
fn finished_untrusted(t: &TestEnv, ci: &Path, id: &str, signer: Option<(&Path, &str)>) -> String {
    let head = finished(t, id, &["--sign-key", s(ci)]);
    let mut rec = record_on(t, &head);
    match signer {
        None => {
            rec.as_object_mut().unwrap().remove("signature");
        }
        Some((key, principal)) => {
            rec["signature"] = serde_json::json!({
                "format": "ssh",
                "principal": principal,
                "key_fingerprint": fingerprint(key),
                "sig": ssh_sign(key, rec["digest"].as_str().unwrap()),
            });
        }
    }
    t.forge_evidence(&head, &resealed(rec));
    head
}

/// `SHA256:…` of `key`, as ssh-keygen prints it.
fn fingerprint(key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(format!("{}.pub", key.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string()
}

/// `message` signed by `key` in namespace `tabellio`: the armored signature.
fn ssh_sign(key: &Path, message: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "tabellio", "-f"])
        .arg(key)
        .env_remove("SSH_AUTH_SOCK")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(message.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The evidence record of `readme` noted on `commit`.
fn record_on(t: &TestEnv, commit: &str) -> serde_json::Value {
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", commit]);
    note.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["check"]["name"] == "readme")
        .expect("a readme record")
}

/// `rec` with its digest recomputed from its content (as a forger with the source would).
pub(crate) fn resealed(mut rec: serde_json::Value) -> String {
    rec["digest"] = tabellio::trust::signed_digest(&rec).unwrap().into();
    let line = serde_json::to_string(&rec).unwrap();
    format!("{line}\n")
}

/// A bare `origin` holding `main`, with the server hooks installed; its path.
pub(crate) fn server_of(t: &TestEnv) -> PathBuf {
    let server = t.path().join("server.git");
    t.git_in(
        t.path(),
        &["init", "-q", "--bare", "-b", "main", s(&server)],
    )
    .ok();
    t.git(&["remote", "add", "origin", s(&server)]).ok();
    // `--no-verify`: the server's pre-receive is what is tested, not the local pre-push.
    t.git(&["push", "-q", "--no-verify", "origin", "main"]).ok();
    t.tab_in(&server, &["hooks", "install", "--server"]).ok();
    server
}

/// Push `head` to the server's `main` with the evidence notes, in one atomic push.
fn push_with_evidence(t: &TestEnv, head: &str) -> Run {
    let refspec = format!("{head}:refs/heads/main");
    t.git(&[
        "push",
        "--no-verify",
        "--atomic",
        "origin",
        &refspec,
        "refs/notes/tabellio/evidence",
    ])
}

fn verdict_of(t: &TestEnv, commit: &str) -> (i32, serde_json::Value) {
    let (code, v) = t.tab_json(&["verify", commit]);
    (code, v["commits"][0]["checks"][0].clone())
}

#[test]
fn a_record_signed_by_an_allowed_signer_verifies_and_promotes() {
    let Trusted { t, ci, .. } = trusted();
    let head = finished(&t, "good", &["--sign-key", s(&ci)]);
    let rec = record_on(&t, &head);
    assert_eq!(rec["signature"]["format"], "ssh", "{rec}");
    assert_eq!(rec["signature"]["principal"], "ci@example.com", "{rec}");
    // Stock ssh-keygen agrees with the stored signature over the stored digest.
    let sig_file = t.path().join("sig");
    std::fs::write(&sig_file, rec["signature"]["sig"].as_str().unwrap()).unwrap();
    let signers = t.repo.join(".tabellio/allowed_signers");
    let mut verify = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-n",
            "tabellio",
            "-I",
            "ci@example.com",
            "-f",
        ])
        .arg(&signers)
        .arg("-s")
        .arg(&sig_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    verify
        .stdin
        .take()
        .unwrap()
        .write_all(rec["digest"].as_str().unwrap().as_bytes())
        .unwrap();
    assert!(verify.wait().unwrap().success());

    let (code, check) = verdict_of(&t, &head);
    assert_eq!(code, 0, "{check}");
    assert_eq!(check["verdict"], "satisfied");
    assert_eq!(check["signer"]["principal"], "ci@example.com", "{check}");
    assert!(check["signer"]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("SHA256:"));
    let (code, j) = t.tab_json(&["promote", "good"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(t.git_out(&["rev-parse", "main"]), head);
    t.fsck();
}

#[test]
fn untrusted_records_are_refused_everywhere_and_nothing_moves() {
    let Trusted { t, ci, old, other } = trusted();
    let mut cases: Vec<(&str, String, &str)> = Vec::new();
    cases.push((
        "unknown",
        finished_untrusted(&t, &ci, "unknown", Some((&other, "tabellio"))),
        "unknown-signer",
    ));
    cases.push((
        "expired",
        finished_untrusted(&t, &ci, "expired", Some((&old, "old@example.com"))),
        "signer-expired",
    ));
    cases.push((
        "unsigned",
        finished_untrusted(&t, &ci, "unsigned", None),
        "unsigned",
    ));

    // A signed record whose body was changed and digest recomputed: the signature no longer
    // covers it.
    let modified = finished(&t, "modified", &["--sign-key", s(&ci)]);
    let signed = record_on(&t, &modified);
    let mut edited = signed.clone();
    edited["output"]["excerpt"] = "all good, trust me".into();
    t.forge_evidence(&modified, &resealed(edited));
    cases.push(("modified", modified, "bad-signature"));

    // An intact record of another commit's check, with a signature copied from another record.
    let copied = finished_untrusted(&t, &ci, "copied", None);
    let mut rec = record_on(&t, &copied);
    rec["signature"] = signed["signature"].clone();
    t.forge_evidence(&copied, &resealed(rec));
    cases.push(("copied", copied, "bad-signature"));

    // A hand-forged passing record: correct digest, no signature, written with `git notes add`.
    let forged = finished_untrusted(&t, &ci, "forged", None);
    let mut rec = record_on(&t, &forged);
    rec["started_at"] = "2026-01-01T00:00:00Z".into();
    rec["output"]["excerpt"] = "forged".into();
    t.forge_evidence(&forged, &resealed(rec));
    cases.push(("forged", forged, "unsigned"));

    let before = t.snapshot();
    for (run, head, want) in &cases {
        let (code, check) = verdict_of(&t, head);
        assert_eq!(
            (code, check["verdict"].as_str()),
            (1, Some(*want)),
            "{run}: {check}"
        );
        let r = t.tab(&["verify", head]);
        assert!(r.stdout.contains(want), "{run}: {}", r.desc);
        let (code, j) = t.tab_json(&["promote", run]);
        assert_eq!(code, 3, "{run}: {j}");
        let message = j["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("readme ({want})")),
            "{run}: {message}"
        );
        let (_, st) = t.tab_json(&["status", run]);
        assert!(
            st["missing_evidence"]
                .as_array()
                .unwrap()
                .contains(&format!("readme ({want})").into()),
            "{run}: {st}"
        );
    }
    assert_eq!(t.snapshot(), before);

    // `land` cannot launder an untrusted record into one that counts: it refuses the run up
    // front (alone: other runs of the queue would land), naming the verdict, and nothing moves.
    let main = t.git_out(&["rev-parse", "main"]);
    for (run, _, want) in &cases {
        let (code, j) = t.tab_json(&["land", run, "--target", "main"]);
        assert_eq!(code, 1, "{run}: {j}");
        assert_eq!(j["runs"][0]["result"], "refused", "{run}: {j}");
        let reason = j["runs"][0]["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("readme ({want})")), "{run}: {j}");
    }
    assert_eq!(t.git_out(&["rev-parse", "main"]), main);

    // The reference-transaction hook refuses every one of them.
    t.tab(&["hooks", "install"]).ok();
    let refs = t.git_out(&["for-each-ref"]);
    for (run, head, want) in &cases {
        let r = t.git(&["update-ref", "refs/heads/main", head]);
        assert_ne!(r.code, 0, "{run}: {}", r.desc);
        assert!(
            r.stderr.contains(&format!("readme ({want})")),
            "{run}: {}",
            r.desc
        );
    }
    assert_eq!(t.git_out(&["for-each-ref"]), refs);

    // And so does a server's pre-receive, judging by the notes in the same push.
    let server = server_of(&t);
    let server_refs = t.git_out_in(&server, &["for-each-ref"]);
    for (run, head, want) in &cases {
        let r = push_with_evidence(&t, head);
        assert_ne!(r.code, 0, "{run}: {}", r.desc);
        assert!(
            r.stderr.contains(&format!("readme ({want})")),
            "{run}: {}",
            r.desc
        );
    }
    assert_eq!(t.git_out_in(&server, &["for-each-ref"]), server_refs);
}

#[test]
fn a_signed_record_passes_the_hooks_and_the_server() {
    let Trusted { t, ci, .. } = trusted();
    let head = finished(&t, "good", &["--sign-key", s(&ci)]);
    t.tab(&["hooks", "install"]).ok();
    let server = server_of(&t);
    push_with_evidence(&t, &head).ok();
    assert_eq!(t.git_out_in(&server, &["rev-parse", "main"]), head);
    t.git(&["update-ref", "refs/heads/main", &head]).ok();
}

#[test]
fn git_config_signs_and_no_sign_is_refused_under_trust() {
    let Trusted { t, ci, .. } = trusted();
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&["config", "user.signingKey", s(&ci)]).ok();
    let head = finished(&t, "configured", &[]);
    assert_eq!(
        record_on(&t, &head)["signature"]["principal"],
        "ci@example.com"
    );
    assert_eq!(verdict_of(&t, &head).1["verdict"], "satisfied");
    // `--no-sign` would make records the policy refuses: refused before anything runs.
    t.started_run("skipped", "skipped.txt");
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["finish", "skipped", "--no-sign"]);
    assert_eq!(code, 3, "{j}");
    assert_eq!(t.snapshot(), before);
    // `validate` signs too.
    let (code, v) = t.tab_json(&["validate", "main"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["evidence"][0]["signature"]["sig"].is_string(), "{v}");
    // A key that is not there is an error before anything is written.
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["validate", "main", "--sign-key", "/nonexistent/key"]);
    assert_eq!(code, 2, "{j}");
    assert!(
        j["error"]["hint"].as_str().unwrap().contains("--sign-key"),
        "{j}"
    );
    assert_eq!(t.snapshot(), before);
}

#[test]
fn signs_through_a_private_ssh_agent() {
    let Trusted { t, ci, .. } = trusted();
    let sock = t.path().join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent starts");
    // The socket file appears when ssh-agent binds it, a moment before it listens: retry
    // `ssh-add` until the agent answers (a loaded machine widens that moment).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let added = Command::new("ssh-add")
            .arg(&ci)
            .env("SSH_AUTH_SOCK", &sock)
            .output()
            .unwrap();
        if added.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ssh-agent never answered: {added:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&[
        "config",
        "user.signingKey",
        &format!("key::{}", public(&ci)),
    ])
    .ok();
    let wt = t.started_run("agent", "agent.txt");
    let r = t.command_with_env(
        BIN,
        &t.repo,
        &[("SSH_AUTH_SOCK", sock.as_os_str())],
        &["finish", "agent"],
    );
    let _ = agent.kill();
    let _ = agent.wait();
    r.ok();
    let head = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    assert_eq!(verdict_of(&t, &head).1["verdict"], "satisfied");
    // Without the agent, the literal key cannot sign: an error, nothing written.
    let before = t.snapshot();
    let (code, j) = t.tab_json(&["validate", "main"]);
    assert_eq!(code, 2, "{j}");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("SSH_AUTH_SOCK"),
        "{j}"
    );
    assert_eq!(t.snapshot(), before);
}

/// A run whose own evidence is trusted, restacked by `land` onto a target that moved: the
/// records land writes for the restacked commit must count too. Without a key, or with a key
/// the allowed signers do not grant, the landing is refused before any check runs (exit 3,
/// nothing written), naming what its records would be; with the allowed key it lands.
#[test]
fn land_refuses_a_restack_it_cannot_sign_before_running_naming_the_verdict() {
    let Trusted { t, ci, other, .. } = trusted();
    let head = finished(&t, "good", &["--sign-key", s(&ci)]);
    assert_eq!(verdict_of(&t, &head).1["verdict"], "satisfied");
    // The target moves: the run must be restacked, and its restacked tree has no evidence.
    t.commit_file_in(&t.repo, "moved.txt", "the target moved\n");
    let main = t.git_out(&["rev-parse", "main"]);
    for (key, want) in [(None, "unsigned"), (Some(&other), "unknown-signer")] {
        let mut args = vec!["land", "good", "--target", "main"];
        if let Some(key) = key {
            args.extend(["--sign-key", s(key)]);
        }
        // Refused before the checks run (exit 3), naming what the records would be.
        let before = t.snapshot();
        let (code, j) = t.tab_json(&args);
        assert_eq!(code, 3, "{want}: {j}");
        let message = j["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("would be {want}")), "{want}: {j}");
        assert!(message.contains("nothing was run"), "{want}: {j}");
        assert_eq!(t.snapshot(), before, "{want}");
        assert_eq!(t.git_out(&["rev-parse", "main"]), main, "{want}");
    }
    let (code, j) = t.tab_json(&["land", "good", "--target", "main", "--sign-key", s(&ci)]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["runs"][0]["result"], "landed", "{j}");
    let landed = t.git_out(&["rev-parse", "main"]);
    assert_ne!(landed, main);
    assert_eq!(verdict_of(&t, &landed).1["verdict"], "satisfied");
}

/// `loop` keeps the user's signing setup from the agent and from the checks it runs: no
/// `SSH_AUTH_SOCK`, no configuration injected through the environment, and git, asked from
/// their own directory, names no signing key and no SSH signing format. The records `loop`
/// writes are never signed, though a signing key is configured.
#[test]
fn loop_withholds_the_signing_setup_and_never_signs() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestEnv::new();
    let keys = t.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let ci = keygen(&keys, "ci");
    // What the agent and the check see, written outside every worktree as `<dir>/<who>.json`.
    let dump = t.path().join("dump.py");
    write_file(
        &dump,
        &format!(
            "#!/usr/bin/env python3\n\
             import json, os, subprocess, sys\n\
             who = sys.argv[1]\n\
             def config(key):\n\
             \x20   r = subprocess.run(['git', 'config', '--get', key], capture_output=True, text=True)\n\
             \x20   return r.stdout.strip() if r.returncode == 0 else None\n\
             seen = {{'ssh_auth_sock': os.environ.get('SSH_AUTH_SOCK'),\n\
             \x20        'config_parameters': os.environ.get('GIT_CONFIG_PARAMETERS'),\n\
             \x20        'signing_key': config('user.signingKey'),\n\
             \x20        'gpg_format': config('gpg.format'),\n\
             \x20        'cwd': os.getcwd()}}\n\
             open(os.path.join({dir:?}, who + '.json'), 'w').write(json.dumps(seen))\n\
             if who == 'agent':\n\
             \x20   open('agent.txt', 'w').write('done\\n')\n",
            dir = t.path().display().to_string()
        ),
    );
    std::fs::set_permissions(&dump, std::fs::Permissions::from_mode(0o755)).unwrap();
    t.commit_policy(&policy(&[("envdump", &[s(&dump), "check"])]));
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&["config", "user.signingKey", s(&ci)]).ok();
    t.tab(&["start", "r1", "--task", "write agent.txt"]).ok();
    let sock = t.path().join("agent.sock");
    let injected = format!("'user.signingkey'='{}'", ci.display());
    let r = t.command_with_env(
        BIN,
        &t.repo,
        &[
            ("SSH_AUTH_SOCK", sock.as_os_str()),
            ("GIT_CONFIG_PARAMETERS", std::ffi::OsStr::new(&injected)),
        ],
        &["--json", "loop", "r1", "--", s(&dump), "agent"],
    );
    r.ok();
    // The loop's process itself had both: the configuration signs for `finish`.
    assert_eq!(t.git_out(&["config", "--get", "gpg.format"]), "ssh");
    let wt = t.worktree("r1");
    for who in ["agent", "check"] {
        let text = std::fs::read_to_string(t.path().join(format!("{who}.json")))
            .unwrap_or_else(|e| panic!("the {who} did not run: {e}; {}", r.desc));
        let seen: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            std::fs::canonicalize(seen["cwd"].as_str().unwrap()).unwrap(),
            std::fs::canonicalize(&wt).unwrap(),
            "{who}: {seen}"
        );
        assert_eq!(
            seen["ssh_auth_sock"],
            serde_json::Value::Null,
            "{who}: {seen}"
        );
        assert_eq!(
            seen["config_parameters"],
            serde_json::Value::Null,
            "{who}: {seen}"
        );
        let key = seen["signing_key"].as_str().unwrap_or("");
        assert!(key.is_empty(), "{who} sees user.signingKey {key:?}: {seen}");
        assert_ne!(seen["gpg_format"], "ssh", "{who}: {seen}");
    }
    // Every record the loop wrote is unsigned.
    let head = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head]);
    assert!(!note.trim().is_empty(), "{}", r.desc);
    for line in note.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(rec.get("signature").is_none(), "the loop signed {rec}");
    }
}

/// `ssh-keygen -Y verify -n tabellio` over `message`: did it accept `sig` by `principal`?
fn ssh_keygen_verifies(
    dir: &Path,
    signers: &Path,
    principal: &str,
    sig: &str,
    message: &str,
) -> bool {
    use std::io::Write;
    let sig_file = dir.join("statement.sig");
    std::fs::write(&sig_file, sig).unwrap();
    let mut verify = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-n", "tabellio", "-I", principal, "-f"])
        .arg(signers)
        .arg("-s")
        .arg(&sig_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ssh-keygen runs");
    verify
        .stdin
        .take()
        .unwrap()
        .write_all(message.as_bytes())
        .unwrap();
    verify.wait().unwrap().success()
}

/// The in-toto statement of a run with signed evidence carries each record's signature, and
/// stock `ssh-keygen -Y verify` accepts it offline with nothing but the statement and the
/// allowed-signers file: the message is the check's `evidence_digest`, the principal and the
/// armored signature are in `signature`. A changed digest or a signature by another key fails.
#[test]
fn the_in_toto_statement_verifies_offline_with_ssh_keygen() {
    let Trusted { t, ci, other, .. } = trusted();
    let head = finished(&t, "good", &["--sign-key", s(&ci)]);
    let out = t.path().join("statement.json");
    t.tab(&["export", "good", "--format", "in-toto", "--out", s(&out)])
        .ok();
    // Offline: only the file and a copy of the allowed signers, far from the repository.
    let offline = t.path().join("offline");
    std::fs::create_dir_all(&offline).unwrap();
    let signers = offline.join("allowed_signers");
    std::fs::copy(t.repo.join(".tabellio/allowed_signers"), &signers).unwrap();
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        st["subject"][0]["digest"]["gitCommit"],
        head.as_str(),
        "{st}"
    );
    let check = &st["predicate"]["checks"][0];
    assert_eq!(check["name"], "readme", "{st}");
    let sig = &check["signature"];
    assert_eq!(sig["format"], "ssh", "{st}");
    let principal = sig["principal"].as_str().unwrap();
    assert_eq!(principal, "ci@example.com");
    let armored = sig["sig"].as_str().unwrap();
    let digest = check["evidence_digest"].as_str().unwrap();
    assert!(
        ssh_keygen_verifies(&offline, &signers, principal, armored, digest),
        "ssh-keygen refused the statement's signature: {st}"
    );
    // The signature is over that digest, that principal, that namespace: nothing else passes.
    let mut other_digest = digest.to_string();
    other_digest.replace_range(..1, if digest.starts_with('0') { "1" } else { "0" });
    assert!(!ssh_keygen_verifies(
        &offline,
        &signers,
        principal,
        armored,
        &other_digest
    ));
    assert!(!ssh_keygen_verifies(
        &offline,
        &signers,
        "old@example.com",
        armored,
        digest
    ));
    // The signed record is in the statement: its canonical digest is the signed message, and
    // it is about the subject, so a signature copied from another record cannot pass.
    let rec = &check["record"];
    assert_eq!(tabellio::trust::signed_digest(rec).unwrap(), digest, "{st}");
    assert_eq!(rec["digest"], digest);
    assert_eq!(rec["commit"], st["subject"][0]["digest"]["gitCommit"]);
    assert_eq!(rec["status"], "passed");
    assert_eq!(rec["check"]["digest"], check["digest"]);
    assert_eq!(rec["signature"], *sig);
    // It is the record in the notes that validated the subject.
    assert_eq!(record_on(&t, &head), *rec);
    // A record signed by a key the allowed signers do not know is exported with its
    // signature too, and ssh-keygen refuses it offline, as `verify` does.
    let unknown = finished_untrusted(&t, &ci, "unknown", Some((&other, "tabellio")));
    assert!(!unknown.is_empty());
    let (code, j) = t.tab_json(&["export", "unknown", "--format", "in-toto"]);
    assert_eq!(code, 0, "{j}");
    let check = &j["document"]["predicate"]["checks"][0];
    let sig = &check["signature"];
    assert!(sig["sig"].is_string(), "{j}");
    assert!(!ssh_keygen_verifies(
        &offline,
        &signers,
        sig["principal"].as_str().unwrap(),
        sig["sig"].as_str().unwrap(),
        check["evidence_digest"].as_str().unwrap()
    ));
}
