//! Terminal escape sequences in what a program printed.

/// `text` without escape sequences (CSI, OSC, DCS and the other ESC sequences, 7- and 8-bit)
/// and without control characters other than newline and tab: what a program printed, made
/// safe to show on a terminal or in a page. Visible text is kept. The evidence stores output
/// as captured; this is for showing it.
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => skip_csi(&mut chars),
                // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // nF: intermediates (space../) then one final byte.
                Some(' '..='/') => {
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next();
                }
                // Fp, Fe, Fs: one byte after ESC.
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            return;
        }
        // A control character inside a CSI aborts it (and is itself dropped).
        if c.is_control() {
            return;
        }
    }
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\x07' | '\u{9c}' => return,
            '\x1b' => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::strip_escapes;

    #[test]
    fn escapes_and_controls_are_stripped_text_is_kept() {
        let cases = [
            ("\x1b[31mred\x1b[0m plain", "red plain"),
            ("\x1b[1;38;5;208mbold\x1b[m", "bold"),
            ("\x1b]0;title\x07after", "after"),
            ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
            ("\x1bPq#0;2;0;0;0\x1b\\sixel", "sixel"),
            ("a\rb\x08c\x00d\x7f", "abcd"),
            ("keep\ttabs\nand lines\n", "keep\ttabs\nand lines\n"),
            ("\u{9b}31mc1\u{9d}osc\u{9c}!", "c1!"),
            (
                "\x1b(Bcharset \x1b=keypad \x1bcreset",
                "charset keypad reset",
            ),
            ("unterminated \x1b[31", "unterminated "),
            ("ünïcode ✓", "ünïcode ✓"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_escapes(input), want, "{input:?}");
        }
    }
}
