//! Signing with real `ssh-keygen` keys (a key file and a private ssh-agent), verifying
//! in-process, and judging against allowed-signers files.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::*;
use crate::model::canonical::sha256_hex;

const AT: &str = "2026-06-01T12:00:00Z";

struct Key {
    private: PathBuf,
    public: String,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn keygen(dir: &Path, name: &str) -> Key {
    let private = dir.join(name);
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&private));
    let public = std::fs::read_to_string(dir.join(format!("{name}.pub")))
        .unwrap()
        .trim()
        .to_string();
    Key { private, public }
}

/// ssh-keygen's own fingerprint of a key file.
fn ssh_fingerprint(key: &Key) -> String {
    let out = run(Command::new("ssh-keygen").arg("-lf").arg(&key.private));
    out.split_whitespace().nth(1).unwrap().to_string()
}

fn signers(text: &str) -> AllowedSigners {
    AllowedSigners::parse(text, ".tabellio/allowed_signers").unwrap()
}

fn signed(digest: &str, key: &Key, principal: &str) -> Signature {
    let config = SigningConfig {
        key: SigningKey::File(key.private.clone()),
        program: sshsig::SSH_KEYGEN.into(),
        agent_socket: None,
    };
    config.sign_digest(digest, principal).unwrap()
}

#[test]
fn allowed_signer_is_trusted_and_ssh_keygen_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let ci = keygen(dir.path(), "ci");
    let digest = sha256_hex(b"record one");
    let armored = sign(&digest, &SigningKey::File(ci.private.clone())).unwrap();
    assert!(
        armored.starts_with("-----BEGIN SSH SIGNATURE-----"),
        "{armored}"
    );
    let sig = signed(&digest, &ci, "ci@example.com");
    assert_eq!(sig.format, "ssh");
    assert_eq!(sig.key_fingerprint, ssh_fingerprint(&ci));
    let file = format!("ci@example.com namespaces=\"tabellio\" {}\n", ci.public);
    let verdict = judge_signature(Some(&sig), &digest, AT, &signers(&file));
    assert_eq!(
        verdict,
        SignatureVerdict::Trusted {
            principal: "ci@example.com".into(),
            fingerprint: ssh_fingerprint(&ci),
        }
    );
    assert_eq!(verdict.as_str(), "trusted");

    // The exact message bytes are the digest string: stock ssh-keygen verifies the stored sig.
    std::fs::write(dir.path().join("allowed"), &file).unwrap();
    std::fs::write(dir.path().join("sig"), &sig.sig).unwrap();
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
        .arg(dir.path().join("allowed"))
        .arg("-s")
        .arg(dir.path().join("sig"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut verify.stdin.take().unwrap(), digest.as_bytes()).unwrap();
    let out = verify.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The record shape: exactly these field names, nothing else accepted.
    let value = serde_json::to_value(&sig).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["format", "key_fingerprint", "principal", "sig"]);
    let mut extra = value.clone();
    extra["note"] = "x".into();
    assert!(serde_json::from_value::<Signature>(extra).is_err());
}

fn assert_unknown_signer(verdict: &SignatureVerdict, why: impl Fn(&SignerRefusal) -> bool) {
    assert_eq!(verdict.as_str(), "unknown-signer", "{verdict:?}");
    assert!(verdict.refusal().is_some_and(why), "{verdict:?}");
}

