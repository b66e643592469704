//! Evidence notes that diverged on the remote (someone else pushed evidence) and a push that
//! carries ours: git rejects the notes as not a fast-forward, and the words must say so and
//! how to fix it — `git tabellio sync` merges the notes — never that the push does not carry
//! them. From outside: stock `git push` through the installed hooks, against a bare server with
//! the server hook.

use crate::util::*;

const EVIDENCE: &str = "refs/notes/tabellio/evidence";

#[test]
fn a_push_whose_notes_diverged_says_to_sync_and_push_again() {
    let server = TestEnv::bare_server();
    let seed = TestEnv::clone_of(&server);
    seed.commit_policy(&policy(&[("ci", &["true"])]));
    seed.git(&["push", "-q", "origin", "main"]).ok();
    server.tab(&["hooks", "install", "--server"]).ok();
    let (a, b) = (TestEnv::clone_of(&server), TestEnv::clone_of(&server));
    for t in [&a, &b] {
        t.tab(&["init", "--hooks"]).ok();
    }

    // Someone else pushes evidence.
    a.start_with_commit("ra", "a.txt", "a\n");
    a.tab(&["finish", "ra"]).ok();
    a.tab(&["sync"]).ok();

    // B validates its own commit: its notes and the server's have diverged.
    b.git(&["switch", "-q", "-c", "work"]).ok();
    b.commit_file_in(&b.repo, "b.txt", "b\n");
    let tip = b.git_out(&["rev-parse", "HEAD"]);
    b.tab(&["validate", &tip]).ok();
    let server_main = server.git_out(&["rev-parse", "main"]);
    let push = [
        "push",
        "--atomic",
        "origin",
        "HEAD:refs/heads/main",
        EVIDENCE,
    ];

    // Not fetched yet: git rejects the notes ("fetch first"); the hook sees their line.
    // Fetched (init's refspecs keep the remote's notes): git rejects them as not a
    // fast-forward and leaves their line out of what the hook sees; the fetched copy tells.
    for fetched in [false, true] {
        if fetched {
            b.git(&["fetch", "-q", "origin"]).ok();
        }
        let r = b.git(&push);
        assert_ne!(r.code, 0, "{}", r.desc);
        assert!(
            r.stderr
                .contains("run `git tabellio sync origin` (merges the notes) and push again")
                && r.stderr.contains("has records this clone has not merged"),
            "fetched: {fetched}\n{}",
            r.desc
        );
        assert!(!r.stderr.contains("does not carry"), "{}", r.desc);
        assert_eq!(server.git_out(&["rev-parse", "main"]), server_main);
    }

    // As the words say: sync merges the notes (and pushes them), then the push goes through.
    let (code, v) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["notes"][0]["action"], "merged", "{v}");
    let r = b.git(&push);
    r.ok();
    assert!(!r.stderr.contains("warning"), "{}", r.desc);
    assert_eq!(server.git_out(&["rev-parse", "main"]), tip);
    // Both records are on the server.
    for rev in [&tip, &a.git_out(&["rev-parse", "tabellio/ra"])] {
        let note = server.git_out(&["notes", "--ref=tabellio/evidence", "show", rev]);
        assert!(note.contains("\"status\":\"passed\""), "{note}");
    }

    // A protected push without the notes, with nothing fetched that diverged: the warning
    // says both what git may have left out and what to do in either case (the server refuses).
    b.commit_file_in(&b.repo, "c.txt", "c\n");
    let next = b.git_out(&["rev-parse", "HEAD"]);
    b.tab(&["validate", &next]).ok();
    let r = b.git(&["push", "origin", "HEAD:refs/heads/main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr
            .contains("this push does not carry refs/notes/tabellio/evidence, or git left it out")
            && r.stderr.contains("git tabellio sync origin"),
        "{}",
        r.desc
    );
    for t in [&server, &a, &b] {
        t.fsck();
    }
}
