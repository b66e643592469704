//! `log --graph` and `log --html`: the picture of runs, pinned as a snapshot, and the page
//! loaded in a real headless browser (Debian's `chromium`), screenshotted, its timeline found
//! in the rendered DOM.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// The required check: `value.txt` must say `2`. On failure it prints markup, a terminal colour
/// and its working directory (a local path the page must not show).
const VALUE_IS_TWO: &str = "import os,sys\nv=open('value.txt').read().strip() if os.path.exists('value.txt') else ''\nok=v=='2'\nprint('ok' if ok else '\\x1b[31merror:\\x1b[0m <value> & is %r in %s' % (v, os.getcwd()))\nsys.exit(0 if ok else 1)";

/// Three runs off one base: `fix-1` checkpointed, validated and promoted; `fix-2` failed its
/// first attempt and passed its second; `exp-3` checkpointed and abandoned.
fn three_runs() -> TestEnv {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("test", &["python3", "-c", VALUE_IS_TWO])]));
    for id in ["fix-1", "fix-2", "exp-3"] {
        t.tab(&["start", id, "--task", &format!("task of {id}")])
            .ok();
    }
    let wt = t.worktree("fix-1");
    t.commit_file_in(&wt, "value.txt", "2\n");
    t.tab_in(&wt, &["checkpoint", "-m", "value is two"]).ok();
    t.tab(&["finish", "fix-1"]).ok();
    t.tab(&["promote", "fix-1"]).ok();

    let wt = t.worktree("fix-2");
    t.commit_file_in(&wt, "value.txt", "1\n");
    t.tab(&["finish", "fix-2"]).code(1);
    t.commit_file_in(&wt, "value.txt", "2\n");
    t.tab(&["finish", "fix-2"]).ok();

    let wt = t.worktree("exp-3");
    t.commit_file_in(&wt, "idea.txt", "maybe\n");
    t.tab_in(&wt, &["checkpoint"]).ok();
    t.tab(&["abandon", "exp-3", "-m", "superseded by fix-2"])
        .ok();
    t
}

