//! A person at a terminal: `git tabellio loop` run through git's dispatcher on a real
//! pseudo-terminal, interrupted by the terminal's interrupt character (Ctrl-C) as a person
//! would, not by a signal sent to one process.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::util::*;

/// A new pseudo-terminal: its master end, and the path of its slave end.
fn open_pty() -> (File, PathBuf) {
    // SAFETY: plain libc calls on a descriptor we own; `ptsname_r` writes into a buffer of the
    // length it is given.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master_file = File::from_raw_fd(master);
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_str()
            .unwrap()
            .to_string();
        (master_file, PathBuf::from(slave))
    }
}

/// Start `program args` in `cwd` as the session leader of the pseudo-terminal at `slave`, its
/// foreground process group, with the terminal as stdin, stdout and stderr.
fn spawn_on_terminal(t: &TestEnv, slave: &Path, cwd: &Path, program: &str, args: &[&str]) -> Child {
    let tty = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(slave)
            .expect("open the terminal")
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::from(OwnedFd::from(tty())))
        .stdout(Stdio::from(OwnedFd::from(tty())))
        .stderr(Stdio::from(OwnedFd::from(tty())));
    hermetic(&mut cmd, &t.home);
    cmd.env("TERM", "xterm");
    // SAFETY: setsid(2) and ioctl(2) are async-signal-safe; stdin is the terminal by now.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("spawn on the terminal")
}

/// Everything the terminal shows until every process has closed it (Linux reports EIO then).
fn read_screen(mut master: File) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut screen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => screen.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&screen).into_owned()
    })
}

/// An agent (`sh` script outside the worktree) that writes its pid to the FIFO once it runs,
/// then waits to be stopped; `deaf` makes it ignore SIGTERM.
fn waiting_agent(t: &TestEnv, fifo: &Path, deaf: bool) -> PathBuf {
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let path = t.path().join("agent.sh");
    write_file(
        &path,
        &format!(
            "#!/bin/sh\n{}echo $$ > '{}'\nexec sleep 120\n",
            if deaf { "trap '' TERM\n" } else { "" },
            fifo.display()
        ),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A loop on a new terminal: `<program> <args…> loop r1 -- <agent>` with an agent as
/// [`waiting_agent`] makes it, started and running.
struct LoopOnTerminal {
    t: TestEnv,
    child: Child,
    /// The master end, to type on.
    input: File,
    screen: std::thread::JoinHandle<String>,
    agent_pid: libc::pid_t,
}

fn loop_on_terminal(program: &str, args: &[&str], deaf_agent: bool) -> LoopOnTerminal {
    let t = TestEnv::new();
    t.commit_policy(&policy(&[("test", &["false"])]));
    t.tab(&["start", "r1", "--task", "t"]).ok();
    let fifo = t.path().join("agent.fifo");
    let agent = waiting_agent(&t, &fifo, deaf_agent);
    let (master, slave) = open_pty();
    let input = master.try_clone().unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["loop", "r1", "--", agent.to_str().unwrap()]);
    let child = spawn_on_terminal(&t, &slave, &t.repo, program, &all);
    let screen = read_screen(master);
    // The agent runs: the loop is in its execute phase.
    let mut pid = String::new();
    File::open(&fifo).unwrap().read_to_string(&mut pid).unwrap();
    LoopOnTerminal {
        t,
        child,
        input,
        screen,
        agent_pid: pid.trim().parse().expect("the agent's pid"),
    }
}

/// The child's exit status, or `None` when it still runs after `secs` seconds.
fn wait_at_most(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Ctrl-C on the terminal of `<program> <args…> loop r1 -- <agent>` once the agent runs: the
/// loop records the interrupt and prints how to resume, whether git's dispatcher stands in
/// front of it (git gets the Ctrl-C too, and forwards it to its child) or not.
fn ctrl_c_during_the_agent(program: &str, args: &[&str]) {
    let LoopOnTerminal {
        t,
        mut child,
        mut input,
        screen,
        ..
    } = loop_on_terminal(program, args, false);
    input.write_all(&[0x03]).expect("type Ctrl-C");
    let status = child.wait().unwrap();
    drop(input);
    let screen = screen.join().unwrap();
    let run = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(
        run["state"], "blocked",
        "{program} {args:?} ended with {status:?} without recording the interrupt; the terminal showed:\n{screen}"
    );
    assert_eq!(run["loop"]["why_harness_stopped"], "interrupted", "{run:#}");
    assert!(
        screen.contains("git tabellio loop r1 --resume"),
        "no --resume line on the terminal:\n{screen}"
    );
    // git ends by the signal after its child ended; the tool itself exits 1 (a blocked run).
    assert!(
        status.code() == Some(1) || status.signal() == Some(libc::SIGINT),
        "{status:?}\n{screen}"
    );
}

#[test]
fn ctrl_c_through_git_records_the_interrupt() {
    ctrl_c_during_the_agent("git", &["tabellio"]);
}

#[test]
fn ctrl_c_on_the_binary_records_the_interrupt() {
    ctrl_c_during_the_agent(BIN, &[]);
}

/// A second Ctrl-C, typed while the loop waits for an agent that ignores the first one's
/// SIGTERM, still ends the loop at once through git: only git's copy of a signal is ignored.
#[test]
fn a_second_ctrl_c_through_git_ends_the_loop_at_once() {
    let LoopOnTerminal {
        t,
        mut child,
        mut input,
        screen,
        agent_pid,
    } = loop_on_terminal("git", &["tabellio"], true);
    input.write_all(&[0x03]).expect("type Ctrl-C");
    // A person's second Ctrl-C comes well after git's copy of the first (which git sends at
    // once); the wait only has to outlast the echo window.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first Ctrl-C ended the loop"
    );
    input.write_all(&[0x03]).expect("type Ctrl-C again");
    let status = wait_at_most(&mut child, 30);
    // SAFETY: stopping the agent (which ignores SIGTERM) the test started through the loop.
    unsafe { libc::kill(agent_pid, libc::SIGKILL) };
    let status = status.unwrap_or_else(|| {
        child.kill().unwrap();
        panic!("the second Ctrl-C did not end the loop")
    });
    drop(input);
    let screen = screen.join().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}\n{screen}");
    // Ended at once: nothing recorded, the ledger still says looping (`--resume` continues).
    let run = t.ledger_record("refs/tabellio/runs/r1");
    assert_eq!(run["state"], "looping", "{screen}");
}
