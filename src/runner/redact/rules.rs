//! The one table of what is redacted. Every rule names a kind of secret, says in one sentence
//! what it matches (the user manual shows this table, row for row), and carries an example as a
//! check prints it and as a command line carries it, with what is stored for each; the tests
//! run every example both ways.
//!
//! A rule's [`Finder`] is tried at every position of a text (output, and every argument of a
//! command line); the rules that take a value from the *next* argument of a command line are
//! also read by [`super::argv`]'s scanner.

use super::names::{FlagValue, ToolFlag};
use super::patterns::{
    assignment, authorization, bearer, cloud_secret_key, option_value, pem_block, tool_flag,
    url_password, TokenFormat,
};
use super::Edge;

/// How a rule finds its secret in a text.
#[derive(Debug, Clone, Copy)]
pub(super) enum Finder {
    PemBlock,
    Token(TokenFormat),
    Authorization,
    Bearer,
    UrlPassword,
    CloudSecretKey,
    Assignment,
    OptionValue,
    ToolFlag(ToolFlag),
    /// Literal values known up front (environment, the command line): the redactor's own.
    Literal,
}

impl Finder {
    /// The byte range of a secret found at `at`, if any. [`Finder::Literal`] is the
    /// redactor's business and finds nothing here.
    pub(super) fn find(&self, bytes: &[u8], at: usize, end: Edge) -> Option<(usize, usize)> {
        match self {
            Finder::PemBlock => pem_block(bytes, at, end),
            Finder::Token(format) => format.find(bytes, at, end),
            Finder::Authorization => authorization(bytes, at),
            Finder::Bearer => bearer(bytes, at),
            Finder::UrlPassword => url_password(bytes, at),
            Finder::CloudSecretKey => cloud_secret_key(bytes, at),
            Finder::Assignment => assignment(bytes, at),
            Finder::OptionValue => option_value(bytes, at),
            Finder::ToolFlag(flag) => tool_flag(flag, bytes, at),
            Finder::Literal => None,
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub name: &'static str,
    /// What is replaced, as the manual says it.
    pub matches: &'static str,
    pub(super) finder: Finder,
    /// A line of output, and what is stored of it.
    pub output: (&'static str, &'static str),
    /// A command line, and what is stored of it.
    pub argv: (&'static [&'static str], &'static [&'static str]),
}

/// The value of an environment variable the examples of the literal rules know as secret.
#[cfg(test)]
pub(super) const EXAMPLE_ENV_SECRET: &str = "env-s3cr3t-value";

