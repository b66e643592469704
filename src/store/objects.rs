//! Loose objects written through one zlib stream per command.
//!
//! gix's loose store starts a new deflate stream for every object it writes, and zlib-rs
//! allocates and zeroes about half a megabyte for each (its window, hash chains and buffers).
//! A checkpoint writes ten objects (the note, its fanout trees and commit, the ledger's blobs,
//! trees and commit), so that set-up was much of a checkpoint's fresh memory and page faults.
//! git keeps one stream and resets it between objects; [`Store::write_blob`] and
//! [`Store::write_object`] do the same, and write what gix's loose store writes: the object,
//! compressed at `core.looseCompression` (else `core.compression`, else 1, git's default), into
//! a read-only temporary file in the objects directory that is then renamed to its
//! `objects/xx/<rest of the id>` path. The temporary file is named as git names its own
//! (`tmp_obj_…`), so one that a killed write leaves behind is removed by `git gc` once it is
//! older than `gc.pruneExpire`, or at once by `git prune`. An object the repository already
//! has is not written again. An invalid level is a usage error (exit 2) with the way to set a
//! valid one, at the command's first object write, before its first ref moves (`finish` asks
//! for it before its checks run).
//!
//! Reading has the same set-up cost: gix's loose store makes a new inflate stream for every
//! object it reads, and maps the file into memory (a map, a page fault and an unmap for a
//! file of a hundred bytes). That was a quarter of a `status` in a run of 300 history entries,
//! each one loose blob. [`Store::read_blob`] and [`Store::object`] (and the reads of
//! `Objects`, which the notes and tree walks use) read a loose object with `read` through one
//! inflate stream per command, reset between objects, and decode it as gix's loose store does
//! (the header's size must be the body's). Commits and trees read this way are kept for the rest
//! of the command, up to 4 MiB, as gix's object cache kept them; blobs are not, loose or packed
//! (their readers parse them once and keep what they need). An object that is not loose here
//! (packed, or in an alternate) is read by gix, through the pack indexes gix maps (the tool
//! maps none of its own: one map of each index per command); later loose objects are still
//! read here, so a run's loose history entries keep the one inflate stream after `git gc`
//! packed its older ones. A command that finds nearly every object packed (`verify` of a
//! range that a clone or `git gc` packed) stops opening loose files that are not there and asks
//! gix first, which looks in its packs before the loose files.
//!
//! `Objects` hands this writer, with the repository's reads, to gix-note's notes editing.

use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gix::objs::{Kind, WriteTo};
use gix::zlib::stream::deflate::{Compress, FlushCompress};
use gix::zlib::{Compression, Status};

use crate::error::{Context, Error, Result};

use super::Store;

/// How the temporary file of an object being written is named, as git names its own.
const TEMP_PREFIX: &str = "tmp_obj_";

/// The deflate stream of a [`Store`]'s writes, made on the first write, and the inflate stream
/// of its loose object reads, made on the first read.
#[derive(Default)]
pub(crate) struct LooseStreams {
    compressor: Mutex<Option<Compress>>,
    decompressor: Mutex<Option<gix::zlib::Inflate>>,
    /// Objects this command has read through [`Store::read_blob`] or written, or that its
    /// caller named with [`Store::known_object`]: a write of one of them does not look for it.
    known: Mutex<std::collections::HashSet<gix::ObjectId>>,
    /// Loose objects this command has read, up to [`LOOSE_CACHE_BYTES`]: a command reads the
    /// same commits and trees several times (gix's object cache, which they bypass, kept them
    /// before).
    cache: Mutex<LooseCache>,
    /// Reads that found no loose file (the object is packed, or in an alternate) and reads
    /// that found one: see [`LooseStreams::mostly_packed`].
    misses: AtomicUsize,
    hits: AtomicUsize,
}

/// Loose reads that must miss before [`LooseStreams::mostly_packed`] can say so.
const MISSES_BEFORE_PACKS_FIRST: usize = 32;

