//! Secret redaction for excerpts, with hand-written matchers (no regex engine).
//!
//! Redaction errs on the side of replacing too much: a false positive costs a few characters
//! of an excerpt, a false negative publishes a credential in a note that is pushed. It is a
//! safety net, not a guarantee — a secret the patterns do not know, or one split exactly at
//! the start of the tail, can survive.
//!
//! Layout: `rules` holds the one table of what is redacted (the manual shows it row for row);
//! this file [`Redactor`] and the scan over a text; `patterns` the hand-written matchers of the
//! rules; `argv` the one scanner of command lines (secret-named options and assignments, tools'
//! password flags).

use std::os::unix::ffi::OsStringExt;

pub use names::is_secret_path;
use names::SECRET_WORDS;
use patterns::orphan_pem_end;
pub use rules::{Rule, RULES};

mod argv;
mod classify;
mod names;
mod patterns;
#[cfg(test)]
mod properties;
mod rules;

/// What a secret is replaced by.
pub const REDACTED: &str = "[REDACTED]";
const REDACTED_BYTES: &[u8] = REDACTED.as_bytes();

/// Environment values shorter than this (in characters) are not treated as secrets: too
/// likely to occur in innocent text.
pub const MIN_SECRET_CHARS: usize = 8;

/// The shortest value of a secret-named command-line option that is hunted in output.
pub const MIN_ARGV_SECRET_CHARS: usize = 4;

/// Whether the environment variable `name` holds a secret (case-insensitive `TOKEN`,
/// `SECRET`, `PASSWORD`, `PASSWD` or `KEY` in it).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|part| upper.contains(part))
}

/// Whether one end of a piece of text is the real end of the output or a truncation cut.
/// Next to a cut, a secret may be incomplete, so shorter fragments are redacted there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Edge {
    Whole,
    Cut,
}

/// Replaces what the rules of the redaction table match (token formats, private-key blocks,
/// credentials, secret-named assignments and options, tools' password flags) and the literal
/// values of secret-named environment variables with [`REDACTED`].
/// `Redactor::default()` knows the patterns only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret containing another one is replaced whole.
    literals: Vec<Vec<u8>>,
}

impl Redactor {
    /// Patterns plus the values of our process's secret-named environment variables.
    pub fn from_env() -> Self {
        Self::from_env_with(&[])
    }

    /// Like [`Redactor::from_env`], plus the secret-named variables among `extra` (the
    /// variables a check gets on top of ours).
    pub fn from_env_with(extra: &[(String, String)]) -> Self {
        let ours = std::env::vars_os()
            .filter(|(name, _)| is_secret_name(&name.to_string_lossy()))
            .map(|(_, value)| value.into_vec());
        let added = extra
            .iter()
            .filter(|(name, _)| is_secret_name(name))
            .map(|(_, value)| value.as_bytes().to_vec());
        Self::from_literals(ours.chain(added), MIN_SECRET_CHARS)
    }

    /// Patterns plus these literal secret values (values under [`MIN_SECRET_CHARS`] are
    /// ignored).
    pub fn from_values<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::from_literals(
            values
                .into_iter()
                .map(|value| value.as_ref().as_bytes().to_vec()),
            MIN_SECRET_CHARS,
        )
    }

    /// Patterns plus the `values` of at least `min_chars` characters, longest first.
    fn from_literals(values: impl Iterator<Item = Vec<u8>>, min_chars: usize) -> Self {
        let mut literals: Vec<Vec<u8>> = values
            .filter(|value| char_count(value) >= min_chars)
            .collect();
        literals.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        literals.dedup();
        Redactor { literals }
    }

    /// The redacted text and the number of replacements.
    pub fn redact(&self, text: &str) -> (String, u64) {
        self.redact_piece(text, Edge::Whole, Edge::Whole)
    }

    /// Like [`Redactor::redact`] for a piece of a truncated output whose `start` or `end` is
    /// a cut.
    pub(super) fn redact_piece(&self, text: &str, start: Edge, end: Edge) -> (String, u64) {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut count = 0;
        let mut copied = 0;
        let mut at = 0;
        if start == Edge::Cut {
            let lead = self.leading_fragment(bytes);
            if lead > 0 {
                out.extend_from_slice(REDACTED.as_bytes());
                count += 1;
                copied = lead;
                at = lead;
            }
        }
        while at < bytes.len() {
            match self.match_at(bytes, at, end) {
                // What is already redacted stays as it is: redacting twice changes nothing.
                Some((from, to))
                    if from >= copied
                        && to > from
                        && !bytes[from..].starts_with(REDACTED_BYTES) =>
                {
                    out.extend_from_slice(&bytes[copied..from]);
                    out.extend_from_slice(REDACTED.as_bytes());
                    count += 1;
                    copied = to;
                    at = to;
                }
                _ => at += 1,
            }
        }
        out.extend_from_slice(&bytes[copied..]);
        // Every replaced range starts and ends on a character boundary (matches begin with
        // ASCII or with a whole secret value), so this is valid UTF-8; lossy just in case.
        let text = String::from_utf8(out)
            .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned());
        (text, count)
    }

    /// The range to replace for a secret starting at `at`, if any.
    fn match_at(&self, bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
        RULES
            .iter()
            .find_map(|rule| rule.finder.find(bytes, at, end))
            .or_else(|| self.literal(bytes, at, end))
    }

    fn literal(&self, bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
        let rest = &bytes[at..];
        for literal in &self.literals {
            if rest.starts_with(literal) {
                return Some((at, at + literal.len()));
            }
            // The start of a secret whose end was cut off.
            if end == Edge::Cut
                && rest.len() >= MIN_SECRET_CHARS
                && rest.len() < literal.len()
                && literal.starts_with(rest)
            {
                return Some((at, bytes.len()));
            }
        }
        None
    }

    /// Bytes at the start of a tail that belong to a secret whose start was cut off: the body
    /// of a private key up to its END line, or the end of a literal secret.
    fn leading_fragment(&self, bytes: &[u8]) -> usize {
        let mut lead = orphan_pem_end(bytes).unwrap_or(0);
        for literal in &self.literals {
            let longest = (MIN_SECRET_CHARS..literal.len())
                .rev()
                .find(|&len| bytes.starts_with(&literal[literal.len() - len..]));
            if let Some(len) = longest {
                lead = lead.max(len);
            }
        }
        lead
    }
}

