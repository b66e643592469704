//! The fleet from outside: one bare repository as the server, validators in separate clones
//! with their own signing keys, landers in other clones, all real processes. What `lanes`
//! shows on one repository, shown across machines: signed evidence the server's hook and
//! `verify` accept, checks overlapping across validators, and landers racing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::lanes::{converged, finish, fleet, remote_worker, terminate, Kids};
use crate::trust::{keygen, public};
use crate::util::*;

/// A check (python) that appends `start <cwd> <time>` and `end <cwd> <time>` to `log`, sleeping
/// `secs` between them, once `<log>.armed` exists (before, it passes at once). The first execution also holds (at most 60 s) until a second one has
/// started: a validator runs one check at a time, so the second is another validator's, and
/// the two overlap however late that validator came up on a busy machine.
fn logging_check(log: &Path, secs: f64) -> String {
    format!(
        "import os, time, sys\nif not os.path.exists({armed:?}):\n    sys.exit(0)\nopen({log:?}, 'a').write('start %s %f\\n' % (os.getcwd(), time.time()))\ntime.sleep({secs})\nuntil = time.time() + 60\nwhile open({log:?}).read().count('start') < 2 and time.time() < until:\n    time.sleep(0.05)\nopen({log:?}, 'a').write('end %s %f\\n' % (os.getcwd(), time.time()))",
        log = log.display().to_string(),
        armed = format!("{}.armed", log.display())
    )
}

/// One execution in the log: where it ran and when.
#[derive(Debug)]
struct Execution {
    cwd: String,
    start: f64,
    end: f64,
}

fn executions(log: &Path) -> Vec<Execution> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut open: Vec<(String, f64)> = Vec::new();
    let mut done = Vec::new();
    for line in text.lines() {
        let mut parts = line.rsplitn(2, ' ');
        let (time, rest) = (parts.next().unwrap(), parts.next().unwrap());
        let time: f64 = time.parse().unwrap();
        if let Some(cwd) = rest.strip_prefix("start ") {
            open.push((cwd.to_string(), time));
        } else if let Some(cwd) = rest.strip_prefix("end ") {
            let i = open.iter().position(|(c, _)| c == cwd).expect("a start");
            let (cwd, start) = open.remove(i);
            done.push(Execution {
                cwd,
                start,
                end: time,
            });
        }
    }
    done
}

/// A `worker --remote origin` in `clone` signing with `key`, polling often.
fn signed_worker(clone: &TestEnv, id: &str, key: &Path) -> std::process::Child {
    remote_worker(clone, id, &["--sign-key", key.to_str().unwrap()])
}

