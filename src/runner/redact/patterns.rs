//! The known secret formats, matched by hand (no regex engine): private-key blocks, token
//! prefixes of the big forges and clouds, and `Authorization` credentials. Each matcher
//! returns the byte range to replace for a secret starting at one position, or `None`.

use super::Edge;

const PEM_BEGIN: &[u8] = b"-----BEGIN ";
const PEM_END: &[u8] = b"-----END ";
const PEM_DASHES: &[u8] = b"-----";
const PRIVATE_KEY: &[u8] = b"PRIVATE KEY";

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
    let line_end = find(&bytes[label_start..], b"\n").map_or(bytes.len(), |p| label_start + p);
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

struct TokenFormat {
    prefixes: &'static [&'static str],
    body: fn(u8) -> bool,
    min_body: usize,
}

const TOKEN_FORMATS: &[TokenFormat] = &[
    TokenFormat {
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        body: is_alnum,
        min_body: 20,
    },
    TokenFormat {
        prefixes: &["github_pat_"],
        body: is_word,
        min_body: 20,
    },
    TokenFormat {
        prefixes: &["glpat-"],
        body: is_word_or_dash,
        min_body: 20,
    },
    TokenFormat {
        prefixes: &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"],
        body: is_alnum_or_dash,
        min_body: 10,
    },
    TokenFormat {
        prefixes: &["AKIA", "ASIA"],
        body: is_upper_or_digit,
        min_body: 16,
    },
];

/// A known token format starting at a word boundary. A token running into a cut is redacted
/// whatever its length: the rest of it is gone, so it may have been long enough.
pub(super) fn prefixed_token(bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
    if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
        return None;
    }
    let rest = &bytes[at..];
    for format in TOKEN_FORMATS {
        for prefix in format.prefixes {
            if !rest.starts_with(prefix.as_bytes()) {
                continue;
            }
            let body_start = at + prefix.len();
            let body = count_while(bytes, body_start, format.body);
            let stop = body_start + body;
            let into_cut = end == Edge::Cut && stop == bytes.len() && body > 0;
            if body >= format.min_body || into_cut {
                return Some((at, stop));
            }
        }
    }
    None
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
    let mut pos = at + NAME.len();
    pos += count_while(bytes, pos, is_quote);
    pos += count_while(bytes, pos, is_blank);
    if !matches!(bytes.get(pos), Some(b':' | b'=')) {
        return None;
    }
    pos += 1;
    pos += count_while(bytes, pos, is_blank);
    pos += count_while(bytes, pos, is_quote);
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn count_while(bytes: &[u8], from: usize, pred: fn(u8) -> bool) -> usize {
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

/// RFC 6750 `b64token` characters.
fn is_token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}
