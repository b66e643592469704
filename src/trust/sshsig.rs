//! SSH signatures (`SSHSIG`, PROTOCOL.sshsig): verified in-process, produced by `ssh-keygen`.
//!
//! Verifying runs on every hook invocation, so it never spawns anything: the armored signature
//! is decoded and checked with the `ssh-key` crate (Ed25519, ECDSA P-256 and RSA keys, which is
//! what `ssh-keygen` makes by default and what hardware tokens and agents hold).
//!
//! Signing is done the way git signs commits with `gpg.format=ssh`: `ssh-keygen -Y sign -n
//! <namespace> -f <key>` (or the program in `gpg.ssh.program`), argv only, never a shell. A key
//! file may be a private key or a public key whose private half is in the agent; a `key::`
//! literal is written to a temporary public key file and signed with `-U` (the private key is in
//! ssh-agent). The agent socket is handed to the child explicitly
//! ([`SigningConfig::agent_socket`], this process's `SSH_AUTH_SOCK` unless the caller says
//! otherwise), never picked up by accident. The message goes on stdin and the armored signature
//! comes back on stdout; nothing is written next to the key.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ssh_key::{HashAlg, PublicKey, SshSig};

/// Why a signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("not an SSH signature: {0}")]
    Malformed(String),
    #[error("signed for namespace {found:?}, not {expected:?}")]
    WrongNamespace { found: String, expected: String },
    #[error(
        "{0} keys are not supported for verification (use ed25519, ecdsa-sha2-nistp256 or rsa)"
    )]
    Unsupported(String),
    #[error("the signature does not match the signed content")]
    Mismatch,
}

/// Verify an armored `SSHSIG` over `message` in `namespace`; the signing public key on success.
pub fn verify(armored: &str, namespace: &str, message: &[u8]) -> Result<PublicKey, VerifyError> {
    let sig =
        SshSig::from_pem(armored.trim()).map_err(|e| VerifyError::Malformed(e.to_string()))?;
    if sig.namespace() != namespace {
        return Err(VerifyError::WrongNamespace {
            found: sig.namespace().into(),
            expected: namespace.into(),
        });
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(namespace, message, &sig).map_err(|e| match e {
        ssh_key::Error::AlgorithmUnknown | ssh_key::Error::AlgorithmUnsupported { .. } => {
            VerifyError::Unsupported(key.algorithm().to_string())
        }
        _ => VerifyError::Mismatch,
    })?;
    Ok(key)
}

/// `SHA256:<base64>`, as `ssh-keygen -l` prints a key's fingerprint.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The key `ssh-keygen` signs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigningKey {
    /// A private key file, or a public key file whose private half is in ssh-agent.
    File(PathBuf),
    /// A literal public key (`key::ssh-ed25519 AAAA…`); the private half is in ssh-agent.
    Agent(String),
}

impl SigningKey {
    /// Read a `user.signingKey` value the way git does: `key::<public key>` (or, as git still
    /// accepts, a bare `ssh-…` public key) is a literal, anything else a path; `~/` is the home
    /// directory and a relative path is taken from `base` (git runs ssh-keygen from the
    /// worktree's top).
    pub fn from_config_value(value: &str, base: Option<&Path>) -> SigningKey {
        let value = value.trim();
        if let Some(literal) = value.strip_prefix("key::") {
            return SigningKey::Agent(literal.trim().to_string());
        }
        if value.starts_with("ssh-") {
            return SigningKey::Agent(value.to_string());
        }
        let path = match value.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(rest),
                None => PathBuf::from(value),
            },
            None => PathBuf::from(value),
        };
        match base {
            Some(base) if path.is_relative() => SigningKey::File(base.join(path)),
            _ => SigningKey::File(path),
        }
    }
}

/// Signing could not be done.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("the signing key {key:?} is in ssh-agent, but SSH_AUTH_SOCK is not set")]
    NoAgent { key: String },
    #[error("the signing key file {} does not exist", .0.display())]
    MissingKeyFile(PathBuf),
    #[error("could not run {program:?}: {message}")]
    Spawn { program: String, message: String },
    #[error("{program:?} could not sign: {stderr}")]
    Failed { program: String, stderr: String },
    #[error("{program:?} returned a signature that does not verify: {error}")]
    Unverifiable { program: String, error: VerifyError },
    #[error("could not read git's configuration: {0}")]
    Config(String),
}

