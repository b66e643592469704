//! The matchers of the rules in [`super::rules`], by hand (no regex engine): private-key
//! blocks, token prefixes of the big forges and clouds, `Authorization` and `Bearer`
//! credentials, URL passwords, secret-named assignments and options, and tools' password
//! flags. Each returns the byte range to replace for a secret found at one position, or `None`.

use super::classify::scan_tool_flags;
use super::names::{names_secret, ToolFlag};
use super::Edge;

const PEM_BEGIN: &[u8] = b"-----BEGIN ";
const PEM_END: &[u8] = b"-----END ";
const PEM_DASHES: &[u8] = b"-----";
const PRIVATE_KEY: &[u8] = b"PRIVATE KEY";
/// The longest PEM label looked for (`ENCRYPTED PRIVATE KEY`, `OPENSSH PRIVATE KEY`, … are
/// far shorter).
const MAX_PEM_LABEL: usize = 64;

/// `-----BEGIN <label containing PRIVATE KEY>-----` through the matching END line, or to the
/// end of the text when the END line is missing (cut off).
pub(super) fn pem_block(bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
    let rest = &bytes[at..];
    if !rest.starts_with(PEM_BEGIN) {
        // A BEGIN line cut in the middle may have been a key's.
        let cut_begin =
            end == Edge::Cut && rest.len() > PEM_DASHES.len() && PEM_BEGIN.starts_with(rest);
        return cut_begin.then_some((at, bytes.len()));
    }
    let label_start = at + PEM_BEGIN.len();
    // Labels are short; looking no further keeps a text of BEGIN lines linear.
    let window = bytes
        .len()
        .min(label_start + MAX_PEM_LABEL + PEM_DASHES.len());
    let line_end = find(&bytes[label_start..window], b"\n").map_or(window, |p| label_start + p);
    let Some(label_len) = find(&bytes[label_start..line_end], PEM_DASHES) else {
        // The header line itself runs into the cut.
        return (end == Edge::Cut && line_end == bytes.len()).then_some((at, bytes.len()));
    };
    let label = &bytes[label_start..label_start + label_len];
    find(label, PRIVATE_KEY)?;
    let body_start = label_start + label_len + PEM_DASHES.len();
    let end_line = [PEM_END, label, PEM_DASHES].concat();
    let block_end = find(&bytes[body_start..], &end_line)
        .map_or(bytes.len(), |p| body_start + p + end_line.len());
    Some((at, block_end))
}

/// The end of the first `-----END … PRIVATE KEY-----` line when no BEGIN line precedes it.
pub(super) fn orphan_pem_end(bytes: &[u8]) -> Option<usize> {
    let at = find(bytes, PEM_END)?;
    if find(&bytes[..at], PEM_BEGIN).is_some() {
        return None;
    }
    let label_start = at + PEM_END.len();
    let line_end = find(&bytes[label_start..], b"\n").map_or(bytes.len(), |p| label_start + p);
    let label_len = find(&bytes[label_start..line_end], PEM_DASHES)?;
    find(&bytes[label_start..label_start + label_len], PRIVATE_KEY)?;
    Some(label_start + label_len + PEM_DASHES.len())
}

/// A token format: one of `prefixes`, at a word start, then at least `min_body` bytes of
/// `body`.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenFormat {
    pub prefixes: &'static [&'static str],
    pub body: fn(u8) -> bool,
    pub min_body: usize,
}

impl TokenFormat {
    pub const ALNUM: fn(u8) -> bool = is_alnum;
    pub const WORD: fn(u8) -> bool = is_word;
    pub const WORD_OR_DASH: fn(u8) -> bool = is_word_or_dash;
    pub const ALNUM_OR_DASH: fn(u8) -> bool = is_alnum_or_dash;
    pub const UPPER_OR_DIGIT: fn(u8) -> bool = is_upper_or_digit;

    /// This token starting at `at`, at a word boundary. A token running into a cut is
    /// redacted whatever its length: the rest of it is gone, so it may have been long enough.
    pub(super) fn find(&self, bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
        if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
            return None;
        }
        let rest = &bytes[at..];
        let prefix = self
            .prefixes
            .iter()
            .find(|prefix| rest.starts_with(prefix.as_bytes()))?;
        let body_start = at + prefix.len();
        let body = count_while(bytes, body_start, self.body);
        let stop = body_start + body;
        let into_cut = end == Edge::Cut && stop == bytes.len() && body > 0;
        (body >= self.min_body || into_cut).then_some((at, stop))
    }
}