/// Every rule, in the order they are tried at each position.
pub const RULES: &[Rule] = &[
    Rule {
        name: "private-key",
        matches: "a PEM block whose label contains `PRIVATE KEY`, through its END line (to the \
                  end of the text when that is cut off)",
        finder: Finder::PemBlock,
        output: (
            "k:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----\n",
            "k:\n[REDACTED]\n",
        ),
        argv: (
            &[
                "ssh-add",
                "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----",
            ],
            &["ssh-add", "[REDACTED]"],
        ),
    },
    Rule {
        name: "github-token",
        matches: "`ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` and 20 or more letters or digits",
        finder: Finder::Token(TokenFormat {
            prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
            body: TokenFormat::ALNUM,
            min_body: 20,
        }),
        output: ("GH=ghp_aB3aB3aB3aB3aB3aB3aB3 ok", "GH=[REDACTED] ok"),
        argv: (
            &["gh", "ghs_0123456789abcdefghijXYZ"],
            &["gh", "[REDACTED]"],
        ),
    },
    Rule {
        name: "github-pat",
        matches: "`github_pat_` and 20 or more letters, digits or `_`",
        finder: Finder::Token(TokenFormat {
            prefixes: &["github_pat_"],
            body: TokenFormat::WORD,
            min_body: 20,
        }),
        output: (
            "pat github_pat_11ABCDEFG0_abcdefghijklmnop.",
            "pat [REDACTED].",
        ),
        argv: (
            &["gh", "github_pat_11ABCDEFG0_abcdefghijklmnop"],
            &["gh", "[REDACTED]"],
        ),
    },
    Rule {
        name: "gitlab-token",
        matches: "`glpat-` and 20 or more letters, digits, `_` or `-`",
        finder: Finder::Token(TokenFormat {
            prefixes: &["glpat-"],
            body: TokenFormat::WORD_OR_DASH,
            min_body: 20,
        }),
        output: ("t=glpat-abc_DEF-ghi_jkl-mnopqr7 end", "t=[REDACTED] end"),
        argv: (
            &["glab", "glpat-abc_DEF-ghi_jkl-mnopqr7"],
            &["glab", "[REDACTED]"],
        ),
    },
    Rule {
        name: "slack-token",
        matches: "`xoxb-`, `xoxp-`, `xoxa-`, `xoxr-` or `xoxs-` and 10 or more letters, digits \
                  or `-`",
        finder: Finder::Token(TokenFormat {
            prefixes: &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"],
            body: TokenFormat::ALNUM_OR_DASH,
            min_body: 10,
        }),
        output: ("slack xoxb-1234567890-abcdEFGH", "slack [REDACTED]"),
        argv: (&["notify", "xoxp-0123456789"], &["notify", "[REDACTED]"]),
    },
    Rule {
        name: "aws-access-key-id",
        matches: "`AKIA` or `ASIA` and 16 or more upper-case letters or digits",
        finder: Finder::Token(TokenFormat {
            prefixes: &["AKIA", "ASIA"],
            body: TokenFormat::UPPER_OR_DIGIT,
            min_body: 16,
        }),
        output: ("id AKIAIOSFODNN7EXAMPLE,", "id [REDACTED],"),
        argv: (&["aws", "ASIAY34FZKBOKMUTVV7A"], &["aws", "[REDACTED]"]),
    },
    Rule {
        name: "authorization",
        matches: "the credentials of an `Authorization` header or key (any case, `:` or `=`, \
                  quoted or not) with the scheme `Bearer` or `Basic`",
        finder: Finder::Authorization,
        output: (
            r#"{"authorization": "Basic dXNlcjpwYXNz"}"#,
            r#"{"authorization": "Basic [REDACTED]"}"#,
        ),
        argv: (
            &["curl", "-H", "Authorization: Bearer abc.DEF"],
            &["curl", "-H", "Authorization: Bearer [REDACTED]"],
        ),
    },
    Rule {
        name: "bearer",
        matches: "a bare `Bearer <token>` (any case): a token of 8 or more token characters with \
                  a digit or one of `-._~+/=` in it",
        finder: Finder::Bearer,
        output: (
            "sent Bearer eyJhbGciOi.J9.sig-123",
            "sent Bearer [REDACTED]",
        ),
        argv: (
            &["probe", "bearer 0123abcdXYZ"],
            &["probe", "bearer [REDACTED]"],
        ),
    },
    Rule {
        name: "url-password",
        matches: "the password of credentials in a URL, `scheme://user:<password>@host` (the \
                  user is kept)",
        finder: Finder::UrlPassword,
        output: (
            "clone https://alice:pa55word@example.com/r.git",
            "clone https://alice:[REDACTED]@example.com/r.git",
        ),
        argv: (
            &["git", "clone", "https://x-access-token:t0k@host/r"],
            &["git", "clone", "https://x-access-token:[REDACTED]@host/r"],
        ),
    },
    Rule {
        name: "aws-secret-key",
        matches: "the value of `aws_secret_access_key` or `aws_session_token` (any case; `=` or \
                  `:`, blanks and quotes around it allowed: credentials file, JSON, environment)",
        finder: Finder::CloudSecretKey,
        output: (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
            "aws_secret_access_key = [REDACTED]",
        ),
        argv: (
            &["aws", r#"{"AWS_SESSION_TOKEN": "FwoGZXIvYXdzEJr//+="}"#],
            &["aws", r#"{"AWS_SESSION_TOKEN": "[REDACTED]"}"#],
        ),
    },
    Rule {
        name: "secret-assignment",
        matches: "the value of `name=value` whose name has a word ending in TOKEN, SECRET, \
                  PASSWORD, PASSWD or KEY, any case (`API_TOKEN=…`, `password=…`, `passwd=…`, \
                  `--token=…`, `-Ddb.password=…`): a whole command-line argument after the `=`; \
                  in output up to a blank, quote, `&`, `;`, `,` or bracket, or a quoted value up \
                  to its quote",
        finder: Finder::Assignment,
        output: (
            "export API_TOKEN=abc123 && login passwd='p w' url?api_key=k1&x=1",
            "export API_TOKEN=[REDACTED] && login passwd='[REDACTED]' url?api_key=[REDACTED]&x=1",
        ),
        argv: (
            &[
                "env",
                "FOO_SECRET=a b c",
                "./test",
                "--password=pw",
                "-Ddb.passwd=x",
                "KEYS=1",
            ],
            &[
                "env",
                "FOO_SECRET=[REDACTED]",
                "./test",
                "--password=[REDACTED]",
                "-Ddb.passwd=[REDACTED]",
                "KEYS=1",
            ],
        ),
    },
    Rule {
        name: "secret-option",
        matches: "the value after an option whose name has a word ending in TOKEN, SECRET, \
                  PASSWORD, PASSWD or KEY (`--api-key <value>`, `-password <value>`): on a \
                  command line the next argument, whatever it is; in output the next word, \
                  unless it starts with `-`, `<`, `[`, `{` or `(`",
        finder: Finder::OptionValue,
        output: (
            "run --api-key k3y-value --keyboard us, usage: --token <TOKEN>",
            "run --api-key [REDACTED] --keyboard us, usage: --token <TOKEN>",
        ),
        argv: (
            &["deploy", "--token", "--odd", "-secret", "x"],
            &["deploy", "--token", "[REDACTED]", "-secret", "[REDACTED]"],
        ),
    },
    Rule {
        name: "mysql-password",
        matches: "`-p<password>` after `mysql`, `mysqldump`, `mysqladmin`, `mysqlimport`, \
                  `mysqlcheck`, `mysqlshow`, `mariadb`, `mariadb-dump` or `mariadb-admin` \
                  (attached only: in `-p db` the `db` is a database)",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &[
                "mysql",
                "mysqldump",
                "mysqladmin",
                "mysqlimport",
                "mysqlcheck",
                "mysqlshow",
                "mariadb",
                "mariadb-dump",
                "mariadb-admin",
            ],
            flags: &["-p"],
            value: FlagValue::Attached,
            user_colon: false,
        }),
        output: (
            "+ mysqldump -u root -phunter2 -p db",
            "+ mysqldump -u root -p[REDACTED] -p db",
        ),
        argv: (
            &["/usr/bin/mysql", "-u", "root", "-p", "shop", "-phunter2"],
            &["/usr/bin/mysql", "-u", "root", "-p", "shop", "-p[REDACTED]"],
        ),
    },
    Rule {
        name: "sshpass-password",
        matches: "`-p <password>` or `-p<password>` after `sshpass`",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &["sshpass"],
            flags: &["-p"],
            value: FlagValue::AttachedOrNext,
            user_colon: false,
        }),
        output: (
            "sshpass -p s3cr3t ssh host",
            "sshpass -p [REDACTED] ssh host",
        ),
        argv: (
            &["sshpass", "-pS3cr3t", "ssh", "host"],
            &["sshpass", "-p[REDACTED]", "ssh", "host"],
        ),
    },
    Rule {
        name: "redis-password",
        matches: "`-a <password>` or `-a<password>` after `redis-cli`",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &["redis-cli"],
            flags: &["-a"],
            value: FlagValue::AttachedOrNext,
            user_colon: false,
        }),
        output: (
            "redis-cli -h db -a r3dis ping",
            "redis-cli -h db -a [REDACTED] ping",
        ),
        argv: (
            &["redis-cli", "-a", "r3dis", "ping"],
            &["redis-cli", "-a", "[REDACTED]", "ping"],
        ),
    },
    Rule {
        name: "sqlcmd-password",
        matches: "`-P <password>` or `-P<password>` after `sqlcmd` or `bcp`",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &["sqlcmd", "bcp"],
            flags: &["-P"],
            value: FlagValue::AttachedOrNext,
            user_colon: false,
        }),
        output: (
            "sqlcmd -S db -U sa -P Pa55",
            "sqlcmd -S db -U sa -P [REDACTED]",
        ),
        argv: (
            &["sqlcmd", "-U", "sa", "-P", "Pa55"],
            &["sqlcmd", "-U", "sa", "-P", "[REDACTED]"],
        ),
    },
    Rule {
        name: "mongo-password",
        matches: "`-p <password>` or `-p<password>` after `mongosh`, `mongo`, `mongodump`, \
                  `mongorestore`, `mongoexport` or `mongoimport`",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &[
                "mongosh",
                "mongo",
                "mongodump",
                "mongorestore",
                "mongoexport",
                "mongoimport",
            ],
            flags: &["-p"],
            value: FlagValue::AttachedOrNext,
            user_colon: false,
        }),
        output: (
            "mongosh -u admin -p m0ng0",
            "mongosh -u admin -p [REDACTED]",
        ),
        argv: (
            &["mongodump", "-u", "admin", "-p", "m0ng0"],
            &["mongodump", "-u", "admin", "-p", "[REDACTED]"],
        ),
    },
    Rule {
        name: "curl-user",
        matches: "the password of `-u user:<password>`, `-uuser:<password>` or \
                  `--user user:<password>` after `curl` (the user is kept)",
        finder: Finder::ToolFlag(ToolFlag {
            tools: &["curl"],
            flags: &["-u", "--user"],
            value: FlagValue::AttachedOrNext,
            user_colon: true,
        }),
        output: (
            "curl -u alice:pw1 https://x",
            "curl -u alice:[REDACTED] https://x",
        ),
        argv: (
            &["curl", "--user", "alice:pw1", "-u", "bob", "https://x"],
            &[
                "curl",
                "--user",
                "alice:[REDACTED]",
                "-u",
                "bob",
                "https://x",
            ],
        ),
    },
    Rule {
        name: "environment-value",
        matches: "the value, 8 characters or more, of an environment variable of ours or of the \
                  check whose name contains TOKEN, SECRET, PASSWORD, PASSWD or KEY",
        finder: Finder::Literal,
        output: ("using env-s3cr3t-value now", "using [REDACTED] now"),
        argv: (&["login", "env-s3cr3t-value"], &["login", "[REDACTED]"]),
    },
    Rule {
        name: "command-line-value",
        matches: "anywhere in a check's output or command line, a value of 4 characters or more \
                  that its command line gives to a secret-named assignment or option or to a \
                  tool's password flag (the rows above)",
        finder: Finder::Literal,
        output: ("connected with Zq9xK2.", "connected with [REDACTED]."),
        argv: (
            &["echo", "--token", "Zq9xK2", "again:Zq9xK2"],
            &["echo", "--token", "[REDACTED]", "again:[REDACTED]"],
        ),
    },
];

