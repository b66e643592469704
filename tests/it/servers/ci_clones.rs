//! `verify` in the clones CI makes: a clone that never fetched the notes is told the exact
//! fetch that brings them; a shallow clone (`--depth 1`) and a partial clone
//! (`--filter=blob:none`) verify after fetching the notes as docs/ci.md says, with no extra
//! step — or, where the history a check needs is not there, refuse naming the cause and the
//! fetch that brings it. Over `file://` and over the HTTP server.

use super::daemons::{Area, Http};
use super::{fetch_notes, Client};
use crate::util::*;

const FETCH_NOTES: &str = "git fetch origin 'refs/notes/tabellio/*:refs/notes/tabellio/*'";

/// A source repository with `policy` on main, a second commit on top, validated, that serves
/// filtered clones; `file://` URL.
fn source(policy: &str) -> (TestEnv, String) {
    let t = TestEnv::new();
    t.commit_policy(policy);
    t.commit_file_in(&t.repo, "two.txt", "two\n");
    t.tab(&["validate", "main"]).ok();
    t.git(&["config", "uploadpack.allowFilter", "true"]).ok();
    let url = format!("file://{}", t.repo.display());
    (t, url)
}

/// `git clone <extra> <url>` as a CI checkout makes it.
fn ci_clone(url: &str, extra: &[&str]) -> Client {
    let c = Client::clone_with(url, None, extra);
    c.git(&["config", "uploadpack.allowFilter", "true"]).ok();
    c
}

#[test]
fn a_clone_without_the_notes_is_told_the_fetch_that_brings_them() {
    let (src, url) = source(&policy(&[("ci", &["true"])]));
    let c = ci_clone(&url, &[]);
    let r = c.tab(&["verify", "main"]);
    r.code(1);
    assert!(
        r.stdout.contains("fetch the evidence notes") && r.stdout.contains(FETCH_NOTES),
        "{}",
        r.desc
    );
    let (code, v) = c.tab_json(&["verify", "main"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["advice"].as_str().unwrap().contains(FETCH_NOTES), "{v}");
    fetch_notes(&c);
    c.tab(&["verify", "main"]).ok();

    // The notes are here, but not the record made since on the remote: the same fetch.
    src.tab(&["validate", "main~1"]).ok();
    let r = c.tab(&["verify", "main~1"]);
    r.code(1);
    assert!(
        r.stdout
            .contains("if it was validated elsewhere, fetch the evidence notes"),
        "{}",
        r.desc
    );
    assert!(r.stdout.contains(FETCH_NOTES), "{}", r.desc);
    fetch_notes(&c);
    c.tab(&["verify", "main~1"]).ok();

    // A commit with a failing record is not a missing fetch: make evidence.
    src.commit_file_in(&src.repo, "three.txt", "3\n");
    src.tab(&["validate", "main", "--check", "ci", "--", "false"])
        .code(1);
    c.git(&["fetch", "-q", "origin"]).ok();
    fetch_notes(&c);
    let (code, v) = c.tab_json(&["verify", "origin/main"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        v["advice"], "make evidence with `git tabellio validate <commit>`",
        "{v}"
    );
}

#[test]
fn a_shallow_clone_verifies_or_names_the_fetch_the_guarded_paths_need() {
    // No guarded paths: verify works in a depth-1 clone. Without --policy-from the step from
    // the missing parent is judged by the commit's own policy, and the output says so.
    let (_src, url) = source(&policy(&[("ci", &["true"])]));
    let c = ci_clone(&url, &["--depth", "1"]);
    fetch_notes(&c);
    let r = c.tab(&["verify", "main"]);
    r.ok();
    assert!(
        r.stdout.contains("beyond this shallow clone's boundary")
            && r.stdout.contains("git fetch --deepen=1 origin"),
        "{}",
        r.desc
    );
    let (code, v) = c.tab_json(&["verify", "--policy-from", "origin/main", "main"]);
    assert_eq!(code, 0, "{v}");
    assert!(v.get("limits").is_none(), "{v}");
    // Older history is not here: the hint says how to bring it.
    let (code, v) = c.tab_json(&["verify", "main~1..main"]);
    assert_eq!(code, 5, "{v}");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("--deepen"),
        "{v}"
    );

    // Guarded paths: the change from the parent must be read. Refused, naming the cause and
    // the fetch; after it, verified.
    let mut guarded: serde_json::Value =
        serde_json::from_str(&policy(&[("ci", &["true"])])).unwrap();
    guarded["guarded"] = serde_json::json!(["src/**"]);
    let (_src, url) = source(&guarded.to_string());
    let c = ci_clone(&url, &["--depth", "1"]);
    fetch_notes(&c);
    for args in [
        vec!["verify", "main"],
        vec!["verify", "--policy-from", "origin/main", "main"],
    ] {
        let (code, v) = c.tab_json(&args);
        assert_eq!(code, 3, "{args:?}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("beyond this shallow clone's boundary"),
            "{v}"
        );
        assert!(
            v["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("`git fetch --deepen=1 origin`"),
            "{v}"
        );
    }
    c.git(&["fetch", "-q", "--deepen=1", "origin"]).ok();
    c.tab(&["verify", "main"]).ok();
}

#[test]
fn a_partial_clone_fetches_the_blobs_verify_reads() {
    let (src, url) = source(&policy(&[("ci", &["true"])]));
    src.tab(&["validate", "main~1"]).ok();
    let c = ci_clone(&url, &["--filter=blob:none"]);
    fetch_notes(&c);
    // The note blobs were filtered out of the fetch, as was the older commit's policy.
    let note = src.git_out(&["notes", "--ref=tabellio/evidence", "list", "main~1"]);
    // What the clone holds itself (listing every object fetches nothing lazily).
    let has = |c: &Client, id: &str| {
        c.git_out(&[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ])
        .lines()
        .any(|l| l == id)
    };
    assert!(!has(&c, &note), "the note blob was fetched with the notes");
    c.tab(&["verify", "main~1", "main"]).ok();
    c.tab(&["verify", "--policy-from", "origin/main", "main~1"])
        .ok();
    assert!(has(&c, &note));
    c.fsck();
}

#[test]
fn shallow_and_partial_clones_over_http_verify_after_fetching_the_notes() {
    let Some(http) = Http::shared() else { return };
    let served = http.serve(Area::Anon, "ci-clones", &policy(&[("ci", &["true"])]));
    served
        .env
        .git(&["config", "uploadpack.allowFilter", "true"])
        .ok();
    // A developer pushes a validated commit with its evidence (the server's gate wants it).
    let dev = Client::clone(&served.url, None);
    dev.commit_file_in(&dev.repo, "two.txt", "two\n");
    dev.tab(&["validate", "HEAD"]).ok();
    dev.git(&[
        "push",
        "-q",
        "--atomic",
        "origin",
        "main",
        "refs/notes/tabellio/evidence",
    ])
    .ok();
    for extra in [&["--depth", "1"][..], &["--filter=blob:none"][..]] {
        let c = ci_clone(&served.url, extra);
        let (code, v) = c.tab_json(&["verify", "main"]);
        assert_eq!(code, 1, "{extra:?}: {v}");
        assert!(v["advice"].as_str().unwrap().contains(FETCH_NOTES), "{v}");
        fetch_notes(&c);
        c.tab(&["verify", "--policy-from", "origin/main", "main"])
            .ok();
        c.tab(&["verify", "main"]).ok();
    }
}
