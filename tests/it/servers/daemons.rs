//! Real git servers for the `servers` tests (the recipe is docs/servers.md): git's own
//! `git http-backend` behind lighttpd (CGI, smart HTTP), OpenSSH's `sshd` with `git-shell` as
//! the forced command, and `git daemon`. Each listens on a free port of 127.0.0.1 only, runs
//! under `timeout` (so a test process that dies cannot leave one behind for long), and is
//! stopped by killing its process group — the one `timeout` leads — when it is dropped.
//!
//! A server program that is not installed is not a failure: the constructor says on stderr
//! which server it skipped, and returns `None`.

use std::ffi::OsString;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::util::*;

/// The most a server lives, in seconds, whatever happens to the test process.
const LIFETIME_S: &str = "600";
/// How long a server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(15);

/// The user and password the HTTP server accepts (basic auth).
pub const HTTP_USER: &str = "alice";
pub const HTTP_PASSWORD: &str = "secret";

/// `name` on `PATH` or in the usual system directories (sshd lives in `/usr/sbin`).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Say that a server is skipped, and why (the test then passes without it).
pub fn skip(server: &str, why: &str) {
    eprintln!("servers: skipped {server}: {why}");
}

/// `git --exec-path`: where `git-http-backend`, `git-shell` and `git-daemon` are.
fn git_exec_path() -> PathBuf {
    let out = Command::new("git").arg("--exec-path").output().unwrap();
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}

/// One server process (`argv`, started under `timeout`), listening on `port`.
pub struct Daemon {
    name: &'static str,
    home: PathBuf,
    argv: Vec<OsString>,
    log: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Daemon {
    /// Start the server `make(port)` builds on a free port; a port taken meanwhile by someone
    /// else is retried with another.
    fn start(
        name: &'static str,
        root: &Path,
        mut make: impl FnMut(u16) -> Vec<OsString>,
    ) -> Daemon {
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let log = root.join(format!("{}.log", name.replace(' ', "-")));
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let mut d = Daemon {
                name,
                home: home.clone(),
                argv: make(port),
                log: log.clone(),
                port,
                child: None,
            };
            match d.spawn() {
                Ok(()) => return d,
                Err(e) => last = e,
            }
        }
        panic!("{name} did not start: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new("timeout");
        // The server and everything it starts (hooks included) see no outer git settings.
        hermetic(&mut cmd, &self.home);
        let mut child = cmd
            .args(["-s", "KILL", LIFETIME_S])
            .args(&self.argv)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("could not run timeout {:?}: {e}", self.argv))?;
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            let log = || std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("{} exited ({status}):\n{}", self.name, log()));
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                return Err(format!("{} never listened:\n{}", self.name, log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stop the server now: its process group is killed and reaped.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }

    /// Start it again on the same port (after it was killed).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_LIMIT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The old listener's socket may linger a moment.
                Err(e) if Instant::now() > deadline => panic!("{} did not restart: {e}", self.name),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Whether the server process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
            && TcpStream::connect(("127.0.0.1", self.port)).is_ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `timeout` puts itself and the server in a process group of their own, led by its pid: kill
/// the whole group (the server's CGI and session children too), then reap `timeout`.
fn kill_group(child: &mut Child) {
    // SAFETY: killpg with a pid we started and have not reaped (so not reused).
    unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
}

fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

/// A bare repository served by one of the servers, with `main` carrying `policy` and the
/// server hook installed (`hooks install --server`). `env.repo` is its directory.
pub struct Served {
    pub env: TestEnv,
    /// The URL a client clones.
    pub url: String,
}

/// Make the bare repository `dir` from a seed holding `policy` on `main`, with the
/// server hook installed.
fn make_served(dir: &Path, policy: &str) -> TestEnv {
    let seed = TestEnv::new();
    seed.commit_policy(policy);
    let (from, to) = (seed.repo.to_str().unwrap(), dir.to_str().unwrap());
    seed.git_in(
        seed.path(),
        &["clone", "-q", "--bare", "--no-local", from, to],
    )
    .ok();
    let home = tempfile::tempdir().unwrap();
    let env = TestEnv {
        home: home.path().to_path_buf(),
        dir: home,
        repo: dir.to_path_buf(),
    };
    env.git(&["remote", "remove", "origin"]).ok();
    env.tab(&["hooks", "install", "--server"]).ok();
    env
}

// ---------------------------------------------------------------------------------------------
// HTTP: lighttpd + git http-backend

/// The areas of the HTTP server, each a directory of repositories (`GIT_PROJECT_ROOT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// Anyone reads and pushes (`http.receivepack` is set in each repository).
    Anon,
    /// Anyone reads; pushing needs a login (`git http-backend` enables receive-pack for an
    /// authenticated user).
    ReadOnly,
    /// Everything needs a login.
    Private,
}

impl Area {
    fn dir(self) -> &'static str {
        match self {
            Area::Anon => "anon",
            Area::ReadOnly => "ro",
            Area::Private => "private",
        }
    }
}