/// The credentials of `Authorization: Bearer <token>` (or `Basic`), header name in any case,
/// also as a quoted key (`"authorization": "Bearer …"`). Only the credentials are replaced.
pub(super) fn authorization(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    const NAME: &[u8] = b"authorization";
    const SCHEMES: [&[u8]; 2] = [b"bearer", b"basic"];
    if at > 0 && is_header_name_char(bytes[at - 1]) {
        return None;
    }
    if !starts_with_ignore_case(&bytes[at..], NAME) {
        return None;
    }
    let mut pos = key_separator(bytes, at + NAME.len())?;
    let scheme = SCHEMES
        .iter()
        .find(|scheme| starts_with_ignore_case(&bytes[pos..], scheme))?;
    pos += scheme.len();
    let blanks = count_while(bytes, pos, is_blank);
    if blanks == 0 {
        return None;
    }
    pos += blanks;
    let token = count_while(bytes, pos, is_token68);
    (token > 0).then_some((pos, pos + token))
}

/// The longest `user:password` of a URL looked at.
const MAX_USERINFO: usize = 256;

/// The longest stretch of a line after a tool's name read as its command line.
const MAX_COMMAND_LINE: usize = 512;
/// The most words after a tool's name read as its command line.
const MAX_COMMAND_WORDS: usize = 24;

/// A bare `Bearer <token>` (any case) at a word start. The token must look like one — 8 or
/// more token characters with a digit or punctuation in it — so that prose such as
/// "Bearer authentication" is left alone.
pub(super) fn bearer(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    const SCHEME: &[u8] = b"bearer";
    const MIN_TOKEN: usize = 8;
    if (at > 0 && is_word(bytes[at - 1])) || !starts_with_ignore_case(&bytes[at..], SCHEME) {
        return None;
    }
    let mut pos = at + SCHEME.len();
    let blanks = count_while(bytes, pos, is_blank);
    if blanks == 0 {
        return None;
    }
    pos += blanks;
    let len = count_while(bytes, pos, is_token68);
    let token = &bytes[pos..pos + len];
    let looks_like_one = token.iter().any(|&b| !b.is_ascii_alphabetic());
    (len >= MIN_TOKEN && looks_like_one).then_some((pos, pos + len))
}

/// The password of `scheme://user:password@host`, found at the `://`. The user is kept.
pub(super) fn url_password(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    const SEPARATOR: &[u8] = b"://";
    if at == 0 || !bytes[at - 1].is_ascii_alphanumeric() || !bytes[at..].starts_with(SEPARATOR) {
        return None;
    }
    let start = at + SEPARATOR.len();
    // Bounded, so that a text of `a://a://…` without `@` costs linear time.
    let len = count_while(
        &bytes[..bytes.len().min(start + MAX_USERINFO)],
        start,
        is_userinfo,
    );
    if bytes.get(start + len) != Some(&b'@') {
        return None;
    }
    let colon = start + find(&bytes[start..start + len], b":")?;
    (colon + 1 < start + len).then_some((colon + 1, start + len))
}

/// The value of `aws_secret_access_key` / `aws_session_token` (any case), in a credentials
/// file (`name = value`), JSON (`"name": "value"`) or the environment (`NAME=value`).
pub(super) fn cloud_secret_key(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    const NAMES: [&[u8]; 2] = [b"aws_secret_access_key", b"aws_session_token"];
    if at > 0 && is_word(bytes[at - 1]) {
        return None;
    }
    let name = NAMES
        .iter()
        .find(|name| starts_with_ignore_case(&bytes[at..], name))?;
    let pos = key_separator(bytes, at + name.len())?;
    let len = count_while(bytes, pos, is_base64);
    (len > 0).then_some((pos, pos + len))
}

/// The value of `name=value` whose name names a secret (`API_TOKEN=…`, `password=…`,
/// `--token=…`): up to a blank, quote, `&`, `;`, `,` or bracket, or a quoted value up to its
/// closing quote (or the end of the line).
pub(super) fn assignment(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    if at > 0 && is_name_char(bytes[at - 1]) {
        return None;
    }
    let name_len = count_while(bytes, at, is_name_char);
    let eq = at + name_len;
    if name_len == 0 || bytes.get(eq) != Some(&b'=') {
        return None;
    }
    let name = std::str::from_utf8(&bytes[at..eq]).ok()?;
    if !names_secret(name) {
        return None;
    }
    value_at(bytes, eq + 1)
}

