//! git's and ssh-keygen's allowed-signers file (`gpg.ssh.allowedSignersFile`, ssh-keygen(1)
//! ALLOWED SIGNERS): who may sign, for which namespaces, and when.
//!
//! Each line is `principals [options] keytype base64-key [comment]`; blank lines and lines
//! starting with `#` are comments. `principals` and `namespaces="…"` are ssh pattern-lists
//! (comma-separated, `*` and `?` wildcards, a leading `!` negates); option keywords are
//! case-insensitive and option values must be double-quoted, as ssh-keygen requires.
//!
//! Two deliberate differences from ssh-keygen, both written down in the user docs:
//!
//! - `valid-after`/`valid-before` (`YYYYMMDD`, `YYYYMMDDHHMM`, `YYYYMMDDHHMMSS`, each with an
//!   optional `Z` or `UTC` suffix) are always read as UTC. ssh-keygen reads a time without `Z`
//!   in the verifying machine's local zone, so the same file would give different verdicts on a
//!   laptop, a CI runner and a server hook; the times it is compared with (`finished_at`) are
//!   UTC. A file that writes the `Z` means the same thing to both tools.
//! - `cert-authority` lines are kept but never match: tabellio verifies signatures made by plain
//!   keys, not by SSH certificates. Each such line is listed in [`AllowedSigners::notes`] so the
//!   caller can say so instead of silently trusting nobody.
//!
//! A line ssh-keygen would refuse (unknown option, unquoted value, bad time, no key) is an error
//! naming the line: a signers file that means something else to git than to us is not guessed at.

use std::fmt;

use ssh_key::public::KeyData;
use ssh_key::PublicKey;

/// One usable line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line number in the file.
    pub line: usize,
    /// The principals pattern-list, as written.
    pub principals: String,
    /// The `namespaces="…"` pattern-list, if the line restricts namespaces.
    pub namespaces: Option<String>,
    /// `valid-after`, as Unix seconds (UTC).
    pub valid_after: Option<i64>,
    /// `valid-before`, as Unix seconds (UTC).
    pub valid_before: Option<i64>,
    /// A `cert-authority` line: parsed, never matched (see the module doc).
    pub cert_authority: bool,
    pub key: PublicKey,
}

/// A parsed allowed-signers file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedSigners {
    entries: Vec<Entry>,
    notes: Vec<String>,
}

/// A line that cannot be read; `source` names the file (a path in the repository).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct AllowedSignersError {
    pub source_name: String,
    pub line: usize,
    pub message: String,
}

/// Why a key is not an allowed signer for a namespace at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignerRefusal {
    /// No line holds this key (for the claimed principal).
    UnknownSigner,
    /// A line holds the key, but its principals do not include the one the signature claims.
    PrincipalNotAllowed {
        line: usize,
        claimed: String,
        principals: String,
    },
    /// The key's line restricts namespaces and the namespace is not among them.
    WrongNamespace {
        line: usize,
        namespace: String,
        namespaces: String,
    },
    /// The time is after the line's `valid-before`.
    Expired { line: usize, valid_before: String },
    /// The time is before the line's `valid-after`.
    NotYetValid { line: usize, valid_after: String },
    /// The time to judge at is not an RFC 3339 UTC time.
    BadTime { value: String },
}

impl SignerRefusal {
    /// How far a line got before refusing: the most specific refusal is the one reported.
    fn rank(&self) -> u8 {
        match self {
            SignerRefusal::UnknownSigner | SignerRefusal::BadTime { .. } => 0,
            SignerRefusal::PrincipalNotAllowed { .. } => 1,
            SignerRefusal::WrongNamespace { .. } => 2,
            SignerRefusal::Expired { .. } | SignerRefusal::NotYetValid { .. } => 3,
        }
    }
}

