//! The documentation's examples run: every fenced shell block in `README.md` and `docs/*.md`
//! marked runnable is executed, so the docs cannot drift from the tool.
//!
//! The marker is an HTML comment on the line right before the fence, which renderers hide:
//!
//! ````markdown
//! <!-- runnable -->
//! ```sh
//! git init -q -b main tour && cd tour
//! ```
//! ````
//!
//! Each block runs on its own, as a reader would paste it into a fresh terminal: in a new empty
//! temporary directory, with its own `HOME`, no global or system git config, a fixed identity,
//! and the built binary first on `PATH` as `git-tabellio` (so `git tabellio` finds it). The
//! block is written to a file and run by `bash -e -o pipefail <file>`: the examples use what a
//! reader's shell gives them (`cd`, `&&`, redirections, here-documents), which a tokenizer of
//! our own would only approximate, and `-e` stops at the first command that fails, which then
//! fails the test with the file, the line of the block, and everything it printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::hermetic;

const MARKER: &str = "<!-- runnable -->";

/// A runnable block: where it is and its text.
struct Block {
    file: PathBuf,
    line: usize,
    text: String,
}

/// The runnable blocks of one markdown file, in order.
fn runnable_blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == MARKER {
            let fence = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            assert!(
                fence == "```sh" || fence == "```bash",
                "{}:{}: `{MARKER}` must be followed by a ```sh or ```bash fence, found {fence:?}",
                file.display(),
                i + 1
            );
            let start = i + 2;
            let end = (start..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .unwrap_or_else(|| panic!("{}:{}: unclosed block", file.display(), i + 2));
            blocks.push(Block {
                file: file.to_path_buf(),
                line: start + 1,
                text: lines[start..end].join("\n") + "\n",
            });
            i = end;
        }
        i += 1;
    }
    blocks
}

/// `README.md` and every `docs/*.md`, sorted.
fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.insert(0, root.join("README.md"));
    files
}

fn run_block(block: &Block) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let script = dir.path().join("block.sh");
    std::fs::write(&script, &block.text).unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["-e", "-o", "pipefail"])
        .arg(&script)
        .current_dir(&work)
        .stdin(std::process::Stdio::null());
    hermetic(&mut cmd, &home);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}:{}: the runnable block failed ({:?})\n--- block\n{}--- stdout\n{}\n--- stderr\n{}",
        block.file.display(),
        block.line,
        out.status,
        block.text,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_runnable_shell_block_in_the_docs_runs() {
    let blocks: Vec<Block> = markdown_files()
        .iter()
        .flat_map(|f| runnable_blocks(f))
        .collect();
    // The README's tour and its agent loop at least: a marker typo must not run nothing.
    let in_readme = blocks
        .iter()
        .filter(|b| b.file.ends_with("README.md"))
        .count();
    assert!(in_readme >= 2, "README.md has {in_readme} runnable blocks");
    for block in &blocks {
        run_block(block);
    }
}

#[test]
fn the_marker_finds_blocks_and_rejects_a_marker_without_a_shell_fence() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("x.md");
    std::fs::write(
        &md,
        "text\n<!-- runnable -->\n```sh\necho one\necho two\n```\n```sh\nnot marked\n```\n",
    )
    .unwrap();
    let blocks = runnable_blocks(&md);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].text, "echo one\necho two\n");
    assert_eq!(blocks[0].line, 4);

    std::fs::write(&md, "<!-- runnable -->\n```json\n{}\n```\n").unwrap();
    let refused = std::panic::catch_unwind(|| runnable_blocks(&md));
    assert!(refused.is_err());
}