#[test]
fn refusals_have_the_right_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let ci = keygen(dir.path(), "ci");
    let stranger = keygen(dir.path(), "stranger");
    let digest = sha256_hex(b"record one");
    let other_digest = sha256_hex(b"record two");
    let sig = signed(&digest, &ci, "ci@example.com");
    let allowed = signers(&format!("ci@example.com {}\n", ci.public));

    // Unsigned.
    assert_eq!(
        judge_signature(None, &digest, AT, &allowed).as_str(),
        "unsigned"
    );

    // A key nobody allowed.
    let by_stranger = signed(&digest, &stranger, "ci@example.com");
    let verdict = judge_signature(Some(&by_stranger), &digest, AT, &allowed);
    assert_eq!(verdict.as_str(), "unknown-signer", "{verdict:?}");
    assert_unknown_signer(&verdict, |r| *r == SignerRefusal::UnknownSigner);

    // The record was changed after signing (its recomputed digest differs).
    let verdict = judge_signature(Some(&sig), &other_digest, AT, &allowed);
    assert_eq!(verdict.as_str(), "bad-signature", "{verdict:?}");

    // A signature copied from another record onto this one.
    let other_sig = signed(&other_digest, &ci, "ci@example.com");
    let verdict = judge_signature(Some(&other_sig), &digest, AT, &allowed);
    assert_eq!(verdict.as_str(), "bad-signature", "{verdict:?}");

    // valid-before in the past of finished_at.
    let expired = signers(&format!(
        "ci@example.com valid-before=\"20260101Z\" {}\n",
        ci.public
    ));
    let verdict = judge_signature(Some(&sig), &digest, AT, &expired);
    assert_eq!(verdict.as_str(), "signer-expired", "{verdict:?}");
    assert!(
        verdict.describe().contains("2026-01-01T00:00:00Z"),
        "{}",
        verdict.describe()
    );
    // ... and valid-after in its future.
    let early = signers(&format!(
        "ci@example.com valid-after=\"20270101\" {}\n",
        ci.public
    ));
    assert_eq!(
        judge_signature(Some(&sig), &digest, AT, &early).as_str(),
        "signer-expired"
    );

    // A namespace restriction that excludes tabellio.
    let git_only = signers(&format!(
        "ci@example.com namespaces=\"git,file\" {}\n",
        ci.public
    ));
    let verdict = judge_signature(Some(&sig), &digest, AT, &git_only);
    assert_unknown_signer(&verdict, |r| {
        matches!(r, SignerRefusal::WrongNamespace { .. })
    });

    // A principal the file does not grant to this key.
    let mut claimed = sig.clone();
    claimed.principal = "release-manager@example.com".into();
    let verdict = judge_signature(Some(&claimed), &digest, AT, &allowed);
    assert_unknown_signer(&verdict, |r| {
        matches!(r, SignerRefusal::PrincipalNotAllowed { .. })
    });

    // A fingerprint that is not the signing key's.
    let mut lying = sig.clone();
    lying.key_fingerprint = ssh_fingerprint(&stranger);
    assert_eq!(
        judge_signature(Some(&lying), &digest, AT, &allowed).as_str(),
        "bad-signature"
    );

    // A signature made for git (namespace `git`) is not one for tabellio.
    let config = SigningConfig {
        key: SigningKey::File(ci.private.clone()),
        program: sshsig::SSH_KEYGEN.into(),
        agent_socket: None,
    };
    let mut for_git = sig.clone();
    for_git.sig = config.sign_message("git", digest.as_bytes()).unwrap();
    let verdict = judge_signature(Some(&for_git), &digest, AT, &allowed);
    assert_eq!(verdict.as_str(), "bad-signature", "{verdict:?}");

    // Garbage and an unknown format.
    let mut garbage = sig.clone();
    garbage.sig = "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----".into();
    assert_eq!(
        judge_signature(Some(&garbage), &digest, AT, &allowed).as_str(),
        "bad-signature"
    );
    let mut gpg = sig.clone();
    gpg.format = "openpgp".into();
    assert_eq!(
        judge_signature(Some(&gpg), &digest, AT, &allowed).as_str(),
        "bad-signature"
    );

    // A wildcard principal pattern grants the concrete principal.
    let domain = signers(&format!("*@example.com,!bot@example.com {}\n", ci.public));
    assert!(judge_signature(Some(&sig), &digest, AT, &domain).is_trusted());
}

#[test]
fn the_principal_to_sign_as() {
    let dir = tempfile::tempdir().unwrap();
    let ci = keygen(dir.path(), "ci");
    let key = ssh_key::PublicKey::from_openssh(&ci.public).unwrap();
    let key = key.key_data();
    let file = signers(&format!("*@ops.example.com,ci@example.com {}\n", ci.public));
    assert_eq!(
        signing_principal(&file, key, Some("me@ops.example.com"), AT).as_deref(),
        Some("me@ops.example.com")
    );
    assert_eq!(
        signing_principal(&file, key, Some("me@elsewhere.org"), AT).as_deref(),
        Some("ci@example.com")
    );
    let empty = signers("");
    assert_eq!(
        signing_principal(&empty, key, Some("me@elsewhere.org"), AT).as_deref(),
        Some("me@elsewhere.org")
    );
    assert_eq!(signing_principal(&empty, key, None, AT), None);
}

