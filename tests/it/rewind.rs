//! `rewind`: a run's worktree and branch back to a checkpoint — tracked and untracked files,
//! ignored and secret-named files untouched — driven as an agent would, by random (seeded)
//! sequences of edits, checkpoints and rewinds checked against a model of the worktree.

use std::collections::BTreeMap;
use std::path::Path;

use crate::util::{write_file, TestEnv};

/// Files by path (relative, `/`-separated) and content.
type Files = BTreeMap<String, String>;

/// Sequences run per ref format: `TABELLIO_REWIND_SEQUENCES`, else 20.
fn sequences() -> u64 {
    std::env::var("TABELLIO_REWIND_SEQUENCES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20)
}

/// The seed of the first sequence: `TABELLIO_REWIND_SEED` reproduces a failure it printed.
fn first_seed() -> u64 {
    std::env::var("TABELLIO_REWIND_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x7ab3_11e0)
}

/// xorshift64*: a few lines, deterministic for a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Paths the agent writes: tracked once committed, untracked until then.
const PLAIN: &[&str] = &["a.txt", "b.txt", "src/c.txt", "src/deep/d.txt", "new/e.txt"];
/// Paths `.gitignore` ignores (`*.log`, `build/`).
const IGNORED: &[&str] = &["x.log", "src/y.log", "build/out.bin"];
/// A path with a secret name: never committed here, never saved, never removed.
const SECRET: &str = ".env";

/// What is on disk in `root`, outside `.git`, split into (plain, ignored, secret).
fn read_tree(root: &Path) -> (Files, Files, Files) {
    fn walk(root: &Path, dir: &Path, out: &mut Files) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_str()
                .expect("utf-8")
                .to_string();
            if rel == ".git" {
                continue;
            }
            if entry.file_type().expect("type").is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&path).expect("read file"));
            }
        }
    }
    let mut all = Files::new();
    walk(root, root, &mut all);
    let (mut plain, mut ignored, mut secret) = (Files::new(), Files::new(), Files::new());
    for (path, content) in all {
        if path == SECRET {
            secret.insert(path, content);
        } else if IGNORED.contains(&path.as_str()) {
            ignored.insert(path, content);
        } else {
            plain.insert(path, content);
        }
    }
    (plain, ignored, secret)
}

/// One checkpoint as the model knows it: the files of its commit and of its snapshot.
#[derive(Clone)]
struct Checkpoint {
    commit: Files,
    snapshot: Files,
}

/// What the sequences did, so a change to the generator cannot quietly test nothing.
#[derive(Default)]
struct Tally {
    rewinds: usize,
    forced: usize,
}

/// One random sequence on run `run`, from `seed`.
fn sequence(t: &TestEnv, run: &str, seed: u64, tally: &mut Tally) {
    let mut rng = Rng::new(seed);
    let ctx = format!("run {run}, seed {seed} (TABELLIO_REWIND_SEED={seed})");
    t.tab(&["start", run, "--task", "rewind me"]).ok();
    let wt = t.worktree(run);
    let (base_files, _, _) = read_tree(&wt);
    let mut m = Model {
        head: base_files,
        checkpoints: Vec::new(),
        saved: Vec::new(),
    };
    for step in 0..14 {
        let ctx = format!("{ctx}, step {step}");
        match rng.below(10) {
            // Edit: write or delete a plain file, write an ignored or a secret-named one.
            0..=4 => {
                for _ in 0..=rng.below(3) {
                    match rng.below(6) {
                        0..=2 => {
                            let p = rng.pick(PLAIN);
                            write_file(&wt.join(p), &format!("{p} {}\n", rng.next() % 1000));
                        }
                        3 => {
                            let p = rng.pick(PLAIN);
                            let _ = std::fs::remove_file(wt.join(p));
                        }
                        4 => {
                            let p = rng.pick(IGNORED);
                            write_file(&wt.join(p), &format!("ignored {}\n", rng.next() % 1000));
                        }
                        _ => write_file(&wt.join(SECRET), &format!("TOKEN={}\n", rng.next())),
                    }
                }
            }
            // Commit everything but the secret, and checkpoint.
            5..=7 => {
                let _ = std::fs::remove_file(wt.join(SECRET));
                t.git_in(&wt, &["add", "-A"]).ok();
                if t.git_in(&wt, &["diff", "--cached", "--quiet"]).code == 0 {
                    continue;
                }
                t.git_in(&wt, &["commit", "-q", "-m", &format!("step {step}")])
                    .ok();
                t.tab_in(&wt, &["checkpoint"]).ok();
                let (plain, _, _) = read_tree(&wt);
                m.head = plain.clone();
                m.checkpoints.push(Checkpoint {
                    commit: plain.clone(),
                    snapshot: plain,
                });
            }
            // Rewind to a random checkpoint.
            _ => {
                if m.checkpoints.is_empty() {
                    continue;
                }
                let k = 1 + rng.below(m.checkpoints.len());
                m.rewind_and_check(t, run, &wt, k, &ctx);
                tally.rewinds += 1;
            }
        }
    }
    tally.forced += m.saved.len();
    // Nothing `--force` saved is lost: every saved checkpoint comes back exactly.
    for k in m.saved.clone() {
        let ctx = format!("{ctx}, saved checkpoint {k} at the end");
        m.rewind_and_check(t, run, &wt, k, &ctx);
    }
}