impl fmt::Display for SignerRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignerRefusal::UnknownSigner => f.write_str("the key is not in the allowed signers"),
            SignerRefusal::PrincipalNotAllowed {
                line,
                claimed,
                principals,
            } => write!(
                f,
                "the key is allowed for {principals:?} (line {line}), not for {claimed:?}"
            ),
            SignerRefusal::WrongNamespace {
                line,
                namespace,
                namespaces,
            } => write!(
                f,
                "the key may sign only in namespaces {namespaces:?} (line {line}), not {namespace:?}"
            ),
            SignerRefusal::Expired { line, valid_before } => {
                write!(f, "the key was valid only until {valid_before} (line {line})")
            }
            SignerRefusal::NotYetValid { line, valid_after } => {
                write!(f, "the key is valid only from {valid_after} (line {line})")
            }
            SignerRefusal::BadTime { value } => {
                write!(f, "{value:?} is not an RFC 3339 UTC time")
            }
        }
    }
}

impl AllowedSigners {
    /// Parse the file's text; `source_name` names it in errors (`.tabellio/allowed_signers`).
    pub fn parse(text: &str, source_name: &str) -> Result<Self, AllowedSignersError> {
        let mut out = AllowedSigners::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| AllowedSignersError {
                source_name: source_name.to_string(),
                line,
                message,
            };
            let Some(entry) = parse_line(raw, line).map_err(err)? else {
                continue;
            };
            if entry.cert_authority {
                out.notes.push(format!(
                    "{source_name}:{line}: cert-authority line ignored: tabellio verifies signatures by plain keys, not by SSH certificates"
                ));
            }
            out.entries.push(entry);
        }
        Ok(out)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Things a person should know about the file that are not errors (ignored lines).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The principal `key` may sign as in `namespace` at `at` (RFC 3339 UTC, the record's
    /// `finished_at`), as `ssh-keygen -Y verify` decides it.
    ///
    /// With `claimed` (the principal a signature names), only lines whose principals match it
    /// count and the claim is returned; without, the first matching line's principals field is
    /// returned, as `ssh-keygen -Y find-principals` prints it. When no line allows the key the
    /// most specific refusal of any line holding the key is returned.
    pub fn find_principal(
        &self,
        key: &KeyData,
        claimed: Option<&str>,
        namespace: &str,
        at: &str,
    ) -> Result<String, SignerRefusal> {
        let Some(t) = parse_rfc3339_utc(at) else {
            return Err(SignerRefusal::BadTime { value: at.into() });
        };
        let mut best = SignerRefusal::UnknownSigner;
        for entry in &self.entries {
            if entry.cert_authority || entry.key.key_data() != key {
                continue;
            }
            match entry.allows(claimed, namespace, t) {
                Ok(()) => {
                    return Ok(claimed.map_or_else(|| entry.principals.clone(), str::to_string))
                }
                Err(refusal) if refusal.rank() > best.rank() => best = refusal,
                Err(_) => {}
            }
        }
        Err(best)
    }
}

/// The namespaces that declare what kind of signer a line's key is (docs/signing.md): ssh-keygen
/// reads them as more namespaces the key may sign in, which none of our signatures use.
pub const KIND_NAMESPACES: [(&str, &str); 3] = [
    ("tabellio.agent", "agent"),
    ("tabellio.human", "human"),
    ("tabellio.ci", "ci"),
];

impl Entry {
    /// The kind of signer the line declares (`agent`, `human`, `ci`) with a `tabellio.<kind>`
    /// entry in its `namespaces`; `None` when it declares none. A line declaring two kinds
    /// declares the most restricted: `agent`.
    pub fn kind(&self) -> Option<&'static str> {
        let listed = self.namespaces.as_deref()?;
        KIND_NAMESPACES
            .iter()
            .find(|(ns, _)| listed.split(',').any(|n| n == *ns))
            .map(|(_, kind)| *kind)
    }

