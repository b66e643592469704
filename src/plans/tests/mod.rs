use super::*;
use crate::store::hermetic;
use std::path::{Path, PathBuf};

/// A temp dir with a hermetic HOME and a worktree at `root`.
struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
}

impl Fixture {
    /// A plain directory, no git.
    fn plain() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&home).expect("mkdir home");
        std::fs::create_dir_all(&root).expect("mkdir repo");
        Fixture {
            _dir: dir,
            home,
            root,
        }
    }

    /// A fresh git repository on branch `main`.
    fn repo() -> Fixture {
        let fixture = Fixture::plain();
        fixture.git(&["init", "-q", "-b", "main"]);
        fixture
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(&self.home, &self.root, args)
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir -p");
        std::fs::write(path, content).expect("write file");
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).expect("read file")
    }

    fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(rel)).is_ok()
    }

    fn commit_all(&self) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "plans"]);
    }
}

fn git_in(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let output = hermetic::git(home, cwd)
        .args(args)
        .output()
        .expect("git can be spawned");
    assert!(
        output.status.success(),
        "git {args:?} in {} failed ({})\nstdout:\n{}\nstderr:\n{}",
        cwd.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8 here")
}

/// A plan titled `title` with `done` ticked and `open` unticked tasks.
fn plan(title: &str, done: usize, open: usize) -> String {
    let mut text = format!("# {title}\n\nWhy {title} exists.\n\n");
    for i in 0..done {
        text.push_str(&format!("- [x] {title} step {i}\n"));
    }
    for i in 0..open {
        text.push_str(&format!("- [ ] {title} later {i}\n"));
    }
    text
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn paths(report: &PlanReport, class: PlanClass) -> Vec<&str> {
    report.with_class(class).map(|p| p.path.as_str()).collect()
}

fn error_list(errors: &[PlanError]) -> Vec<(String, String)> {
    errors
        .iter()
        .map(|e| (e.path().to_owned(), e.message()))
        .collect()
}

mod reconcile;
mod scan;
