//! What every command gets: where it was started, how to print, and the repository, discovered
//! once and only by the commands that need one (`demo` and `plans --dir` work anywhere).

use std::cell::OnceCell;
use std::path::PathBuf;

// The one place the CLI names the environment type: commands reach it through `Ctx::env`.
use tabellio::run::Env;
use tabellio::runner::Stream;
use tabellio::store::Store;
use tabellio::{Error, Result};

use super::color;
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
        color::init(json, cwd.clone());
        let stream = progress::stream(json, quiet);
        Ok(Ctx {
            cwd,
            json,
            quiet,
            stream,
            env: OnceCell::new(),
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
