//! Provenance: one canonical id per person, the actor and initiator in the run and in its
//! signed evidence, the kind of signer the allowed signers declare, and a policy that guards
//! paths by who made the change and excludes approvers by role. The attack corpus tries six
//! ways around it at three gates (land, verify, a server's pre-receive) with three SSH keys:
//! an agent's, its initiator's and a reviewer's.

use std::path::{Path, PathBuf};

use crate::trust::{keygen, public, resealed, server_of};
use crate::util::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Approving your own run with both commands' defaults: `start` and `approve` name you by one
/// canonical id (your git email, not `$USER` in one place and the email in the other), so
/// under `distinct_from_actor` the approval is refused by `approve` and, written by hand, by
/// `promote` and `verify`.
#[test]
fn approving_your_own_run_with_the_default_ids_does_not_count() {
    let t = TestEnv::ref_only();
    t.git(&["checkout", "-q", "main"]).ok();
    t.write("tests/a.rs", "// a\n");
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["guarded"] = serde_json::json!(["tests/**"]);
    p["approval"] = serde_json::json!({"distinct_from_actor": true});
    t.commit_policy(&p.to_string());
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    let (_, started) = t.tab_json(&["start", "mine", "--task", "t", "--base", "main"]);
    assert_eq!(started["run"]["actor"]["id"], "committer@example.com");
    assert_eq!(started["run"]["initiator"], "committer@example.com");
    let wt = t.worktree("mine");
    t.commit_file_in(&wt, "tests/a.rs", "// changed\n");
    t.tab(&["finish", "mine"]).ok();
    let before = t.snapshot();
    let r = t.tab(&["approve", "mine"]);
    r.code(3);
    assert!(r.stderr.contains("own actor"), "{}", r.desc);
    assert_eq!(t.snapshot(), before, "a refused approve wrote something");
    // The same approval written past `approve`, as the old default would have made it.
    let head = t.git_out(&["rev-parse", "tabellio/mine"]);
    let tree = t.git_out(&["rev-parse", "tabellio/mine^{tree}"]);
    let rec = serde_json::json!({
        "schema": "tabellio.approval/v1", "run_id": "mine", "repository": "x",
        "commit": head, "tree": tree, "paths": ["tests/a.rs"],
        "approver": {"type": "human", "id": "Committer@Example.com"},
        "reason": null, "at": "2026-01-01T00:00:00Z", "tool": "hand", "digest": "",
    });
    put_notes(
        &t,
        "tabellio/approvals",
        &head,
        &[resealed(rec).trim_end().to_string()],
    );
    let r = t.tab(&["promote", "mine"]);
    r.code(3);
    assert!(r.stderr.contains("own actor"), "{}", r.desc);
    let (code, v) = t.tab_json(&["verify", &format!("main..{head}")]);
    assert_eq!(code, 1, "{v}");
    assert!(v.to_string().contains("own actor"), "{v}");
}

