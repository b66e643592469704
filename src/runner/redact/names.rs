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
