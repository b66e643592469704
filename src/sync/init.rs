//! `git tabellio init [--remote <name>] [--hooks]`: idempotent set-up of a repository.
//!
//! A clone gets, for each remote, the fetch refspecs of the tracking namespaces (so a plain
//! `git fetch` brings the remote's ledgers and notes too), `/.tabellio/worktrees/` in
//! `info/exclude`, and with `--hooks` the client hook shims. A bare repository is a server: it
//! gets the `pre-receive` shim with `--hooks`, and tracking refspecs only for a remote named
//! with `--remote` (a mirror that fetches).
//!
//! Guarantees: `remote.<name>.push` is never set (a plain `git push` keeps doing what it did);
//! our local notes are never the destination of a refspec; a value already configured
//! (anywhere git reads config from) is not added again, so a second run changes nothing.
//! Config is written with gix-config under git's own `config.lock`, after checking that gix
//! reproduces the file byte for byte; when it would not (formatting gix does not keep), the
//! values are added with `git config --add` instead, so the user's file is never reformatted.
//! The hooks installer runs first because it is the step that can refuse (a foreign hook):
//! a refused init writes nothing.

use std::path::PathBuf;

use gix::bstr::{BString, ByteSlice};
use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::hooks::install::{self, InstallOptions, InstallOutcome};
use crate::store::Store;

use super::fetch::{self, fetch_refspecs};
use crate::store::git_cli as git;

#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Only this remote (default: every configured remote).
    pub remote: Option<String>,
    /// Install the hook shims (client hooks; the server's in a bare repository).
    pub hooks: bool,
}

/// What init found and changed for one remote.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteSetup {
    pub remote: String,
    /// Refspecs added to `remote.<name>.fetch` by this run.
    pub added: Vec<String>,
    /// Refspecs that were configured already.
    pub present: Vec<String>,
}

/// How config was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigWriter {
    /// Nothing needed writing.
    None,
    /// gix-config, under `config.lock`.
    Gix,
    /// `git config --add` (gix would not have kept the file's formatting).
    GitCli,
}

#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    /// `client` (a repository with a worktree) or `server` (bare).
    pub side: &'static str,
    pub remotes: Vec<RemoteSetup>,
    /// True when this run added the exclude line.
    pub exclude_added: bool,
    pub hooks: Option<InstallOutcome>,
    pub config_writer: ConfigWriter,
    /// True when this run changed anything at all.
    pub changed: bool,
    /// Configuration that works against tabellio (found, not changed).
    pub warnings: Vec<String>,
}

pub fn init(store: &Store, opts: &InitOptions) -> Result<InitReport> {
    let bare = store.is_bare();
    let remotes = match &opts.remote {
        Some(name) => vec![name.clone()],
        None if bare => Vec::new(),
        None => fetch::remote_names(store),
    };
    // Validate every remote before writing anything.
    for name in &remotes {
        fetch::check_remote(store, name)?;
    }

    let hooks = if opts.hooks {
        Some(install::install(
            store,
            &InstallOptions {
                server: bare,
                force: false,
            },
        )?)
    } else {
        None
    };
    let hooks_changed = hooks.as_ref().is_some_and(|h| {
        h.hooks
            .iter()
            .any(|x| x.action != install::Action::Unchanged)
    });

    let snapshot = store.repo.config_snapshot();
    let mut setups = Vec::new();
    let mut warnings = Vec::new();
    for name in &remotes {
        let configured: Vec<BString> = snapshot
            .plumbing()
            .strings_by("remote", name.as_str(), "fetch")
            .unwrap_or_default();
        for spec in &configured {
            let spec = spec.to_string();
            if overwrites_our_notes(&spec) {
                warnings.push(format!(
                    "remote.{name}.fetch has {spec:?}: a plain `git fetch` then writes the remote's values over our own notes or run ledgers (forced, it overwrites them, losing records not pushed yet); remove it (`git config --unset --fixed-value remote.{name}.fetch '{spec}'`): the tracking refspecs and `git tabellio sync` share notes without loss"
                ));
            }
        }
        let (present, added): (Vec<String>, Vec<String>) = fetch_refspecs(name)
            .into_iter()
            .partition(|spec| configured.iter().any(|c| c.trim() == spec.as_bytes()));
        setups.push(RemoteSetup {
            remote: name.clone(),
            added,
            present,
        });
    }
    let config_writer = if setups.iter().all(|s| s.added.is_empty()) {
        ConfigWriter::None
    } else {
        add_fetch_refspecs(store, &setups)?
    };

    let exclude_added = if bare {
        false
    } else {
        store.ensure_excluded()?
    };
    let changed = config_writer != ConfigWriter::None || exclude_added || hooks_changed;
    Ok(InitReport {
        side: if bare { "server" } else { "client" },
        remotes: setups,
        exclude_added,
        hooks,
        config_writer,
        changed,
        warnings,
    })
}