/// The evidence records noted on `object` in `repo`'s notes (none when there is no note).
fn records_on(repo: &TestEnv, object: &str) -> Vec<Value> {
    let r = repo.git(&["notes", "--ref=tabellio/evidence", "show", object]);
    r.stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A server (with the server hooks) whose `main` requires `count`, signed by an allowed signer;
/// clone `a` (the agents' and the lander's) signs with `agent`, validators `b` and `c` with
/// their own keys; four finished runs queued. Returns the log the check writes and the
/// validators' keys.
struct SignedFleet {
    server: TestEnv,
    a: TestEnv,
    b: TestEnv,
    c: TestEnv,
    log: PathBuf,
    keys: [PathBuf; 2],
}

fn signed_fleet(runs: &[&str]) -> SignedFleet {
    let (server, a, b) = TestEnv::server_and_two_clones();
    let c = TestEnv::clone_of(&server);
    let agent = keygen(&a.path().join("keys"), "agent");
    let (kb, kc) = (
        keygen(&b.path().join("keys"), "validator-b"),
        keygen(&c.path().join("keys"), "validator-c"),
    );
    let log = a.path().join("checks.log");
    a.write(
        ".tabellio/allowed_signers",
        &format!(
            "agent@example.com namespaces=\"tabellio\" {}\nvb@example.com namespaces=\"tabellio\" {}\nvc@example.com namespaces=\"tabellio\" {}\n",
            public(&agent),
            public(&kb),
            public(&kc)
        ),
    );
    let mut p: Value = serde_json::from_str(&policy(&[(
        "count",
        &["python3", "-c", &logging_check(&log, 1.0)],
    )]))
    .unwrap();
    p["trust"] = serde_json::json!({
        "allowed_signers": ".tabellio/allowed_signers",
        "require_signed": "*",
    });
    a.commit_policy(&p.to_string());
    a.git(&["push", "-q"]).ok();
    server
        .tab_in(&server.repo, &["hooks", "install", "--server"])
        .ok();
    for id in runs {
        a.start_with_commit(id, &format!("{id}.txt"), "x\n");
        a.tab(&["finish", id, "--sign-key", agent.to_str().unwrap()])
            .ok();
    }
    let mut enqueue = vec!["enqueue"];
    enqueue.extend_from_slice(runs);
    a.tab(&enqueue).ok();
    a.tab(&["sync"]).ok();
    write_file(Path::new(&format!("{}.armed", log.display())), "");
    SignedFleet {
        server,
        a,
        b,
        c,
        log,
        keys: [kb, kc],
    }
}

#[test]
fn evidence_signed_by_two_validators_lands_through_the_hook_and_verifies_under_require_signed() {
    let SignedFleet {
        server,
        a,
        b,
        c,
        log,
        keys,
    } = signed_fleet(&["s0", "s1", "s2", "s3"]);
    let lander = a.spawn_tab(&[
        "--json", "land", "--lanes", "2", "--remote", "origin", "--target", "main",
    ]);
    let published = || {
        server.git_out(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/tabellio/candidates/",
        ])
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while published().lines().count() < 2 {
        assert!(std::time::Instant::now() < until, "no candidates published");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A validator without a key the policy allows refuses before claiming or running
    // anything: its records could not count.
    let before = server.snapshot();
    let keyless = c.tab(&["worker", "--remote", "origin", "--once", "--id", "keyless"]);
    assert_eq!(keyless.code, 3, "{}", keyless.desc);
    assert!(
        keyless.stderr.contains("requires signed evidence"),
        "{}",
        keyless.desc
    );
    assert_eq!(
        server.snapshot(),
        before,
        "a refused worker wrote something"
    );
    assert!(executions(&log).is_empty(), "a refused worker ran a check");
    let kids = Kids(vec![
        signed_worker(&b, "vb", &keys[0]),
        signed_worker(&c, "vc", &keys[1]),
    ]);
    let exit = finish(lander, "the lander");
    terminate(kids);
    let j: Value = serde_json::from_str(exit.stdout.trim()).unwrap_or(Value::Null);
    let code = exit.code;
    assert_eq!(code, 0, "{j}");
    let files = server.git_out(&["ls-tree", "--name-only", "main"]);
    for f in ["s0.txt", "s1.txt", "s2.txt", "s3.txt"] {
        assert!(files.contains(f), "{files}");
    }
    // The tip's tree was validated by a validator, signed with its key; the lander signed
    // nothing it landed on.
    let tree = server.git_out(&["rev-parse", "main^{tree}"]);
    let ran: Vec<Value> = records_on(&server, &tree)
        .into_iter()
        .filter(|r| r["reused_from"].is_null())
        .collect();
    assert!(!ran.is_empty(), "no record on the tip's tree");
    for r in &ran {
        let who = r["signature"]["principal"].as_str().unwrap_or("unsigned");
        assert!(
            who == "vb@example.com" || who == "vc@example.com",
            "signed by {who}: {r}"
        );
    }
    // Both validators ran checks, at the same time.
    let runs = executions(&log);
    let (in_b, in_c) = (
        b.path().display().to_string(),
        c.path().display().to_string(),
    );
    let of =
        |dir: &str| -> Vec<&Execution> { runs.iter().filter(|e| e.cwd.starts_with(dir)).collect() };
    let (by_b, by_c) = (of(&in_b), of(&in_c));
    assert_eq!(
        by_b.len() + by_c.len(),
        runs.len(),
        "a check ran outside the validators: {runs:?}"
    );
    let overlap = by_b
        .iter()
        .any(|x| by_c.iter().any(|y| x.start < y.end && y.start < x.end));
    assert!(overlap, "the validators' checks never overlapped: {runs:?}");
    // `verify` in a fresh clone, from what the server holds, under the policy's trust.
    let d = TestEnv::clone_of(&server);
    d.tab(&["sync"]).ok();
    let (code, v) = d.tab_json(&["verify", "origin/main"]);
    assert_eq!(code, 0, "{v}");
    let signers: Vec<&str> = v["commits"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["signer"]["principal"].as_str())
        .collect();
    assert!(
        signers
            .iter()
            .all(|s| *s == "vb@example.com" || *s == "vc@example.com")
            && !signers.is_empty(),
        "{v}"
    );
    // The server's hook judged the landing push: it still refuses a tip without such evidence.
    d.git(&["switch", "-q", "-c", "side", "origin/main"]).ok();
    d.commit_file_in(&d.repo, "unvalidated.txt", "x\n");
    let pushed = d.git(&["push", "origin", "side:main"]);
    assert_ne!(pushed.code, 0, "{}", pushed.desc);
    server.git(&["fsck", "--strict", "--no-progress"]).ok();
}

#[test]
fn two_landers_in_two_clones_at_once_land_every_run_once() {
    const LAND: [&str; 8] = [
        "--json", "land", "--lanes", "2", "--remote", "origin", "--target", "main",
    ];
    let (server, a, b, kids) = fleet();
    let base = server.git_out(&["rev-parse", "main"]);
    // Both start together; every move either makes is a compare-and-swap on the server, and
    // the one that loses reads the refs again.
    let landers = [a.spawn_tab(&LAND), b.spawn_tab(&LAND)];
    let exits: Vec<_> = landers.into_iter().map(|l| finish(l, "a lander")).collect();
    terminate(kids);
    for e in &exits {
        assert_eq!(e.code, 0, "{}\n{}", e.stdout, e.stderr);
    }
    // Between them they landed each run once; a run one of them landed the other saw landed.
    let landed_by = |e: &Exit| -> Vec<String> {
        let j: Value = serde_json::from_str(e.stdout.trim()).unwrap();
        j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["result"] == "landed")
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect()
    };
    let mut all: Vec<String> = exits.iter().flat_map(landed_by).collect();
    all.sort();
    assert_eq!(
        all,
        ["q0", "q1", "q2", "q3"],
        "each run landed by exactly one lander"
    );
    converged(&server, &base, "two landers");
}