/// lighttpd serving `git http-backend` over CGI on 127.0.0.1.
pub struct Http {
    pub root: tempfile::TempDir,
    pub daemon: Mutex<Daemon>,
}

impl Http {
    /// A server of its own (for a test that kills it), or `None` when lighttpd is missing.
    pub fn start() -> Option<Http> {
        let Some(lighttpd) = find_program("lighttpd") else {
            skip(
                "HTTP (lighttpd + git http-backend)",
                "lighttpd is not installed",
            );
            return None;
        };
        if find_program("timeout").is_none() {
            skip("HTTP", "timeout (coreutils) is not installed");
            return None;
        }
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for area in ["anon", "ro", "private", "www"] {
            std::fs::create_dir_all(r.join(area)).unwrap();
        }
        std::fs::write(r.join("users"), format!("{HTTP_USER}:{HTTP_PASSWORD}\n")).unwrap();
        // The CGI program: git http-backend, unless a test asked for the server to die when a
        // push arrives (before receive-pack has read any of it).
        let cgi = r.join("cgi");
        write_file(
            &cgi,
            &format!(
                "#!/bin/sh\n\
                 case \"$REQUEST_METHOD $PATH_INFO\" in\n\
                 \"POST \"*/git-receive-pack)\n\
                 \x20 if [ -e '{root}/kill-before-push' ]; then\n\
                 \x20   rm -f '{root}/kill-before-push'\n\
                 \x20   kill -9 \"$(cat '{root}/lighttpd.pid')\"\n\
                 \x20   exit 1\n\
                 \x20 fi;;\n\
                 esac\n\
                 exec '{backend}'\n",
                root = r.display(),
                backend = git_exec_path().join("git-http-backend").display()
            ),
        );
        make_executable(&cgi);
        let conf = r.join("lighttpd.conf");
        let root_s = r.display().to_string();
        let daemon = Daemon::start("lighttpd", r, |port| {
            write_file(&conf, &lighttpd_conf(&root_s, port));
            vec![os(&lighttpd), os("-D"), os("-f"), os(&conf)]
        });
        Some(Http {
            root,
            daemon: Mutex::new(daemon),
        })
    }

    /// The server the module's tests share: started by the first test that asks, stopped when
    /// the last one holding it is done.
    pub fn shared() -> Option<Arc<Http>> {
        static SHARED: Mutex<Weak<Http>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(http) = slot.upgrade() {
            return Some(http);
        }
        let http = Arc::new(Http::start()?);
        *slot = Arc::downgrade(&http);
        Some(http)
    }

    fn port(&self) -> u16 {
        self.daemon.lock().unwrap().port()
    }

    /// The URL of repository `name` in `area`, with `user:password@` when given.
    pub fn url(&self, area: Area, name: &str, login: Option<(&str, &str)>) -> String {
        let login = login.map_or(String::new(), |(u, p)| format!("{u}:{p}@"));
        format!(
            "http://{login}127.0.0.1:{}/{}/{name}.git",
            self.port(),
            area.dir()
        )
    }