/// Does a fetch refspec write into our own notes or ledger namespace (not the tracking ones)?
fn overwrites_our_notes(spec: &str) -> bool {
    let Some((_, dst)) = spec.trim().split_once(':') else {
        return false;
    };
    dst == "refs/*"
        || dst == "refs/notes/*"
        || (dst.starts_with("refs/notes/tabellio/")
            && !dst.starts_with("refs/notes/tabellio/remotes/"))
        || (dst.starts_with("refs/tabellio/") && !dst.starts_with("refs/tabellio/remotes/"))
}

/// Add each setup's `added` refspecs to `remote.<name>.fetch` in the repository's own config.
fn add_fetch_refspecs(store: &Store, setups: &[RemoteSetup]) -> Result<ConfigWriter> {
    let path: PathBuf = store.repo.common_dir().join("config");
    // git's own lock: a concurrent `git config` waits for us or fails, never interleaves.
    let mut lock = gix::lock::File::acquire_to_update_resource(
        &path,
        gix::lock::acquire::Fail::AfterDurationWithBackoff(std::time::Duration::from_secs(2)),
        None,
        0,
    )
    .map_err(|e| {
        Error::conflict(format!("could not lock {}: {e}", path.display())).hint(format!(
            "another git process is changing the config; if none is running, remove {}.lock",
            path.display()
        ))
    })?;
    let original = std::fs::read(&path).context(|| format!("could not read {}", path.display()))?;
    let meta = gix::config::file::Metadata::from(gix::config::Source::Local);
    let mut file = gix::config::File::from_bytes_no_includes(&original, meta, Default::default())
        .context(|| format!("could not parse {}", path.display()))?;
    let mut round_trip = Vec::new();
    file.write_to(&mut round_trip)
        .context(|| "could not serialize the config".into())?;
    if round_trip != original {
        // Dropping the lock releases it; git config takes its own.
        drop(lock);
        return add_with_git_cli(store, setups);
    }
    for setup in setups.iter().filter(|s| !s.added.is_empty()) {
        // Under the lock, re-check the file itself: a concurrent init may have added them.
        let in_file: Vec<BString> = file
            .strings_by("remote", setup.remote.as_str(), "fetch")
            .unwrap_or_default();
        let mut section = file
            .section_mut_or_create_new("remote", Some(setup.remote.as_bytes().as_bstr()))
            .context(|| format!("could not edit the section of remote {}", setup.remote))?;
        for spec in &setup.added {
            if in_file.iter().any(|c| c.trim() == spec.as_bytes()) {
                continue;
            }
            section
                .push("fetch", Some(spec.as_bytes().as_bstr()))
                .context(|| format!("could not add {spec} to remote.{}.fetch", setup.remote))?;
        }
    }
    let mut bytes = Vec::new();
    file.write_to(&mut bytes)
        .context(|| "could not serialize the config".into())?;
    use std::io::Write;
    lock.write_all(&bytes)
        .context(|| format!("could not write {}.lock", path.display()))?;
    lock.commit().map_err(|e| {
        Error::internal(format!("could not replace {}: {}", path.display(), e.error))
    })?;
    Ok(ConfigWriter::Gix)
}

fn add_with_git_cli(store: &Store, setups: &[RemoteSetup]) -> Result<ConfigWriter> {
    for setup in setups {
        for spec in &setup.added {
            let key = format!("remote.{}.fetch", setup.remote);
            let out = git::run(
                store,
                &git::argv(["config", "--local", "--add", key.as_str(), spec.as_str()]),
            )?;
            if !out.success() {
                return Err(Error::internal(format!(
                    "git config --add {key} {spec} failed: {}",
                    out.stderr_tail()
                )));
            }
        }
    }
    Ok(ConfigWriter::GitCli)
}
