//! Against real git servers, started here on 127.0.0.1 and stopped by pid ([`daemons`]; the
//! recipe is docs/servers.md): smart HTTP (`git http-backend` behind lighttpd, with an
//! anonymous area, a read-only area where only a logged-in user pushes, and an area that needs a
//! login for everything), SSH (`sshd` with `git-shell` as the forced command) and the read-only
//! `git daemon`. Every served repository has the server hook (`hooks install --server`).
//!
//! The whole life of shared runs goes through each server that takes pushes: `init`, `sync`,
//! `promote --remote`, `land --remote`, `verify` in a clone that fetched the notes, and the
//! server's gate refusing an unvalidated push and a forged record in words that reach the
//! pusher as `remote:` lines. A remote that refuses (no or wrong credentials, a read-only
//! remote) is exit 3 naming the remote and the operation, with nothing written here; a server
//! that dies before a push arrives or right after the ref update converges on the next run.
//!
//! A server program that is not installed skips its tests with a line on stderr; `.ci/run`
//! installs them.

mod ci_clones;
mod daemons;
mod notes;

use std::ffi::OsString;
use std::ops::Deref;

use crate::util::*;
use daemons::{Area, GitDaemon, Http, Served, Ssh, HTTP_PASSWORD, HTTP_USER};

/// A clone of a served repository: one machine, talking to the server through `env` (never
/// prompting for anything; `GIT_SSH_COMMAND` for SSH).
struct Client {
    t: TestEnv,
    env: Vec<(&'static str, OsString)>,
}

impl Deref for Client {
    type Target = TestEnv;
    fn deref(&self) -> &TestEnv {
        &self.t
    }
}

impl Client {
    /// `git clone <url>` into a new machine; `ssh` is the `GIT_SSH_COMMAND` to use.
    fn clone(url: &str, ssh: Option<&str>) -> Client {
        Self::clone_with(url, ssh, &[])
    }

    /// [`Client::clone`] with more `git clone` options (`--depth 1`, `--filter=blob:none`).
    fn clone_with(url: &str, ssh: Option<&str>, options: &[&str]) -> Client {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = dir.path().join("repo");
        let mut env = vec![("GIT_TERMINAL_PROMPT", OsString::from("0"))];
        if let Some(ssh) = ssh {
            env.push(("GIT_SSH_COMMAND", ssh.into()));
        }
        let c = Client {
            t: TestEnv { dir, home, repo },
            env,
        };
        let to = c.t.repo.to_str().unwrap().to_string();
        let mut args = vec!["clone", "-q"];
        args.extend_from_slice(options);
        args.extend([url, to.as_str()]);
        c.run("git", c.t.path(), &args).ok();
        c
    }

    fn run(&self, program: &str, cwd: &std::path::Path, args: &[&str]) -> Run {
        let env: Vec<(&str, &std::ffi::OsStr)> =
            self.env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        self.t.command_with_env(program, cwd, &env, args)
    }

    fn git(&self, args: &[&str]) -> Run {
        self.run("git", &self.t.repo, args)
    }

    fn git_out(&self, args: &[&str]) -> String {
        let r = self.git(args);
        r.ok();
        r.stdout.trim().to_string()
    }

    fn tab(&self, args: &[&str]) -> Run {
        self.run(BIN, &self.t.repo, args)
    }

    fn tab_json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = self.tab(&all);
        (r.code, r.json())
    }
}

/// The policy of every served repository: `ci` (`true`) required, `main` protected.
fn ci_policy() -> String {
    policy(&[("ci", &["true"])])
}

/// Start run `id` from the checked-out `main`, commit `file`, finish it (the policy's `ci`);
/// the validated commit.
fn finished(c: &Client, id: &str, file: &str) -> String {
    c.start_with_commit(id, file, &format!("{id}\n"));
    c.tab(&["finish", id]).ok();
    c.git_out(&["rev-parse", &format!("refs/heads/tabellio/{id}")])
}

fn rev(t: &TestEnv, r: &str) -> String {
    t.git_out(&["rev-parse", r])
}

