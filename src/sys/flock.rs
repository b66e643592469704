//! Advisory `flock(2)` locks on open files.
//!
//! A lock belongs to the open file description: it is held until it is unlocked or the last
//! descriptor sharing that description is closed, including descriptors children inherited,
//! and the kernel releases it when its holders die, so it can never be left stale. Failures are
//! `io::Error`s; a lock already held by someone else is [`Locked::Busy`] (only with
//! [`Wait::No`]), not an error.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// Whether [`lock_exclusive`] waits for a lock someone else holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Block until the lock is free (retrying when a signal interrupts the wait).
    Yes,
    /// Return [`Locked::Busy`] at once.
    No,
}

/// The result of [`lock_exclusive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Locked {
    /// We hold the lock now.
    Acquired,
    /// Someone else holds it (only with [`Wait::No`]).
    Busy,
}

/// Take an exclusive lock on `file`.
pub fn lock_exclusive(file: &File, wait: Wait) -> io::Result<Locked> {
    let operation = match wait {
        Wait::Yes => libc::LOCK_EX,
        Wait::No => libc::LOCK_EX | libc::LOCK_NB,
    };
    loop {
        // SAFETY: flock(2) on a descriptor the borrowed `File` keeps open for the call.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(Locked::Acquired);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) if wait == Wait::No => return Ok(Locked::Busy),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// Release the lock on `file` for every descriptor sharing its open file description. Best
/// effort: closing the last descriptor releases it anyway.
pub fn unlock(file: &File) {
    // SAFETY: flock(2) on a descriptor the borrowed `File` keeps open for the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// Let children started from now on inherit `file`'s descriptor (clear close-on-exec), so a
/// lock on it is held until the last of them exits too.
pub fn inherit_across_exec(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl(2) F_GETFD/F_SETFD on a descriptor the borrowed `File` keeps open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_description_is_busy_until_the_first_unlocks() {
        let path = std::env::temp_dir().join(format!("tabellio-flock-{}", std::process::id()));
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .expect("open lock file")
        };
        let (first, second) = (open(), open());
        assert_eq!(
            lock_exclusive(&first, Wait::No).expect("lock"),
            Locked::Acquired
        );
        assert_eq!(
            lock_exclusive(&second, Wait::No).expect("try"),
            Locked::Busy
        );
        unlock(&first);
        assert_eq!(
            lock_exclusive(&second, Wait::Yes).expect("lock"),
            Locked::Acquired
        );
        inherit_across_exec(&second).expect("clear close-on-exec");
        drop((first, second));
        let _ = std::fs::remove_file(&path);
    }
}
