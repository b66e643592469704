//! Property tests of the redaction table: for every rule, secrets of the rule's shape (its
//! example with the secret's letters and digits replaced at random) never survive, in output or
//! on a command line, and nothing around them changes; text that matches no rule is kept byte
//! for byte.

use proptest::prelude::*;

use super::rules::{Finder, EXAMPLE_ENV_SECRET, RULES};
use super::{Redactor, REDACTED};

/// `given` cut into (text, is_secret) pieces, by aligning it with `stored`, its redacted form:
/// every `[REDACTED]` of `stored` stands for one secret of `given`.
fn split_secrets(given: &str, stored: &str) -> Vec<(String, bool)> {
    let pieces: Vec<&str> = stored.split(REDACTED).collect();
    let mut out = Vec::new();
    let mut rest = given;
    for (i, piece) in pieces.iter().enumerate() {
        let at = if i == 0 {
            0
        } else if i == pieces.len() - 1 {
            rest.len() - piece.len()
        } else {
            rest.find(piece)
                .expect("the stored form's pieces are in the example")
        };
        if i > 0 {
            out.push((rest[..at].to_string(), true));
        }
        assert!(rest[at..].starts_with(piece), "{given:?} vs {stored:?}");
        out.push((piece.to_string(), false));
        rest = &rest[at + piece.len()..];
    }
    out
}

/// `secret` with its letters and digits replaced by others of the same kind (lower, upper,
/// digit), chosen by `seed`; what makes it a secret of its rule is kept: a token's prefix, the
/// `-----` lines of a PEM block, and every other character.
fn mutate(secret: &str, finder: &Finder, seed: u64) -> String {
    let keep = match finder {
        Finder::Token(format) => format
            .prefixes
            .iter()
            .find(|p| secret.starts_with(**p))
            .map_or(0, |p| p.len()),
        _ => 0,
    };
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u8| {
        // xorshift64*: enough for picking letters.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u8 % n
    };
    let mut out = String::new();
    for line in secret.split_inclusive('\n') {
        if line.starts_with("-----") {
            out.push_str(line);
            continue;
        }
        let line_start = out.len();
        for (i, c) in line.char_indices() {
            let kept = line_start + i < keep;
            out.push(match c {
                _ if kept => c,
                'a'..='z' => (b'a' + next(26)) as char,
                'A'..='Z' => (b'A' + next(26)) as char,
                '0'..='9' => (b'0' + next(10)) as char,
                _ => c,
            });
        }
    }
    out
}

/// One rule's example with its secrets mutated by `seed`: (output, what is stored of it,
/// argv, what is stored of it, the environment secret).
struct Case {
    output: String,
    stored_output: String,
    argv: Vec<String>,
    stored_argv: Vec<String>,
    env_secret: String,
    secrets: Vec<String>,
}

fn case(rule: &super::Rule, seed: u64) -> Case {
    // The same secret gets the same replacement wherever it is (an option's value hunted in the
    // output, the environment's value): the replacement depends on the secret and the seed.
    let for_secret = |s: &str| {
        let salt = s.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b));
        mutate(s, &rule.finder, seed ^ salt)
    };
    let mut secrets = Vec::new();
    let mut rebuild = |given: &str, stored: &str| -> String {
        split_secrets(given, stored)
            .into_iter()
            .map(|(text, secret)| {
                if secret {
                    let new = for_secret(&text);
                    secrets.push(new.clone());
                    new
                } else {
                    text
                }
            })
            .collect()
    };
    let output = rebuild(rule.output.0, rule.output.1);
    let argv = rule
        .argv
        .0
        .iter()
        .zip(rule.argv.1)
        .map(|(given, stored)| rebuild(given, stored))
        .collect();
    Case {
        output,
        stored_output: rule.output.1.to_string(),
        argv,
        stored_argv: rule.argv.1.iter().map(|s| s.to_string()).collect(),
        env_secret: for_secret(EXAMPLE_ENV_SECRET),
        secrets,
    }
}

