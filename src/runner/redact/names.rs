//! The vocabulary of secrets that the rules, the matchers and the command-line scanner share:
//! which names name a secret, and how a known tool takes its password flag.

/// The words a secret's name is made of. An environment variable is secret when its name
/// contains one (`PGPASSWORD`, `MY_KEYS`); an option or an assignment when one of its words
/// (split at `-`, `_`, `.`) ends in one (`--api-key`, `--authtoken`, `db.password=`), so that
/// `--keyboard` is not.
pub(super) const SECRET_WORDS: [&str; 5] = ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY"];

/// Whether an option or assignment name (leading dashes ignored) names a secret.
pub(super) fn names_secret(name: &str) -> bool {
    name.trim_start_matches('-')
        .split(['-', '_', '.'])
        .any(|word| {
            let word = word.to_ascii_uppercase();
            SECRET_WORDS.iter().any(|secret| word.ends_with(secret))
        })
}

/// How a tool takes its password flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlagValue {
    /// Only attached (`-pPASSWORD`): the next argument is something else (`mysql -p db`
    /// prompts for the password of database `db`).
    Attached,
    /// Attached, or as the next argument.
    AttachedOrNext,
}

/// A password flag of a known command-line tool. It counts after an argument whose file name
/// is one of `tools` (so also after `env`, `sudo`, `timeout` or a path).
#[derive(Debug, Clone, Copy)]
pub(super) struct ToolFlag {
    pub tools: &'static [&'static str],
    /// Short (`-p`: value attached directly) or long (`--user`: value attached after `=`).
    pub flags: &'static [&'static str],
    pub value: FlagValue,
    /// The value is `user:password`; only the password is secret.
    pub user_colon: bool,
}

/// File names that hold secrets by convention: environment files, credential stores, private
/// keys. Compared case-insensitively with a path's file name.
const SECRET_FILE_NAMES: [&str; 14] = [
    ".env",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    "credentials",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
];

/// File name endings of key and certificate stores.
const SECRET_FILE_SUFFIXES: [&str; 8] = [
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".kdbx",
    ".gpg",
];

/// Words that make a file or directory name secret when one of its words (split at `-`, `_`,
/// `.`) is one of them, or ends in one of the first four (`authtoken`, `clientsecret`); `key`
/// only as a whole word, so `monkey.rs` is not.
const SECRET_NAME_WORDS: [&str; 11] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "TOKENS",
    "SECRETS",
    "PASSWORDS",
    "KEY",
    "KEYS",
    "APIKEY",
    "CREDENTIALS",
];

/// Whether a worktree path (`/`-separated, relative) is secret by its name: one of its
/// components is a conventional secret file (`.env`, `.env.local`, `id_ed25519`, `*.pem`,
/// `.netrc`, …) or is named with a secret word (`api_token.txt`, `secrets/`). What a snapshot
/// of a worktree leaves out (docs/lifecycle.md, rewind).
pub fn is_secret_path(path: &str) -> bool {
    path.split('/').any(is_secret_file_name)
}

fn is_secret_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if SECRET_FILE_NAMES.contains(&lower.as_str())
        || lower.starts_with(".env.")
        || SECRET_FILE_SUFFIXES.iter().any(|s| lower.ends_with(s))
    {
        return true;
    }
    name.split(['-', '_', '.']).any(|word| {
        let word = word.to_ascii_uppercase();
        SECRET_NAME_WORDS.contains(&word.as_str())
            || SECRET_NAME_WORDS[..4].iter().any(|w| word.ends_with(w))
    })
}

#[cfg(test)]
mod tests {
    use super::is_secret_path;

    #[test]
    fn secret_paths_by_name() {
        for p in [
            ".env",
            ".env.local",
            "config/.env",
            "id_ed25519",
            "deploy/server.pem",
            "tls.KEY",
            "api_token.txt",
            "secrets/db.yml",
            "config/client-secret.json",
            "authtoken",
            ".netrc",
            "aws/credentials",
            "keys/a.txt",
        ] {
            assert!(is_secret_path(p), "{p}");
        }
        for p in [
            "src/monkey.rs",
            "hotkey.c",
            "README.md",
            "env.rs",
            "tokenizer.rs",
            "id_ed25519.pub.txt",
            "keyboard/layout.rs",
            "notes.txt",
        ] {
            assert!(!is_secret_path(p), "{p}");
        }
    }
}