    fn allows(&self, claimed: Option<&str>, namespace: &str, t: i64) -> Result<(), SignerRefusal> {
        if let Some(claimed) = claimed {
            if !pattern_list_matches(claimed, &self.principals) {
                return Err(SignerRefusal::PrincipalNotAllowed {
                    line: self.line,
                    claimed: claimed.into(),
                    principals: self.principals.clone(),
                });
            }
        }
        if let Some(namespaces) = &self.namespaces {
            if !pattern_list_matches(namespace, namespaces) {
                return Err(SignerRefusal::WrongNamespace {
                    line: self.line,
                    namespace: namespace.into(),
                    namespaces: namespaces.clone(),
                });
            }
        }
        // Inclusive at both ends, as ssh-keygen compares.
        if let Some(after) = self.valid_after.filter(|after| t < *after) {
            return Err(SignerRefusal::NotYetValid {
                line: self.line,
                valid_after: format_utc(after),
            });
        }
        if let Some(before) = self.valid_before.filter(|before| t > *before) {
            return Err(SignerRefusal::Expired {
                line: self.line,
                valid_before: format_utc(before),
            });
        }
        Ok(())
    }
}

fn parse_line(raw: &str, line: usize) -> Result<Option<Entry>, String> {
    let rest = raw.trim_start_matches([' ', '\t']);
    if rest.is_empty() || rest.starts_with('#') {
        return Ok(None);
    }
    let (principals, rest) = next_field(rest)?;
    if principals.is_empty() {
        return Err("empty principals field".into());
    }
    if rest.is_empty() {
        return Err(format!(
            "no key after the principals {principals:?}; a line is `principals [options] keytype base64-key`"
        ));
    }
    // ssh-keygen reads a key first and falls back to options: do the same, so a line whose
    // second field is a key type is never mistaken for options.
    let (options, key_text) = match PublicKey::from_openssh(rest.trim_end()) {
        Ok(_) => (String::new(), rest),
        Err(_) => {
            let (first, after) = next_field(rest)?;
            if ssh_key::Algorithm::new(&first).is_ok() {
                return Err(format!("invalid {first} public key"));
            }
            if after.is_empty() {
                return Err(format!(
                    "no key after the options {first:?}; a line is `principals [options] keytype base64-key`"
                ));
            }
            (first, after)
        }
    };
    let key = PublicKey::from_openssh(key_text.trim_end()).map_err(|e| {
        format!(
            "invalid public key ({e}); copy the line of the key's .pub file after the principals"
        )
    })?;
    let mut entry = Entry {
        line,
        principals,
        namespaces: None,
        valid_after: None,
        valid_before: None,
        cert_authority: false,
        key,
    };
    parse_options(&options, &mut entry)?;
    Ok(Some(entry))
}

/// The next whitespace-delimited field (a leading `"` quotes up to the next `"`), and the rest
/// with leading whitespace removed.
fn next_field(s: &str) -> Result<(String, &str), String> {
    if let Some(quoted) = s.strip_prefix('"') {
        let end = quoted
            .find('"')
            .ok_or_else(|| "unterminated quote in the principals field".to_string())?;
        let rest = quoted[end + 1..].trim_start_matches([' ', '\t']);
        return Ok((quoted[..end].to_string(), rest));
    }
    // Options may hold quoted spaces (`namespaces="a b"` is not valid, but quoted values are).
    let mut in_quote = false;
    let end = s
        .char_indices()
        .find(|&(_, c)| {
            if c == '"' {
                in_quote = !in_quote;
            }
            !in_quote && (c == ' ' || c == '\t')
        })
        .map_or(s.len(), |(i, _)| i);
    if in_quote {
        return Err("unterminated quote".into());
    }
    Ok((
        s[..end].to_string(),
        s[end..].trim_start_matches([' ', '\t']),
    ))
}