fn try_rev(t: &TestEnv, r: &str) -> Option<String> {
    let out = t.git(&["rev-parse", "--verify", "-q", r]);
    (out.code == 0).then(|| out.stdout.trim().to_string())
}

/// The state in `run.json` of the ledger of `run` in `t`.
fn state(t: &TestEnv, run: &str) -> String {
    let json = t.git_out(&["show", &format!("refs/tabellio/runs/{run}:run.json")]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["state"].as_str().unwrap().to_string()
}

/// Every ledger and every shared notes ref with its value (the tracking namespaces left out).
fn shared_refs(t: &TestEnv) -> String {
    t.git_out(&[
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        "refs/tabellio/runs/",
        "refs/notes/tabellio/evidence",
        "refs/notes/tabellio/checkpoints",
    ])
}

/// Every ref with its value: what a refused command must leave as it was.
fn all_refs(t: &TestEnv) -> String {
    t.git_out(&["for-each-ref", "--format=%(objectname) %(refname)"])
}

/// The whole life of shared runs through one server that takes pushes: `init`, `sync`,
/// `promote --remote`, `land --remote`, `verify` after fetching the notes, and the server's gate
/// refusing an unvalidated push and a forged record with its words reaching the pusher.
fn whole_life(server: &Served, ssh: Option<&str>) {
    let srv = &server.env;
    let a = Client::clone(&server.url, ssh);
    let b = Client::clone(&server.url, ssh);
    for c in [&a, &b] {
        let (code, v) = c.tab_json(&["init"]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["remotes"][0]["remote"], "origin", "{v}");
    }

    // A shares a finished run; B receives it.
    let r1 = finished(&a, "r1", "one.txt");
    a.tab(&["sync"]).ok();
    assert_eq!(state(srv, "r1"), "completed");
    let note = srv.git_out(&["notes", "--ref=tabellio/evidence", "show", &r1]);
    assert!(note.contains("\"status\":\"passed\""), "{note}");
    let (code, v) = b.tab_json(&["sync"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ledgers"]["created"], serde_json::json!(["r1"]), "{v}");

    // A promotes on the server: target, ledger and evidence in one push the gate accepts.
    let (code, v) = a.tab_json(&["promote", "r1", "--remote", "origin"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(rev(srv, "main"), r1);
    assert_eq!(state(srv, "r1"), "promoted");
    assert_eq!(state(&a, "r1"), "promoted");

    // A CI clone that fetched the notes verifies what the server's main points at.
    let ci = Client::clone(&server.url, ssh);
    ci.git(&[
        "fetch",
        "-q",
        "origin",
        "refs/notes/tabellio/*:refs/notes/tabellio/*",
    ])
    .ok();
    let r = ci.tab(&["verify", "origin/main"]);
    r.ok();

    // B, whose main is behind, lands a run on the server's tip.
    let r2 = finished(&b, "r2", "two.txt");
    let (code, v) = b.tab_json(&["land", "r2", "--remote", "origin"]);
    assert_eq!(code, 0, "{v}");
    let landed = rev(srv, "main");
    assert_ne!(landed, r2, "restacked onto r1");
    assert_eq!(rev(srv, "main^"), r1);
    assert_eq!(state(srv, "r2"), "promoted");

    // Everyone agrees after a sync each.
    for c in [&a, &b, &a] {
        c.tab(&["sync"]).ok();
    }
    assert_eq!(shared_refs(&a), shared_refs(srv));
    assert_eq!(shared_refs(&b), shared_refs(srv));

    // A commit nobody validated, pushed with stock git: the server's gate refuses it and its
    // words reach the pusher.
    a.git(&["pull", "-q", "--ff-only", "origin", "main"]).ok();
    a.commit_file_in(&a.repo, "bad.txt", "bad\n");
    let bad = rev(&a, "HEAD");
    let r = a.git(&["push", "origin", "main"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr.contains(&format!(
            "remote: tabellio: refusing to update refs/heads/main to {bad}"
        )) && r.stderr.contains("ci (missing)"),
        "{}",
        r.desc
    );
    assert_eq!(rev(srv, "main"), landed);

    // A forged record (validated, then edited) pushed with the commit: refused as tampered.
    a.tab(&["validate", &bad]).ok();
    let line = a
        .git_out(&["notes", "--ref=tabellio/evidence", "show", &bad])
        .replace("\"duration_ms\":", "\"duration_ms\":1");
    a.forge_evidence(&bad, &line);
    let r = a.git(&[
        "push",
        "--atomic",
        "origin",
        "main",
        "refs/notes/tabellio/evidence",
    ]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(
        r.stderr
            .contains("remote: tabellio: refusing to update refs/heads/main")
            && r.stderr.contains("ci (tampered)"),
        "{}",
        r.desc
    );
    assert_eq!(rev(srv, "main"), landed);
    assert!(try_rev(srv, &bad).is_none() || srv.git(&["cat-file", "-e", &bad]).code != 0);

    for t in [srv, &a.t, &b.t, &ci.t] {
        t.fsck();
    }
}

#[test]
fn smart_http_with_a_login_carries_the_whole_life_of_runs() {
    let Some(http) = Http::shared() else { return };
    // The read-only area: anyone reads, only the logged-in user pushes.
    let mut served = http.serve(Area::ReadOnly, "life", &ci_policy());
    served.url = http.url(Area::ReadOnly, "life", Some((HTTP_USER, HTTP_PASSWORD)));
    whole_life(&served, None);
}

#[test]
fn ssh_with_git_shell_carries_the_whole_life_of_runs() {
    let Some(ssh) = Ssh::shared() else { return };
    let served = ssh.serve("life", &ci_policy());
    whole_life(&served, Some(&ssh.ssh_command(None)));
}

/// `sync`, `promote --remote` and `land --remote` of the finished run `run` against a remote
/// that refuses them: each exits `code` with `words` in its message (the operation refused is
/// `fetch`, `ls-remote` or `push` where `words` has `{op}`), names the remote, and writes
/// nothing here.
#[track_caller]
fn refused_everywhere(c: &Client, run: &str, code: i32, words: &str) {
    let before = all_refs(c);
    for args in [
        vec!["sync"],
        vec!["promote", run, "--remote", "origin"],
        vec!["land", run, "--remote", "origin"],
    ] {
        let (got, v) = c.tab_json(&args);
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(got, code, "{args:?}: {v}");
        let said = ["fetch", "ls-remote", "push"]
            .iter()
            .any(|op| message.contains(&words.replace("{op}", op)));
        assert!(message.contains("origin") && said, "{args:?}: {v}");
        assert!(v["error"]["hint"].as_str().is_some(), "{args:?}: {v}");
        assert_eq!(all_refs(c), before, "{args:?} wrote here");
        // In words, too.
        let r = c.tab(&args);
        assert!(
            r.stderr.starts_with("error: ") && r.stderr.contains("hint: "),
            "{}",
            r.desc
        );
    }
}

#[test]
fn smart_http_refusals_name_the_remote_and_write_nothing() {
    let Some(http) = Http::shared() else { return };
    let served = http.serve(Area::ReadOnly, "refusals", &ci_policy());
    let srv = &served.env;
    let main = rev(srv, "main");

    // Anyone reads the read-only area; a push without a login is refused: exit 3.
    let c = Client::clone(&served.url, None);
    c.tab(&["init"]).ok();
    c.tab(&["sync"]).ok();
    finished(&c, "r1", "one.txt");
    refused_everywhere(&c, "r1", 3, "refused the push");
    // A wrong password is refused the same way.
    let wrong = http.url(Area::ReadOnly, "refusals", Some((HTTP_USER, "wrong")));
    c.git(&["remote", "set-url", "origin", &wrong]).ok();
    refused_everywhere(&c, "r1", 3, "did not accept the credentials");
    assert_eq!(rev(srv, "main"), main);
    assert!(try_rev(srv, "refs/tabellio/runs/r1").is_none());

    // The area that needs a login for everything refuses the fetch already.
    let private = http.serve(Area::Private, "refusals", &ci_policy());
    let login = http.url(Area::Private, "refusals", Some((HTTP_USER, HTTP_PASSWORD)));
    let p = Client::clone(&login, None);
    p.tab(&["init"]).ok();
    finished(&p, "r1", "one.txt");
    p.git(&["remote", "set-url", "origin", &private.url]).ok();
    refused_everywhere(
        &p,
        "r1",
        3,
        "refused the {op}: it did not accept the credentials",
    );
    // With the login, it all goes through.
    p.git(&["remote", "set-url", "origin", &login]).ok();
    p.tab(&["promote", "r1", "--remote", "origin"]).ok();
    assert_eq!(state(&private.env, "r1"), "promoted");
    for t in [srv, &private.env, &c.t, &p.t] {
        t.fsck();
    }
}

#[test]
fn a_server_hook_that_declines_is_the_servers_verdict() {
    let Some(http) = Http::shared() else { return };
    let served = http.serve(Area::Anon, "frozen", &ci_policy());
    let c = Client::clone(&served.url, None);
    c.tab(&["init"]).ok();
    finished(&c, "r1", "one.txt");
    // The server's own rule, ahead of ours: nothing may be pushed today.
    let hook = served.env.repo.join("hooks/pre-receive");
    write_file(
        &hook,
        "#!/bin/sh\necho 'pushes are frozen until the release is out' >&2\nexit 1\n",
    );
    let before = all_refs(&c);
    for args in [vec!["sync"], vec!["promote", "r1", "--remote", "origin"]] {
        let (code, v) = c.tab_json(&args);
        assert_eq!(code, 1, "{args:?}: {v}");
        assert_eq!(v["error"]["code"], "declined", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("origin declined") && message.contains("frozen until the release"),
            "{v}"
        );
        assert_eq!(all_refs(&c), before);
    }
    assert!(try_rev(&served.env, "refs/tabellio/runs/r1").is_none());
}

#[test]
fn ssh_with_an_unknown_key_is_refused_and_writes_nothing() {
    let Some(ssh) = Ssh::shared() else { return };
    let served = ssh.serve("keys", &ci_policy());
    let c = Client::clone(&served.url, Some(&ssh.ssh_command(None)));
    c.tab(&["init"]).ok();
    finished(&c, "r1", "one.txt");
    let stranger = c.path().join("stranger_key");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&stranger)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let c = Client {
        env: vec![
            ("GIT_TERMINAL_PROMPT", "0".into()),
            ("GIT_SSH_COMMAND", ssh.ssh_command(Some(&stranger)).into()),
        ],
        t: c.t,
    };
    refused_everywhere(&c, "r1", 3, "did not accept the credentials");
    assert!(try_rev(&served.env, "refs/tabellio/runs/r1").is_none());
}

#[test]
fn the_read_only_git_daemon_shares_what_it_has_and_refuses_pushes() {
    let Some(mut daemon) = GitDaemon::start() else {
        return;
    };
    let served = daemon.serve("ro", &ci_policy());
    // Someone with write access (here: the repository's own path) shares and promotes a run.
    let writer = Client::clone(served.env.repo.to_str().unwrap(), None);
    writer.tab(&["init"]).ok();
    let r1 = finished(&writer, "r1", "one.txt");
    writer.tab(&["promote", "r1", "--remote", "origin"]).ok();

    // Through git://: init, a sync that has nothing to push, verify after fetching the notes.
    let c = Client::clone(&served.url, None);
    c.tab(&["init"]).ok();
    let (code, v) = c.tab_json(&["sync"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ledgers"]["created"], serde_json::json!(["r1"]), "{v}");
    assert_eq!(state(&c, "r1"), "promoted");
    fetch_notes(&c);
    c.tab(&["verify", &r1]).ok();
    c.tab(&["verify", "origin/main"]).ok();

    // Anything to push is refused, naming the remote; nothing is written here.
    c.git(&["pull", "-q", "--ff-only", "origin", "main"]).ok();
    finished(&c, "r2", "two.txt");
    refused_everywhere(&c, "r2", 3, "refused the push");

    // A remote that is not there at all: exit 4, run it again later.
    daemon.daemon.kill();
    let before = all_refs(&c);
    let (code, v) = c.tab_json(&["sync"]);
    assert_eq!(code, 4, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("could not reach origin for the fetch"),
        "{v}"
    );
    assert_eq!(all_refs(&c), before);
    for t in [&served.env, &writer.t, &c.t] {
        t.fsck();
    }
}

#[test]
fn a_web_server_that_dies_mid_push_converges_on_the_next_run() {
    let Some(http) = Http::start() else { return };
    let served = http.serve(Area::Anon, "dies", &ci_policy());
    let srv = &served.env;
    let a = Client::clone(&served.url, None);
    a.tab(&["init"]).ok();
    let r1 = finished(&a, "r1", "one.txt");

    // The server dies when the push arrives: nothing landed there, nothing changed here.
    for args in [vec!["sync"], vec!["promote", "r1", "--remote", "origin"]] {
        let before = all_refs(&a);
        let server_before = all_refs(srv);
        http.kill_before_next_push();
        let (code, v) = a.tab_json(&args);
        assert_eq!(code, 4, "{args:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("origin") && message.contains("push"),
            "{v}"
        );
        assert!(!http.daemon.lock().unwrap().alive(), "the server is down");
        assert_eq!(all_refs(&a), before);
        assert_eq!(all_refs(srv), server_before);
        http.daemon.lock().unwrap().restart();
        a.tab(&args).ok();
    }
    assert_eq!(rev(srv, "main"), r1);
    assert_eq!(state(srv, "r1"), "promoted");
    assert_eq!(state(&a, "r1"), "promoted");

    // The server dies right after the ref update, before telling the client: the next run of
    // the same command converges.
    a.git(&["pull", "-q", "--ff-only", "origin", "main"]).ok();
    let r2 = finished(&a, "r2", "two.txt");
    for (args, run) in [
        (vec!["promote", "r2", "--remote", "origin"], "r2"),
        (vec!["sync"], "r3"),
        (vec!["land", "r4", "--remote", "origin"], "r4"),
    ] {
        match run {
            "r3" => drop(finished(&a, "r3", "three.txt")),
            // From the local main, which is behind the server's by now: land restacks.
            "r4" => drop(finished(&a, "r4", "four.txt")),
            _ => {}
        }
        http.kill_after_next_ref_update(&served);
        let (code, v) = a.tab_json(&args);
        assert_eq!(code, 4, "{args:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("connection to origin broke during the push"),
            "{v}"
        );
        assert!(try_rev(srv, &format!("refs/tabellio/runs/{run}")).is_some());
        if run == "r2" {
            // Landed there, not recorded here (yet).
            assert_eq!(state(srv, "r2"), "promoted");
            assert_eq!(state(&a, "r2"), "completed");
        }
        let hint = v["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("git tabellio sync origin"), "{v}");
        let landed = rev(srv, "main");
        http.daemon.lock().unwrap().restart();
        if run == "r4" {
            // land does not look at the remote's ledger of the run before it restacks again;
            // the push refuses to replace that ledger, and the hint's sync brings the landing.
            let (code, v) = a.tab_json(&args);
            assert_eq!(code, 4, "{v}");
            assert!(
                v["error"]["hint"]
                    .as_str()
                    .unwrap()
                    .contains("git tabellio sync origin"),
                "{v}"
            );
            a.tab(&["sync"]).ok();
        }
        a.tab(&args).ok();
        assert_eq!(shared_refs(&a), shared_refs(srv), "after {args:?}");
        assert_eq!(rev(srv, "main"), landed, "{args:?} landed twice");
        if run == "r2" {
            assert_eq!(landed, r2);
        }
    }
    assert_eq!(state(&a, "r2"), "promoted");
    assert_eq!(state(srv, "r3"), "completed");
    assert_eq!(state(&a, "r4"), "promoted");
    assert_eq!(rev(srv, "main^"), r2);
    srv.fsck();
    a.fsck();
}

/// The fetch of docs/ci.md, as a clone runs it.
fn fetch_notes(c: &Client) {
    c.git(&[
        "fetch",
        "-q",
        "origin",
        "refs/notes/tabellio/*:refs/notes/tabellio/*",
    ])
    .ok();
}