#[cfg(test)]
mod tests {
    use super::super::{Redactor, REDACTED};
    use super::*;
    use crate::runner::redact::names::names_secret;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// The redactor of a check whose environment holds [`EXAMPLE_ENV_SECRET`] and whose
    /// command line is `argv`.
    fn redactor_for(argv: &[String]) -> Redactor {
        Redactor::from_values([EXAMPLE_ENV_SECRET]).with_argv(argv)
    }

    #[test]
    fn every_rule_redacts_its_example_in_output_and_on_a_command_line() {
        for rule in RULES {
            let argv = strings(rule.argv.0);
            let redactor = redactor_for(&argv);
            let (out, count) = redactor.redact(rule.output.0);
            assert_eq!(out, rule.output.1, "output of rule {}", rule.name);
            assert!(count > 0, "rule {}", rule.name);
            assert_eq!(
                redactor.redact_argv(&argv),
                strings(rule.argv.1),
                "command line of rule {}",
                rule.name
            );
        }
    }

    #[test]
    fn each_output_example_is_matched_by_its_own_rule() {
        // Not only by a rule before it: the text rules' examples are found by their finder.
        for rule in RULES {
            if matches!(rule.finder, Finder::Literal) {
                continue;
            }
            let bytes = rule.output.0.as_bytes();
            let found =
                (0..bytes.len()).any(|at| rule.finder.find(bytes, at, Edge::Whole).is_some());
            assert!(found, "rule {} does not find its own example", rule.name);
        }
    }