    /// A new repository `name` in `area`, served with `policy` on `main`.
    pub fn serve(&self, area: Area, name: &str, policy: &str) -> Served {
        let dir = self
            .root
            .path()
            .join(area.dir())
            .join(format!("{name}.git"));
        let env = make_served(&dir, policy);
        if area == Area::Anon {
            env.git(&["config", "http.receivepack", "true"]).ok();
        }
        Served {
            env,
            url: self.url(area, name, None),
        }
    }

    /// Make the server die when the next push arrives, before receive-pack reads it.
    pub fn kill_before_next_push(&self) {
        write_file(&self.root.path().join("kill-before-push"), "");
    }

    /// Make the server die right after the next ref update of `served` was committed there
    /// (a `reference-transaction` hook in the `committed` phase), before the client hears of it.
    pub fn kill_after_next_ref_update(&self, served: &Served) {
        let marker = self.root.path().join("kill-after-update");
        let hook = served.env.repo.join("hooks/reference-transaction");
        write_file(
            &hook,
            &format!(
                "#!/bin/sh\n\
                 [ \"$1\" = committed ] && [ -e '{marker}' ] || exit 0\n\
                 rm -f '{marker}'\n\
                 kill -9 \"$(cat '{pid}')\"\n",
                marker = marker.display(),
                pid = self.root.path().join("lighttpd.pid").display()
            ),
        );
        make_executable(&hook);
        write_file(&marker, "");
    }
}

fn lighttpd_conf(root: &str, port: u16) -> String {
    let auth = r#"auth.require = ( "" => ( "method" => "basic", "realm" => "git", "require" => "valid-user" ) )"#;
    format!(
        r#"server.modules = ( "mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_cgi" )
server.bind = "127.0.0.1"
server.port = {port}
server.document-root = "{root}/www"
server.pid-file = "{root}/lighttpd.pid"
server.errorlog = "{root}/error.log"
auth.backend = "plain"
auth.backend.plain.userfile = "{root}/users"
alias.url = ( "/anon/" => "{root}/cgi/", "/ro/" => "{root}/cgi/", "/private/" => "{root}/cgi/" )
cgi.assign = ( "" => "" )
setenv.set-environment = (
  "PATH" => "{path}",
  "HOME" => "{root}/home",
  "GIT_CONFIG_NOSYSTEM" => "1",
  "GIT_CONFIG_GLOBAL" => "/dev/null",
  "GIT_HTTP_EXPORT_ALL" => "1"
)
$HTTP["url"] =~ "^/anon/" {{ setenv.add-environment = ( "GIT_PROJECT_ROOT" => "{root}/anon" ) }}
$HTTP["url"] =~ "^/ro/" {{
  setenv.add-environment = ( "GIT_PROJECT_ROOT" => "{root}/ro" )
  $HTTP["querystring"] =~ "service=git-receive-pack" {{ {auth} }}
  $HTTP["url"] =~ "/git-receive-pack$" {{ {auth} }}
}}
$HTTP["url"] =~ "^/private/" {{
  setenv.add-environment = ( "GIT_PROJECT_ROOT" => "{root}/private" )
  {auth}
}}
"#,
        path = path_with_binary(),
    )
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// SSH: sshd + git-shell

/// OpenSSH's sshd on 127.0.0.1 with its own config and host key; one user key, whose
/// `authorized_keys` line forces `git-shell`.
pub struct Ssh {
    pub root: tempfile::TempDir,
    pub daemon: Daemon,
    user: String,
}

impl Ssh {
    pub fn start() -> Option<Ssh> {
        let (Some(sshd), Some(_), Some(keygen)) = (
            find_program("sshd"),
            find_program("ssh"),
            find_program("ssh-keygen"),
        ) else {
            skip(
                "SSH (sshd + git-shell)",
                "sshd, ssh or ssh-keygen is not installed",
            );
            return None;
        };
        if find_program("timeout").is_none() {
            skip("SSH", "timeout (coreutils) is not installed");
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            skip(
                "SSH",
                "sshd must run as root to switch to the logged-in user",
            );
            return None;
        }
        // sshd running as root insists on its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for key in ["host_key", "user_key"] {
            let out = Command::new(&keygen)
                .args(["-q", "-t", "ed25519", "-N", "", "-C", key, "-f"])
                .arg(r.join(key))
                .output()
                .unwrap();
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        let public = std::fs::read_to_string(r.join("user_key.pub")).unwrap();
        let shell = git_exec_path().join("git-shell");
        write_file(
            &r.join("authorized_keys"),
            &format!(
                "command=\"{} -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",restrict {}",
                shell.display(),
                public.trim()
            ),
        );
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        let conf = r.join("sshd_config");
        let root_s = r.display().to_string();
        let daemon = Daemon::start("sshd", r, |port| {
            write_file(&conf, &sshd_conf(&root_s, port));
            // sshd re-executes itself: it needs its absolute path.
            vec![os(&sshd), os("-D"), os("-e"), os("-f"), os(&conf)]
        });
        Some(Ssh { root, daemon, user })
    }

    /// The sshd the module's tests share: started by the first test that asks, stopped when the
    /// last one holding it is done.
    pub fn shared() -> Option<Arc<Ssh>> {
        static SHARED: Mutex<Weak<Ssh>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ssh) = slot.upgrade() {
            return Some(ssh);
        }
        let ssh = Arc::new(Ssh::start()?);
        *slot = Arc::downgrade(&ssh);
        Some(ssh)
    }

    /// `GIT_SSH_COMMAND` for a client holding `key` (the authorised one by default).
    pub fn ssh_command(&self, key: Option<&Path>) -> String {
        let key = key.map_or_else(|| self.root.path().join("user_key"), Path::to_path_buf);
        format!(
            "ssh -F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
             -o BatchMode=yes -o IdentitiesOnly=yes -o LogLevel=ERROR -i {} -p {}",
            key.display(),
            self.daemon.port()
        )
    }

    /// A new repository `name`, served with `policy` on `main`.
    pub fn serve(&self, name: &str, policy: &str) -> Served {
        let dir = self.root.path().join("repos").join(format!("{name}.git"));
        let env = make_served(&dir, policy);
        Served {
            env,
            url: format!("{}@127.0.0.1:{}", self.user, dir.display()),
        }
    }
}

