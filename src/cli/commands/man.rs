//! `man [--install [DIR]]`: manual pages generated from the command-line definitions, one for
//! the tool (`git-tabellio.1`, which `git tabellio --help` opens through `man`) and one per
//! subcommand (`git-tabellio-<sub>.1`). Installing writes each page to a temporary file in DIR
//! and renames it into place, so `man` never reads a half-written page; a failure leaves the
//! pages written so far and names the one that failed.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use serde_json::json;

use tabellio::{Error, Result};

use crate::cli::{Cli, Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write every page into DIR instead of printing the main page (default DIR:
    /// `<prefix>/share/man/man1`, where `<prefix>/bin` holds this binary).
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub install: Option<Option<PathBuf>>,
}

pub fn cmd_man(_ctx: &Ctx, args: &ManArgs) -> Result<Output> {
    let pages = pages()?;
    let Some(dir) = &args.install else {
        let (_, main) = pages
            .into_iter()
            .next()
            .expect("the tool's own page comes first");
        let text = String::from_utf8_lossy(&main).into_owned();
        return Ok(Output::new(json!({ "page": text }), text));
    };
    let dir = match dir {
        Some(dir) => dir.clone(),
        None => default_dir()?,
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::usage(format!("cannot create {}", dir.display()))
            .hint("give a directory you can write: `git tabellio man --install <dir>`")
            .caused_by(e)
    })?;
    let mut written = Vec::new();
    for (name, page) in &pages {
        let path = dir.join(name);
        write_atomically(&path, page)?;
        written.push(path);
    }
    let human: String = written
        .iter()
        .map(|p| format!("wrote {}\n", p.display()))
        .collect();
    Ok(Output::new(
        json!({ "dir": dir, "written": written }),
        human,
    ))
}

/// `(file name, roff)` for the tool and every visible subcommand (nested ones too), the tool's
/// own page first.
fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    // `git-tabellio` is the page name `git help tabellio` asks `man` for; clap derives
    // `git-tabellio-<sub>` for the subcommands from it and keeps `git tabellio <sub>` as the
    // name in each synopsis.
    let root = crate::cli::full_command(
        Cli::command()
            .display_name("git-tabellio")
            .disable_help_subcommand(true),
    );
    let mut out = Vec::new();
    collect(&root, &mut out)?;
    Ok(out)
}

fn collect(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    // The examples are a section of their own, set line by line: clap_mangen would fill them
    // into a paragraph under "EXTRA".
    let examples = cmd.get_after_long_help().map(ToString::to_string);
    let man = clap_mangen::Man::new(cmd.clone().after_long_help(None::<&str>))
        .source(concat!("git-tabellio ", env!("CARGO_PKG_VERSION")))
        .manual("git-tabellio Manual");
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| Error::internal("could not render a manual page").caused_by(e))?;
    if let Some(examples) = examples {
        page.extend_from_slice(examples_section(&examples).as_bytes());
    }
    out.push((man.get_filename(), page));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, out)?;
    }
    Ok(())
}

/// An `EXAMPLES` section in no-fill mode, from an `Examples:` block (its first line dropped).
fn examples_section(block: &str) -> String {
    use clap_mangen::roff::{roman, Roff};
    let mut roff = Roff::new();
    roff.control("SH", ["EXAMPLES"]).control("nf", []);
    for line in block.lines().skip_while(|l| l.trim() == "Examples:") {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.to_roff()
}

/// `<prefix>/share/man/man1` for the binary at `<prefix>/bin/git-tabellio`: where `man` looks
/// for pages of the commands in a `PATH` directory.
fn default_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| {
        Error::internal("cannot find this binary's own path")
            .hint("name the directory: `git tabellio man --install <dir>`")
            .caused_by(e)
    })?;
    // The real file, so a symlink on PATH does not send the pages next to the link.
    let exe = exe.canonicalize().unwrap_or(exe);
    let prefix = exe.parent().and_then(Path::parent).ok_or_else(|| {
        Error::usage(format!("{} has no prefix directory", exe.display()))
            .hint("name the directory: `git tabellio man --install <dir>`")
    })?;
    Ok(prefix.join("share").join("man").join("man1"))
}

/// Write `bytes` to a temporary file beside `path`, then rename it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| {
        Error::usage(format!("cannot write {}", path.display()))
            .hint("give a directory you can write: `git tabellio man --install <dir>`")
            .caused_by(e)
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".git-tabellio-man")
        .tempfile_in(dir)
        .map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    // Pages are read by every user, like the ones the package manager installs.
    set_readable(tmp.path()).map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(unix)]
fn set_readable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable(_path: &Path) -> std::io::Result<()> {
    Ok(())
}
