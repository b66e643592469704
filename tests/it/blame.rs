//! `blame`: each line → commit (git's blame) → the run that landed it → actor and initiator,
//! over a corpus of rewrites made with stock git and with tabellio: runs rebased and fixed up
//! before finishing, `land --squash`, `land` restacking one run onto another, a forge's
//! `merge --squash`, and a forge's squash onto an integration branch merged into `main` with an
//! outer merge commit.

use std::collections::HashMap;
use std::path::Path;

use crate::util::*;

/// How a case's run reaches `main`.
#[derive(Debug, Clone, Copy)]
enum Rewrite {
    /// Two commits rewritten by `git rebase --force-rebase` onto the same base, promoted.
    Rebase,
    /// A commit and a `--fixup` of it, autosquashed by `git rebase -i`, promoted.
    Fixup,
    /// `land --squash`.
    TabellioSquash,
    /// A forge's squash: `git merge --squash` of the run branch onto `main` in a scratch
    /// worktree, committed and pushed to `main`; the run stays `completed`.
    ForgeSquash,
    /// A forge's squash onto an integration branch, merged into `main` with `git merge --no-ff`.
    OuterMerge,
    /// Two runs from the same tip, landed together: the second is restacked onto the first.
    Restack,
}

const REWRITES: [Rewrite; 6] = [
    Rewrite::Rebase,
    Rewrite::Fixup,
    Rewrite::TabellioSquash,
    Rewrite::ForgeSquash,
    Rewrite::OuterMerge,
    Rewrite::Restack,
];

struct Corpus {
    t: TestEnv,
    /// Per file, per line (from 1): the run expected to own it.
    expected: HashMap<String, Vec<String>>,
}

impl Corpus {
    fn new() -> Corpus {
        let t = TestEnv::ref_only();
        t.git(&["checkout", "-q", "main"]).ok();
        t.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
        t.git(&["checkout", "-q", "elsewhere"]).ok();
        Corpus {
            t,
            expected: HashMap::new(),
        }
    }
}

/// Start `run` from `base` as an agent, initiated by ada.
fn start(t: &TestEnv, run: &str, base: &str) -> std::path::PathBuf {
    let actor = format!("agent:{run}@example.com");
    t.tab(&[
        "start",
        run,
        "--task",
        "t",
        "--base",
        base,
        "--actor",
        &actor,
        "--initiator",
        "ada@example.com",
    ])
    .ok();
    t.worktree(run)
}

/// Commit `lines` as `file` in `wt` (the run `run` owns them in `expected`), and, when `steal`
/// names an earlier case's file, rewrite its second line too (the run then owns that line).
fn write(
    (t, expected): (&TestEnv, &mut HashMap<String, Vec<String>>),
    (wt, run): (&Path, &str),
    file: &str,
    lines: &[&str],
    steal: Option<&str>,
) {
    write_file(&wt.join(file), &format!("{}\n", lines.join("\n")));
    let owners = expected.entry(file.to_string()).or_default();
    owners.resize(lines.len(), String::new());
    for owner in owners.iter_mut() {
        *owner = run.to_string();
    }
    if let Some(other) = steal {
        let path = wt.join(other);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut l: Vec<String> = text.lines().map(str::to_string).collect();
        l[1] = format!("{run} rewrote this");
        write_file(&path, &format!("{}\n", l.join("\n")));
        expected.get_mut(other).unwrap()[1] = run.to_string();
    }
    t.commit_all_in(wt, &format!("{run}: {file}"));
}

/// Move `branch` to the commit a scratch worktree at it makes with the `git` commands `steps`,
/// as a forge's merge button would.
fn forge(t: &TestEnv, branch: &str, steps: &[&[&str]]) {
    let scratch = t.path().join("forge");
    let old = t.git_out(&["rev-parse", branch]);
    t.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        scratch.to_str().unwrap(),
        &old,
    ])
    .ok();
    for step in steps {
        t.git_in(&scratch, step).ok();
    }
    let new = t.git_out_in(&scratch, &["rev-parse", "HEAD"]);
    t.git(&["update-ref", &format!("refs/heads/{branch}"), &new, &old])
        .ok();
    t.git(&["worktree", "remove", "--force", scratch.to_str().unwrap()])
        .ok();
}

/// `git merge --squash` of run `run`'s branch onto `branch` and a commit, as a forge's button.
fn forge_squash(t: &TestEnv, branch: &str, run: &str, i: usize) {
    let squash = ["merge", "-q", "--squash", &format!("tabellio/{run}")].map(str::to_string);
    let commit = ["commit", "-q", "-m", &format!("{run} (#{i})")].map(str::to_string);
    let steps: Vec<Vec<&str>> = [&squash, &commit]
        .iter()
        .map(|s| s.iter().map(String::as_str).collect())
        .collect();
    let steps: Vec<&[&str]> = steps.iter().map(Vec::as_slice).collect();
    forge(t, branch, &steps);
}