impl LooseStreams {
    /// Whether this command's reads have so far found their objects packed nearly every time
    /// (a range of history that `git gc` or a clone packed): each further read then goes to
    /// gix first, which looks in the packs before the loose files, instead of opening a loose
    /// file that is not there (a failed `open` per object, three for a commit and its trees).
    fn mostly_packed(&self) -> bool {
        let misses = self.misses.load(Ordering::Relaxed);
        misses >= MISSES_BEFORE_PACKS_FIRST && misses > 8 * self.hits.load(Ordering::Relaxed)
    }
}

/// Whether a loose object read is kept in [`LooseStreams`]'s cache for a second read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Yes,
    No,
}

/// The delta bases of the objects one command reads past gix's object cache (blobs,
/// [`Store::read_blob`], and the fanout trees a notes view reads once), as gix's own delta-base
/// cache keeps them for other objects: as big as that one (`core.deltaBaseCacheLimit`), `None`
/// when it is turned off.
#[derive(Default)]
pub(crate) struct ReadOnceDeltas(
    std::cell::RefCell<Option<gix::odb::pack::cache::lru::MemoryCappedHashmap>>,
);

impl ReadOnceDeltas {
    pub(crate) fn new(bytes: usize) -> ReadOnceDeltas {
        ReadOnceDeltas(std::cell::RefCell::new(
            (bytes > 0).then(|| gix::odb::pack::cache::lru::MemoryCappedHashmap::new(bytes)),
        ))
    }
}

/// How many bytes of loose objects one command keeps in [`LooseStreams`]'s cache.
const LOOSE_CACHE_BYTES: usize = 4 * 1024 * 1024;

#[derive(Default)]
struct LooseCache {
    objects: std::collections::HashMap<gix::ObjectId, (Kind, Vec<u8>)>,
    bytes: usize,
}

impl std::fmt::Debug for LooseStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LooseStreams")
    }
}

impl Store {
    /// Write `data` as a blob.
    pub fn write_blob(&self, data: &[u8]) -> Result<gix::ObjectId> {
        self.write_loose(Kind::Blob, data)
    }

    /// Write `object` (a tree, a commit).
    pub fn write_object(&self, object: &impl WriteTo) -> Result<gix::ObjectId> {
        let mut data = Vec::with_capacity(object.size() as usize);
        object
            .write_to(&mut data)
            .context(|| format!("could not encode a {}", object.kind()))?;
        self.write_loose(object.kind(), &data)
    }

    fn write_loose(&self, kind: Kind, data: &[u8]) -> Result<gix::ObjectId> {
        let id = gix::objs::compute_hash(self.object_hash(), kind, data)
            .context(|| format!("could not hash a {kind}"))?;
        if self.is_known(id) || self.repo.objects.exists_without_refresh(&id) {
            return Ok(id);
        }
        let compressed = self.deflate(kind, data)?;
        let dir = self.repo.objects.store_ref().path();
        let path = loose_path(dir, id);
        let written = (|| -> std::io::Result<()> {
            let mut file = temp_object_file(dir)?;
            file.write_all(&compressed)?;
            let fanout = path.parent().expect("a fanout directory");
            match std::fs::create_dir(fanout) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        })();
        written.context(|| format!("could not write the {kind} {id} into {}", dir.display()))?;
        self.known_object(id);
        Ok(id)
    }

    /// Note that the object `id` is in the repository (this command read or wrote it), so that
    /// writing it again costs no lookup: a transition in a run of hundreds of history entries
    /// writes every entry's blob and bucket tree again, and most are what it has just read.
    pub(crate) fn known_object(&self, id: gix::ObjectId) {
        let mut known = self.loose.known.lock().unwrap_or_else(|e| e.into_inner());
        known.insert(id);
    }

    /// Did this command read or write the object `id`?
    pub(crate) fn is_known(&self, id: gix::ObjectId) -> bool {
        let known = self.loose.known.lock().unwrap_or_else(|e| e.into_inner());
        known.contains(&id)
    }

