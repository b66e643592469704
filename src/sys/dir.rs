//! A directory held open, and files opened relative to it with `openat(2)`.
//!
//! Opening `objects/ab/cdef…` by its whole path makes the kernel walk every component of the
//! path again, for each object; in a linked worktree gix spells the objects directory
//! `<common>/worktrees/<name>/../../objects`, eleven components and two `..` here. Relative to
//! the objects directory held open the walk is two components.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// An open directory.
#[derive(Debug)]
pub struct Dir(OwnedFd);

impl Dir {
    /// Open the directory `path` (an error when it is not a directory).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)?;
        Ok(Dir(file.into()))
    }

    /// Open the file `relative` (a path relative to this directory) for reading.
    pub fn open_file(&self, relative: &Path) -> io::Result<File> {
        let name = CString::new(relative.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let fd = loop {
            // SAFETY: openat(2) with a descriptor `self` keeps open for the call and a
            // NUL-terminated path that outlives it.
            let fd = unsafe {
                libc::openat(
                    self.0.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                )
            };
            if fd >= 0 {
                break fd;
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        };
        // SAFETY: `fd` is a descriptor openat(2) just returned, owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::Dir;

    #[test]
    fn opens_a_file_relative_to_the_directory_and_names_what_is_missing() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("ab")).expect("mkdir");
        std::fs::write(dir.path().join("ab/cd"), b"content").expect("write");
        let open = Dir::open(dir.path()).expect("open");
        let mut text = String::new();
        open.open_file("ab/cd".as_ref())
            .expect("opened")
            .read_to_string(&mut text)
            .expect("read");
        assert_eq!(text, "content");
        let missing = open.open_file("ab/ef".as_ref()).expect_err("missing");
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        assert!(
            Dir::open(&dir.path().join("ab/cd")).is_err(),
            "a file is not a directory"
        );
    }
}