/// The model of one run: the files at its head commit, its checkpoints, and the numbers of
/// those `--force` saved.
struct Model {
    head: Files,
    checkpoints: Vec<Checkpoint>,
    saved: Vec<usize>,
}

impl Model {
    /// Rewind `run` to checkpoint `k` (with `--force` when the worktree has uncommitted work,
    /// after checking that without it the rewind is refused and writes nothing), then check the
    /// worktree against the model.
    fn rewind_and_check(&mut self, t: &TestEnv, run: &str, wt: &Path, k: usize, ctx: &str) {
        let (plain, ignored, secret) = read_tree(wt);
        let dirty = plain != self.head;
        let number = k.to_string();
        let args: Vec<&str> = if dirty {
            let before = t.snapshot();
            let refused = t.tab(&["rewind", run, &number]);
            refused.code(3);
            assert!(
                refused.stderr.contains("--force"),
                "{ctx}\n{}",
                refused.desc
            );
            assert_eq!(t.snapshot(), before, "{ctx}: a refused rewind wrote");
            assert_eq!(
                read_tree(wt).0,
                plain,
                "{ctx}: a refused rewind touched files"
            );
            vec!["--json", "rewind", "--force", run, &number]
        } else {
            vec!["--json", "rewind", run, &number]
        };
        let out = t.tab(&args);
        out.ok();
        let json = out.json();
        if dirty {
            self.checkpoints.push(Checkpoint {
                commit: self.head.clone(),
                snapshot: plain.clone(),
            });
            let n = self.checkpoints.len();
            assert_eq!(json["saved"], n, "{ctx}: {}", out.desc);
            self.saved.push(n);
        } else {
            assert!(json["saved"].is_null(), "{ctx}: {}", out.desc);
        }
        let want = self.checkpoints[k - 1].clone();
        let (now, ignored_now, secret_now) = read_tree(wt);
        assert_eq!(now, want.snapshot, "{ctx}: worktree after rewind to {k}");
        assert_eq!(ignored_now, ignored, "{ctx}: ignored files changed");
        assert_eq!(secret_now, secret, "{ctx}: the secret-named file changed");
        if json["rewound"] == true {
            assert_eq!(json["run"]["rewound"]["checkpoint"], k, "{ctx}");
            assert_eq!(json["run"]["state"], "active", "{ctx}");
        } else {
            // Already there: a clean worktree at the checkpoint's own commit.
            assert!(!dirty, "{ctx}: {}", out.desc);
            assert_eq!(json["from"], json["commit"], "{ctx}");
        }
        // The index is the checkpoint's commit: saved work comes back uncommitted, nothing staged.
        let head_commit = t.git_out_in(wt, &["rev-parse", "HEAD"]);
        assert_eq!(json["commit"], head_commit.as_str(), "{ctx}");
        t.git_in(wt, &["diff", "--cached", "--quiet"]).ok();
        self.head = want.commit;
    }
}