    /// The zlib stream of `kind`'s loose header and `data`, made by the one compressor.
    fn deflate(&self, kind: Kind, data: &[u8]) -> Result<Vec<u8>> {
        let header = gix::objs::encode::loose_header(kind, data.len() as u64);
        let mut guard = reused(
            &self.loose.compressor,
            || Ok(Compress::new(self.loose_compression()?)),
            Compress::reset,
        )?;
        let compressor = guard.as_mut().expect("made by reused");
        let mut out = Vec::with_capacity(data.len() / 2 + 64);
        let mut chunk = [0u8; 16 * 1024];
        for (input, flush) in [
            (&header[..], FlushCompress::None),
            (data, FlushCompress::Finish),
        ] {
            let mut input = input;
            loop {
                let (read, wrote) = (compressor.total_in(), compressor.total_out());
                let status = compressor
                    .compress(input, &mut chunk, flush)
                    .context(|| format!("could not compress a {kind}"))?;
                input = &input[(compressor.total_in() - read) as usize..];
                out.extend_from_slice(&chunk[..(compressor.total_out() - wrote) as usize]);
                match (flush, status) {
                    (_, Status::StreamEnd) => break,
                    (FlushCompress::None, _) if input.is_empty() => break,
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// The blob `id`: read from its loose file through the one inflate stream when this
    /// repository's objects directory has it, else from its pack by gix. A blob is read past
    /// the object caches: its reader parses it once and keeps what it needs (a note, a policy,
    /// an allowed-signers file), so a copy kept for a second read is memory nobody reads. Its
    /// delta bases are kept ([`ReadOnceDeltas`]): notes written one after another are packed as
    /// deltas of each other.
    pub(crate) fn read_blob(&self, id: gix::ObjectId) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        let kind = match self.read_loose(id, &mut data, Keep::No)? {
            Some(kind) => kind,
            None => match self.read_uncached(id, &mut data)? {
                Some(kind) => kind,
                None => {
                    // Not in this repository's stores: as [`Store::object`] reads it (an
                    // object only in memory), or its not-found error.
                    let mut object = self
                        .object(id)
                        .context(|| format!("could not read the blob {id}"))?;
                    data = std::mem::take(&mut object.data);
                    object.kind
                }
            },
        };
        if kind != Kind::Blob {
            return Err(not_a_blob(id, kind));
        }
        self.known_object(id);
        Ok(data)
    }

    /// The object `id` from gix's store (its packs, loose files and alternates) past the
    /// object cache, its delta bases through [`ReadOnceDeltas`]; `None` when the store has none.
    fn read_uncached(&self, id: gix::ObjectId, out: &mut Vec<u8>) -> Result<Option<Kind>> {
        use gix::odb::pack::Find as _;
        let cache: &gix::odb::Handle = &self.repo.objects;
        let handle = &**cache;
        let mut deltas = self.read_once_deltas.0.borrow_mut();
        let found = match deltas.as_mut() {
            Some(deltas) => handle.try_find_cached(&id, out, deltas),
            None => handle.try_find_cached(&id, out, &mut gix::odb::pack::cache::Never),
        };
        let found = found.context(|| format!("could not read the object {id}"))?;
        Ok(found.map(|(data, _)| data.kind))
    }

    /// The object `id`, `None` when the repository does not have it: read as
    /// [`Store::read_blob`] reads a blob, through the one inflate stream when it is loose.
    pub(crate) fn try_object(&self, id: gix::ObjectId) -> Result<Option<gix::Object<'_>>> {
        let mut data = Vec::new();
        match self.read_loose(id, &mut data, Keep::Yes)? {
            Some(kind) => Ok(Some(
                gix::ObjectDetached { id, kind, data }.attach(&self.repo),
            )),
            None => self
                .repo
                .try_find_object(id)
                .context(|| format!("could not read the object {id}")),
        }
    }

    /// The object `id`: [`Store::try_object`], and an object the repository does not have is
    /// an error that names it.
    pub(crate) fn object(&self, id: gix::ObjectId) -> Result<gix::Object<'_>> {
        self.try_object(id)?.ok_or_else(|| {
            Error::not_found(format!("the object {id} is not in this repository"))
                .hint("`git fsck` lists what is missing; fetch it from a clone that has it")
        })
    }

    /// The commit `id`, read as [`Store::object`] reads it.
    pub(crate) fn commit(&self, id: gix::ObjectId) -> Result<gix::Commit<'_>> {
        self.object(id)?
            .try_into_commit()
            .context(|| format!("could not read the commit {id}"))
    }

