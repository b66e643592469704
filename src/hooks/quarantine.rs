//! Opening the repository inside a server hook, where pushed objects are still in quarantine.
//!
//! During `pre-receive`, git keeps the pushed objects in a temporary object directory and tells
//! hooks about it only through the environment: `GIT_OBJECT_DIRECTORY` (the quarantine),
//! `GIT_ALTERNATE_OBJECT_DIRECTORIES` (the real object store) and `GIT_QUARANTINE_PATH`. gix
//! 0.90 does not read those variables, so a plainly opened repository reports the pushed commit
//! as missing. We give the store an object database that sees both: a scratch object directory
//! outside the repository, empty but for an `info/alternates` file that lists the quarantine and
//! every alternate git named. Nothing is written into the quarantine (git would migrate it into
//! the repository) or into the repository; the scratch directory is deleted when the
//! [`HookStore`] is dropped.

use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};
use crate::store::Store;

/// A store for a hook, with the scratch directory that must outlive it.
pub struct HookStore {
    pub store: Store,
    _scratch: Option<tempfile::TempDir>,
}

impl std::ops::Deref for HookStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// Discover the repository from `cwd` and the `GIT_*` environment, seeing quarantined objects.
pub fn open(cwd: &Path) -> Result<HookStore> {
    let mut store = Store::discover(cwd)?;
    let Some(quarantine) = std::env::var_os("GIT_OBJECT_DIRECTORY").map(PathBuf::from) else {
        return Ok(HookStore {
            store,
            _scratch: None,
        });
    };
    let own = store.repo.common_dir().join("objects");
    let mut dirs = vec![absolute(cwd, &quarantine)];
    if let Some(alts) = std::env::var_os("GIT_ALTERNATE_OBJECT_DIRECTORIES") {
        dirs.extend(
            split_alternates(&alts.to_string_lossy()).map(|d| absolute(cwd, Path::new(&d))),
        );
    }
    dirs.push(absolute(cwd, &own));
    dirs.dedup();
    let scratch = tempfile::Builder::new()
        .prefix("tabellio-objects-")
        .tempdir()
        .context(|| "could not create a scratch object directory".into())?;
    let info = scratch.path().join("info");
    std::fs::create_dir_all(&info).context(|| format!("could not create {}", info.display()))?;
    let mut alternates = String::new();
    for dir in &dirs {
        let text = dir.to_string_lossy();
        if text.contains('\n') || text.starts_with('"') {
            return Err(Error::internal(format!(
                "cannot use the object directory {text:?} (newline or leading quote in its path)"
            )));
        }
        alternates.push_str(&text);
        alternates.push('\n');
    }
    std::fs::write(info.join("alternates"), alternates)
        .context(|| format!("could not write {}", info.join("alternates").display()))?;
    let handle = gix::odb::at_opts(
        scratch.path(),
        store.object_hash(),
        std::iter::empty(),
        gix::odb::store::init::Options::default(),
    )
    .context(|| "could not open the pushed objects in quarantine".into())?;
    store.repo.objects = gix::odb::memory::Proxy::from(handle);
    Ok(HookStore {
        store,
        _scratch: Some(scratch),
    })
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// Split a `GIT_ALTERNATE_OBJECT_DIRECTORIES` value: `:`-separated, an entry may be C-quoted.
fn split_alternates(value: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut entry = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            entry.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    other => entry.push(other),
                }
            }
            out.push(entry);
            rest = quoted[end..].trim_start_matches(':');
        } else {
            let (entry, tail) = rest.split_once(':').unwrap_or((rest, ""));
            if !entry.is_empty() {
                out.push(entry.to_string());
            }
            rest = tail;
        }
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::split_alternates;

    #[test]
    fn alternates_env_is_split_and_unquoted() {
        let v: Vec<String> = split_alternates("/a/objects:\"/b:c/objects\":/d").collect();
        assert_eq!(v, ["/a/objects", "/b:c/objects", "/d"]);
        assert_eq!(split_alternates("").count(), 0);
    }
}
