//! Bounded capture of a check's merged output: full hash, byte count, head and tail.
//!
//! Memory is `cap` bytes however much is pushed; what does not fit between the first ⅓ and the
//! last ⅔ is hashed and counted, then forgotten.

use sha2::{Digest, Sha256};

use super::redact::{Edge, Redactor};
use super::OutputSummary;

/// A ring buffer that keeps the last `cap` bytes pushed into it.
#[derive(Debug, Clone)]
pub struct TailRing {
    buf: Vec<u8>,
    cap: usize,
    /// Index of the oldest byte once `buf` is full (and the next one to overwrite).
    start: usize,
}

impl TailRing {
    /// The buffer grows as bytes arrive, so a large `cap` costs nothing until it is used.
    pub fn new(cap: usize) -> Self {
        TailRing {
            buf: Vec::new(),
            cap,
            start: 0,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        if self.cap == 0 {
            return;
        }
        let mut rest = if data.len() > self.cap {
            &data[data.len() - self.cap..]
        } else {
            data
        };
        if self.buf.len() < self.cap {
            let n = (self.cap - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        while !rest.is_empty() {
            let n = (self.cap - self.start).min(rest.len());
            self.buf[self.start..self.start + n].copy_from_slice(&rest[..n]);
            self.start = (self.start + n) % self.cap;
            rest = &rest[n..];
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The kept bytes, oldest first.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.buf.len());
        out.extend_from_slice(&self.buf[self.start..]);
        out.extend_from_slice(&self.buf[..self.start]);
        out
    }
}

/// The streaming half of the excerpt: feed it chunks in arrival order, then [`finish`] it.
///
/// [`finish`]: OutputCapture::finish
#[derive(Debug, Clone)]
pub struct OutputCapture {
    hasher: Sha256,
    total: u64,
    head: Vec<u8>,
    head_cap: usize,
    tail: TailRing,
    tail_cap: usize,
}

impl OutputCapture {
    /// Keeps the first `cap / 3` bytes and the last `cap - cap / 3`.
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 3;
        let tail_cap = cap - head_cap;
        OutputCapture {
            hasher: Sha256::new(),
            total: 0,
            head: Vec::new(),
            head_cap,
            tail: TailRing::new(tail_cap),
            tail_cap,
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        self.hasher.update(data);
        self.total += data.len() as u64;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        self.tail.push(data);
    }

    /// Bytes pushed so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Hash, count and the redacted excerpt. Head and tail are cut back to whole characters
    /// (the cut-off bytes count as omitted) and redacted separately, each knowing which of its
    /// ends is a cut, so a secret running into the cut is still caught.
    pub fn finish(self, redactor: &Redactor) -> OutputSummary {
        let sha256 = hex(&self.hasher.finalize());
        let kept = self.head.len() as u64 + self.tail.len() as u64;
        let tail = self.tail.to_vec();
        if self.total == kept {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            let text = String::from_utf8_lossy(&all);
            let (excerpt, redactions) = redactor.redact(&text);
            return OutputSummary {
                bytes: self.total,
                sha256,
                excerpt,
                truncated: false,
                redactions,
            };
        }
        debug_assert_eq!(
            self.tail.len(),
            self.tail_cap,
            "the tail only drops bytes when full"
        );
        let head = trim_partial_char_end(&self.head);
        let tail = trim_partial_char_start(&tail);
        let omitted = self.total - head.len() as u64 - tail.len() as u64;
        let (head_text, head_count) =
            redactor.redact_piece(&String::from_utf8_lossy(head), Edge::Whole, Edge::Cut);
        let (tail_text, tail_count) =
            redactor.redact_piece(&String::from_utf8_lossy(tail), Edge::Cut, Edge::Whole);
        let marker = omission_marker(omitted);
        let mut excerpt = String::with_capacity(head_text.len() + marker.len() + tail_text.len());
        excerpt.push_str(&head_text);
        excerpt.push_str(&marker);
        excerpt.push_str(&tail_text);
        OutputSummary {
            bytes: self.total,
            sha256,
            excerpt,
            truncated: true,
            redactions: head_count + tail_count,
        }
    }
}

/// The line that stands for the middle of a truncated output.
pub fn omission_marker(omitted: u64) -> String {
    format!("\n[... tabellio: {omitted} bytes omitted ...]\n")
}

/// The summary [`run_command`](super::run_command) would store for `output` with this `cap`.
pub fn excerpt_of(output: &[u8], cap: usize, redactor: &Redactor) -> OutputSummary {
    let mut capture = OutputCapture::new(cap);
    capture.push(output);
    capture.finish(redactor)
}

/// Drops an incomplete UTF-8 sequence at the end, so the cut does not show up as U+FFFD.
fn trim_partial_char_end(bytes: &[u8]) -> &[u8] {
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let byte = bytes[n - back];
        if is_continuation(byte) {
            continue;
        }
        let needed = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            // Not a lead byte: invalid anyway, left for the lossy decoder.
            _ => 1,
        };
        return if needed > back {
            &bytes[..n - back]
        } else {
            bytes
        };
    }
    bytes
}

/// Drops the continuation bytes of a character whose start was cut off.
fn trim_partial_char_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&b| is_continuation(b))
        .count();
    &bytes[skip..]
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0F)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Redactor {
        Redactor::from_values(Vec::<String>::new())
    }

    fn numbered(len: usize) -> Vec<u8> {
        (0..len).map(|i| b'a' + (i % 26) as u8).collect()
    }

    #[test]
    fn ring_keeps_last_bytes_across_chunkings() {
        let data = numbered(1000);
        for chunk in [1, 3, 7, 64, 99, 100, 101, 1000] {
            let mut ring = TailRing::new(100);
            for piece in data.chunks(chunk) {
                ring.push(piece);
            }
            assert_eq!(ring.to_vec(), &data[900..], "chunk size {chunk}");
        }
        let mut short = TailRing::new(100);
        short.push(b"abc");
        assert_eq!(short.to_vec(), b"abc");
        let mut none = TailRing::new(0);
        none.push(b"abc");
        assert!(none.is_empty());
    }

    #[test]
    fn small_output_is_kept_whole() {
        let data = numbered(30);
        let s = excerpt_of(&data, 30, &plain());
        assert!(!s.truncated);
        assert_eq!(s.bytes, 30);
        assert_eq!(s.excerpt.as_bytes(), &data[..]);
        assert_eq!(s.redactions, 0);
    }

    #[test]
    fn large_output_keeps_a_third_head_and_two_thirds_tail() {
        let data = numbered(100);
        // cap 30: head 10, tail 20, 70 omitted; the same whatever the chunking.
        let expected = format!(
            "{}\n[... tabellio: 70 bytes omitted ...]\n{}",
            String::from_utf8_lossy(&data[..10]),
            String::from_utf8_lossy(&data[80..])
        );
        for chunk in [1, 7, 10, 11, 100] {
            let mut capture = OutputCapture::new(30);
            for piece in data.chunks(chunk) {
                capture.push(piece);
            }
            let s = capture.finish(&plain());
            assert!(s.truncated);
            assert_eq!(s.bytes, 100);
            assert_eq!(s.excerpt, expected, "chunk size {chunk}");
        }
        // One byte over the cap is already truncated.
        let s = excerpt_of(&numbered(31), 30, &plain());
        assert!(s.truncated);
        assert!(s.excerpt.contains("[... tabellio: 1 bytes omitted ...]"));
    }

    #[test]
    fn hash_covers_every_byte_not_just_the_excerpt() {
        let a = excerpt_of(b"0123456789ABCDEFGHIJ-end", 6, &plain());
        let b = excerpt_of(b"0123456789abcdefghij-end", 6, &plain());
        assert_eq!(a.excerpt, b.excerpt);
        assert_ne!(a.sha256, b.sha256);
        assert_eq!(
            excerpt_of(b"", 6, &plain()).sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            excerpt_of(b"abc", 6, &plain()).sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // "é" is two bytes. cap 9: head 3 bytes = "aé"; with "aaé" the head would end
        // inside the "é", which must be dropped, not shown as U+FFFD.
        let data = "aaé-middle-part-xyzé".as_bytes();
        let s = excerpt_of(data, 9, &plain());
        assert!(s.truncated);
        assert!(
            s.excerpt.starts_with("aa\n[... tabellio: "),
            "{:?}",
            s.excerpt
        );
        assert!(!s.excerpt.contains('\u{FFFD}'), "{:?}", s.excerpt);
        // The tail (last 6 bytes) is "-xyzé": starts on a boundary, kept whole.
        assert!(s.excerpt.ends_with("-xyzé"), "{:?}", s.excerpt);
        let omitted = data.len() - 2 - "-xyzé".len();
        assert!(s.excerpt.contains(&format!(" {omitted} bytes omitted")));

        // Tail cut inside a character: its continuation byte is dropped.
        let data = "héllo wörld".as_bytes(); // 13 bytes, ö at 8..10
        let s = excerpt_of(data, 6, &plain()); // head 2 = "h\xc3", tail 4 = "\xb6rld"
        assert_eq!(s.excerpt, "h\n[... tabellio: 9 bytes omitted ...]\nrld");
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        let s = excerpt_of(b"ok \xff\xfe done", 100, &plain());
        assert_eq!(s.excerpt, "ok \u{FFFD}\u{FFFD} done");
        assert_eq!(s.bytes, 10);
    }

    #[test]
    fn head_and_tail_are_redacted_separately() {
        let token = "ghp_0123456789abcdefghijABCD";
        let mut data = format!("token {token} start\n").into_bytes();
        data.extend(std::iter::repeat_n(b'.', 1000));
        data.extend(format!("\nend {token}").into_bytes());
        let s = excerpt_of(&data, 150, &plain());
        assert!(s.truncated);
        assert!(!s.excerpt.contains(token), "{}", s.excerpt);
        assert_eq!(s.redactions, 2);
    }

    #[test]
    fn token_running_into_the_head_cut_is_redacted() {
        // Head is 12 bytes: "xx ghp_abcde" — too short to be a token on its own, but it runs
        // into the cut, so the rest may have been a token.
        let mut data = b"xx ghp_abcdefghijklmnopqrstuvwxyz ".to_vec();
        data.extend(std::iter::repeat_n(b'-', 100));
        let s = excerpt_of(&data, 36, &plain());
        assert!(s.excerpt.starts_with("xx [REDACTED]\n"), "{:?}", s.excerpt);
        assert_eq!(s.redactions, 1);
    }
}