fn sshd_conf(root: &str, port: u16) -> String {
    format!(
        "Port {port}
ListenAddress 127.0.0.1
HostKey {root}/host_key
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PrintMotd no
SetEnv PATH={path} GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
LogLevel ERROR
",
        path = path_with_binary(),
    )
}

// ---------------------------------------------------------------------------------------------
// git daemon (read-only)

/// `git daemon` serving every repository under its base path, read-only (receive-pack is off,
/// git daemon's default).
pub struct GitDaemon {
    pub root: tempfile::TempDir,
    pub daemon: Daemon,
}

impl GitDaemon {
    pub fn start() -> Option<GitDaemon> {
        if find_program("timeout").is_none() {
            skip("git daemon", "timeout (coreutils) is not installed");
            return None;
        }
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("repos");
        std::fs::create_dir_all(&base).unwrap();
        let daemon = Daemon::start("git daemon", root.path(), |port| {
            vec![
                os("git"),
                os("daemon"),
                os("--reuseaddr"),
                os("--listen=127.0.0.1"),
                os(format!("--port={port}")),
                os(format!("--base-path={}", base.display())),
                os("--export-all"),
                os(&base),
            ]
        });
        Some(GitDaemon { root, daemon })
    }

    pub fn serve(&self, name: &str, policy: &str) -> Served {
        let dir = self.root.path().join("repos").join(format!("{name}.git"));
        let env = make_served(&dir, policy);
        Served {
            env,
            url: format!("git://127.0.0.1:{}/{name}.git", self.daemon.port()),
        }
    }
}