impl SignError {
    /// What a person can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            SignError::NoAgent { .. } => {
                "start ssh-agent and `ssh-add` the key, or pass --sign-key <private key file>"
            }
            SignError::MissingKeyFile(_) => {
                "check user.signingKey or --sign-key; it names a private key, or a public key whose private half is in ssh-agent"
            }
            SignError::Spawn { .. } => "install OpenSSH's ssh-keygen, or set gpg.ssh.program",
            SignError::Failed { .. } | SignError::Unverifiable { .. } => {
                "try `ssh-keygen -Y sign -n tabellio -f <key>` by hand to see what it needs"
            }
            SignError::Config(_) => "fix the git configuration, or pass --sign-key <file>",
        }
    }
}

impl From<SignError> for crate::Error {
    fn from(e: SignError) -> Self {
        let hint = e.hint();
        let error = match e {
            SignError::Unverifiable { .. } => crate::Error::internal(e.to_string()),
            _ => crate::Error::usage(e.to_string()),
        };
        error.hint(hint)
    }
}

/// The default signing program, as git's `gpg.ssh.program` default.
pub const SSH_KEYGEN: &str = "ssh-keygen";

/// Sign `digest` (the message is exactly its bytes) in namespace `tabellio` with `ssh-keygen`
/// and this process's `SSH_AUTH_SOCK`; the armored signature.
pub fn sign(digest: &str, key: &SigningKey) -> Result<String, SignError> {
    SigningConfig::new(key.clone()).sign_message(super::NAMESPACE, digest.as_bytes())
}

/// How this user signs, read from git's configuration the way git reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningConfig {
    pub key: SigningKey,
    /// `gpg.ssh.program`, else `ssh-keygen`.
    pub program: OsString,
    /// The ssh-agent socket the signer is given (`SSH_AUTH_SOCK`); `None` runs it without one.
    /// Explicit rather than inherited, so a caller that keeps the agent from a child (`loop`)
    /// and one that signs on the user's behalf cannot be confused.
    pub agent_socket: Option<OsString>,
}

impl SigningConfig {
    /// Sign with `key` through `ssh-keygen` and this process's `SSH_AUTH_SOCK`.
    pub fn new(key: SigningKey) -> SigningConfig {
        SigningConfig {
            key,
            program: OsString::from(SSH_KEYGEN),
            agent_socket: agent_socket_from_env(),
        }
    }

    /// `gpg.format=ssh` + `user.signingKey` (and `gpg.ssh.program`) from `repo`'s configuration;
    /// `Ok(None)` when no SSH signing key is configured. A signing key under another
    /// `gpg.format` (openpgp, the default, or x509) is a GPG/X.509 setup tabellio cannot use: no
    /// signing, exactly as when no key is configured (`--sign-key` still signs).
    pub fn from_git_config(repo: &gix::Repository) -> Result<Option<SigningConfig>, SignError> {
        let config = repo.config_snapshot();
        let Some(value) = config.string("user.signingKey") else {
            return Ok(None);
        };
        let value = value.to_string();
        if value.trim().is_empty() {
            return Ok(None);
        }
        let format = config
            .string("gpg.format")
            .map(|f| f.to_string())
            .unwrap_or_else(|| "openpgp".into());
        if format != "ssh" {
            return Ok(None);
        }
        Ok(Some(SigningConfig {
            key: SigningKey::from_config_value(&value, repo.workdir()),
            program: signing_program(repo)?,
            agent_socket: agent_socket_from_env(),
        }))
    }

    /// What `--sign-key <file>` / `--no-sign` / git's configuration together decide: the
    /// explicit key file wins, `no_sign` means no signing at all.
    pub fn resolve(
        repo: &gix::Repository,
        key_file: Option<&Path>,
        no_sign: bool,
    ) -> Result<Option<SigningConfig>, SignError> {
        if no_sign {
            return Ok(None);
        }
        if let Some(path) = key_file {
            return Ok(Some(SigningConfig {
                key: SigningKey::File(path.to_path_buf()),
                program: signing_program(repo)?,
                agent_socket: agent_socket_from_env(),
            }));
        }
        Self::from_git_config(repo)
    }

    /// Sign `message` in `namespace` (an `ssh-keygen -Y sign` compatible program) and check
    /// the result verifies before handing it back: the armored signature.
    pub fn sign_message(&self, namespace: &str, message: &[u8]) -> Result<String, SignError> {
        self.sign_verified(namespace, message)
            .map(|(armored, _)| armored)
    }

