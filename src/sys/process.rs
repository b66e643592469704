//! Child processes: the process groups our checks and agents lead, waiting for a child without
//! reaping it, and the one `/proc` scan that finds the groups our children lead.
//!
//! Guarantees. [`ProcessGroup::signal`] never signals our own group or every process we may
//! signal (`kill(0, _)`, `kill(-1, _)`): a group id of 0 or 1 is ignored. While a child that
//! leads its group is an unreaped zombie ([`wait_exited_unreaped`]) its pid, which is the group
//! id, cannot be reused, so signalling the group cannot hit a stranger.
//!
//! Failure model. Signals are best effort: a group that is already empty (ESRCH) is fine and
//! nothing is reported. [`child_groups`] reads `/proc` (Linux); a process that exits while it
//! is read is skipped, and elsewhere it finds nothing.

use std::io;
use std::mem;

/// A process group led by a child of ours (`Command::process_group(0)` makes its id the
/// child's pid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(libc::pid_t);

impl ProcessGroup {
    /// The group the child `pid` leads; a pid that does not fit is group 0, which
    /// [`ProcessGroup::signal`] ignores.
    pub fn led_by(pid: u32) -> ProcessGroup {
        ProcessGroup(libc::pid_t::try_from(pid).unwrap_or(0))
    }

    /// Signals every process still in the group; an empty group (ESRCH) is fine.
    pub fn signal(self, signal: libc::c_int) {
        // kill(0, _) or kill(-1, _) would hit our own group or every process we may signal.
        if self.0 > 1 {
            // SAFETY: kill(2) has no memory-safety preconditions; the negative id names the
            // group, and the check above keeps it away from 0 and -1.
            unsafe {
                libc::kill(-self.0, signal);
            }
        }
    }
}

/// Blocks until the child `pid` has exited, without reaping it (`WNOWAIT`): while it is a
/// zombie its pid, which is also its process group id, stays reserved.
pub fn wait_exited_unreaped(pid: u32) -> io::Result<()> {
    loop {
        // SAFETY: `siginfo_t` is plain data for which all-zero is a valid value; `waitid`
        // only writes into it.
        let mut info: libc::siginfo_t = unsafe { mem::zeroed() };
        // SAFETY: a plain syscall on our own child with a valid out-pointer.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                libc::id_t::from(pid),
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Whether no process `pid` exists any more (signal 0 fails with ESRCH). A process we may not
/// signal still exists.
pub fn is_gone(pid: libc::pid_t) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks whether the process exists; `pid` is positive, so it names
    // one process, never a group.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The process groups led by direct children of ours (each agent or check the runner
/// started), never our own group. Linux only: elsewhere it finds nothing.
pub fn child_groups() -> Vec<ProcessGroup> {
    if !cfg!(target_os = "linux") {
        return Vec::new();
    }
    let me = std::process::id();
    // SAFETY: getpgrp(2) cannot fail and has no preconditions.
    let my_group = unsafe { libc::getpgrp() };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(ids) = parse_stat(&stat) else {
            continue;
        };
        let leads_own_group = u32::try_from(ids.pgrp).ok() == Some(pid);
        let group = ProcessGroup(ids.pgrp);
        if ids.ppid == me && leads_own_group && ids.pgrp != my_group && !out.contains(&group) {
            out.push(group);
        }
    }
    out
}

/// The ids of `/proc/<pid>/stat` that [`child_groups`] needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatIds {
    ppid: u32,
    pgrp: libc::pid_t,
}

/// Parses `pid (comm) state ppid pgrp …`; `comm` may hold spaces and parentheses, so the
/// fields are counted after the last `)`.
fn parse_stat(stat: &str) -> Option<StatIds> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(1);
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(StatIds { ppid, pgrp })
}

/// Sends `signal` to process `pid` (a worker passes a stop on to its lanes; tests stop
/// processes that left a check's group).
pub fn kill(pid: libc::pid_t, signal: libc::c_int) {
    if pid > 0 {
        // SAFETY: kill(2) on one positive pid has no memory-safety preconditions.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Waits up to `timeout` for `pid` to exit, whoever its parent is: a pidfd becomes readable
/// when the process exits, and a zombie counts as gone. `Ok(false)` if it is still running.
#[cfg(test)]
pub fn wait_gone(pid: libc::pid_t, timeout: std::time::Duration) -> io::Result<bool> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(true),
            _ => Err(err),
        };
    }
    let fd = libc::c_int::try_from(fd).map_err(io::Error::other)?;
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd that lives across the call.
    let ready = unsafe { libc::poll(&mut pollfd, 1, millis) };
    // SAFETY: the pidfd is ours and closed once.
    unsafe { libc::close(fd) };
    Ok(ready == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let stat = "4242 (a) b (c) d) S 17 4242 4242 0 -1";
        assert_eq!(
            parse_stat(stat),
            Some(StatIds {
                ppid: 17,
                pgrp: 4242
            })
        );
        assert_eq!(parse_stat("4242 (cut"), None);
        assert_eq!(parse_stat("4242 (x) S"), None);
    }

    #[test]
    fn a_child_leading_its_group_is_found_and_signalled() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let group = ProcessGroup::led_by(child.id());
        assert!(child_groups().contains(&group), "{group:?}");
        group.signal(libc::SIGKILL);
        let status = child.wait().expect("wait");
        assert!(status.code().is_none(), "killed by a signal: {status:?}");
        assert!(!child_groups().contains(&group));
    }

    #[test]
    fn our_own_process_exists_and_group_zero_is_never_signalled() {
        assert!(!is_gone(
            libc::pid_t::try_from(std::process::id()).expect("pid fits")
        ));
        ProcessGroup::led_by(0).signal(libc::SIGKILL);
        ProcessGroup::led_by(1).signal(0);
    }
}