fn parse_options(options: &str, entry: &mut Entry) -> Result<(), String> {
    if options.is_empty() {
        return Ok(());
    }
    let mut rest = options;
    loop {
        let (name, value, after) = next_option(rest)?;
        let lower = name.to_ascii_lowercase();
        match (lower.as_str(), value) {
            ("cert-authority", None) => entry.cert_authority = true,
            ("namespaces", Some(v)) => {
                if entry.namespaces.replace(v).is_some() {
                    return Err("more than one \"namespaces\" option".into());
                }
            }
            ("valid-after", Some(v)) => {
                let t = parse_ssh_time(&v).ok_or_else(|| bad_time("valid-after", &v))?;
                if entry.valid_after.replace(t).is_some() {
                    return Err("more than one \"valid-after\" option".into());
                }
            }
            ("valid-before", Some(v)) => {
                let t = parse_ssh_time(&v).ok_or_else(|| bad_time("valid-before", &v))?;
                if entry.valid_before.replace(t).is_some() {
                    return Err("more than one \"valid-before\" option".into());
                }
            }
            ("cert-authority", Some(_)) => {
                return Err("cert-authority takes no value".into());
            }
            ("namespaces" | "valid-after" | "valid-before", None) => {
                return Err(format!(
                    "option {name:?} needs a double-quoted value, e.g. {lower}=\"…\""
                ));
            }
            _ => {
                return Err(format!(
                    "unknown option {name:?} (allowed: namespaces=\"…\", valid-after=\"…\", valid-before=\"…\", cert-authority)"
                ));
            }
        }
        match after {
            None => break,
            Some(next) => rest = next,
        }
    }
    if let (Some(after), Some(before)) = (entry.valid_after, entry.valid_before) {
        if before <= after {
            return Err("\"valid-before\" is not after \"valid-after\"".into());
        }
    }
    Ok(())
}

fn bad_time(option: &str, value: &str) -> String {
    format!(
        "{option}=\"{value}\" is not a time; write YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS, optionally followed by Z (always read as UTC)"
    )
}

/// One `name` or `name="value"` option and what follows the comma, if anything does.
fn next_option(s: &str) -> Result<(String, Option<String>, Option<&str>), String> {
    let name_end = s.find(['=', ',']).unwrap_or(s.len());
    let name = s[..name_end].to_string();
    if name.is_empty() {
        return Err("empty option".into());
    }
    let mut rest = &s[name_end..];
    let mut value = None;
    if let Some(v) = rest.strip_prefix('=') {
        let Some(quoted) = v.strip_prefix('"') else {
            return Err(format!(
                "the value of option {name:?} must be double-quoted, e.g. {name}=\"…\""
            ));
        };
        let end = quoted
            .find('"')
            .ok_or_else(|| format!("unterminated quote in option {name:?}"))?;
        value = Some(quoted[..end].to_string());
        rest = &quoted[end + 1..];
    }
    match rest.strip_prefix(',') {
        None if rest.is_empty() => Ok((name, value, None)),
        None => Err(format!("unexpected {rest:?} after option {name:?}")),
        Some("") => Err("options end with a comma".into()),
        Some(next) => Ok((name, value, Some(next))),
    }
}

/// ssh's pattern-list match: true when some pattern matches and no negated (`!`) one does.
pub fn pattern_list_matches(s: &str, list: &str) -> bool {
    let mut matched = false;
    for pattern in list.split(',') {
        match pattern.strip_prefix('!') {
            Some(negated) if pattern_matches(s, negated) => return false,
            Some(_) => {}
            None => matched |= pattern_matches(s, pattern),
        }
    }
    matched
}

/// ssh's `match_pattern`: `*` any run of characters, `?` exactly one.
fn pattern_matches(s: &str, pattern: &str) -> bool {
    fn go(s: &[char], p: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(&s[i..], rest)),
            Some(('?', rest)) => !s.is_empty() && go(&s[1..], rest),
            Some((c, rest)) => s.first() == Some(c) && go(&s[1..], rest),
        }
    }
    let s: Vec<char> = s.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    go(&s, &p)
}

