//! Help as git users expect it: manual pages that `git tabellio --help` opens.

use std::path::PathBuf;
use std::process::Command;

use crate::util::{hermetic, path_with_binary, TestEnv, BIN};

/// `<prefix>/bin/git-tabellio`, the built binary linked (or copied) there, as `cargo install
/// --root <prefix>` would place it.
fn installed_binary(t: &TestEnv) -> PathBuf {
    let bin = t.path().join("prefix").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("git-tabellio");
    if std::fs::hard_link(BIN, &exe).is_err() {
        std::fs::copy(BIN, &exe).unwrap();
    }
    exe
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// The `.TH` header of a roff page: its title and section.
fn th_header(page: &str) -> (String, String) {
    let line = page
        .lines()
        .find(|l| l.starts_with(".TH "))
        .unwrap_or_else(|| panic!("no .TH line in:\n{page}"));
    let mut words = line.split_whitespace().skip(1);
    (
        words.next().unwrap().to_string(),
        words.next().unwrap().to_string(),
    )
}

#[test]
fn man_prints_the_main_page_as_roff() {
    let t = TestEnv::new();
    let r = t.tab(&["man"]);
    r.ok();
    assert_eq!(
        th_header(&r.stdout),
        ("git-tabellio".into(), "1".into()),
        "{}",
        r.desc
    );
    assert!(
        r.stdout.contains("git\\-tabellio\\-finish(1)"),
        "{}",
        r.desc
    );
    let (code, j) = t.tab_json(&["man"]);
    assert_eq!(code, 0);
    assert!(j["page"].as_str().unwrap().starts_with(".ie"), "{j}");
}

#[test]
fn installed_man_pages_open_through_git_help() {
    let t = TestEnv::new();
    let exe = installed_binary(&t);
    let prefix = t.path().join("prefix");
    let man1 = prefix.join("share").join("man").join("man1");

    // Without a directory: next to the binary's prefix, where `man` looks for PATH's commands.
    let r = t.command(exe.to_str().unwrap(), &t.repo, &["man", "--install"]);
    r.ok();
    let main_page = man1.join("git-tabellio.1");
    let finish_page = man1.join("git-tabellio-finish.1");
    for page in [
        &main_page,
        &finish_page,
        &man1.join("git-tabellio-plans-status.1"),
    ] {
        assert!(
            r.stdout.contains(&format!("wrote {}", page.display())),
            "{}",
            r.desc
        );
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.file_stem().unwrap().to_str().unwrap();
        assert_eq!(th_header(&text), (name.to_string(), "1".into()));
    }
    // Written by rename: no temporary file is left, and installing again replaces the pages.
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&man1)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let first = names();
    assert!(first.iter().all(|n| n.ends_with(".1")), "{first:?}");
    t.command(exe.to_str().unwrap(), &t.repo, &["man", "--install"])
        .ok();
    assert_eq!(names(), first);

    // `git tabellio --help` is git's: it runs `man git-tabellio`, found from PATH alone.
    if !on_path("man") {
        eprintln!("no `man` on this machine: checked the pages' headers only");
        return;
    }
    let mut cmd = Command::new("git");
    cmd.args(["-c", "help.format=man", "tabellio", "--help"])
        .current_dir(&t.repo);
    hermetic(&mut cmd, &t.home);
    let path = format!("{}:{}", exe.parent().unwrap().display(), path_with_binary());
    cmd.env("PATH", path)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env_remove("MANPATH");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("SYNOPSIS")
            && stdout.contains("git-tabellio-finish(1)"),
        "git tabellio --help: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_install_into_a_place_that_cannot_be_written_is_a_usage_error() {
    let t = TestEnv::new();
    let (code, j) = t.tab_json(&["man", "--install", "/dev/null/man1"]);
    assert_eq!(code, 2, "{j}");
    assert_eq!(j["error"]["code"], "usage");
    assert!(
        j["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--install <dir>"),
        "{j}"
    );
}

#[test]
fn the_json_usage_hint_names_a_help_command_that_works() {
    let t = TestEnv::new();
    let (code, j) = t.tab_json(&["start"]);
    assert_eq!(code, 2);
    let hint = j["error"]["hint"].as_str().unwrap();
    // The first command in backquotes, run through git as a person would paste it.
    let command = hint.split('`').nth(1).unwrap();
    let argv: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&argv[..2], ["git", "tabellio"], "{hint}");
    let r = t.git(&argv[1..]);
    r.ok();
    assert!(
        r.stdout.contains("Usage:") && r.stdout.contains("finish"),
        "{}",
        r.desc
    );
}