/// `text` with every commit id (7 to 64 hex digits standing alone) replaced by `<cN>`, numbered
/// by first appearance, so the same commit keeps one name.
fn normalise_ids(text: &str) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut out = String::new();
    let mut word = String::new();
    let mut flush = |word: &mut String, out: &mut String| {
        let hex = word.len() >= 7 && word.chars().all(|c| c.is_ascii_hexdigit());
        if hex && word.chars().any(|c| c.is_ascii_digit()) {
            let n = names.iter().position(|w| w == word).unwrap_or_else(|| {
                names.push(word.clone());
                names.len() - 1
            });
            out.push_str(&format!("<c{}>", n + 1));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[test]
fn log_graph_draws_lanes_off_the_shared_base() {
    let t = three_runs();
    let r = t.tab(&["log", "--graph", "fix-1", "fix-2", "exp-3"]);
    r.ok();
    insta::assert_snapshot!("log-graph", normalise_ids(&r.stdout));

    // Every run by default, the same lanes; one run alone is one lane into its base.
    let all = t.tab(&["log", "--graph"]);
    all.ok();
    assert_eq!(all.stdout.lines().count(), r.stdout.lines().count());
    let one = t.tab(&["log", "--graph", "exp-3"]);
    one.ok();
    assert!(one
        .stdout
        .starts_with("* (exp-3: abandoned) abandoned: superseded by fix-2\n"));
    assert!(!one.stdout.contains("| *"), "{}", one.desc);

    let (code, j) = t.tab_json(&["log", "--graph", "fix-2"]);
    assert_eq!(code, 0, "{j:#}");
    let human = t.tab(&["log", "--graph", "fix-2"]);
    human.ok();
    assert_eq!(j["graph"].as_str(), Some(human.stdout.as_str()), "{j:#}");
    let kinds: Vec<(&str, Option<&str>)> = j["runs"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["status"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("start", None),
            ("attempt", Some("failed")),
            ("attempt", Some("passed"))
        ],
        "{j:#}"
    );
    assert_eq!(j["runs"][0]["state"], "completed");
}

#[test]
fn log_graph_shows_land_restacks_refusals_and_landings() {
    let t = TestEnv::ref_only();
    t.git(&["switch", "-q", "main"]).ok();
    t.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
    t.git(&["switch", "-q", "elsewhere"]).ok();
    for (id, file, content) in [
        ("a-first", "README.md", "first\n"),
        ("b-clash", "README.md", "clash\n"),
        ("c-other", "other.txt", "other\n"),
    ] {
        t.tab(&["start", id, "--task", id, "--base", "main"]).ok();
        t.commit_file_in(&t.worktree(id), file, content);
        t.tab(&["finish", id]).ok();
    }
    t.tab(&["land", "--target", "main", "a-first", "b-clash", "c-other"])
        .code(1);
    // One batch: main moved once from the base to the top of the stack, c-other on a-first.
    let main = t.git_out(&["rev-parse", "--short=7", "main"]);
    let first = t.git_out(&["rev-parse", "--short=7", "main~1"]);
    let base = t.git_out(&["rev-parse", "--short=7", "main~2"]);
    let r = t.tab(&["log", "--graph", "c-other", "b-clash", "a-first"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    // The replayed run: its landing on top, the restack onto the first run's landing below.
    assert_eq!(
        lines[0],
        format!("* {main} (c-other: promoted) landed on main {base}..{main} (ref)"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].starts_with(&format!("* {main} restacked (replay) onto {first}: ")),
        "{}",
        r.stdout
    );
    assert!(
        lines.iter().any(|l| l.starts_with("| * ")
            && l.contains("(b-clash: completed) land onto main")
            && l.ends_with("refused: conflict in README.md")),
        "{}",
        r.stdout
    );
    // The first run landed as it was (no restack drawn), at its own commit.
    let landed = format!("| * {first} (a-first: promoted) landed on main {base}..{main} (ref)");
    assert!(lines.contains(&landed.as_str()), "{}", r.stdout);
    assert!(!r.stdout.contains("restacked (none)"), "{}", r.stdout);
    assert!(
        r.stdout.ends_with(&format!(
            "* {base} (main) base of c-other, b-clash, a-first\n"
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn log_without_a_picture_shows_one_run_and_refuses_more() {
    let t = TestEnv::new();
    t.completed_run("a", "a.txt");
    t.completed_run("b", "b.txt");
    let r = t.tab(&["log", "a", "b"]);
    r.code(2);
    assert!(r.stderr.contains("--graph"), "{}", r.desc);
    t.tab(&["log"]).code(2);
    t.tab(&["log", "--graph", "a", "nope"]).code(5);
    t.tab(&["log", "--graph", "a/../b"]).code(2);
    let one = t.tab(&["log", "a"]);
    one.ok();
    assert_eq!(one.stdout.lines().count(), 2, "{}", one.desc);

    // A ledger from a newer tool: every-run pictures name it and draw the rest; asked for by
    // name, it is the error.
    t.forge_ledger("b", "newer", |run| run["schema"] = "tabellio.run/v9".into());
    let all = t.tab(&["log", "--graph"]);
    all.ok();
    assert!(all.stdout.contains("(a: completed)"), "{}", all.desc);
    assert!(
        all.stdout.contains("unreadable run b: ") && all.stdout.contains("tabellio.run/v9"),
        "{}",
        all.desc
    );
    let (code, j) = t.tab_json(&["log", "--graph"]);
    assert_eq!(code, 0, "{j:#}");
    assert_eq!(j["unreadable"][0]["run_id"], "b", "{j:#}");
    assert_eq!(j["runs"].as_array().unwrap().len(), 1, "{j:#}");
    let named = t.tab(&["log", "--graph", "b"]);
    assert_ne!(named.code, 0, "{}", named.desc);
    assert!(named.stderr.contains("tabellio.run/v9"), "{}", named.desc);
}

/// A python3 agent for `loop` in HOME (shown as `~/agent.py`): writes `value.txt` = its
/// iteration number, so the check passes on the second iteration.
fn counting_agent(t: &TestEnv) -> String {
    let path = t.home.join("agent.py");
    write_file(
        &path,
        "#!/usr/bin/env python3\nimport os\nopen('value.txt','w').write(os.environ['TABELLIO_ITERATION']+'\\n')\nprint('wrote', os.environ['TABELLIO_ITERATION'])\n",
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Run `chromium` headless with `args` and the page `url`, killed after 60 s. `None` (and a line
/// on stderr) when there is no chromium on this machine.
fn chromium(t: &TestEnv, args: &[&str], url: &str) -> Option<(i32, String)> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("chromium").is_file()))
        .unwrap_or(false);
    if !found {
        eprintln!(
            "skipping the browser check: `chromium` is not on PATH (apt-get install chromium)"
        );
        return None;
    }
    let profile = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,900",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    hermetic(&mut cmd, &t.home);
    let mut child = cmd.spawn().expect("spawn chromium");
    let mut stdout = child.stdout.take().expect("piped stdout");
    // Read while it runs: a DOM larger than the pipe would otherwise block it forever.
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dom = reader.join().expect("reader").expect("chromium's stdout");
    Some((status.code().unwrap_or(-1), dom))
}

#[test]
fn log_html_is_a_self_contained_page_that_a_browser_renders() {
    let t = three_runs();
    t.tab(&["start", "loop-4", "--task", "make value.txt say 2"])
        .ok();
    let agent = counting_agent(&t);
    t.tab(&["loop", "loop-4", "--", &agent]).ok();

    let page = t.path().join("report.html");
    let r = t.tab(&["log", "--html", page.to_str().unwrap()]);
    r.ok();
    assert!(r.stdout.contains("wrote a report of 4 runs"), "{}", r.desc);
    let html = std::fs::read_to_string(&page).unwrap();

    // Self-contained and scrubbed: no script, no resource from elsewhere, no local path.
    for absent in ["<script", "src=", "http://", "https://", "url(", "@import"] {
        assert!(!html.contains(absent), "{absent:?} in the page:\n{html}");
    }
    let root = t.path().display().to_string();
    let canonical = std::fs::canonicalize(t.path())
        .unwrap()
        .display()
        .to_string();
    assert!(
        !html.contains(&root) && !html.contains(&canonical),
        "{html}"
    );
    // The failing excerpt, escaped, its colours dropped, its path as a label.
    assert!(
        html.contains("error: &lt;value&gt; &amp; is &#39;1&#39; in &lt;worktree&gt;"),
        "{html}"
    );
    assert!(!html.contains('\u{1b}'));
    assert!(html.contains("data-stop=\"validated\""), "{html}");

    // Asked again, the page is replaced, the same bytes.
    t.tab(&["log", "--html", page.to_str().unwrap()]).ok();
    assert_eq!(std::fs::read_to_string(&page).unwrap(), html);
    assert!(!t.path().join("report.html.tmp").exists());
    let (code, j) = t.tab_json(&["log", "--html", "/nonexistent-dir/x.html", "fix-1"]);
    assert_eq!(code, 2, "{j:#}");
    assert!(
        j["error"]["hint"].as_str().unwrap().contains("--html"),
        "{j:#}"
    );

    let url = format!("file://{}", page.display());
    let Some((code, dom)) = chromium(&t, &["--dump-dom"], &url) else {
        return;
    };
    assert_eq!(code, 0, "chromium --dump-dom failed:\n{dom}");
    for run in ["fix-1", "fix-2", "exp-3", "loop-4"] {
        assert!(
            dom.contains(&format!("data-run=\"{run}\"")),
            "{run}:\n{dom}"
        );
    }
    let count = |needle: &str| dom.matches(needle).count();
    assert_eq!(count("data-kind=\"start\""), 4, "{dom}");
    // fix-1, exp-3, and each of the loop's two iterations.
    assert_eq!(count("data-kind=\"checkpoint\""), 4, "{dom}");
    assert_eq!(
        count("data-kind=\"attempt\" data-status=\"failed\""),
        2,
        "fix-2's first attempt and the loop's first iteration:\n{dom}"
    );
    assert_eq!(
        count("data-kind=\"attempt\" data-status=\"passed\""),
        3,
        "{dom}"
    );
    assert_eq!(count("data-kind=\"promoted\""), 1, "{dom}");
    assert_eq!(count("data-kind=\"abandoned\""), 1, "{dom}");
    assert_eq!(count("data-kind=\"loop_stopped\""), 1, "{dom}");
    assert_eq!(count("class=\"iteration\""), 2, "{dom}");
    assert!(
        dom.contains("<details class=\"excerpt\" data-check=\"test\" open=\"\">"),
        "{dom}"
    );

    let png = t.path().join("report.png");
    let shot = format!("--screenshot={}", png.display());
    let (code, _) = chromium(&t, &[&shot], &url).expect("chromium was there a moment ago");
    assert_eq!(code, 0);
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 900));
    // A blank page compresses to a few hundred bytes; text and colour take far more.
    assert!(
        bytes.len() > 20_000,
        "a screenshot of {} bytes",
        bytes.len()
    );
}