/// `YYYYMMDD[HHMM[SS]]` with an optional `Z`/`UTC` suffix, as Unix seconds, read as UTC.
fn parse_ssh_time(value: &str) -> Option<i64> {
    let digits = value
        .strip_suffix(['Z', 'z'])
        .or_else(|| {
            value
                .len()
                .checked_sub(3)
                .filter(|&i| value.is_char_boundary(i) && value[i..].eq_ignore_ascii_case("utc"))
                .map(|i| &value[..i])
        })
        .unwrap_or(value);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| digits[r].parse::<i64>().ok();
    let (h, mi, s) = match digits.len() {
        8 => (0, 0, 0),
        12 => (num(8..10)?, num(10..12)?, 0),
        14 => (num(8..10)?, num(10..12)?, num(12..14)?),
        _ => return None,
    };
    epoch_seconds(num(0..4)?, num(4..6)?, num(6..8)?, h, mi, s)
}

/// An RFC 3339 time in UTC (`…Z` or `…+00:00`, fractional seconds ignored) as Unix seconds.
pub fn parse_rfc3339_utc(value: &str) -> Option<i64> {
    let b = value.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let mut tail = &value[19..];
    if let Some(frac) = tail.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        tail = &frac[n..];
    }
    if !matches!(tail, "Z" | "z" | "+00:00" | "-00:00") {
        return None;
    }
    let num = |r: std::ops::Range<usize>| {
        let part = &value[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse::<i64>().ok())
            .flatten()
    };
    epoch_seconds(
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    )
}

fn epoch_seconds(y: i64, m: i64, d: i64, h: i64, mi: i64, s: i64) -> Option<i64> {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=month_days).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s)
}