#[test]
fn signed_digest_leaves_out_digest_and_signature() {
    let record = serde_json::json!({"a": 1, "digest": "x", "signature": {"format": "ssh"}});
    assert_eq!(signed_digest(&record).unwrap(), sha256_hex(br#"{"a":1}"#));
}

#[test]
fn signing_errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = SigningConfig {
        key: SigningKey::File(dir.path().join("nope")),
        program: sshsig::SSH_KEYGEN.into(),
        agent_socket: None,
    };
    let err = missing.sign_digest(&sha256_hex(b"x"), "p").unwrap_err();
    assert!(matches!(err, SignError::MissingKeyFile(_)), "{err}");
    let no_agent = SigningConfig {
        key: SigningKey::Agent("ssh-ed25519 AAAA".into()),
        program: sshsig::SSH_KEYGEN.into(),
        agent_socket: None,
    };
    let err = no_agent.sign_digest(&sha256_hex(b"x"), "p").unwrap_err();
    assert!(matches!(err, SignError::NoAgent { .. }), "{err}");
    assert!(err.hint().contains("ssh-add"));
}

#[test]
fn signing_key_values_read_as_git_reads_them() {
    let base = Path::new("/repo");
    assert_eq!(
        SigningKey::from_config_value("key::ssh-ed25519 AAAA c", Some(base)),
        SigningKey::Agent("ssh-ed25519 AAAA c".into())
    );
    assert_eq!(
        SigningKey::from_config_value("ssh-ed25519 AAAA", Some(base)),
        SigningKey::Agent("ssh-ed25519 AAAA".into())
    );
    assert_eq!(
        SigningKey::from_config_value("keys/ci", Some(base)),
        SigningKey::File(PathBuf::from("/repo/keys/ci"))
    );
    assert_eq!(
        SigningKey::from_config_value("/k/ci", Some(base)),
        SigningKey::File(PathBuf::from("/k/ci"))
    );
}

#[test]
fn signing_config_comes_from_git_config() {
    let dir = tempfile::tempdir().unwrap();
    let repo_dir = dir.path().join("repo");
    crate::store::test_git(dir.path(), dir.path(), &["init", "-q", "repo"]);
    // Isolated: the machine's global configuration must not decide this test.
    let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).unwrap();
    assert_eq!(SigningConfig::from_git_config(&repo).unwrap(), None);
    let config_path = repo.git_dir().join("config");
    let mut text = std::fs::read_to_string(&config_path).unwrap();
    text.push_str("[user]\n\tsigningKey = keys/ci\n");
    std::fs::write(&config_path, &text).unwrap();
    let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).unwrap();
    assert_eq!(
        SigningConfig::from_git_config(&repo).unwrap(),
        None,
        "a GPG signing key (gpg.format unset) is not an SSH signing key"
    );

    text.push_str("[gpg]\n\tformat = ssh\n");
    std::fs::write(&config_path, &text).unwrap();
    let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).unwrap();
    let config = SigningConfig::from_git_config(&repo).unwrap().unwrap();
    let workdir = repo.workdir().unwrap().to_path_buf();
    assert_eq!(config.key, SigningKey::File(workdir.join("keys/ci")));
    assert_eq!(config.program, sshsig::SSH_KEYGEN);

    let explicit = SigningConfig::resolve(&repo, Some(Path::new("/k/other")), false)
        .unwrap()
        .unwrap();
    assert_eq!(explicit.key, SigningKey::File("/k/other".into()));
    assert_eq!(SigningConfig::resolve(&repo, None, true).unwrap(), None);
}

/// A private ssh-agent, killed when dropped.
struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Agent {
    fn start(dir: &Path) -> Agent {
        let socket = dir.join("agent.sock");
        let mut child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // With -D the agent prints its environment lines once the socket is listening.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("SSH_AUTH_SOCK"), "ssh-agent said {line:?}");
        Agent { child, socket }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn signs_through_a_private_ssh_agent() {
    let dir = tempfile::tempdir().unwrap();
    let person = keygen(dir.path(), "person");
    let agent = Agent::start(dir.path());
    run(Command::new("ssh-add")
        .arg("-q")
        .arg(&person.private)
        .env("SSH_AUTH_SOCK", &agent.socket));
    // The private key is gone from disk: only the agent can sign now.
    std::fs::remove_file(&person.private).unwrap();

    let config = SigningConfig {
        key: SigningKey::from_config_value(&format!("key::{}", person.public), None),
        program: sshsig::SSH_KEYGEN.into(),
        agent_socket: Some(agent.socket.clone().into_os_string()),
    };
    let digest = sha256_hex(b"approval");
    let sig = config.sign_digest(&digest, "person@example.com").unwrap();
    let file = format!("person@example.com {}\n", person.public);
    let verdict = judge_signature(Some(&sig), &digest, AT, &signers(&file));
    assert!(verdict.is_trusted(), "{verdict:?}");
    assert_eq!(
        config.public_key().map(|k| sshsig::fingerprint(&k)),
        Some(sig.key_fingerprint.clone())
    );

    // Without the agent the same key cannot sign.
    let without = SigningConfig {
        agent_socket: None,
        ..config.clone()
    };
    assert!(matches!(
        without.sign_digest(&digest, "person@example.com"),
        Err(SignError::NoAgent { .. })
    ));
    drop(agent);
}
