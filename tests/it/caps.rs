//! Size caps on write (docs/storage.md, "Size caps"): a check printing a gibibyte leaves a
//! record of a few KiB with the full output's size and digest; an excerpt that escapes to more
//! than its stored cap is cut; a note that would pass the cap is refused and nothing is written.

use crate::util::*;

/// The one record `finish` noted on the run head, parsed.
fn records_on(t: &TestEnv, rev: &str) -> Vec<serde_json::Value> {
    t.git_out(&["notes", "--ref=tabellio/evidence", "show", rev])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_check_printing_a_gibibyte_leaves_a_small_record_with_the_full_digest() {
    let t = TestEnv::new();
    t.started_run("r1", "one.txt");
    // 1 GiB of NUL bytes from a small program, never a file.
    t.tab(&[
        "finish",
        "r1",
        "--",
        "head",
        "-c",
        "1073741824",
        "/dev/zero",
    ])
    .ok();
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", "tabellio/r1"]);
    assert!(note.len() < 200 * 1024, "the note is {} bytes", note.len());
    let rec = &records_on(&t, "tabellio/r1")[0];
    assert_eq!(rec["output"]["bytes"], 1_073_741_824u64);
    // `head -c 1073741824 /dev/zero | sha256sum`
    assert_eq!(
        rec["output"]["sha256"],
        "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14"
    );
    assert_eq!(rec["output"]["truncated"], true);
}

/// A policy with half the largest excerpt (512 KiB, three MiB as stored when every byte is a
/// control character) and `n` checks each printing `bytes` NUL bytes.
fn nul_checks(n: usize, bytes: usize) -> String {
    let checks: serde_json::Map<String, serde_json::Value> = (1..=n)
        .map(|i| {
            (
                format!("c{i}"),
                serde_json::json!({"argv": ["head", "-c", bytes.to_string(), "/dev/zero"], "timeout_s": 60}),
            )
        })
        .collect();
    let required: Vec<String> = (1..=n).map(|i| format!("c{i}")).collect();
    serde_json::json!({
        "schema": "tabellio.policy/v1", "checks": checks, "required": required,
        "output": {"excerpt_bytes": 524_288}
    })
    .to_string()
}

#[test]
fn an_excerpt_is_cut_to_its_stored_cap_and_an_oversized_note_is_refused_on_write() {
    let t = TestEnv::new();
    t.commit_policy(&nul_checks(1, 4 * 1024 * 1024));
    t.started_run("r1", "one.txt");
    t.tab(&["finish", "r1"]).ok();
    // A NUL escapes to six bytes in JSON: the stored excerpt is cut to 2 MiB.
    let note = t.git_out(&["notes", "--ref=tabellio/evidence", "show", "tabellio/r1"]);
    assert!(
        note.len() <= 2 * 1024 * 1024 + 4096,
        "the record is {} bytes",
        note.len()
    );
    let rec = &records_on(&t, "tabellio/r1")[0];
    assert_eq!(rec["output"]["bytes"], 4 * 1024 * 1024);
    assert_eq!(rec["output"]["truncated"], true);

    // A note already near the cap on the next run's head (written with stock git): one more
    // record would take it over 16 MiB, so finish refuses and writes nothing (the ledger and
    // the notes are where they were).
    t.commit_policy(&nul_checks(1, 16));
    t.started_run("r2", "two.txt");
    let big = t.path().join("big-note.txt");
    // Lines are kept sorted and unique: each one different.
    let lines: String = (0..16 * 1024)
        .map(|i| format!("{i:08} {}\n", "x".repeat(1014)))
        .collect();
    std::fs::write(&big, lines).unwrap();
    let head = t.git_out(&["rev-parse", "tabellio/r2"]);
    t.git(&[
        "notes",
        "--ref=tabellio/evidence",
        "add",
        "-F",
        big.to_str().unwrap(),
        &head,
    ])
    .ok();
    let before = t.snapshot();
    let (code, out) = t.tab_json(&["finish", "r2"]);
    assert_eq!(code, 3, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("over the cap of 16777216 bytes"),
        "{message}"
    );
    assert_eq!(t.snapshot(), before);
}