// Howard Hinnant's days-from-civil algorithm (the inverse of model::time's).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn format_utc(t: i64) -> String {
    let at = if t >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64)
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_secs(t.unsigned_abs())
    };
    crate::model::time::rfc3339(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOM/xKXqP0Bi/nnrzfZqy1lpi1QpF3fXvGsFs+sKJZK9";

    fn key_a() -> KeyData {
        PublicKey::from_openssh(KEY_A).unwrap().key_data().clone()
    }

    #[test]
    fn times() {
        assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_utc("2024-02-29T23:59:59Z"),
            Some(1_709_251_199)
        );
        assert_eq!(
            parse_rfc3339_utc("2024-02-29T23:59:59.25Z"),
            Some(1_709_251_199)
        );
        assert_eq!(parse_rfc3339_utc("2023-02-29T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_utc("2024-01-01T00:00:00+02:00"), None);
        assert_eq!(parse_rfc3339_utc("2024-01-01 00:00:00"), None);
        assert_eq!(parse_ssh_time("20240301"), Some(1_709_251_200));
        assert_eq!(parse_ssh_time("20240301Z"), Some(1_709_251_200));
        assert_eq!(parse_ssh_time("202403010001UTC"), Some(1_709_251_260));
        assert_eq!(parse_ssh_time("20240301000130z"), Some(1_709_251_290));
        assert_eq!(parse_ssh_time("2024030"), None);
        assert_eq!(parse_ssh_time("2024-03-01"), None);
        assert_eq!(format_utc(1_709_251_199), "2024-02-29T23:59:59Z");
    }

    #[test]
    fn patterns() {
        assert!(pattern_list_matches("ci@example.com", "*@example.com"));
        assert!(pattern_list_matches("tabellio", "git,tabellio"));
        assert!(pattern_list_matches("tabellio", "tab?llio"));
        assert!(!pattern_list_matches("tabellio", "git,file"));
        assert!(!pattern_list_matches(
            "bot@example.com",
            "*@example.com,!bot@*"
        ));
        assert!(!pattern_list_matches("x", "!y"));
    }

    #[test]
    fn parses_lines_and_options() {
        let text = format!(
            "# comment\n\n  ci@example.com,ops@example.com {KEY_A} ci key\n\"a b\" NameSpaces=\"git,tabellio\",valid-after=\"20240101\",valid-before=\"20250101Z\" {KEY_A}\n*@ca.example.com cert-authority {KEY_A}\n"
        );
        let signers = AllowedSigners::parse(&text, "signers").unwrap();
        let e = signers.entries();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].line, e[0].principals.as_str()),
            (3, "ci@example.com,ops@example.com")
        );
        assert_eq!(e[1].principals, "a b");
        assert_eq!(e[1].namespaces.as_deref(), Some("git,tabellio"));
        assert_eq!(e[1].valid_after, Some(1_704_067_200));
        assert_eq!(e[1].valid_before, Some(1_735_689_600));
        assert!(e[2].cert_authority);
        assert_eq!(signers.notes().len(), 1);
        assert!(
            signers.notes()[0].contains("signers:5"),
            "{:?}",
            signers.notes()
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("ci@example.com".to_string(), "no key"),
            (
                format!("ci@example.com shell=\"x\" {KEY_A}"),
                "unknown option",
            ),
            (
                format!("ci@example.com namespaces=tabellio {KEY_A}"),
                "double-quoted",
            ),
            (
                format!("ci@example.com valid-before=\"2024\" {KEY_A}"),
                "not a time",
            ),
            (
                format!(
                    "ci@example.com valid-after=\"20250101\",valid-before=\"20240101\" {KEY_A}"
                ),
                "not after",
            ),
            (
                "ci@example.com ssh-ed25519 AAAAnotakey".to_string(),
                "invalid ssh-ed25519",
            ),
            (
                "ci@example.com namespaces=\"tabellio\"".to_string(),
                "no key",
            ),
            (
                format!("ci@example.com namespaces=\"a\",namespaces=\"b\" {KEY_A}"),
                "more than one",
            ),
        ];
        for (line, needle) in cases {
            let text = format!("# first\n{line}\n");
            let err = AllowedSigners::parse(&text, ".tabellio/allowed_signers").unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.starts_with(".tabellio/allowed_signers:2: ") && msg.contains(needle),
                "{line}: {msg}"
            );
        }
    }

    #[test]
    fn find_principal_reasons() {
        let text = format!(
            "ci@example.com namespaces=\"tabellio\",valid-after=\"20240101Z\",valid-before=\"20250101Z\" {KEY_A}\n"
        );
        let s = AllowedSigners::parse(&text, "f").unwrap();
        let key = key_a();
        let at = "2024-06-01T00:00:00Z";
        assert_eq!(
            s.find_principal(&key, None, "tabellio", at),
            Ok("ci@example.com".into())
        );
        assert_eq!(
            s.find_principal(
                &key,
                Some("ci@example.com"),
                "tabellio",
                "2025-01-01T00:00:00Z"
            ),
            Ok("ci@example.com".into()),
            "valid-before is inclusive"
        );
        assert!(matches!(
            s.find_principal(&key, None, "tabellio", "2025-01-01T00:00:01Z"),
            Err(SignerRefusal::Expired { line: 1, .. })
        ));
        assert!(matches!(
            s.find_principal(&key, None, "tabellio", "2023-12-31T23:59:59Z"),
            Err(SignerRefusal::NotYetValid { line: 1, .. })
        ));
        assert!(matches!(
            s.find_principal(&key, None, "git", at),
            Err(SignerRefusal::WrongNamespace { line: 1, .. })
        ));
        assert!(matches!(
            s.find_principal(&key, Some("mallory@example.com"), "tabellio", at),
            Err(SignerRefusal::PrincipalNotAllowed { line: 1, .. })
        ));
        assert!(matches!(
            s.find_principal(&key, None, "tabellio", "yesterday"),
            Err(SignerRefusal::BadTime { .. })
        ));
        let other = AllowedSigners::parse("", "f").unwrap();
        assert_eq!(
            other.find_principal(&key, None, "tabellio", at),
            Err(SignerRefusal::UnknownSigner)
        );
    }

    #[test]
    fn a_later_line_can_allow_what_an_earlier_refuses() {
        let text =
            format!("ci@example.com valid-before=\"20200101Z\" {KEY_A}\nci@example.com {KEY_A}\n");
        let s = AllowedSigners::parse(&text, "f").unwrap();
        assert_eq!(
            s.find_principal(
                &key_a(),
                Some("ci@example.com"),
                "tabellio",
                "2024-06-01T00:00:00Z"
            ),
            Ok("ci@example.com".into())
        );
    }
}