pub(super) fn char_count(value: &[u8]) -> usize {
    std::str::from_utf8(value).map_or(value.len(), |s| s.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns() -> Redactor {
        Redactor::from_values(Vec::<String>::new())
    }

    fn redacted(text: &str) -> (String, u64) {
        patterns().redact(text)
    }

    #[test]
    fn github_tokens() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let token = format!("{prefix}{}", "aB3".repeat(7)); // 21 alnum
            let (out, n) = redacted(&format!("export GH={token}; done"));
            assert_eq!(out, "export GH=[REDACTED]; done", "{prefix}");
            assert_eq!(n, 1);
        }
        let fine_grained = "github_pat_11ABCDEFG0_abcdefghijklmnopqrstuvwxyz";
        assert_eq!(redacted(fine_grained), ("[REDACTED]".to_string(), 1));
        // 19 characters is not a token.
        let short = format!("ghp_{}", "a".repeat(19));
        assert_eq!(redacted(&short), (short.clone(), 0));
        // Inside a longer word it is not a token either.
        let embedded = format!("xghp_{}", "a".repeat(30));
        assert_eq!(redacted(&embedded), (embedded.clone(), 0));
    }

    #[test]
    fn gitlab_slack_and_aws() {
        let (out, n) = redacted("t=glpat-abc_DEF-ghi_jkl-mnopqr7 end");
        assert_eq!((out.as_str(), n), ("t=[REDACTED] end", 1));
        let (out, n) = redacted("slack xoxb-1234567890-abcdEFGH and xoxp-0123456789");
        assert_eq!((out.as_str(), n), ("slack [REDACTED] and [REDACTED]", 2));
        let (out, n) = redacted("id AKIAIOSFODNN7EXAMPLE, ASIAY34FZKBOKMUTVV7A.");
        assert_eq!((out.as_str(), n), ("id [REDACTED], [REDACTED].", 2));
        // 15 characters after AKIA, lower case, or too short for Slack: untouched.
        for innocent in ["AKIAIOSFODNN7EXAMPL", "AKIAiosfodnn7example", "xoxb-123"] {
            assert_eq!(redacted(innocent), (innocent.to_string(), 0));
        }
    }

    #[test]
    fn private_key_blocks() {
        let text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc=\n\
                    -----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(redacted(text), ("before\n[REDACTED]\nafter".to_string(), 1));
        // END line missing (cut off): redacted to the end.
        let cut = "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA";
        assert_eq!(redacted(cut), ("x\n[REDACTED]".to_string(), 1));
        // A certificate is public.
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(redacted(cert), (cert.to_string(), 0));
    }

    #[test]
    fn authorization_credentials() {
        let (out, n) = redacted("curl -H 'Authorization: Bearer abc.DEF-123_x/y+z=' url");
        assert_eq!(out, "curl -H 'Authorization: Bearer [REDACTED]' url");
        assert_eq!(n, 1);
        let (out, _) = redacted("AUTHORIZATION:bearer  t0k3n\n");
        assert_eq!(out, "AUTHORIZATION:bearer  [REDACTED]\n");
        let (out, _) = redacted(r#"{"authorization": "Bearer t0k3n"}"#);
        assert_eq!(out, r#"{"authorization": "Bearer [REDACTED]"}"#);
        let (out, _) = redacted("authorization: Basic dXNlcjpwYXNz");
        assert_eq!(out, "authorization: Basic [REDACTED]");
        for innocent in [
            "Authorization: required",
            "proxy-authorization-mode: bearer x",
        ] {
            assert_eq!(redacted(innocent), (innocent.to_string(), 0));
        }
    }

    #[test]
    fn secret_named_environment_values() {
        let extra = vec![
            ("MY_API_KEY".to_string(), "s3cr3t-value-123".to_string()),
            ("db_password".to_string(), "correct horse".to_string()),
            ("SHORT_TOKEN".to_string(), "abcd".to_string()),
            ("PATH_EXTRA".to_string(), "/opt/tools/bin".to_string()),
        ];
        let redactor = Redactor::from_env_with(&extra);
        let text = "key=s3cr3t-value-123 pw=correct horse short=abcd path=/opt/tools/bin";
        let (out, n) = redactor.redact(text);
        assert_eq!(
            out,
            "key=[REDACTED] pw=[REDACTED] short=abcd path=/opt/tools/bin"
        );
        assert_eq!(n, 2);
    }

    #[test]
    fn redacting_twice_changes_nothing() {
        let redactor = Redactor::from_values(["s3cr3t-value-123"]);
        for rule in RULES {
            let (once, _) = redactor.redact(rule.output.0);
            assert_eq!(
                redactor.redact(&once),
                (once.clone(), 0),
                "rule {}",
                rule.name
            );
            let argv: Vec<String> = rule.argv.0.iter().map(|s| s.to_string()).collect();
            let once = redactor.redact_argv(&argv);
            assert_eq!(redactor.redact_argv(&once), once, "rule {}", rule.name);
        }
    }

    #[test]
    fn pathological_texts_take_linear_time() {
        // Each would take minutes if a matcher rescanned the rest of the text at every match.
        let redactor = patterns();
        for unit in [
            "a://",
            "mysql ",
            "/",
            "-",
            "x=",
            "--token ",
            "Bearer ",
            "\"",
            "-----BEGIN ",
        ] {
            let text = unit.repeat(100_000 / unit.len());
            let (out, _) = redactor.redact(&text);
            assert!(out.len() <= text.len() + REDACTED.len() * 100_000, "{unit}");
        }
    }

    #[test]
    fn longer_secret_wins_over_a_contained_one() {
        let redactor = Redactor::from_values(["abcdefgh", "abcdefgh-and-more"]);
        assert_eq!(
            redactor.redact("[abcdefgh-and-more]"),
            ("[[REDACTED]]".to_string(), 1)
        );
    }

    #[test]
    fn innocent_text_is_untouched() {
        let redactor = Redactor::from_values(["abcd", "1234567"]);
        let text = "monkey tokenizer keyboard: secret-sauce password? abcd 1234567 ghp_ xoxb- \
                    AKIA Bearer token -----BEGIN PUBLIC KEY----- héllo";
        assert_eq!(redactor.redact(text), (text.to_string(), 0));
    }

    #[test]
    fn secret_names() {
        for name in [
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "PGPASSWORD",
            "ApiKey",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "GIT_DIR", "TOKN"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn fragments_next_to_a_cut() {
        let redactor = Redactor::from_values(["0123456789abcdef"]);
        // Head piece: its end is a cut.
        let (out, n) = redactor.redact_piece("x 0123456789ab", Edge::Whole, Edge::Cut);
        assert_eq!((out.as_str(), n), ("x [REDACTED]", 1));
        let (out, _) = redactor.redact_piece("x ghp_abc", Edge::Whole, Edge::Cut);
        assert_eq!(out, "x [REDACTED]");
        let (out, _) = redactor.redact_piece("x\n-----BEGIN RSA PRIV", Edge::Whole, Edge::Cut);
        assert_eq!(out, "x\n[REDACTED]");
        // Tail piece: its start is a cut.
        let (out, n) = redactor.redact_piece("456789abcdef done", Edge::Cut, Edge::Whole);
        assert_eq!((out.as_str(), n), ("[REDACTED] done", 1));
        let key_rest = "QUFBQQ==\n-----END PRIVATE KEY-----\nok";
        let (out, _) = redactor.redact_piece(key_rest, Edge::Cut, Edge::Whole);
        assert_eq!(out, "[REDACTED]\nok");
        // The same texts are left alone where the ends are real.
        assert_eq!(redactor.redact("x ghp_abc").1, 0);
        assert_eq!(redactor.redact("456789abcdef done").1, 0);
        assert_eq!(redactor.redact(key_rest).1, 0);
    }
}