    /// [`Self::sign_message`], also returning the key that signed.
    fn sign_verified(
        &self,
        namespace: &str,
        message: &[u8],
    ) -> Result<(String, PublicKey), SignError> {
        let program_name = self.program.to_string_lossy().into_owned();
        let key = &self.key;
        // Kept alive until the child has exited: the literal key's file.
        let mut _literal_file = None;
        let mut cmd = Command::new(&self.program);
        match &self.agent_socket {
            Some(socket) => cmd.env("SSH_AUTH_SOCK", socket),
            None => cmd.env_remove("SSH_AUTH_SOCK"),
        };
        cmd.args(["-Y", "sign", "-n", namespace, "-f"]);
        match key {
            SigningKey::File(path) => {
                if !path.exists() {
                    return Err(SignError::MissingKeyFile(path.clone()));
                }
                cmd.arg(path);
            }
            SigningKey::Agent(literal) => {
                if self.agent_socket.is_none() {
                    return Err(SignError::NoAgent {
                        key: literal.clone(),
                    });
                }
                let mut file = tempfile::Builder::new()
                    .prefix(".tabellio_signing_key_")
                    .tempfile()
                    .map_err(|e| SignError::Spawn {
                        program: program_name.clone(),
                        message: format!("could not write the public key to a temporary file: {e}"),
                    })?;
                writeln!(file, "{literal}")
                    .and_then(|()| file.flush())
                    .map_err(|e| SignError::Spawn {
                        program: program_name.clone(),
                        message: format!("could not write the public key to a temporary file: {e}"),
                    })?;
                cmd.arg(file.path()).arg("-U");
                _literal_file = Some(file);
            }
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| SignError::Spawn {
            program: program_name.clone(),
            message: e.to_string(),
        })?;
        // ssh-keygen reads the whole message before it writes a byte, and stdin is closed as soon
        // as it is written, so writing first and reading after cannot deadlock.
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(message))
            .transpose();
        let output = child.wait_with_output().map_err(|e| SignError::Spawn {
            program: program_name.clone(),
            message: e.to_string(),
        })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
            return Err(SignError::Failed {
                program: program_name,
                stderr: if stderr.is_empty() {
                    format!("exited with {}", output.status)
                } else {
                    stderr
                },
            });
        }
        if let Err(e) = written {
            return Err(SignError::Failed {
                program: program_name,
                stderr: format!("could not pass the message on stdin: {e}"),
            });
        }
        let armored = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let key =
            verify(&armored, namespace, message).map_err(|error| SignError::Unverifiable {
                program: program_name,
                error,
            })?;
        Ok((armored, key))
    }

    /// Sign a record's digest: the [`super::Signature`] to store in it. `principal` is the
    /// identity the signer claims (the allowed-signers principal for this key).
    pub fn sign_digest(
        &self,
        digest: &str,
        principal: &str,
    ) -> Result<super::Signature, SignError> {
        let (armored, key) = self.sign_verified(super::NAMESPACE, digest.as_bytes())?;
        Ok(super::Signature {
            format: super::FORMAT_SSH.into(),
            principal: principal.into(),
            key_fingerprint: fingerprint(&key),
            sig: armored,
        })
    }

    /// The public key this configuration signs with, when it can be known without signing
    /// (a literal, a key file with its `.pub` beside it, or an OpenSSH private key file): for
    /// finding its principal.
    pub fn public_key(&self) -> Option<PublicKey> {
        match &self.key {
            SigningKey::Agent(literal) => PublicKey::from_openssh(literal).ok(),
            SigningKey::File(path) => {
                let text = std::fs::read_to_string(path).ok();
                let pub_text = || {
                    let mut p = path.clone().into_os_string();
                    p.push(".pub");
                    std::fs::read_to_string(PathBuf::from(p)).ok()
                };
                // A private key file alone (a CI secret written to a file) holds its public
                // half in clear, also when the private half is encrypted.
                let from_private = |t: &str| {
                    ssh_key::PrivateKey::from_openssh(t.trim())
                        .ok()
                        .map(|k| k.public_key().clone())
                };
                text.as_deref()
                    .and_then(|t| PublicKey::from_openssh(t.trim()).ok())
                    .or_else(|| pub_text().and_then(|t| PublicKey::from_openssh(t.trim()).ok()))
                    .or_else(|| text.as_deref().and_then(from_private))
            }
        }
    }
}

/// `SSH_AUTH_SOCK` of this process, if set and not empty.
fn agent_socket_from_env() -> Option<OsString> {
    std::env::var_os("SSH_AUTH_SOCK").filter(|s| !s.is_empty())
}

/// `gpg.ssh.program` from trusted configuration, else `ssh-keygen`.
fn signing_program(repo: &gix::Repository) -> Result<OsString, SignError> {
    Ok(repo
        .config_snapshot()
        .trusted_program("gpg.ssh.program")
        .map_err(|e| SignError::Config(format!("gpg.ssh.program: {e}")))?
        .unwrap_or_else(|| OsString::from(SSH_KEYGEN)))
}