#[test]
fn random_sequences_restore_every_checkpoint_exactly() {
    let t = TestEnv::new();
    t.write(".gitignore", "*.log\nbuild/\n");
    t.git(&["add", ".gitignore"]).ok();
    t.git(&["commit", "-q", "-m", "ignore logs and builds"])
        .ok();
    let seed = first_seed();
    let mut tally = Tally::default();
    for i in 0..sequences() {
        sequence(&t, &format!("r{i}"), seed + i, &mut tally);
    }
    if sequences() >= 20 {
        assert!(
            tally.rewinds >= 20 && tally.forced >= 5,
            "the sequences rewound {} times, {} with --force",
            tally.rewinds,
            tally.forced
        );
    }
    t.fsck();
    // The ledger is a first-parent chain of transitions stock git reads.
    let log = t.git_out(&[
        "log",
        "--first-parent",
        "--format=%s",
        "refs/tabellio/runs/r0",
    ]);
    assert!(log.lines().all(|l| l.starts_with("tabellio: ")), "{log}");
}

/// Bad input is refused with its exit code and a hint, and writes nothing: an unknown run, a
/// malformed, unknown or ambiguous checkpoint, a finished run, and no checkpoint at all.
#[test]
fn bad_input_writes_nothing() {
    let t = TestEnv::new();
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let wt = t.worktree("r1");
    let no_checkpoint = t.tab(&["rewind", "r1", "1"]);
    no_checkpoint.code(5);
    assert!(
        no_checkpoint.stderr.contains("no checkpoints yet"),
        "{}",
        no_checkpoint.desc
    );
    write_file(&wt.join("a.txt"), "one\n");
    t.git_in(&wt, &["add", "-A"]).ok();
    t.git_in(&wt, &["commit", "-q", "-m", "one"]).ok();
    t.tab(&["checkpoint", "r1"]).ok();
    let first = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
    write_file(&wt.join("a.txt"), "two\n");
    t.tab(&["rewind", "--force", "r1", "1"]).ok();
    let before = t.snapshot();
    for (args, code, says) in [
        (vec!["rewind", "nope", "1"], 5, "no run"),
        (vec!["rewind", "r1", "3"], 5, "no checkpoint 3"),
        (vec!["rewind", "r1", "HEAD~1"], 2, "names no checkpoint"),
        (vec!["rewind", "r1"], 2, "checkpoint"),
        // Checkpoint 2 is the work `--force` saved, on checkpoint 1's commit.
        (vec!["rewind", "r1", &first[..12]], 2, "ambiguous"),
    ] {
        let r = t.tab(&args);
        r.code(code);
        assert!(r.stderr.contains(says), "{}", r.desc);
        assert!(r.stderr.contains("hint:"), "{}", r.desc);
        assert_eq!(t.snapshot(), before, "{args:?} wrote");
    }
    // The saved work comes back by its number; the plain checkpoint by a unique prefix.
    t.tab(&["rewind", "r1", "2"]).ok();
    assert_eq!(std::fs::read_to_string(wt.join("a.txt")).unwrap(), "two\n");
    t.tab(&["abandon", "r1"]).ok();
    let before = t.snapshot();
    let finished = t.tab(&["rewind", "--force", "r1", "1"]);
    finished.code(3);
    assert_eq!(t.snapshot(), before, "a finished run was rewound");
    // `log` numbers the checkpoints and names the rewinds.
    let log = t.tab(&["log", "r1"]);
    log.ok();
    assert!(log.stdout.contains("[checkpoint 2]"), "{}", log.desc);
    assert!(log.stdout.contains("[to checkpoint 2]"), "{}", log.desc);
    let graph = t.tab(&["log", "--graph", "r1"]);
    assert!(
        graph.stdout.contains("rewound to checkpoint 1 from"),
        "{}",
        graph.desc
    );
    t.fsck();
}