    /// The first line of `commit`'s message (empty when it cannot be read): a checkpoint's
    /// default summary, and how the loop names an iteration's commit.
    pub fn commit_subject(&self, commit: gix::ObjectId) -> String {
        self.commit(commit)
            .ok()
            .and_then(|c| c.message_raw().ok().map(|m| m.to_string()))
            .and_then(|m| m.lines().next().map(str::to_string))
            .unwrap_or_default()
    }

    /// Read the loose object `id` of this repository's own objects directory into `out`
    /// through the one inflate stream, and return its kind; `None` when it is packed or not
    /// there (in an alternate), for gix to read.
    fn read_loose(&self, id: gix::ObjectId, out: &mut Vec<u8>, keep: Keep) -> Result<Option<Kind>> {
        {
            let cache = self.loose.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((kind, data)) = cache.objects.get(&id) {
                out.clear();
                out.extend_from_slice(data);
                return Ok(Some(*kind));
            }
        }
        if self.loose.mostly_packed() {
            return Ok(None);
        }
        let path = loose_path(self.repo.objects.store_ref().path(), id);
        // Most loose objects fit in a page; read without asking the file's size first.
        let mut compressed = Vec::with_capacity(4096);
        match std::fs::File::open(&path) {
            Ok(file) => {
                self.loose.hits.fetch_add(1, Ordering::Relaxed);
                file.take(u64::MAX)
                    .read_to_end(&mut compressed)
                    .context(|| format!("could not read the object {id}"))?
            }
            // Packed (a repository packed by `git gc` holds its older objects in packs and what
            // the tool wrote since loose), or in an alternate: gix reads it, through the pack
            // indexes it maps anyway (the tool maps none of its own), and later loose objects
            // are still read here.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.loose.misses.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            Err(e) => return Err(e).context(|| format!("could not read the object {id}")),
        };
        let kind = self.inflate_loose(id, &compressed, out)?;
        let mut cache = self.loose.cache.lock().unwrap_or_else(|e| e.into_inner());
        if keep == Keep::Yes && cache.bytes + out.len() <= LOOSE_CACHE_BYTES {
            cache.bytes += out.len();
            cache.objects.insert(id, (kind, out.clone()));
        }
        Ok(Some(kind))
    }

    /// Inflate `compressed`, the file of the loose object `id`, into `out` through the one
    /// inflate stream, as gix's loose store decodes it: the header's size must be the size
    /// of the body. Returns the kind the header names.
    fn inflate_loose(
        &self,
        id: gix::ObjectId,
        compressed: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Kind> {
        let mut guard = reused(
            &self.loose.decompressor,
            || Ok(gix::zlib::Inflate::default()),
            gix::zlib::Inflate::reset,
        )?;
        let inflate = guard.as_mut().expect("made by reused");
        let corrupt = |why: String| {
            Error::internal(format!("the loose object {id} is corrupt: {why}")).hint(
                "`git fsck` lists the damaged objects; copy them back from a clone that has them",
            )
        };
        let mut header = [0u8; 64];
        let (status, read, wrote) = inflate
            .prefix(compressed, &mut header)
            .map_err(|e| corrupt(e.to_string()))?;
        let (kind, size, header_size) = gix::objs::decode::loose_header(&header[..wrote])
            .map_err(|e| corrupt(e.to_string()))?;
        // Deflate shrinks by at most about 1032:1, so a header claiming more is a damaged one
        // (and must not size an allocation).
        let size = usize::try_from(size)
            .ok()
            .filter(|&size| size <= compressed.len().saturating_mul(1032) + header.len())
            .ok_or_else(|| corrupt(format!("its header claims {size} bytes")))?;
        if wrote - header_size > size {
            return Err(corrupt(format!(
                "more than the {size} bytes its header says"
            )));
        }
        out.clear();
        let n = if status == Status::StreamEnd {
            out.extend_from_slice(&header[header_size..wrote]);
            out.len()
        } else {
            inflate
                .rest(
                    &compressed[read..],
                    &header[..wrote],
                    header_size,
                    out,
                    size,
                )
                .map_err(|e| corrupt(e.to_string()))?
        };
        if n != size {
            return Err(corrupt(format!("{n} bytes where its header says {size}")));
        }
        Ok(kind)
    }

    /// The loose-object compression level, as git and gix choose it.
    pub(crate) fn loose_compression(&self) -> Result<Compression> {
        use gix::config::tree::{Core, Key};
        let config = self.repo.config_snapshot();
        for key in [&Core::LOOSE_COMPRESSION, &Core::COMPRESSION] {
            let name = key.logical_name();
            let level = key
                .try_into_compression(config.try_integer(name.as_str()))
                .map_err(|e| {
                    Error::usage(format!("invalid {name}: {e:#}")).hint(format!(
                        "git takes a level from -1 to 9: `git config {name} 1` (git's default)"
                    ))
                })?;
            if let Some(level) = level {
                return Ok(level);
            }
        }
        Ok(Compression::BEST_SPEED)
    }

    /// This store's reads and writes, for gix's object traits.
    pub(crate) fn objects(&self) -> Objects<'_> {
        Objects(self, Keep::Yes)
    }