/// A mutated secret that happens to spell something the example keeps, or the text around it
/// (a 4-letter value becoming `--api` of `--api-key`), would be hunted there too: such seeds
/// are not secrets of the rule's shape alone, and are skipped.
fn collides(c: &Case, around: &[&str]) -> bool {
    let kept: Vec<&str> = std::iter::once(c.stored_output.as_str())
        .chain(c.stored_argv.iter().map(String::as_str))
        .chain(around.iter().copied())
        .flat_map(|s| s.split(REDACTED))
        .collect();
    c.secrets
        .iter()
        .chain(std::iter::once(&c.env_secret))
        .any(|s| s.chars().count() >= 4 && kept.iter().any(|k| k.contains(s.as_str())))
}

/// Text with no secret in it: digits, blanks, punctuation (`=`, `:`, `-`, quotes too),
/// characters outside ASCII, and every letter but `a`, `e` and `x`: every secret word, scheme,
/// header and key label of the table has one of them (`KEY`, `TOKEN`, `PASSWD`, `Bearer`,
/// `aws_`, `xoxb-`, `BEGIN`), so no rule can match, while tool names (`mysql`, `curl`) and
/// flags can still appear.
fn plain() -> impl Strategy<Value = String> {
    "[b-df-wyzB-DF-WYZ0-9 .,;:!?()/='\"\t\n_é日本ßü🙂-]{0,160}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every rule: a secret of its shape, in output between unrelated lines and on the command
    /// line, is stored as `[REDACTED]`, and everything else as it was.
    #[test]
    fn no_rule_lets_a_secret_of_its_shape_through(
        seed in any::<u64>(),
        before in plain(),
        after in plain(),
    ) {
        for rule in RULES {
            let mut c = case(rule, seed);
            let mut bump = seed;
            while collides(&c, &[&before, &after]) {
                bump = bump.wrapping_add(1);
                c = case(rule, bump);
            }
            let redactor = Redactor::from_values([c.env_secret.as_str()]).with_argv(&c.argv);
            let text = format!("{before}\n{}\n{after}", c.output);
            let (out, count) = redactor.redact(&text);
            prop_assert_eq!(
                &out,
                &format!("{before}\n{}\n{after}", c.stored_output),
                "rule {} redacted {:?}", rule.name, text
            );
            prop_assert!(count > 0, "rule {}", rule.name);
            let stored_argv = redactor.redact_argv(&c.argv);
            prop_assert_eq!(&stored_argv, &c.stored_argv, "rule {}: {:?}", rule.name, c.argv);
            for secret in c.secrets.iter().filter(|s| s.chars().count() >= 8) {
                prop_assert!(!out.contains(secret.as_str()), "rule {}: {}", rule.name, secret);
                prop_assert!(
                    stored_argv.iter().all(|a| !a.contains(secret.as_str())),
                    "rule {}: {}", rule.name, secret
                );
            }
        }
    }

    /// Text that matches no rule comes out byte for byte, with nothing counted.
    #[test]
    fn text_without_a_secret_is_unchanged(text in plain()) {
        let (out, count) = Redactor::from_values(["not-in-the-text-0"]).redact(&text);
        prop_assert_eq!(out, text);
        prop_assert_eq!(count, 0);
    }

    /// A command line of plain words comes out as it went in.
    #[test]
    fn a_command_line_without_a_secret_is_unchanged(
        argv in prop::collection::vec(plain(), 0..6),
    ) {
        prop_assert_eq!(Redactor::default().redact_argv(&argv), argv);
    }
}

#[test]
fn mutation_keeps_what_makes_a_secret_and_changes_the_rest() {
    let github = &RULES[1];
    let token = "ghp_aB3aB3aB3aB3aB3aB3aB3";
    let mutated = mutate(token, &github.finder, 7);
    assert!(mutated.starts_with("ghp_") && mutated != token, "{mutated}");
    assert_eq!(mutated.len(), token.len());
    let pem = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----";
    let mutated = mutate(pem, &RULES[0].finder, 7);
    assert!(
        mutated.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{mutated}"
    );
    assert!(
        mutated.ends_with("\n-----END PRIVATE KEY-----"),
        "{mutated}"
    );
}
