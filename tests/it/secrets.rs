//! Secrets never reach a stored evidence note: every entry of the redaction table, once as
//! output a check prints and once on a check's command line, read back with stock `git notes`.

use crate::util::*;

/// Every note on `commit` and on its tree, as stock git shows them.
fn notes_on(t: &TestEnv, commit: &str) -> String {
    let tree = t.git_out(&["rev-parse", &format!("{commit}^{{tree}}")]);
    let on_commit = t.git_out(&["notes", "--ref=tabellio/evidence", "show", commit]);
    let on_tree = t.git_out(&["notes", "--ref=tabellio/evidence", "show", &tree]);
    format!("{on_commit}\n{on_tree}")
}

/// One line of output per table entry, with the secret each must lose.
const OUTPUT_SAMPLES: &[(&str, &str)] = &[
    ("export API_TOKEN=apitok-out-1111", "apitok-out-1111"),
    ("FOO_SECRET=foosec-out-2222 ./test", "foosec-out-2222"),
    ("password=pw-out-3333", "pw-out-3333"),
    ("PASSWD='pwd with-out-4444'", "pwd with-out-4444"),
    (
        "aws_secret_access_key = awssec/out+5555EXAMPLEKEY",
        "awssec/out+5555EXAMPLEKEY",
    ),
    ("Bearer bearer.out-6666", "bearer.out-6666"),
    (
        "cloning https://alice:urlpw-out-7777@example.com/repo.git",
        "urlpw-out-7777",
    ),
    ("+ mysql -u root -pmysql-out-8888 db", "mysql-out-8888"),
    ("sshpass -p sshpass-out-9999 ssh host", "sshpass-out-9999"),
    ("redis-cli -a redis-out-1212 ping", "redis-out-1212"),
    ("sqlcmd -S db -U sa -P sqlcmd-out-1313", "sqlcmd-out-1313"),
    ("mongosh -u admin -p mongo-out-1414", "mongo-out-1414"),
    ("curl -u alice:curl-out-1515 https://x", "curl-out-1515"),
    ("deploy --api-key apikey-out-1616", "apikey-out-1616"),
    ("deploy --token=tokopt-out-1717", "tokopt-out-1717"),
];

#[test]
fn every_listed_secret_is_redacted_from_stored_output() {
    let t = TestEnv::new();
    let lines: Vec<&str> = OUTPUT_SAMPLES.iter().map(|(line, _)| *line).collect();
    t.commit_file_in(&t.repo, "samples.txt", &(lines.join("\n") + "\n"));
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let r = t.tab(&["--json", "validate", "--", "cat", "samples.txt"]);
    r.ok();
    let notes = notes_on(&t, &head);
    for (line, secret) in OUTPUT_SAMPLES {
        assert!(!notes.contains(secret), "{line:?} survived:\n{notes}");
    }
    assert!(!notes.contains("-out-"), "{notes}");
    let record = &r.json()["evidence"][0];
    assert_eq!(
        record["output"]["redactions"].as_u64(),
        Some(OUTPUT_SAMPLES.len() as u64),
        "{record}"
    );
    // What is around a secret is kept.
    let excerpt = record["output"]["excerpt"].as_str().unwrap();
    for kept in [
        "export API_TOKEN=[REDACTED]",
        "https://alice:[REDACTED]@example.com/repo.git",
        "+ mysql -u root -p[REDACTED] db",
        "curl -u alice:[REDACTED] https://x",
    ] {
        assert!(excerpt.contains(kept), "{kept:?} not in {excerpt}");
    }
}

#[test]
fn every_listed_secret_is_redacted_from_the_stored_command_line() {
    let t = TestEnv::new();
    let head = t.git_out(&["rev-parse", "HEAD"]);
    let argv_and_stored: &[(&str, &str)] = &[
        ("env", "env"),
        ("API_TOKEN=apitok-argv-1111", "API_TOKEN=[REDACTED]"),
        ("FOO_SECRET=foo secret-argv-2222", "FOO_SECRET=[REDACTED]"),
        ("echo", "echo"),
        ("password=pw-argv-3333", "password=[REDACTED]"),
        ("passwd=pwd-argv-4444", "passwd=[REDACTED]"),
        (
            "aws_secret_access_key = awssec/argv+5555KEY",
            "aws_secret_access_key = [REDACTED]",
        ),
        ("Bearer bearer.argv-6666", "Bearer [REDACTED]"),
        (
            "https://alice:urlpw-argv-7777@example.com",
            "https://alice:[REDACTED]@example.com",
        ),
        ("mysql", "mysql"),
        ("-pmysql-argv-8888", "-p[REDACTED]"),
        ("sshpass", "sshpass"),
        ("-p", "-p"),
        ("sshpass-argv-9999", "[REDACTED]"),
        ("redis-cli", "redis-cli"),
        ("-a", "-a"),
        ("redis-argv-1212", "[REDACTED]"),
        ("sqlcmd", "sqlcmd"),
        ("-P", "-P"),
        ("sqlcmd-argv-1313", "[REDACTED]"),
        ("mongosh", "mongosh"),
        ("-p", "-p"),
        ("mongo-argv-1414", "[REDACTED]"),
        ("curl", "curl"),
        ("-u", "-u"),
        ("alice:curl-argv-1515", "alice:[REDACTED]"),
        ("--api-key", "--api-key"),
        ("apikey-argv-1616", "[REDACTED]"),
        ("--token=tokopt-argv-1717", "--token=[REDACTED]"),
    ];
    let mut args = vec!["--json", "validate", "--"];
    args.extend(argv_and_stored.iter().map(|(arg, _)| *arg));
    let r = t.tab(&args);
    r.ok();
    let stored: Vec<&str> = argv_and_stored.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        r.json()["evidence"][0]["check"]["argv"],
        serde_json::json!(stored)
    );
    // Every secret above, and nothing else, has `-argv-` in it.
    let notes = notes_on(&t, &head);
    assert!(!notes.contains("-argv-"), "{notes}");
}

#[test]
fn a_secret_given_to_env_on_the_command_line_is_redacted_from_the_note_of_finish() {
    let t = TestEnv::new();
    t.start_with_commit("r1", "a.txt", "a\n");
    let secret = "s3cr3t-env-argv-value";
    let assignment = format!("DEPLOY_TOKEN={secret}");
    let r = t.tab(&[
        "--json",
        "finish",
        "r1",
        "--",
        "env",
        &assignment,
        "printenv",
        "DEPLOY_TOKEN",
    ]);
    r.ok();
    let rec = &r.json()["evidence"][0];
    assert_eq!(
        rec["check"]["argv"],
        serde_json::json!(["env", "DEPLOY_TOKEN=[REDACTED]", "printenv", "DEPLOY_TOKEN"])
    );
    assert_eq!(rec["output"]["excerpt"], "[REDACTED]\n");
    let head = t.git_out(&["rev-parse", "tabellio/r1"]);
    let notes = notes_on(&t, &head);
    assert!(!notes.contains(secret), "{notes}");
    let ledger = t.git_out(&["log", "-p", "refs/tabellio/runs/r1"]);
    assert!(!ledger.contains(secret), "{ledger}");
}