/// `start`'s provenance flags reach the run and every evidence record, the session link only
/// as its SHA-256: nothing stored holds the link.
#[test]
fn the_run_and_its_evidence_carry_the_actor_and_initiator_never_the_session_link() {
    let t = TestEnv::with_readme_policy();
    let link = "https://sessions.example.com/s/3f9c?token=secret";
    let (code, v) = t.tab_json(&[
        "start",
        "prov",
        "--task",
        "t",
        "--actor",
        "agent:bot@example.com",
        "--initiator",
        "ada@example.com",
        "--agent-name",
        "claude-code",
        "--model",
        "model-7",
        "--harness-version",
        "2.1.0",
        "--session",
        link,
    ]);
    assert_eq!(code, 0, "{v}");
    let digest = tabellio::model::canonical::sha256_hex(link.as_bytes());
    let actor = &v["run"]["actor"];
    assert_eq!(actor["type"], "agent", "{v}");
    assert_eq!(actor["name"], "claude-code", "{v}");
    assert_eq!(actor["model"], "model-7", "{v}");
    assert_eq!(actor["harness_version"], "2.1.0", "{v}");
    assert_eq!(actor["session_digest"], digest.as_str(), "{v}");
    assert_eq!(v["run"]["initiator"], "ada@example.com", "{v}");
    let wt = t.worktree("prov");
    t.commit_file_in(&wt, "a.txt", "a\n");
    t.tab(&["finish", "prov"]).ok();
    let head = t.git_out(&["rev-parse", "tabellio/prov"]);
    let (_, ev) = t.tab_json(&["evidence", &head]);
    let text = ev.to_string();
    let rec = serde_json::from_str::<serde_json::Value>(
        t.git_out(&["notes", "--ref=tabellio/evidence", "show", &head])
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(rec["actor"]["kind"], "agent", "{rec}");
    assert_eq!(rec["actor"]["id"], "bot@example.com", "{rec}");
    assert_eq!(rec["actor"]["session_digest"], digest.as_str(), "{rec}");
    assert_eq!(rec["initiator"], "ada@example.com", "{rec}");
    // Nothing stored anywhere names the link.
    let all = t.git_out(&["log", "--all", "-p", "--format=%B"]);
    assert!(!all.contains("sessions.example.com") && !text.contains("sessions.example.com"));
    t.tab(&["promote", "prov"]).ok();
    t.fsck();
}

/// Three keys, their kinds declared in the allowed signers; `main` requires signed evidence and
/// guards `migrations/**` when an agent made the change, excluding its actor and initiator as
/// approvers.
struct Three {
    t: TestEnv,
    agent: PathBuf,
    initiator: PathBuf,
    reviewer: PathBuf,
}

const AGENT: &str = "agent@example.com";
const INITIATOR: &str = "ini@example.com";
const REVIEWER: &str = "rev@example.com";

fn three_keys() -> Three {
    three_keys_with(|_| {})
}

/// [`three_keys`] with `edit` applied to main's policy.
fn three_keys_with(edit: impl FnOnce(&mut serde_json::Value)) -> Three {
    let t = TestEnv::ref_only();
    let keys = t.path().join("keys");
    let (agent, initiator, reviewer) = (
        keygen(&keys, "agent"),
        keygen(&keys, "initiator"),
        keygen(&keys, "reviewer"),
    );
    t.git(&["checkout", "-q", "main"]).ok();
    t.write(
        ".tabellio/allowed_signers",
        &format!(
            "{AGENT} namespaces=\"tabellio,tabellio.agent\" {}\n{INITIATOR} namespaces=\"tabellio,tabellio.human\" {}\n{REVIEWER} namespaces=\"tabellio,tabellio.human\" {}\n",
            public(&agent),
            public(&initiator),
            public(&reviewer)
        ),
    );
    t.write("migrations/0.sql", "-- 0\n");
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    p["trust"] =
        serde_json::json!({"allowed_signers": ".tabellio/allowed_signers", "require_signed": "*"});
    p["guarded_paths"] = serde_json::json!({"migrations/**": {
        "approvals": 1, "when": {"actor.kind": "agent"}, "approver_not": ["actor", "initiator"]}});
    edit(&mut p);
    t.commit_policy(&p.to_string());
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    Three {
        t,
        agent,
        initiator,
        reviewer,
    }
}

impl Three {
    /// Start `id` from main as `actor` (with `extra` flags) and commit `file`; its worktree.
    fn start_as(&self, id: &str, actor: &str, extra: &[&str], file: (&str, &str)) -> PathBuf {
        let mut args = vec![
            "start", id, "--task", "t", "--base", "main", "--actor", actor,
        ];
        args.extend_from_slice(extra);
        self.t.tab(&args).ok();
        let wt = self.t.worktree(id);
        self.t.commit_file_in(&wt, file.0, file.1);
        wt
    }

    /// An agent's run `id` from main writing `file`, finished with the agent's key; its head.
    fn agent_run(&self, id: &str, file: (&str, &str)) -> String {
        let t = &self.t;
        let extra = ["--initiator", INITIATOR, "--agent-name", "claude-code"];
        self.start_as(id, &format!("agent:{AGENT}"), &extra, file);
        t.tab(&["finish", id, "--sign-key", s(&self.agent)]).ok();
        t.git_out(&["rev-parse", &format!("tabellio/{id}")])
    }

    /// The reviewer's genuine approval of run `id`; its record.
    fn review(&self, id: &str) -> serde_json::Value {
        let (code, v) = self.t.tab_json(&[
            "approve",
            id,
            "--actor",
            &format!("human:{REVIEWER}"),
            "--sign-key",
            s(&self.reviewer),
        ]);
        assert_eq!(code, 0, "{v}");
        v["approval"].clone()
    }

    /// `rec` re-sealed and signed by `key` as `principal`, as its holder could by hand.
    fn resign(&self, mut rec: serde_json::Value, key: &Path, principal: &str) -> serde_json::Value {
        let obj = rec.as_object_mut().unwrap();
        obj.remove("signature");
        let digest = tabellio::trust::signed_digest(&rec).unwrap();
        let file = self.t.path().join("digest");
        std::fs::write(&file, &digest).unwrap();
        self.t
            .command(
                "ssh-keygen",
                self.t.path(),
                &["-Y", "sign", "-q", "-n", "tabellio", "-f", s(key), s(&file)],
            )
            .ok();
        let sig = std::fs::read_to_string(format!("{}.sig", file.display())).unwrap();
        std::fs::remove_file(format!("{}.sig", file.display())).unwrap();
        let fp = self.t.command(
            "ssh-keygen",
            self.t.path(),
            &[
                "-l",
                "-E",
                "sha256",
                "-f",
                &format!("{}.pub", key.display()),
            ],
        );
        let fingerprint = fp.stdout.split_whitespace().nth(1).unwrap().to_string();
        rec["digest"] = digest.into();
        rec["signature"] = serde_json::json!({
            "format": "ssh", "principal": principal, "key_fingerprint": fingerprint, "sig": sig,
        });
        rec
    }

    /// The evidence records on `commit`.
    fn evidence(&self, commit: &str) -> Vec<serde_json::Value> {
        self.t
            .git_out(&["notes", "--ref=tabellio/evidence", "show", commit])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Replace the notes on `commit` and its tree in `notes` with `lines`.
fn put_notes(t: &TestEnv, notes: &str, commit: &str, lines: &[String]) {
    let file = t.path().join("note.txt");
    write_file(&file, &format!("{}\n", lines.join("\n")));
    let tree = t.git_out(&["rev-parse", &format!("{commit}^{{tree}}")]);
    for object in [commit, tree.as_str()] {
        t.git(&[
            "notes",
            &format!("--ref={notes}"),
            "add",
            "-f",
            "-F",
            s(&file),
            object,
        ])
        .ok();
    }
}

/// The gates beside `land` and `verify`: a server whose pre-receive judges pushes (`server`),
/// and a remote without hooks (`plain`) that only the client's pre-push guards, with this
/// clone's hooks installed (reference-transaction, pre-push).
struct Gates {
    server: PathBuf,
    plain: PathBuf,
}

fn gates(t: &TestEnv) -> Gates {
    let server = server_of(t);
    let plain = t.path().join("plain.git");
    t.git_in(t.path(), &["init", "-q", "--bare", "-b", "main", s(&plain)])
        .ok();
    t.git(&["remote", "add", "plain", s(&plain)]).ok();
    t.git(&["push", "-q", "--no-verify", "plain", "main"]).ok();
    t.tab(&["hooks", "install"]).ok();
    Gates { server, plain }
}

/// Push `head` to `remote`'s main with the evidence and approval notes, in one atomic push
/// (`--no-verify` leaves the client's pre-push out).
fn push_main(t: &TestEnv, remote: &str, head: &str, no_verify: bool) -> Run {
    let refspec = format!("{head}:refs/heads/main");
    let mut args = vec!["push", "--atomic"];
    if no_verify {
        args.push("--no-verify");
    }
    args.extend([
        remote,
        refspec.as_str(),
        "refs/notes/tabellio/evidence",
        "refs/notes/tabellio/approvals",
    ]);
    t.git(&args)
}

/// One attack, tried at the five gates: `verify` of the move by main's policy, a push of it to the server with
/// the notes (pre-receive), `land` of the run, moving main here (reference-transaction) and a
/// push to a remote without hooks (pre-push). Each must refuse, moving nothing; the number
/// that did.
fn refused_at_every_gate(t: &TestEnv, gates: &Gates, case: &str, run: &str, head: &str) -> usize {
    let Gates { server, plain } = gates;
    let mut refused = 0;
    let main = t.git_out(&["rev-parse", "main"]);
    let r = t.git(&["update-ref", "refs/heads/main", head]);
    if r.code != 0 && t.git_out(&["rev-parse", "main"]) == main {
        refused += 1;
    } else {
        eprintln!("{case}: reference-transaction did not refuse: {}", r.desc);
        t.git(&["update-ref", "refs/heads/main", &main]).ok();
    }
    let plain_main = t.git_out_in(plain, &["rev-parse", "main"]);
    let r = push_main(t, "plain", head, false);
    if r.code != 0 && t.git_out_in(plain, &["rev-parse", "main"]) == plain_main {
        refused += 1;
    } else {
        eprintln!("{case}: pre-push did not refuse: {}", r.desc);
    }
    // As CI verifies a change to main: by main's policy (docs/ci.md).
    let r = t.tab(&["verify", "--policy-from", "main", &format!("main..{head}")]);
    if r.code == 1 {
        refused += 1;
    } else {
        eprintln!("{case}: verify did not refuse: {}", r.desc);
    }
    let server_main = t.git_out_in(server, &["rev-parse", "main"]);
    let r = push_main(t, "origin", head, true);
    if r.code != 0 && t.git_out_in(server, &["rev-parse", "main"]) == server_main {
        refused += 1;
    } else {
        eprintln!("{case}: pre-receive did not refuse: {}", r.desc);
    }
    let r = t.tab(&["land", run, "--target", "main"]);
    let landed_main = t.git_out(&["rev-parse", "main"]);
    let contains = t
        .git(&["merge-base", "--is-ancestor", head, &landed_main])
        .code
        == 0;
    if r.code != 0 && landed_main == main && !contains {
        refused += 1;
    } else {
        eprintln!("{case}: land did not refuse: {}", r.desc);
    }
    refused
}

/// The six attacks of provenance, and a seventh on a check asked only of agents, each tried at
/// land, verify, pre-receive, reference-transaction and pre-push: 35/35 refused. Main requires
/// `scan` of agents' changes (`when`).
#[test]
fn six_attacks_on_provenance_are_refused_at_land_verify_and_pre_receive() {
    let k = three_keys_with(|p| {
        p["checks"]["scan"] =
            serde_json::json!({"argv": ["true"], "when": {"actor.kind": "agent"}});
        p["required"] = serde_json::json!(["readme", "scan"]);
    });
    let t = &k.t;
    let gates = gates(t);
    let mut attacks: Vec<(&str, String, String)> = Vec::new();

    // 1. The actor signs its own approval.
    let head = k.agent_run("own", ("migrations/1.sql", "-- own\n"));
    let mut rec = k.review("own");
    rec["approver"]["id"] = AGENT.into();
    put_notes(
        t,
        "tabellio/approvals",
        &head,
        &[serde_json::to_string(&k.resign(rec, &k.agent, AGENT)).unwrap()],
    );
    attacks.push(("the actor signs its own approval", "own".into(), head));

    // 2. The initiator approves the agent's run, which the policy forbids.
    let head = k.agent_run("ini", ("migrations/1.sql", "-- ini\n"));
    let mut rec = k.review("ini");
    rec["approver"]["id"] = INITIATOR.into();
    put_notes(
        t,
        "tabellio/approvals",
        &head,
        &[serde_json::to_string(&k.resign(rec, &k.initiator, INITIATOR)).unwrap()],
    );
    attacks.push(("the initiator approves", "ini".into(), head));

    // 3. An approval of tree X replayed on tree Y.
    let x = k.agent_run("x", ("migrations/1.sql", "-- x\n"));
    k.review("x");
    let y = k.agent_run("y", ("migrations/1.sql", "-- y: drop everything\n"));
    let x_line = t.git_out(&["notes", "--ref=tabellio/approvals", "show", &x]);
    put_notes(t, "tabellio/approvals", &y, &[x_line]);
    attacks.push(("an approval of tree X replayed on Y", "y".into(), y));

    // 4. The actor field edited after signing (a human, so `when` would not hold): the digest
    //    recomputed, the agent's signature kept.
    let head = k.agent_run("edited", ("migrations/1.sql", "-- edited\n"));
    let lines: Vec<String> = k
        .evidence(&head)
        .into_iter()
        .map(|mut rec| {
            rec["actor"]["kind"] = "human".into();
            rec["digest"] = tabellio::trust::signed_digest(&rec).unwrap().into();
            serde_json::to_string(&rec).unwrap()
        })
        .collect();
    put_notes(t, "tabellio/evidence", &head, &lines);
    attacks.push((
        "the actor field edited after signing",
        "edited".into(),
        head,
    ));

    // 5. The agent's key signs records claiming a human made the change.
    let head = k.agent_run("claims", ("migrations/1.sql", "-- claims\n"));
    let lines: Vec<String> = k
        .evidence(&head)
        .into_iter()
        .map(|mut rec| {
            rec["actor"]["kind"] = "human".into();
            serde_json::to_string(&k.resign(rec, &k.agent, AGENT)).unwrap()
        })
        .collect();
    put_notes(t, "tabellio/evidence", &head, &lines);
    let (_, v) = t.tab_json(&["verify", &format!("main..{head}")]);
    assert!(v.to_string().contains("forged-actor"), "{v}");
    attacks.push((
        "an agent key claims actor.kind = human",
        "claims".into(),
        head,
    ));

    // 6. A guarded change split across two runs: the first half approved, the second riding on
    //    it, judged on the tree that would land (the second run's change on top of the first).
    let first = k.agent_run("half1", ("migrations/1.sql", "-- part 1\n"));
    k.review("half1");
    let second = k.agent_run("half2", ("migrations/1.sql", "-- part 1\n-- part 2\n"));
    let tree = t.git_out(&["rev-parse", &format!("{second}^{{tree}}")]);
    let stacked = t.git_out(&["commit-tree", &tree, "-p", &first, "-m", "both halves"]);
    attacks.push((
        "a guarded change split across two runs",
        "half2".into(),
        stacked,
    ));

    // 7. The agent's run rewrites its own policy so that `scan`, asked of agents, is asked of
    //    persons instead (the reviewer approved the policy change): its finish skips `scan`,
    //    and the target tip's policy still asks it of the agent.
    let mut p: serde_json::Value =
        serde_json::from_str(&t.git_out(&["show", "main:.tabellio/policy.json"])).unwrap();
    p["checks"]["scan"]["when"] = serde_json::json!({"actor.kind": "human"});
    let head = k.agent_run("flip", (".tabellio/policy.json", &p.to_string()));
    k.review("flip");
    assert!(
        k.evidence(&head)
            .iter()
            .all(|r| r["check"]["name"] != "scan"),
        "the run's own policy does not ask scan of it"
    );
    attacks.push((
        "the run asks the agents' check of persons only",
        "flip".into(),
        head,
    ));

    let mut refused = 0;
    for (case, run, head) in &attacks {
        refused += refused_at_every_gate(t, &gates, case, run, head);
    }
    let all = attacks.len() * 5;
    assert_eq!(
        refused, all,
        "refused {refused} of {all} (see the lines above)"
    );

    // The control: the first half, genuinely approved by the reviewer, passes every gate.
    t.tab(&["verify", &format!("main..{first}")]).ok();
    push_main(t, "origin", &first, true).ok();
    push_main(t, "plain", &first, false).ok();
    t.tab(&["land", "half1", "--target", "main"]).ok();
    assert_eq!(t.git_out(&["rev-parse", "main"]), first);
    t.git(&["update-ref", "refs/heads/main", &first, &first])
        .ok();
    t.fsck();
}

/// `finish` with an agent's key on a run whose actor is a person is refused before any check
/// runs: the records would not count.
#[test]
fn an_agent_key_cannot_finish_a_persons_run() {
    let k = three_keys();
    let t = &k.t;
    k.start_as("p", &format!("human:{INITIATOR}"), &[], ("a.txt", "a\n"));
    let before = t.snapshot();
    let r = t.tab(&["finish", "p", "--sign-key", s(&k.agent)]);
    r.code(3);
    assert!(r.stderr.contains("agent's key"), "{}", r.desc);
    assert_eq!(t.snapshot(), before);
}

/// A person's own run needs no approval of `migrations/**` (`when` holds only for agents),
/// proven by the evidence the person signed with a key declared human; the same change by the
/// agent needs one, and neither its actor nor its initiator may give it.
#[test]
fn when_and_approver_not_judge_by_the_proven_actor() {
    let k = three_keys();
    let t = &k.t;
    let who = format!("human:{INITIATOR}");
    k.start_as("mine", &who, &[], ("migrations/1.sql", "-- by a person\n"));
    t.tab(&["finish", "mine", "--sign-key", s(&k.initiator)])
        .ok();
    t.tab(&["promote", "mine"]).ok();

    k.agent_run("bot", ("migrations/2.sql", "-- by the agent\n"));
    let r = t.tab(&["promote", "bot"]);
    r.code(3);
    assert!(r.stderr.contains("migrations/2.sql"), "{}", r.desc);
    for (key, who) in [(&k.agent, AGENT), (&k.initiator, INITIATOR)] {
        let before = t.snapshot();
        let r = t.tab(&[
            "approve",
            "bot",
            "--actor",
            &format!("human:{who}"),
            "--sign-key",
            s(key),
        ]);
        r.code(3);
        assert_eq!(t.snapshot(), before, "{who}");
    }
    k.review("bot");
    t.tab(&["promote", "bot"]).ok();
}

/// A key that signed a run's evidence vouched for its checks and cannot also approve its
/// change: `approve` refuses it, and an approval it signed by hand counts at no gate.
#[test]
fn a_key_that_signed_the_evidence_cannot_approve_the_change() {
    let k = three_keys();
    let t = &k.t;
    let file = ("migrations/1.sql", "-- 1\n");
    k.start_as(
        "ci",
        &format!("agent:{AGENT}"),
        &["--initiator", INITIATOR],
        file,
    );
    // The reviewer's key signs the checks (a person's key may sign any actor's records).
    t.tab(&["finish", "ci", "--sign-key", s(&k.reviewer)]).ok();
    let before = t.snapshot();
    let r = t.tab(&[
        "approve",
        "ci",
        "--actor",
        &format!("human:{REVIEWER}"),
        "--sign-key",
        s(&k.reviewer),
    ]);
    r.code(3);
    assert!(r.stderr.contains("signed run ci's evidence"), "{}", r.desc);
    assert_eq!(t.snapshot(), before);
    // Signed by hand past `approve`: refused by promote and verify.
    let head = t.git_out(&["rev-parse", "tabellio/ci"]);
    let tree = t.git_out(&["rev-parse", "tabellio/ci^{tree}"]);
    let rec = serde_json::json!({
        "schema": "tabellio.approval/v1", "run_id": "ci", "repository": "x",
        "commit": head, "tree": tree, "paths": ["migrations/1.sql"],
        "approver": {"type": "human", "id": REVIEWER},
        "run_actor": {"type": "agent", "id": AGENT}, "run_initiator": INITIATOR,
        "reason": null, "at": "2026-01-01T00:00:00Z", "tool": "hand", "digest": "",
    });
    let line = serde_json::to_string(&k.resign(rec, &k.reviewer, REVIEWER)).unwrap();
    put_notes(t, "tabellio/approvals", &head, &[line]);
    let r = t.tab(&["promote", "ci"]);
    r.code(3);
    assert!(r.stderr.contains("signed the run's evidence"), "{}", r.desc);
    let (code, v) = t.tab_json(&["verify", &format!("main..{head}")]);
    assert_eq!(code, 1, "{v}");
}

/// A repository whose `main` (not checked out) requires `readme`.
fn readme_main() -> TestEnv {
    let t = TestEnv::ref_only();
    t.git(&["checkout", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    t
}

/// Start `id` from main as `agent:<id>` and commit `file`; finished.
fn finished_agent_run(t: &TestEnv, id: &str, file: &str) {
    let actor = format!("agent:{id}@example.com");
    t.tab(&[
        "start", id, "--task", "t", "--base", "main", "--actor", &actor,
    ])
    .ok();
    t.commit_file_in(&t.worktree(id), file, &format!("{id}\n"));
    t.tab(&["finish", id]).ok();
}

/// `verify --first-parent --require-provenance` resolves every commit `main` pointed at to the
/// run that landed it, through promote, land (a restack), land --squash and a forge-style squash
/// (same tree, another commit); a commit pushed by hand, even with passing evidence, fails the
/// range, named.
#[test]
fn require_provenance_resolves_every_landing_and_names_a_commit_no_run_landed() {
    let t = readme_main();
    let start = t.git_out(&["rev-parse", "main"]);
    finished_agent_run(&t, "promoted", "a.txt");
    t.tab(&["promote", "promoted"]).ok();
    finished_agent_run(&t, "first", "b.txt");
    finished_agent_run(&t, "restacked", "c.txt");
    t.tab(&["land", "first", "restacked", "--target", "main"])
        .ok();
    finished_agent_run(&t, "squashed", "d.txt");
    finished_agent_run(&t, "other", "e.txt");
    t.tab(&["land", "other", "--target", "main"]).ok();
    t.tab(&["land", "squashed", "--target", "main", "--squash"])
        .ok();
    // A forge squashes a run's branch onto main: a new commit with the run's validated tree.
    finished_agent_run(&t, "forge", "f.txt");
    let tree = t.git_out(&["rev-parse", "tabellio/forge^{tree}"]);
    let main = t.git_out(&["rev-parse", "main"]);
    let squash = t.git_out(&["commit-tree", &tree, "-p", &main, "-m", "forge: squash"]);
    t.git(&["update-ref", "refs/heads/main", &squash, &main])
        .ok();

    let range = format!("{start}..main");
    let args = [
        "verify",
        "--first-parent",
        "--require-provenance",
        range.as_str(),
    ];
    let (code, v) = t.tab_json(&args);
    assert_eq!(code, 0, "{v}");
    let commits = v["commits"].as_array().unwrap();
    let runs: Vec<&str> = commits
        .iter()
        .map(|c| c["provenance"]["run"]["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        runs,
        ["forge", "squashed", "other", "restacked", "promoted"],
        "{v}"
    );
    assert!(commits
        .iter()
        .all(|c| c["provenance"]["run"]["actor"]["kind"] == "agent"));
    assert_eq!(commits[0]["provenance"]["run"]["via"], "tree", "{v}");

    // A commit pushed by hand, validated so that only provenance is missing.
    t.git(&["checkout", "-q", "main"]).ok();
    t.commit_file_in(&t.repo, "g.txt", "by hand\n");
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    t.tab(&["validate", "main"]).ok();
    let hand = t.git_out(&["rev-parse", "main"]);
    let (code, v) = t.tab_json(&args);
    assert_eq!(code, 1, "{v}");
    let bad: Vec<&serde_json::Value> = v["commits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verified"] == false)
        .collect();
    assert_eq!(bad.len(), 1, "{v}");
    assert_eq!(bad[0]["commit"], hand.as_str(), "{v}");
    assert_eq!(bad[0]["provenance"]["verdict"], "unresolved", "{v}");
    let r = t.tab(&args);
    assert!(r.stdout.contains("no run landed it"), "{}", r.desc);
    // Without the flag the same range verifies: only provenance was missing.
    t.tab(&["verify", "--first-parent", &range]).ok();
}

/// `promote` notes a verification summary on the new tip, signed with the configured key: an
/// in-toto Statement of predicate type VSA v1 with the fields the schema requires, the levels
/// the policy earns and the evidence it rests on. `export --vsa` prints it, ssh-keygen verifies
/// its signature against the allowed signers, `verify` checks it and refuses an edited one.
#[test]
fn the_verification_summary_validates_against_its_schema_and_the_allowed_signers() {
    use base64ct::{Base64, Encoding};
    let k = three_keys();
    let t = &k.t;
    t.git(&["config", "gpg.format", "ssh"]).ok();
    t.git(&[
        "config",
        "user.signingKey",
        &format!("{}.pub", k.reviewer.display()),
    ])
    .ok();
    t.git(&["config", "user.email", REVIEWER]).ok();
    k.agent_run("vsa", ("a.txt", "a\n"));
    t.tab(&["promote", "vsa"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let (code, v) = t.tab_json(&["export", "--vsa", "main"]);
    assert_eq!(code, 0, "{v}");
    let envelope = &v["document"];
    assert_eq!(
        envelope["payloadType"], "application/vnd.in-toto+json",
        "{v}"
    );
    let body = Base64::decode_vec(envelope["payload"].as_str().unwrap()).unwrap();
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    // The Statement and the VSA v1 schema's fields.
    assert_eq!(st["_type"], "https://in-toto.io/Statement/v1", "{st}");
    assert_eq!(
        st["predicateType"],
        "https://slsa.dev/verification_summary/v1"
    );
    assert_eq!(
        st["subject"][0]["digest"]["gitCommit"],
        main.as_str(),
        "{st}"
    );
    let p = &st["predicate"];
    for field in [
        "/verifier/id",
        "/timeVerified",
        "/resourceUri",
        "/policy/uri",
    ] {
        assert!(
            p.pointer(field).is_some_and(|f| f.is_string()),
            "{field}: {st}"
        );
    }
    assert!(p["timeVerified"].as_str().unwrap().ends_with('Z'), "{st}");
    assert_eq!(p["verificationResult"], "PASSED", "{st}");
    assert_eq!(
        p["verifiedLevels"],
        serde_json::json!([
            "SLSA_SOURCE_LEVEL_1",
            "SLSA_SOURCE_LEVEL_2",
            "SLSA_SOURCE_LEVEL_3"
        ]),
        "{st}"
    );
    let records = k.evidence(&main);
    let inputs = p["inputAttestations"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{st}");
    assert_eq!(inputs[0]["digest"]["sha256"], records[0]["digest"], "{st}");
    // The signature, checked by ssh-keygen against the allowed signers on main.
    let sig = envelope["signatures"][0]["sig"].as_str().unwrap();
    let sig_file = t.path().join("vsa.sig");
    std::fs::write(&sig_file, sig).unwrap();
    let signers = t.path().join("allowed");
    std::fs::write(
        &signers,
        t.git_out(&["show", "main:.tabellio/allowed_signers"]),
    )
    .unwrap();
    let pae = format!(
        "DSSEv1 28 application/vnd.in-toto+json {} {}",
        body.len(),
        String::from_utf8(body.clone()).unwrap()
    );
    t.command_with_input(
        "ssh-keygen",
        t.path(),
        &[],
        &[
            "-Y",
            "verify",
            "-f",
            s(&signers),
            "-I",
            REVIEWER,
            "-n",
            "tabellio",
            "-s",
            s(&sig_file),
        ],
        &pae,
    )
    .ok();
    let (code, v) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["commits"][0]["vsa"][0]["verdict"], "valid", "{v}");
    assert_eq!(v["commits"][0]["vsa"][0]["signers"][0], REVIEWER, "{v}");

    // Edited after signing (a level it did not earn): verify refuses the commit.
    put_summary(t, envelope, &main, |st| {
        st["predicate"]["verifiedLevels"] = serde_json::json!(["SLSA_SOURCE_LEVEL_4"])
    });
    let (code, v) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["commits"][0]["vsa"][0]["verdict"], "invalid", "{v}");
    // No summary on the commit before: not found.
    t.tab(&["export", "--vsa", "main~1"]).code(5);
}

/// `main` requires `readme` of every change and `scan` (which passes only once `SCANNED` is
/// committed) only when an agent made it.
fn scan_when_agent(p: &mut serde_json::Value) {
    p["checks"]["scan"] = serde_json::json!({
        "argv": ["test", "-f", "SCANNED"], "timeout_s": 60, "when": {"actor.kind": "agent"}});
    p["required"] = serde_json::json!(["readme", "scan"]);
}

/// A culprit's refusal names the check that failed, also when a check with `when` that is not
/// asked of the change sorts before it (it has no verdict to pair with).
#[test]
fn a_culprits_refusal_names_its_failing_check_beside_a_check_not_asked() {
    let t = TestEnv::ref_only();
    t.git(&["checkout", "-q", "main"]).ok();
    let both =
        "import os,sys\nsys.exit(1 if os.path.exists('a.txt') and os.path.exists('b.txt') else 0)";
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("zlint", &["python3", "-c", both])])).unwrap();
    p["checks"]["audit"] = serde_json::json!({
        "argv": ["test", "-f", "AUDITED"], "timeout_s": 60, "when": {"actor.kind": "agent"}});
    p["required"] = serde_json::json!(["audit", "zlint"]);
    t.commit_policy(&p.to_string());
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    for (id, file) in [("ra", "a.txt"), ("rb", "b.txt")] {
        t.tab(&["start", id, "--task", "t", "--base", "main"]).ok();
        t.commit_file_in(&t.worktree(id), file, "x\n");
        t.tab(&["finish", id]).ok();
    }
    let (code, j) = t.tab_json(&["land", "ra", "rb", "--target", "main"]);
    assert_eq!(code, 1, "{j}");
    let reason = t.ledger_record("refs/tabellio/runs/rb")["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("zlint: new on this tree"), "{reason}");
    assert!(!reason.contains("audit"), "{reason}");
    t.fsck();
}

/// A required check with `when` is asked only of the actor it names: a person's run finishes
/// and promotes without it (its evidence, which claims a person, is all the policy needs), an
/// agent's run must pass it. `verify` and the hooks judge the same way; a policy whose every
/// required check has `when` is refused.
#[test]
fn a_required_check_with_when_is_asked_only_of_the_actor_it_names() {
    let t = TestEnv::ref_only();
    t.git(&["checkout", "-q", "main"]).ok();
    let mut p: serde_json::Value =
        serde_json::from_str(&policy(&[("readme", &["test", "-f", "README.md"])])).unwrap();
    scan_when_agent(&mut p);
    t.commit_policy(&p.to_string());
    t.git(&["checkout", "-q", "elsewhere"]).ok();
    let start = |id: &str, actor: &str| {
        t.tab(&[
            "start", id, "--task", "t", "--base", "main", "--actor", actor,
        ])
        .ok();
        t.commit_file_in(&t.worktree(id), &format!("{id}.txt"), "x\n");
    };

    start("person", "human:ada@example.com");
    let (code, v) = t.tab_json(&["finish", "person"]);
    assert_eq!(code, 0, "{v}");
    let ran: Vec<&str> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["check"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(ran, ["readme"], "{v}");
    let head = t.git_out(&["rev-parse", "tabellio/person"]);
    t.tab(&["verify", &head]).ok();
    t.tab(&["promote", "person"]).ok();
    // Another person's run, landed later onto a moved main (restacked).
    start("later", "human:bea@example.com");
    t.tab(&["finish", "later"]).ok();

    start("bot", "agent:bot@example.com");
    let (code, v) = t.tab_json(&["finish", "bot"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["run"]["state"], "validation_failed", "{v}");
    // Its passing `readme` alone does not open main, at any gate.
    let head = t.git_out(&["rev-parse", "tabellio/bot"]);
    let (code, v) = t.tab_json(&["verify", &head]);
    assert_eq!(code, 1, "{v}");
    assert!(v.to_string().contains("scan"), "{v}");
    t.tab(&["hooks", "install"]).ok();
    let before = t.snapshot();
    let r = t.git(&["update-ref", "refs/heads/main", &head]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("scan"), "{}", r.desc);
    assert_eq!(t.snapshot(), before);
    t.commit_file_in(&t.worktree("bot"), "SCANNED", "ok\n");
    t.tab(&["finish", "bot"]).ok();
    // A person's run making the very tree the agent's evidence is on: the records there say
    // an agent, so the actor is not proven a person and `scan` runs.
    t.tab(&[
        "start",
        "twin",
        "--task",
        "t",
        "--base",
        "main",
        "--actor",
        "human:ada@example.com",
    ])
    .ok();
    t.commit_file_in(&t.worktree("twin"), "bot.txt", "x\n");
    t.commit_file_in(&t.worktree("twin"), "SCANNED", "ok\n");
    let (code, v) = t.tab_json(&["finish", "twin"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["evidence"].as_array().unwrap().len(), 2, "{v}");
    t.tab(&["verify", &t.git_out(&["rev-parse", "tabellio/twin"])])
        .ok();
    t.tab(&["promote", "bot"]).ok();
    // `land` restacks the person's run onto the agent's and runs only what is asked of a
    // person: `readme`, not `scan`.
    let (code, j) = t.tab_json(&["land", "later", "--target", "main"]);
    assert_eq!(code, 0, "{j}");
    let landed = t.git_out(&["rev-parse", "main"]);
    let names: Vec<String> = t
        .git_out(&["notes", "--ref=tabellio/evidence", "show", &landed])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["check"]["name"].to_string())
        .collect();
    assert_eq!(names, ["\"readme\""], "{j}");
    t.tab(&["verify", "main"]).ok();

    // Every required check conditional: nothing would be asked of a person. Such a policy is
    // invalid, and the hook keeps it off main.
    t.git(&["checkout", "-q", "main"]).ok();
    p["required"] = serde_json::json!(["scan"]);
    t.write(".tabellio/policy.json", &p.to_string());
    let before = t.git_out(&["rev-parse", "main"]);
    let r = t.git(&["commit", "-qam", "only scan"]);
    assert_ne!(r.code, 0, "{}", r.desc);
    assert!(r.stderr.contains("without \"when\""), "{}", r.desc);
    assert_eq!(t.git_out(&["rev-parse", "main"]), before);
    t.fsck();
}

/// The actor and initiator of every record on `commit` (kind:id, initiator).
fn provenance_on(t: &TestEnv, commit: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = t
        .git_out(&["notes", "--ref=tabellio/evidence", "show", commit])
        .lines()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                format!(
                    "{}:{}",
                    r["actor"]["kind"].as_str().unwrap_or("-"),
                    r["actor"]["id"].as_str().unwrap_or("-")
                ),
                r["initiator"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    out.dedup();
    out
}

/// Not only `finish`: the records `land` writes for a restacked run name its actor and
/// initiator, a stack of several actors' runs names whoever landed it, and `validate` names
/// whoever validated.
#[test]
fn every_evidence_writer_records_who_made_the_change() {
    let t = readme_main();
    let agent = |id: &str, who: &str, file: &str| {
        t.tab(&[
            "start",
            id,
            "--task",
            "t",
            "--base",
            "main",
            "--actor",
            &format!("agent:{who}"),
            "--initiator",
            "ada@example.com",
        ])
        .ok();
        t.commit_file_in(&t.worktree(id), file, "x\n");
        t.tab(&["finish", id]).ok();
    };
    let me = (
        "human:committer@example.com".to_string(),
        "committer@example.com".to_string(),
    );
    let bot = (
        "agent:bot@example.com".to_string(),
        "ada@example.com".to_string(),
    );

    // One agent's two runs: the restacked one's records are the agent's.
    agent("a1", "bot@example.com", "a1.txt");
    agent("a2", "bot@example.com", "a2.txt");
    let validated = t.git_out(&["rev-parse", "tabellio/a2"]);
    t.tab(&["land", "a1", "a2", "--target", "main"]).ok();
    let restacked = t.git_out(&["rev-parse", "main"]);
    assert_ne!(restacked, validated);
    assert_eq!(provenance_on(&t, &restacked), std::slice::from_ref(&bot));

    // Two agents' runs stacked together: the records name the first agent, never the person
    // who landed them (whose key would prove a person made the change).
    agent("b1", "bot@example.com", "b1.txt");
    agent("b2", "other@example.com", "b2.txt");
    t.tab(&["land", "b1", "b2", "--target", "main"]).ok();
    let mixed = t.git_out(&["rev-parse", "main"]);
    assert_eq!(provenance_on(&t, &mixed), std::slice::from_ref(&bot));

    // A person's run under an agent's: the agent's, whatever the order.
    t.tab(&["start", "h1", "--task", "t", "--base", "main"])
        .ok();
    t.commit_file_in(&t.worktree("h1"), "h1.txt", "x\n");
    t.tab(&["finish", "h1"]).ok();
    agent("c1", "bot@example.com", "c1.txt");
    t.tab(&["land", "h1", "c1", "--target", "main"]).ok();
    let person_then_agent = t.git_out(&["rev-parse", "main"]);
    assert_eq!(
        provenance_on(&t, &person_then_agent),
        std::slice::from_ref(&bot)
    );

    // Two people's runs stacked together: whoever landed them vouches for the mix.
    t.tab(&["start", "p1", "--task", "t", "--base", "main"])
        .ok();
    t.commit_file_in(&t.worktree("p1"), "p1.txt", "x\n");
    t.tab(&["finish", "p1"]).ok();
    t.tab(&[
        "start",
        "p2",
        "--task",
        "t",
        "--base",
        "main",
        "--actor",
        "human:grace@example.com",
    ])
    .ok();
    t.commit_file_in(&t.worktree("p2"), "p2.txt", "x\n");
    t.tab(&["finish", "p2"]).ok();
    t.tab(&["land", "p1", "p2", "--target", "main"]).ok();
    let people = t.git_out(&["rev-parse", "main"]);
    assert_eq!(provenance_on(&t, &people), std::slice::from_ref(&me));

    // validate: whoever validates.
    t.git(&["checkout", "-q", "main"]).ok();
    t.commit_file_in(&t.repo, "hand.txt", "by hand\n");
    t.tab(&["validate", "HEAD"]).ok();
    assert_eq!(provenance_on(&t, &t.git_out(&["rev-parse", "HEAD"])), [me]);
    t.fsck();
}

/// `promote --remote` and `land --remote` note the verification summary of the tip they moved
/// the remote's target to, and push it there: the server's `export --vsa` prints it and its
/// `verify` judges it.
#[test]
fn landings_on_a_remote_push_their_verification_summary() {
    let server = TestEnv::bare_server();
    let a = TestEnv::clone_of(&server);
    a.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
    a.git(&["push", "-q"]).ok();
    server.tab(&["init", "--hooks"]).ok();
    let summary_on_server = |what: &str| {
        let main = server.git_out(&["rev-parse", "main"]);
        let (code, v) = server.tab_json(&["export", "--vsa", "main"]);
        assert_eq!(code, 0, "{what}: {v}");
        use base64ct::{Base64, Encoding};
        let body = Base64::decode_vec(v["document"]["payload"].as_str().unwrap()).unwrap();
        let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            st["subject"][0]["digest"]["gitCommit"],
            main.as_str(),
            "{what}: {st}"
        );
        let (code, v) = server.tab_json(&["verify", "main"]);
        assert_eq!(code, 0, "{what}: {v}");
        assert_eq!(v["commits"][0]["commit"], main.as_str(), "{what}: {v}");
        assert_eq!(v["commits"][0]["vsa"][0]["verdict"], "valid", "{what}: {v}");
        assert_eq!(
            v["commits"][0]["vsa"][0]["levels"][1], "SLSA_SOURCE_LEVEL_2",
            "{what}: {v}"
        );
    };

    a.start_with_commit("p1", "p1.txt", "x\n");
    a.tab(&["finish", "p1"]).ok();
    let (code, v) = a.tab_json(&["promote", "p1", "--remote", "origin"]);
    assert_eq!(code, 0, "{v}");
    assert!(v.get("summary_warning").is_none(), "{v}");
    summary_on_server("promote --remote");

    for id in ["m1", "m2"] {
        a.start_with_commit(id, &format!("{id}.txt"), "x\n");
        a.tab(&["finish", id]).ok();
    }
    let (code, j) = a.tab_json(&["land", "m1", "m2", "--remote", "origin"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["new"], server.git_out(&["rev-parse", "main"]).as_str());
    summary_on_server("land --remote");
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
    a.fsck();
}

/// Note on `commit` the summary `envelope` with its Statement edited by `edit` (its signatures
/// kept), as anyone who can push notes could.
fn put_summary(
    t: &TestEnv,
    envelope: &serde_json::Value,
    commit: &str,
    edit: impl Fn(&mut serde_json::Value),
) {
    use base64ct::{Base64, Encoding};
    let payload = Base64::decode_vec(envelope["payload"].as_str().unwrap()).unwrap();
    let mut st: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    edit(&mut st);
    let mut forged = envelope.clone();
    forged["payload"] = Base64::encode_string(st.to_string().as_bytes()).into();
    let file = t.path().join("vsa.json");
    write_file(&file, &format!("{forged}\n"));
    t.git(&[
        "notes",
        "--ref=tabellio/vsa",
        "add",
        "-f",
        "-F",
        s(&file),
        commit,
    ])
    .ok();
}

/// A summary is checked, not believed: `verify` recomputes, under the policy the summary names,
/// the levels the evidence earns and the records it rests on. An unsigned summary edited to
/// claim a level the evidence does not earn, or to rest on a record that is not there, fails
/// the commit; the genuine one verifies.
#[test]
fn a_summary_claiming_more_than_the_evidence_earns_fails_verify() {
    use base64ct::{Base64, Encoding};
    let t = readme_main();
    finished_agent_run(&t, "s", "s.txt");
    t.tab(&["promote", "s"]).ok();
    let main = t.git_out(&["rev-parse", "main"]);
    let (_, v) = t.tab_json(&["export", "--vsa", "main"]);
    let envelope = v["document"].clone();
    assert_eq!(envelope["signatures"], serde_json::json!([]), "{v}");
    let st: serde_json::Value =
        serde_json::from_slice(&Base64::decode_vec(envelope["payload"].as_str().unwrap()).unwrap())
            .unwrap();
    assert_eq!(
        st["predicate"]["verifiedLevels"],
        serde_json::json!(["SLSA_SOURCE_LEVEL_1", "SLSA_SOURCE_LEVEL_2"])
    );
    let (code, v) = t.tab_json(&["verify", "main"]);
    assert_eq!(
        (code, &v["commits"][0]["vsa"][0]["verdict"]),
        (0, &"valid".into()),
        "{v}"
    );

    let put = |edit: &dyn Fn(&mut serde_json::Value)| put_summary(&t, &envelope, &main, edit);
    put(&|st| {
        st["predicate"]["verifiedLevels"] = serde_json::json!([
            "SLSA_SOURCE_LEVEL_1",
            "SLSA_SOURCE_LEVEL_2",
            "SLSA_SOURCE_LEVEL_3"
        ])
    });
    let (code, v) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 1, "{v}");
    let vsa = &v["commits"][0]["vsa"][0];
    assert_eq!(vsa["verdict"], "invalid", "{v}");
    assert!(
        vsa["reason"]
            .as_str()
            .unwrap()
            .contains("SLSA_SOURCE_LEVEL_3"),
        "{v}"
    );
    put(&|st| st["predicate"]["inputAttestations"][0]["digest"]["sha256"] = "0".repeat(64).into());
    let (code, v) = t.tab_json(&["verify", "main"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["commits"][0]["vsa"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("not noted"));
    put(&|_| {});
    t.tab(&["verify", "main"]).ok();
}

/// Under `trust`, `finish` skips a check asked only of agents when the records it signs prove a
/// person made the change (the person's own key, declared human), and runs it when they do not
/// (another person's key signs): the gate then asks for it, and it is there. Either way the run
/// promotes; no hint sends it back to a `finish` that would skip the check again.
#[test]
fn finish_skips_a_check_asked_of_agents_only_when_its_signature_proves_a_person() {
    let k = three_keys_with(|p| {
        p["checks"]["scan"] =
            serde_json::json!({"argv": ["true"], "when": {"actor.kind": "agent"}});
        p["required"] = serde_json::json!(["readme", "scan"]);
    });
    let t = &k.t;
    let who = format!("human:{INITIATOR}");
    let checks_of = |id: &str| -> Vec<String> {
        let head = t.git_out(&["rev-parse", &format!("tabellio/{id}")]);
        let mut names: Vec<String> = k
            .evidence(&head)
            .iter()
            .map(|r| r["check"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    k.start_as("own", &who, &[], ("own.txt", "own\n"));
    t.tab(&["finish", "own", "--sign-key", s(&k.initiator)])
        .ok();
    assert_eq!(checks_of("own"), ["readme"]);
    t.tab(&["promote", "own"]).ok();

    k.start_as("vouched", &who, &[], ("vouched.txt", "v\n"));
    t.tab(&["finish", "vouched", "--sign-key", s(&k.reviewer)])
        .ok();
    assert_eq!(checks_of("vouched"), ["readme", "scan"]);
    t.tab(&["promote", "vouched"]).ok();
    t.tab(&["verify", "--policy-from", "main~1", "main"]).ok();
}
