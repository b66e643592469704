//! DONE detection: does the agent's stdout end with a completion claim?
//!
//! A claim is the last non-empty line being exactly `DONE` — unindented, not inside a fenced
//! code block (``` or ~~~, CommonMark's fence rules: up to three spaces of indentation, a run of
//! at least three fence characters, a backtick fence's info string holds no backtick, the
//! closing fence uses the same character at least as many times and nothing but whitespace
//! after it, an unclosed fence runs to the end). Container blocks (block quotes, lists) are not
//! interpreted: a fence inside them counts like one at top level.
//!
//! A claim is only ever a claim: the loop reports it (`done_reason`) but decides on the checks.

/// An open fence: its character and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence {
    ch: u8,
    len: usize,
}

/// Is `line` a fence line, and which? Returns the fence and the rest after the fence run.
fn fence_of(line: &str) -> Option<(Fence, &str)> {
    let indent = line.bytes().take_while(|&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&b| b == ch).count();
    if len < 3 {
        return None;
    }
    Some((Fence { ch, len }, &rest[len..]))
}

/// True when stdout's last non-empty line is an unfenced, unindented `DONE`.
///
/// `stdout` may be only the tail of the output; it is then read as if it began outside a
/// fence (a fence opened before the tail and never closed is not seen).
pub fn claims_done(stdout: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stdout);
    let mut open: Option<Fence> = None;
    // (is the line exactly DONE outside a fence) for the last non-blank line so far.
    let mut last: Option<bool> = None;
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        match open {
            Some(f) => {
                if let Some((close, after)) = fence_of(line) {
                    if close.ch == f.ch && close.len >= f.len && after.trim().is_empty() {
                        open = None;
                    }
                }
                last = Some(false);
            }
            None => {
                if let Some((f, info)) = fence_of(line) {
                    if !(f.ch == b'`' && info.contains('`')) {
                        open = Some(f);
                        last = Some(false);
                        continue;
                    }
                }
                last = Some(line == "DONE");
            }
        }
    }
    // A DONE that is still inside an unclosed fence was recorded as `false` above.
    last == Some(true)
}

#[cfg(test)]
mod tests {
    use super::claims_done;

    fn done(s: &str) -> bool {
        claims_done(s.as_bytes())
    }

    #[test]
    fn plain_claims() {
        assert!(done("DONE"));
        assert!(done("working\nDONE\n"));
        assert!(done("working\r\nDONE\r\n\r\n  \n"));
        assert!(!done(""));
        assert!(!done("DONE\nmore"));
        assert!(!done(" DONE"));
        assert!(!done("\tDONE"));
        assert!(!done("DONE."));
        assert!(!done("done"));
        assert!(!done("DONE  "));
    }

    #[test]
    fn fenced_is_not_a_claim() {
        assert!(!done("```\nDONE\n```"));
        assert!(!done("```\nDONE\n"), "an unclosed fence runs to the end");
        assert!(
            !done("~~~~\nDONE\n~~~\n"),
            "a shorter closer does not close"
        );
        assert!(
            !done("~~~\nDONE\n```\n"),
            "another fence character does not close"
        );
        assert!(!done("```rust\nDONE"));
        assert!(done("```\ncode\n```\nDONE\n"));
        assert!(done("~~~~\n```\n~~~~~\nDONE"));
        assert!(
            done("   ```\nx\n   ```\nDONE"),
            "three spaces still open and close"
        );
        assert!(
            done("    ```\nDONE"),
            "four spaces are an indented block, not a fence"
        );
        assert!(
            done("``` a`b\nDONE"),
            "a backtick in the info string: not a fence"
        );
        assert!(!done("~~~ a`b\nDONE"), "tildes allow backticks in the info");
        assert!(
            !done("```\nx\n``` trailing\nDONE"),
            "a closer has nothing after it"
        );
        assert!(!done("DONE\n```"), "DONE is not the last non-empty line");
    }
}