    /// [`Store::objects`], its reads past the object caches: for a reader that keeps what it
    /// parsed of each object itself (a notes tree's fanout, loaded once into a view).
    pub(crate) fn objects_read_once(&self) -> Objects<'_> {
        Objects(self, Keep::No)
    }
}

/// The stream in `slot`, reset for the next object, or made by `make` on first use; locked
/// while the caller codes its object.
fn reused<T>(
    slot: &Mutex<Option<T>>,
    make: impl FnOnce() -> Result<T>,
    reset: impl FnOnce(&mut T),
) -> Result<std::sync::MutexGuard<'_, Option<T>>> {
    let mut guard = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match guard.as_mut() {
        Some(stream) => reset(stream),
        None => *guard = Some(make()?),
    }
    Ok(guard)
}

/// Where the loose object `id` lives in the objects directory `dir`: `xx/<the rest of its id>`.
fn loose_path(dir: &std::path::Path, id: gix::ObjectId) -> std::path::PathBuf {
    let hex = id.to_hex().to_string();
    dir.join(&hex[..2]).join(&hex[2..])
}

fn not_a_blob(id: gix::ObjectId, kind: Kind) -> Error {
    Error::internal(format!("the object {id} is a {kind}, not a blob"))
}

/// A read-only temporary file in the objects directory `dir`, named as git names its own:
/// `git gc` (after gc.pruneExpire) and `git prune` remove one that a killed write left behind.
fn temp_object_file(dir: &std::path::Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(read_only())
        .tempfile_in(dir)
}

#[cfg(unix)]
fn read_only() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o444)
}

/// A [`Store`]'s object reads (loose ones through its inflate stream, the rest by gix) and
/// writes ([`Store::write_object`]).
pub(crate) struct Objects<'a>(&'a Store, Keep);

impl gix::objs::Find for Objects<'_> {
    fn try_find<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::error::Result<Option<gix::objs::Data<'a>>> {
        let id = id.to_owned();
        let mut kind = self.0.read_loose(id, buffer, self.1).map_err(gix_error)?;
        if kind.is_none() && self.1 == Keep::No {
            kind = self.0.read_uncached(id, buffer).map_err(gix_error)?;
        }
        match kind {
            Some(kind) => Ok(Some(gix::objs::Data {
                kind,
                object_hash: id.kind(),
                data: buffer,
            })),
            None => self.0.repo.objects.try_find(&id, buffer),
        }
    }
}

impl gix::objs::Write for Objects<'_> {
    fn write_buf_with_known_id(
        &self,
        kind: Kind,
        from: &[u8],
        _id: gix::ObjectId,
    ) -> gix::error::Result<gix::ObjectId> {
        self.0.write_loose(kind, from).map_err(gix_error)
    }

    fn write_stream(
        &self,
        kind: Kind,
        _size: u64,
        from: &mut dyn std::io::Read,
    ) -> gix::error::Result<gix::ObjectId> {
        let mut data = Vec::new();
        from.read_to_end(&mut data)
            .map_err(|e| gix_error(Error::internal(format!("could not read a {kind}: {e}"))))?;
        self.0.write_loose(kind, &data).map_err(gix_error)
    }

    fn write_stream_with_known_id(
        &self,
        kind: Kind,
        size: u64,
        from: &mut dyn std::io::Read,
        _id: gix::ObjectId,
    ) -> gix::error::Result<gix::ObjectId> {
        self.write_stream(kind, size, from)
    }
}