/// Statements of docs/lifecycle.md, docs/storage.md and docs/loop.md that are easy to get wrong.
#[test]
fn generated_ids_default_actor_summary_and_context_keys_are_as_documented() {
    let t = crate::util::TestEnv::new();
    // Without a run id: `r`, the UTC time as yymmddHHMMSS, `-`, 4 hex digits. Without USER:
    // `human:unknown`.
    let long_task = format!("{}\nsecond line", "x".repeat(100));
    let r = t.command_with_env(
        crate::util::BIN,
        &t.repo,
        &[("USER", std::ffi::OsStr::new(""))],
        &["--json", "start", "--task", &long_task],
    );
    r.ok();
    let run = &r.json()["run"];
    let id = run["run_id"].as_str().unwrap();
    let (stamp, salt) = id[1..].split_once('-').unwrap();
    assert!(
        id.starts_with('r')
            && stamp.len() == 12
            && stamp.bytes().all(|b| b.is_ascii_digit())
            && salt.len() == 4
            && salt.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(run["actor"]["type"], "human");
    assert_eq!(run["actor"]["id"], "unknown");
    // The summary: the first non-empty line, cut at 72 characters, an ellipsis appended.
    assert_eq!(run["task"]["summary"], format!("{}…", "x".repeat(72)));

    // `--json context`: the packet, plus `markdown` unless `--format json`.
    let (_, j) = t.tab_json(&["context", id]);
    assert!(j["context"].is_object() && j["markdown"].is_string(), "{j}");
    let (_, j) = t.tab_json(&["context", id, "--format", "json"]);
    assert!(
        j["context"].is_object() && j.get("markdown").is_none(),
        "{j}"
    );
}

/// docs/loop.md: the finalize commit's message says `loop <n>/stop`, its `loop.phase` is
/// `finalize`.
#[test]
fn the_loops_last_ledger_commit_is_named_stop() {
    let t = crate::util::TestEnv::new();
    t.write(
        ".tabellio/policy.json",
        r#"{"schema": "tabellio.policy/v1", "checks": {"t": {"argv": ["true"], "timeout_s": 60}}, "required": ["t"]}"#,
    );
    t.git(&["add", "-A"]).ok();
    t.git(&["commit", "-q", "-m", "policy"]).ok();
    t.tab(&["start", "l1", "--task", "idle"]).ok();
    // An agent that changes nothing stops the loop at once with a limit of one idle iteration.
    let r = t.tab(&[
        "--json",
        "loop",
        "l1",
        "--no-progress-limit",
        "1",
        "--",
        "true",
    ]);
    r.code(1);
    assert_eq!(r.json()["run"]["loop"]["phase"], "finalize", "{}", r.desc);
    let subject = t.git_out(&["log", "-1", "--format=%s", "refs/tabellio/runs/l1"]);
    assert_eq!(subject, "tabellio: loop 1/stop l1: looping -> blocked");
}

/// docs/verify.md: Ctrl-C during `validate` run through `git tabellio` ends git by SIGINT too,
/// so a shell shows 130 (128 + 2), as for the binary run directly.
#[test]
fn ctrl_c_through_git_tabellio_ends_git_by_the_signal() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let t = crate::util::TestEnv::new();
    let marker = t.path().join("started");
    let script = format!(
        "echo $$ > {m}.tmp && mv {m}.tmp {m} && exec sleep 60",
        m = marker.display()
    );
    let mut cmd = Command::new("git");
    cmd.args([
        "tabellio", "validate", "--check", "slow", "--", "sh", "-c", &script,
    ])
    .current_dir(&t.repo)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    // A terminal's Ctrl-C signals the foreground process group: git and its child.
    .process_group(0);
    hermetic(&mut cmd, &t.home);
    let child = cmd.spawn().unwrap();
    crate::util::wait_for_file(&marker);
    let group = i32::try_from(child.id()).unwrap();
    // SAFETY: signalling a process group this test created.
    unsafe { libc::killpg(group, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // What a shell shows: 128 + the signal when the process died of it, else its exit code.
    let shown = out
        .status
        .signal()
        .map_or(out.status.code(), |s| Some(128 + s));
    assert_eq!(shown, Some(130), "{out:?}");
}

/// Every file of the source tree (not `target/` nor `.git/`), for the checks below.
fn source_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && name != ".git" {
                    pending.push(path);
                }
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Install instructions a reader can follow as written: no placeholder to fill in for where the
/// project lives, and no install from a git address nobody published; an install is from a
/// source tree (`--path`) or the released crate. (The needles are built from parts, so this
/// file does not find itself.)
#[test]
fn install_instructions_have_no_placeholders_or_invented_addresses() {
    let placeholder = ["OW", "NER"].concat();
    let (install, from_git) = (["cargo", " install"].concat(), ["--", "git "].concat());
    let mut found = Vec::new();
    for file in source_files() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let invented = line.contains(&install) && line.contains(&from_git);
            if line.contains(&placeholder) || invented {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
