//! The multi-pack index, `objects/pack/multi-pack-index`: one index over every pack, which git
//! and gix read in place of each pack's own index (git's `multi-pack-index write` writes the
//! same file).
//!
//! gix checks a pack's own index from end to end each time a process opens it (its table of
//! offsets: 2 MB for a pack of 500,000 objects), where a multi-pack index is opened by its
//! header and chunk table alone. Beside an archive of a hundred thousand runs every command
//! would pay that check; `gc` keeps a multi-pack index over the packs instead, so that it opens
//! one index whatever the archive holds.
//!
//! It is left alone where git's own maintenance keeps one: with a bitmap (written with it by
//! `git repack --write-midx --write-bitmap-index`, and tied to its checksum), with a chain of
//! incremental ones, or where `core.multiPackIndex` is off. `git gc` removes it when it
//! removes the packs it covers; the next `gc` writes it again.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Store;

const FILE: &str = "multi-pack-index";
const LOCK: &str = "multi-pack-index.lock";

/// What [`refresh`] did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Refreshed {
    /// The packs the multi-pack index covers.
    pub packs: usize,
    /// Whether it was written now (`false`: it already covered exactly these packs).
    pub written: bool,
    /// Why it could not be written, when it could not: the repository is read as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Write the multi-pack index over the repository's packs unless it already covers exactly
/// them. `None` when there is nothing to do: no pack, or git's own maintenance keeps it.
/// Never fails: a multi-pack index that could not be written is a warning, and the file is
/// left as it was.
pub fn refresh(store: &Store) -> Option<Refreshed> {
    let config = store.repo.config_snapshot();
    if config.boolean("core.multiPackIndex") == Some(false) {
        return None;
    }
    let dir = store.repo.objects.store_ref().path().join("pack");
    if maintained_by_git(&dir) {
        return None;
    }
    let packs = match packs_in(&dir) {
        Ok(packs) if !packs.is_empty() => packs,
        Ok(_) => return None,
        Err(e) => return Some(failed(0, format!("could not list {}: {e}", dir.display()))),
    };
    let names: Vec<PathBuf> = packs.iter().map(|p| file_name(p)).collect();
    let current = dir.join(FILE);
    if covered_by(&current, &names) {
        return Some(Refreshed {
            packs: packs.len(),
            written: false,
            warning: None,
        });
    }
    let n = packs.len();
    Some(match write(store, &dir, packs) {
        Ok(()) => Refreshed {
            packs: n,
            written: true,
            warning: None,
        },
        Err(why) => failed(n, why),
    })
}

fn failed(packs: usize, why: String) -> Refreshed {
    Refreshed {
        packs,
        written: false,
        warning: Some(format!("the multi-pack index was not written: {why}")),
    }
}

/// A bitmap tied to the multi-pack index, or a chain of incremental ones: git's maintenance
/// writes them together, and a file written here would not match them.
fn maintained_by_git(dir: &Path) -> bool {
    if dir.join("multi-pack-index.d").exists() {
        return true;
    }
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("multi-pack-index") && name.ends_with(".bitmap")
        })
    })
}

/// The index of every pack in `dir` whose pack file is there too.
fn packs_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let is_index = path.extension().is_some_and(|e| e == "idx")
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pack-"));
        if is_index && path.with_extension("pack").is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn file_name(path: &Path) -> PathBuf {
    PathBuf::from(path.file_name().unwrap_or_default())
}

/// Does the multi-pack index at `path` cover exactly the packs `names` (sorted)?
fn covered_by(path: &Path, names: &[PathBuf]) -> bool {
    if !path.is_file() {
        return false;
    }
    gix::odb::pack::multi_index::File::at(path, None).is_ok_and(|m| {
        let mut covered = m.index_names().to_vec();
        covered.sort();
        covered == names
    })
}

/// Write the multi-pack index of `packs` under git's lock, `multi-pack-index.lock`, and rename
/// it into place once written and synced, unless a pack went meanwhile (a `git repack` or `git
/// gc` running beside: the one it leaves is theirs to index).
fn write(store: &Store, dir: &Path, packs: Vec<PathBuf>) -> Result<(), String> {
    let lock = dir.join(LOCK);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists: another process is writing it (if none is, remove the file)",
                lock.display()
            ),
            _ => format!("could not create {}: {e}", lock.display()),
        })?;
    let written = write_locked(store, file, &packs).and_then(|()| {
        match packs.iter().all(|p| still_there(p)) {
            true => fs::rename(&lock, dir.join(FILE))
                .map_err(|e| format!("could not rename {} into place: {e}", lock.display())),
            false => Err("a pack was removed while it was written (a repack beside)".into()),
        }
    });
    if written.is_err() {
        let _ = fs::remove_file(&lock);
    } else if !packs.iter().all(|p| still_there(p)) {
        // Removed after the rename: as git does when it removes a pack its index covers.
        let _ = fs::remove_file(dir.join(FILE));
        return Err("a pack was removed as it was written (a repack beside)".into());
    }
    written
}

fn write_locked(store: &Store, file: fs::File, packs: &[PathBuf]) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(file);
    let options = gix::odb::pack::multi_index::write::Options {
        object_hash: store.repo.object_hash(),
    };
    gix::odb::pack::multi_index::write_from_index_paths(
        packs.to_vec(),
        &mut out,
        &mut gix::progress::Discard,
        &std::sync::atomic::AtomicBool::new(false),
        options,
    )
    .map_err(|e| format!("{e}"))?;
    out.flush().map_err(|e| format!("{e}"))?;
    let file = out.into_inner().map_err(|e| format!("{e}"))?;
    file.sync_all().map_err(|e| format!("{e}"))
}

fn still_there(index: &Path) -> bool {
    index.is_file() && index.with_extension("pack").is_file()
}