fn gix_error(e: Error) -> gix::Error {
    gix::Error::from_error(e)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::path::Path;

    use crate::store::test_git as git;
    use crate::store::test_git_command;
    use crate::store::test_repo as repo;
    use crate::store::Store;

    fn git_out(home: &Path, dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = test_git_command(home, dir, args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}");
        out.stdout
    }

    fn loose_file(repo: &Path, id: gix::ObjectId) -> std::path::PathBuf {
        super::loose_path(&repo.join(".git/objects"), id)
    }

    /// What `read_blob` reads through its one stream is what git wrote, whatever the size;
    /// packed blobs come from gix; a tree, a truncated file or a header claiming more than the
    /// file can hold is an error, not a panic or a huge allocation.
    #[test]
    fn blobs_read_by_one_reused_stream_are_what_git_wrote() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let sizes = [0usize, 1, 40, 100, 16 * 1024 - 7, 16 * 1024, 200_000];
        let blobs: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7919 % 251) as u8).collect())
            .collect();
        let mut ids = Vec::new();
        for (i, blob) in blobs.iter().enumerate() {
            let file = home.join(format!("blob{i}"));
            std::fs::write(&file, blob).expect("write");
            let hex = git_out(home, &path, &["hash-object", "-w", file.to_str().unwrap()]);
            let hex = String::from_utf8(hex).expect("hex");
            ids.push(gix::ObjectId::from_hex(hex.trim().as_bytes()).expect("id"));
        }
        let store = Store::open(&path).expect("open");
        for _ in 0..2 {
            for (blob, id) in blobs.iter().zip(&ids) {
                assert!(loose_file(&path, *id).is_file());
                assert_eq!(&store.read_blob(*id).expect("read"), blob);
            }
        }
        let tree = store.repo.head_tree_id().expect("tree").detach();
        let message = store.read_blob(tree).expect_err("a tree").message;
        assert!(message.contains("not a blob"), "{message}");

        // Damaged loose files: the stream cut short, and a header that claims 1 GB.
        let cut = ids[6];
        let bytes = std::fs::read(loose_file(&path, cut)).expect("read");
        let claim = {
            let mut z =
                gix::zlib::stream::deflate::Compress::new(gix::zlib::Compression::BEST_SPEED);
            let mut out = vec![0u8; 256];
            z.compress(
                b"blob 1000000000\0abc",
                &mut out,
                gix::zlib::stream::deflate::FlushCompress::Finish,
            )
            .expect("compressed");
            out.truncate(z.total_out() as usize);
            out
        };
        for damaged in [bytes[..bytes.len() / 2].to_vec(), claim] {
            let file = loose_file(&path, cut);
            let mut perms = std::fs::metadata(&file).expect("meta").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&file, perms).expect("writable");
            std::fs::write(&file, damaged).expect("damage");
            let store = Store::open(&path).expect("open");
            let message = store.read_blob(cut).expect_err("damaged").message;
            assert!(message.contains("is corrupt"), "{message}");
        }
        std::fs::remove_file(loose_file(&path, cut)).expect("remove");

        // Packed, the loose files pruned: gix reads them.
        for (i, id) in ids.iter().take(6).enumerate() {
            let name = format!("refs/keep/{i}");
            git(home, &path, &["update-ref", &name, &id.to_string()]);
        }
        git(home, &path, &["repack", "-a", "-d", "-q"]);
        git(home, &path, &["prune-packed"]);
        let store = Store::open(&path).expect("open");
        for (blob, id) in blobs.iter().zip(&ids).take(6) {
            assert!(!loose_file(&path, *id).exists());
            assert_eq!(&store.read_blob(*id).expect("read"), blob);
        }

        // A loose object written after the repack is still read through the one stream after
        // packed ones were read, which gix read from the pack. Blobs are not kept for a
        // second read.
        let written = Store::open(&path).expect("open");
        let late = written
            .write_blob(b"written after the repack\n")
            .expect("write");
        assert!(loose_file(&path, late).is_file());
        let hits = store.loose.hits.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            &store.read_blob(late).expect("read"),
            b"written after the repack\n"
        );
        let after = store.loose.hits.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(after, hits + 1, "read as a loose object");
        let cache = store.loose.cache.lock().expect("cache");
        assert!(!cache.objects.contains_key(&late), "a blob is not kept");
        assert!(
            !cache.objects.contains_key(&ids[0]),
            "read by gix from its pack"
        );
    }

    /// Once a command has found nearly every object packed, it stops looking for loose files
    /// first: gix reads what follows, from its packs or, for an object written since, from the
    /// loose file, and the object is the same.
    #[test]
    fn a_command_reading_mostly_packed_objects_asks_gix_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let writer = Store::open(&path).expect("open");
        let ids: Vec<gix::ObjectId> = (0..super::MISSES_BEFORE_PACKS_FIRST + 8)
            .map(|i| writer.write_blob(format!("blob {i}\n").as_bytes()))
            .collect::<Result<_, _>>()
            .expect("written");
        for (i, id) in ids.iter().enumerate() {
            git(
                home,
                &path,
                &["update-ref", &format!("refs/keep/{i}"), &id.to_string()],
            );
        }
        git(home, &path, &["repack", "-a", "-d", "-q"]);
        git(home, &path, &["prune-packed"]);

        let store = Store::open(&path).expect("open");
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                store.loose.mostly_packed(),
                i >= super::MISSES_BEFORE_PACKS_FIRST
            );
            assert_eq!(
                store.read_blob(*id).expect("read"),
                format!("blob {i}\n").as_bytes()
            );
        }
        assert!(store.loose.mostly_packed());
        let late = writer
            .write_blob(b"written after the repack\n")
            .expect("write");
        assert!(loose_file(&path, late).is_file());
        assert_eq!(
            store.read_blob(late).expect("read"),
            b"written after the repack\n"
        );
        let cache = store.loose.cache.lock().expect("cache");
        assert!(!cache.objects.contains_key(&late), "read by gix");
    }

    /// Commits and trees read through the one stream (`object`, the `Objects` reads, paths
    /// looked up with `entry_at`) are what gix reads, loose, read again from the command's
    /// cache, and packed; a missing object is `None`, or an error naming it.
    #[test]
    fn commits_and_trees_read_by_the_stream_are_what_gix_reads() {
        use gix::objs::FindExt as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        std::fs::create_dir_all(path.join("a/b")).expect("dirs");
        for (file, text) in [("a/b/c.txt", "c\n"), ("a/d.txt", "d\n"), ("top.txt", "t\n")] {
            std::fs::write(path.join(file), text).expect("write");
        }
        git(home, &path, &["add", "-A"]);
        git(home, &path, &["commit", "-q", "-m", "files"]);
        let rev = |spec: &str| crate::store::test_rev(home, &path, spec);
        let ids = [
            "HEAD",
            "HEAD^{tree}",
            "HEAD:a",
            "HEAD:a/b",
            "HEAD:a/b/c.txt",
        ]
        .map(rev);
        let missing =
            gix::ObjectId::from_hex(b"0123456789012345678901234567890123456789").expect("id");
        for packed in [false, true] {
            if packed {
                git(home, &path, &["repack", "-a", "-d", "-q"]);
                git(home, &path, &["prune-packed"]);
            }
            let store = Store::open(&path).expect("open");
            for _ in 0..2 {
                for id in ids {
                    assert_eq!(loose_file(&path, id).is_file(), !packed);
                    let ours = store.object(id).expect("read");
                    let theirs = store.repo.find_object(id).expect("gix reads it");
                    assert_eq!((ours.kind, &ours.data), (theirs.kind, &theirs.data));
                    let mut buf = Vec::new();
                    let found = store.objects().find(&id, &mut buf).expect("found");
                    assert_eq!((found.kind, found.data), (theirs.kind, &theirs.data[..]));
                }
            }
            let tree = ids[1];
            let at = |p: &str| {
                store
                    .entry_at(tree, p)
                    .expect("looked up")
                    .map(|(_, id)| id)
            };
            assert_eq!(at("a/b/c.txt"), Some(ids[4]));
            assert_eq!(at("a/b"), Some(ids[3]));
            assert!(store
                .entry_at(tree, "a/b")
                .expect("tree")
                .expect("there")
                .0
                .is_tree());
            assert_eq!(at("a/missing"), None);
            assert_eq!(at("top.txt/c.txt"), None, "a file has no entries");
            assert_eq!(at("a/b/c.txt/x"), None);
            assert!(store.try_object(missing).expect("looked up").is_none());
            let message = store.object(missing).expect_err("missing").message;
            assert!(message.contains(&missing.to_string()), "{message}");
            assert!(store.entry_at(ids[4], "x").is_err(), "a blob is not a tree");
        }
    }

    #[test]
    fn objects_written_by_one_reused_stream_are_what_git_reads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let store = Store::open(&path).expect("open");
        // Sizes around the compressor's 16 KiB output chunk, and an empty blob.
        let blobs: Vec<Vec<u8>> = [0usize, 1, 100, 16 * 1024 - 7, 16 * 1024, 200_000]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7919 % 251) as u8).collect())
            .collect();
        let mut ids = Vec::new();
        for blob in &blobs {
            ids.push(store.write_blob(blob).expect("written"));
        }
        let tree = gix::objs::Tree {
            entries: vec![gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: "f".into(),
                oid: ids[2],
            }],
        };
        let tree = store.write_object(&tree).expect("tree");
        let commit = store.write_commit("m\n", tree, []).expect("commit");

        for (blob, id) in blobs.iter().zip(&ids) {
            let hex = id.to_hex().to_string();
            assert_eq!(&git_out(home, &path, &["cat-file", "blob", &hex]), blob);
            assert!(loose_file(&path, *id).is_file(), "{hex} is a loose object");
        }
        let listed = git_out(home, &path, &["ls-tree", &commit.to_string()]);
        assert!(String::from_utf8_lossy(&listed).contains(&ids[2].to_string()));
        git(home, &path, &["fsck", "--strict", "--no-dangling"]);
        // A second store (a new stream) reads and dedups them.
        let again = Store::open(&path).expect("open");
        let before = std::fs::metadata(loose_file(&path, ids[5])).expect("there");
        assert_eq!(again.write_blob(&blobs[5]).expect("same"), ids[5]);
        let after = std::fs::metadata(loose_file(&path, ids[5])).expect("there");
        assert_eq!(
            before.modified().expect("mtime"),
            after.modified().expect("mtime"),
            "an object the repository has is not written again"
        );
        assert_eq!(
            again.repo.find_blob(ids[3]).expect("gix reads it").data,
            blobs[3]
        );
    }

    #[test]
    fn a_temporary_object_file_left_by_a_killed_write_is_one_git_prune_removes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let objects = path.join(".git/objects");
        // What a write killed before its rename leaves: the temporary file, kept.
        let mut file = super::temp_object_file(&objects).expect("temp file");
        file.write_all(b"half an object").expect("written");
        let (_, left) = file.keep().expect("kept");
        assert_eq!(left.parent(), Some(objects.as_path()));
        git(home, &path, &["fsck", "--strict"]);
        git(home, &path, &["prune"]);
        assert!(!left.exists(), "git prune removes {}", left.display());
    }

    #[test]
    fn the_loose_compression_level_is_git_s() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let data = vec![b'a'; 100_000];
        let size = |store: &Store, data: &[u8]| {
            let id = store.write_blob(data).expect("written");
            std::fs::metadata(loose_file(&path, id))
                .expect("loose")
                .len()
        };
        // Default (1) compresses; core.compression 0 stores; core.looseCompression wins.
        assert!(size(&Store::open(&path).expect("open"), &data) < 2_000);
        git(home, &path, &["config", "core.compression", "0"]);
        let stored = size(&Store::open(&path).expect("open"), &data[1..]);
        assert!(stored > 100_000, "level 0 stores: {stored}");
        git(home, &path, &["config", "core.looseCompression", "9"]);
        assert!(size(&Store::open(&path).expect("open"), &data[2..]) < 2_000);
        git(home, &path, &["config", "core.looseCompression", "12"]);
        let err = Store::open(&path)
            .expect("open")
            .write_blob(b"x")
            .expect_err("an invalid level is refused");
        assert!(err.to_string().contains("core.looseCompression"), "{err}");
    }
}