impl Corpus {
    /// One case: run `c<i>` (and for a restack `c<i>b`) reaching `main` by `how`.
    fn case(&mut self, i: usize, how: Rewrite) {
        let (t, expected) = (&self.t, &mut self.expected);
        let run = format!("c{i}");
        let file = format!("{run}.txt");
        let (l1, l2, l3) = (
            format!("{run} one"),
            format!("{run} two"),
            format!("{run} three"),
        );
        // Every seventh case also rewrites a line an earlier case wrote.
        let steal = (i % 7 == 6).then(|| format!("c{}.txt", i - 5));
        let base = match how {
            Rewrite::OuterMerge => {
                let int = format!("int-{i}");
                t.git(&["branch", &int, "main"]).ok();
                int
            }
            _ => "main".to_string(),
        };
        let wt = start(t, &run, &base);
        let fork = t.git_out_in(&wt, &["rev-parse", "HEAD"]);
        if let Rewrite::Restack = how {
            let second = format!("{run}b");
            let wt2 = start(t, &second, "main");
            write(
                (t, expected),
                (&wt, &run),
                &file,
                &[&l1, &l2],
                steal.as_deref(),
            );
            let file2 = format!("{second}.txt");
            write((t, expected), (&wt2, &second), &file2, &[&l1, &l3], None);
            t.tab(&["finish", &run]).ok();
            t.tab(&["finish", &second]).ok();
            t.tab(&["land", &run, &second, "--target", "main"]).ok();
            return;
        }
        // Two commits; a fixup case's first has a typo its fixup mends.
        let first = if let Rewrite::Fixup = how {
            "typo"
        } else {
            l2.as_str()
        };
        write((t, expected), (&wt, &run), &file, &[&l1, first], None);
        write(
            (t, expected),
            (&wt, &run),
            &file,
            &[&l1, &l2, &l3],
            steal.as_deref(),
        );
        match how {
            Rewrite::Rebase => {
                t.git_in(&wt, &["rebase", "-q", "--force-rebase", &fork])
                    .ok();
            }
            Rewrite::Fixup => {
                let message = format!("fixup! {run}: {file}");
                t.git_in(&wt, &["commit", "-q", "--amend", "-m", &message])
                    .ok();
                let editor = [("GIT_SEQUENCE_EDITOR", std::ffi::OsStr::new("true"))];
                let rebase = ["rebase", "-q", "-i", "--autosquash", &fork];
                t.command_with_env("git", &wt, &editor, &rebase).ok();
            }
            _ => {}
        }
        t.tab(&["finish", &run]).ok();
        match how {
            Rewrite::TabellioSquash => {
                t.tab(&["land", &run, "--target", "main", "--squash"]).ok();
            }
            Rewrite::ForgeSquash => forge_squash(t, "main", &run, i),
            Rewrite::OuterMerge => {
                forge_squash(t, &base, &run, i);
                let merge = format!("Merge {base}");
                forge(
                    t,
                    "main",
                    &[&["merge", "-q", "--no-ff", "-m", &merge, &base]],
                );
            }
            _ => {
                t.tab(&["promote", &run]).ok();
            }
        }
    }
}

#[test]
fn blame_attributes_every_line_over_fifty_rewrites() {
    let mut c = Corpus::new();
    let start = c.t.git_out(&["rev-parse", "main"]);
    let cases = 54;
    for i in 0..cases {
        c.case(i, REWRITES[i % REWRITES.len()]);
    }
    let t = &c.t;
    let mut lines = 0;
    let mut wrong = Vec::new();
    for (file, owners) in &c.expected {
        let (code, v) = t.tab_json(&["blame", file, "main"]);
        assert_eq!(code, 0, "{v}");
        let got = v["lines"].as_array().unwrap();
        assert_eq!(got.len(), owners.len(), "{file}: {v}");
        for (line, owner) in got.iter().zip(owners) {
            lines += 1;
            if line["run"]["run_id"] != owner.as_str()
                || line["run"]["actor"]["id"] != format!("{owner}@example.com").as_str()
                || line["run"]["initiator"] != "ada@example.com"
            {
                wrong.push(format!("{file}:{} {line}", line["line"]));
            }
        }
    }
    assert!(lines >= 150, "{lines}");
    assert!(
        wrong.is_empty(),
        "{} of {lines} lines misattributed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // `--porcelain` is git's, with the run's lines after each commit's details.
    let r = t.tab(&["blame", "c0.txt", "main", "--porcelain"]);
    assert!(
        r.stdout
            .contains("\ntabellio-run c0\ntabellio-actor agent:c0@example.com\n"),
        "{}",
        r.desc
    );
    assert!(r.stdout.contains("\nauthor Test Author\n"), "{}", r.desc);
    // Every commit main pointed at resolves to a run, whichever way it landed.
    let range = format!("{start}..main");
    let (code, v) = t.tab_json(&["verify", "--first-parent", "--require-provenance", &range]);
    assert_eq!(code, 0, "{v}");
    t.fsck();
}

#[test]
fn blame_of_a_path_that_is_not_there_is_not_found_and_a_hand_commit_has_no_run() {
    let t = TestEnv::ref_only();
    let r = t.tab(&["blame", "missing.txt"]);
    r.code(5);
    assert!(r.stderr.contains("missing.txt"), "{}", r.desc);
    let (code, v) = t.tab_json(&["blame", "README.md"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["attributed"], 0, "{v}");
    assert!(v["lines"][0]["run"].is_null(), "{v}");
    let r = t.tab(&["blame", "README.md", "--porcelain"]);
    assert!(r.stdout.contains("\ntabellio-run -\n"), "{}", r.desc);
}