    #[test]
    fn examples_keep_what_is_not_secret() {
        for rule in RULES {
            for (given, stored) in [rule.output]
                .into_iter()
                .chain(rule.argv.0.iter().copied().zip(rule.argv.1.iter().copied()))
            {
                // Every difference is a [REDACTED] in place of something.
                let pieces: Vec<&str> = stored.split(REDACTED).collect();
                let mut rest = given;
                for piece in &pieces {
                    let at = rest.find(piece).unwrap_or_else(|| {
                        panic!("rule {}: {piece:?} not in {given:?}", rule.name)
                    });
                    rest = &rest[at + piece.len()..];
                }
            }
        }
    }

    #[test]
    fn the_manual_shows_this_table() {
        let manual = include_str!("../../../docs/verify.md");
        for rule in RULES {
            let row = format!("| `{}` | {} |", rule.name, rule.matches);
            assert!(manual.contains(&row), "docs/verify.md lacks the row\n{row}");
        }
        let table = manual
            .lines()
            .skip_while(|line| *line != "| rule | replaced |")
            .skip(2)
            .take_while(|line| line.starts_with('|'));
        assert_eq!(
            table.count(),
            RULES.len(),
            "docs/verify.md has rows the table has not"
        );
    }

    #[test]
    fn secret_names_are_words() {
        for name in [
            "--api-key",
            "--authtoken",
            "db.password",
            "API_TOKEN",
            "passwd",
            "-SECRET",
        ] {
            assert!(names_secret(name), "{name}");
        }
        for name in ["--keyboard", "KEYS", "tokens", "--user", "path"] {
            assert!(!names_secret(name), "{name}");
        }
    }
}
