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
