//! What every command gets: where it was started, how to print, and the repository, discovered
//! once and only by the commands that need one (`demo` and `plans --dir` work anywhere).

use std::cell::OnceCell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

// The one place the CLI names the environment type: commands reach it through `Ctx::env`.
use tabellio::run::Env;
use tabellio::runner::Stream;
use tabellio::store::Store;
use tabellio::{Error, Result};

use super::color::{self, GitColor, Palette, Palettes};
use super::progress;

pub struct Ctx {
    /// The directory the command was started in (after `git -C`).
    pub cwd: PathBuf,
    /// `--json`: one JSON object on stdout.
    pub json: bool,
    /// `-q`: nothing but errors.
    pub quiet: bool,
    /// Where live progress of the checks goes: stderr ([`progress`]), or nowhere with `-q`
    /// and `--json`.
    pub stream: Stream,
    env: OnceCell<Env>,
}

impl Ctx {
    pub fn new(json: bool, quiet: bool) -> Result<Ctx> {
        let cwd = std::env::current_dir()
            .map_err(|e| Error::internal(format!("cannot read the current directory: {e}")))?;
        let env = OnceCell::new();
        let palettes = if json {
            Palettes::default()
        } else {
            let git = OnceCell::new();
            let git = || *git.get_or_init(|| git_color(&cwd, &env));
            let var = |name: &str| std::env::var_os(name);
            Palettes {
                stdout: Palette {
                    on: color::enabled(std::io::stdout().is_terminal(), var, git),
                },
                stderr: Palette {
                    on: color::enabled(std::io::stderr().is_terminal(), var, git),
                },
            }
        };
        color::init(palettes);
        let stream = progress::stream(json, quiet, palettes.stderr);
        Ok(Ctx {
            cwd,
            json,
            quiet,
            stream,
            env,
        })
    }

    /// The repository around `cwd`, discovered on first use.
    pub fn env(&self) -> Result<&Env> {
        if let Some(env) = self.env.get() {
            return Ok(env);
        }
        let env = Env::discover(&self.cwd)?;
        Ok(self.env.get_or_init(|| env))
    }

    pub fn store(&self) -> Result<&Store> {
        Ok(&self.env()?.store)
    }

    /// Whether people see lines as they happen (neither `--json` nor `-q`).
    pub fn shows_progress(&self) -> bool {
        !self.json && !self.quiet
    }
}

/// git's colour setting for us (`color.tabellio`, else `color.ui`), from the repository around
/// `cwd` when there is one; the repository found is kept for the command.
fn git_color(cwd: &Path, env: &OnceCell<Env>) -> Option<GitColor> {
    if env.get().is_none() {
        let found = Env::discover(cwd).ok()?;
        let _ = env.set(found);
    }
    let store = &env.get()?.store;
    let value = store
        .config_string("color.tabellio")
        .or_else(|| store.config_string("color.ui"))?;
    Some(GitColor::parse(&value))
}