/// The next word after a secret-named option (`--api-key <value>`, `-password <value>`),
/// unless it looks like another option or a placeholder (`-x`, `<TOKEN>`, `[KEY]`).
pub(super) fn option_value(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    if bytes.get(at) != Some(&b'-') || (at > 0 && !is_separator(bytes[at - 1])) {
        return None;
    }
    let name_len = count_while(bytes, at, is_name_char);
    let name = std::str::from_utf8(&bytes[at..at + name_len]).ok()?;
    if !names_secret(name) {
        return None;
    }
    let blanks = count_while(bytes, at + name_len, is_blank);
    let start = at + name_len + blanks;
    if blanks == 0 || matches!(bytes.get(start), Some(b'-' | b'<' | b'[' | b'{' | b'(')) {
        return None;
    }
    let len = count_while(bytes, start, |b| !b.is_ascii_whitespace() && !is_quote(b));
    (len > 0).then_some((start, start + len))
}

/// A tool's password flag on the rest of the line, when the tool's name is the word at `at`
/// (`mysql -u root -p<password>`): the command line after it, split at blanks, is read as
/// arguments are (the first secret found).
pub(super) fn tool_flag(flag: &ToolFlag, bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    if at > 0 && !is_separator(bytes[at - 1]) && bytes[at - 1] != b'/' {
        return None;
    }
    let rest = &bytes[at..];
    let is_tool = |tool: &&str| {
        rest.starts_with(tool.as_bytes())
            && rest.get(tool.len()).is_none_or(|b| b.is_ascii_whitespace())
    };
    if !flag.tools.iter().any(is_tool) {
        return None;
    }
    // Only so much of the line: a text of nothing but tool names must not cost n² time.
    let window = &rest[..rest.len().min(MAX_COMMAND_LINE)];
    let window = &window[..find(window, b"\n").unwrap_or(window.len())];
    let line = match std::str::from_utf8(window) {
        Ok(line) => line,
        Err(cut) => std::str::from_utf8(&window[..cut.valid_up_to()]).ok()?,
    };
    let words: Vec<&str> = line
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .take(MAX_COMMAND_WORDS)
        .collect();
    let (index, value) = scan_tool_flags(flag, &words)?;
    // `words` borrow from `line`, so the offset of a value is its distance from the line start.
    let word_at = words[index].as_ptr() as usize - line.as_ptr() as usize;
    let value_at = word_at + words[index].len() - value.len();
    Some((at + value_at, at + value_at + value.len()))
}

/// Where the value of a key ending at `pos` starts: after a closing quote, blanks, `:` or `=`,
/// blanks and an opening quote (`key = v`, `"key": "v"`, `KEY=v`).
fn key_separator(bytes: &[u8], mut pos: usize) -> Option<usize> {
    pos += count_while(bytes, pos, is_quote);
    pos += count_while(bytes, pos, is_blank);
    if !matches!(bytes.get(pos), Some(b':' | b'=')) {
        return None;
    }
    pos += 1;
    pos += count_while(bytes, pos, is_blank);
    Some(pos + count_while(bytes, pos, is_quote))
}

/// A value at `start`: quoted (up to the closing quote or the end of the line) or bare.
fn value_at(bytes: &[u8], start: usize) -> Option<(usize, usize)> {
    match bytes.get(start) {
        Some(&quote) if is_quote(quote) => {
            let from = start + 1;
            let len = count_while(bytes, from, |b| b != quote && b != b'\n');
            (len > 0).then_some((from, from + len))
        }
        _ => {
            let len = count_while(bytes, start, is_bare_value);
            (len > 0).then_some((start, start + len))
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn count_while(bytes: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    bytes
        .get(from..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| pred(b)).count())
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_word_or_dash(b: u8) -> bool {
    is_word(b) || b == b'-'
}

fn is_alnum_or_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn is_upper_or_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

fn is_header_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn is_quote(b: u8) -> bool {
    b == b'"' || b == b'\''
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Where an option or a command may start: the text start, a blank, a quote, `=` or `(`.
fn is_separator(b: u8) -> bool {
    b.is_ascii_whitespace() || is_quote(b) || matches!(b, b'=' | b'(' | b'`')
}

/// Characters of an option or variable name (`--api-key`, `db.password`, `API_TOKEN`).
fn is_name_char(b: u8) -> bool {
    is_word(b) || b == b'-' || b == b'.'
}

/// A bare value ends at a blank, a quote, a separator of URL queries and lists, or a bracket.
fn is_bare_value(b: u8) -> bool {
    !b.is_ascii_whitespace()
        && !is_quote(b)
        && !matches!(b, b'&' | b';' | b',' | b')' | b']' | b'}' | b'<' | b'>')
}

/// Characters of a URL's `user:password` part (no `/`, `?`, `#`, `@`, blanks or quotes).
fn is_userinfo(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'/' | b'?' | b'#' | b'@' | b'"' | b'\'' | b'<' | b'>')
}

/// Base64 characters (AWS secret keys and session tokens).
fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// RFC 6750 `b64token` characters.
fn is_token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}
