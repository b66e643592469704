//! Setup the tests share, named for the domain: commits, policies, runs started and finished,
//! ledgers and notes forged by hand, and the repositories a test starts from. Plumbing (running
//! commands hermetically) lives in `util`.

use std::path::{Path, PathBuf};

use crate::util::*;

impl TestEnv {
    /// A repository whose main worktree is on `elsewhere`, so `main` is a ref-only target.
    pub fn ref_only() -> TestEnv {
        let t = TestEnv::new();
        t.git(&["switch", "-q", "-c", "elsewhere"]).ok();
        t
    }

    /// A repository whose `main` carries a policy requiring `readme` (`test -f README.md`).
    pub fn with_readme_policy() -> TestEnv {
        let t = TestEnv::new();
        t.commit_policy(&policy(&[("readme", &["test", "-f", "README.md"])]));
        t
    }

    /// A bare server and two clones of it (`origin`): two machines sharing one remote.
    pub fn server_and_two_clones() -> (TestEnv, TestEnv, TestEnv) {
        let server = TestEnv::bare_server();
        let a = TestEnv::clone_of(&server);
        let b = TestEnv::clone_of(&server);
        (server, a, b)
    }

    /// A bare clone of the repository at `<test dir>/bare.git`.
    pub fn bare_clone(&self) -> PathBuf {
        let bare = self.path().join("bare.git");
        let (from, to) = (self.repo.to_str().unwrap(), bare.to_str().unwrap());
        self.git(&with_ref_format(&["clone", "-q", "--bare", from, to]))
            .ok();
        self.assert_ref_storage(&["clone"], &bare);
        bare
    }

    /// A bare repository at `<test dir>/server.git` added as `origin`, with `main` pushed to
    /// it (as `refspecs` say: e.g. `["main"]`, or a commit and the notes), and the server's
    /// pre-receive shim installed.
    pub fn origin_with_hook(&self, refspecs: &[&str]) -> PathBuf {
        let server = self.path().join("server.git");
        let path = server.to_str().unwrap();
        self.git_in(self.path(), &["init", "-q", "--bare", "-b", "main", path])
            .ok();
        self.git(&["remote", "add", "origin", path]).ok();
        let mut push = vec!["push", "-q", "origin"];
        push.extend_from_slice(refspecs);
        self.git(&push).ok();
        self.tab_in(&server, &["hooks", "install", "--server"]).ok();
        assert!(server.join("hooks/pre-receive").exists());
        server
    }

    /// Start run `id` from main and commit `file` (with `content`) in its worktree.
    pub fn started_with(&self, id: &str, file: &str, content: &str) -> PathBuf {
        let task = format!("task {id}");
        self.tab(&["start", id, "--task", &task, "--base", "main"])
            .ok();
        let wt = self.worktree(id);
        self.commit_file_in(&wt, file, content);
        wt
    }

    /// `git add -A` and commit with `message`, in `cwd`.
    pub fn commit_all_in(&self, cwd: &Path, message: &str) {
        self.git_in(cwd, &["add", "-A"]).ok();
        self.git_in(cwd, &["commit", "-q", "-m", message]).ok();
    }

    /// `git add -A` and commit with `message`, in the main worktree.
    pub fn commit_all(&self, message: &str) {
        self.commit_all_in(&self.repo, message);
    }

    /// Write `file` under `cwd` with `content` and commit everything as `edit <file>`.
    pub fn commit_file_in(&self, cwd: &Path, file: &str, content: &str) {
        write_file(&cwd.join(file), content);
        self.commit_all_in(cwd, &format!("edit {file}"));
    }

    /// Commit `policy` as `.tabellio/policy.json` on the checked-out branch (message `policy`).
    pub fn commit_policy(&self, policy: &str) {
        self.write(".tabellio/policy.json", policy);
        self.commit_all("policy");
    }

    /// Commit a policy requiring `ok` (`true`) and plan hygiene (the finish gate on plans).
    pub fn commit_hygiene_policy(&self) {
        let policy = serde_json::json!({
            "schema": "tabellio.policy/v1",
            "checks": {"ok": {"argv": ["true"], "timeout_s": 30}},
            "required": ["ok"],
            "plans": {"require_hygiene": true}
        });
        self.commit_policy(&policy.to_string());
    }

    /// Start run `id`, commit `file` with `content` in its worktree.
    pub fn start_with_commit(&self, id: &str, file: &str, content: &str) -> PathBuf {
        self.tab(&["start", id, "--task", "test task"]).ok();
        let wt = self.worktree(id);
        self.commit_file_in(&wt, file, content);
        wt
    }

    /// A repository whose `main` (checked out nowhere) requires `check` (`true`), and the runs
    /// `ids` started from it, each committing `<id>.txt`, finished: ready to land.
    pub fn runs_to_land(check: &str, ids: &[&str]) -> Self {
        let t = TestEnv::ref_only();
        t.git(&["switch", "-q", "main"]).ok();
        t.commit_policy(&policy(&[(check, &["true"])]));
        t.git(&["switch", "-q", "elsewhere"]).ok();
        for id in ids {
            t.started_run(id, &format!("{id}.txt"));
            t.tab(&["finish", id]).ok();
        }
        t
    }

    /// Start `id` from `main` (task `t`) and commit `file` saying `<id>`; its worktree.
    pub fn started_run(&self, id: &str, file: &str) -> PathBuf {
        self.tab(&["start", id, "--task", "t", "--base", "main"])
            .ok();
        let wt = self.worktree(id);
        self.commit_file_in(&wt, file, &format!("{id}\n"));
        wt
    }

    /// [`TestEnv::started_run`], then finished with a passing check; its worktree.
    pub fn completed_run(&self, id: &str, file: &str) -> PathBuf {
        let wt = self.started_run(id, file);
        self.tab(&["finish", id, "--", "true"]).ok();
        wt
    }

    /// A ref-only promotion of a completed run `id` killed between its two ref writes: `main`
    /// at the validated commit, the ledger still `completed`. The validated commit.
    pub fn half_promoted_run(&self, id: &str, file: &str) -> String {
        self.completed_run(id, file);
        let validated = self.git_out(&["rev-parse", &format!("tabellio/{id}")]);
        self.git(&["update-ref", "refs/heads/main", &validated])
            .ok();
        validated
    }

    /// What a `start` killed inside its ref transaction leaves: the ledger of `id` written, its
    /// branch not, the branch's `.lock` file still there, no worktree. The lock's path.
    pub fn torn_start(&self, id: &str) -> PathBuf {
        self.tab(&["start", id, "--task", "t"]).ok();
        let wt = self.worktree(id);
        self.git(&["worktree", "remove", "--force", wt.to_str().unwrap()])
            .ok();
        let branch = format!("refs/heads/tabellio/{id}");
        let base = self.git_out(&["rev-parse", &branch]);
        self.git(&["update-ref", "-d", &branch]).ok();
        let lock = self.repo.join(format!(".git/{branch}.lock"));
        write_file(&lock, &format!("{base}\n"));
        lock
    }

    /// A blob (`README.md` of main), a tree (main's) and an unrelated commit (main itself): what
    /// a corrupt ledger or notes ref points at.
    pub fn corrupt_targets(&self) -> [(&'static str, String); 3] {
        [
            ("blob", self.git_out(&["rev-parse", "main:README.md"])),
            ("tree", self.git_out(&["rev-parse", "main^{tree}"])),
            ("commit", self.git_out(&["rev-parse", "main"])),
        ]
    }

    /// The whole run record (`tabellio.run/v1`) of the ledger commit `rev`, read with stock git
    /// only, as a reader without tabellio would: a v2 commit's `run.json`, with the task text
    /// from `task.txt` and the entries under `history/` put back in their places.
    pub fn ledger_record(&self, rev: &str) -> serde_json::Value {
        let show = |path: &str| {
            let r = self.git(&["show", &format!("{rev}:{path}")]);
            r.ok();
            r.stdout
        };
        let mut run: serde_json::Value = serde_json::from_str(&show("run.json")).unwrap();
        if run["schema"] == "tabellio.run/v1" {
            return run;
        }
        assert_eq!(run["schema"], "tabellio.run/v2", "{run}");
        run["task"]["text"] = show("task.txt").into();
        let mut history: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
            ["checkpoints", "attempts", "loop"]
                .iter()
                .map(|k| (k.to_string(), Vec::new()))
                .collect();
        let paths = self.git_out(&["ls-tree", "-r", "--name-only", rev, "history/"]);
        for path in paths.lines() {
            let kind = path.split('/').nth(1).unwrap().to_string();
            let entry = serde_json::from_str(&show(path)).unwrap();
            history.get_mut(&kind).unwrap().push(entry);
        }
        let counts = run.as_object_mut().unwrap().remove("history").unwrap();
        for (kind, entries) in history {
            assert_eq!(counts[&kind], entries.len(), "{kind} in {rev}");
            let entries = serde_json::Value::Array(entries);
            match kind.as_str() {
                "loop" if run["loop"].is_object() => run["loop"]["history"] = entries,
                "loop" => assert_eq!(entries, serde_json::json!([])),
                _ => run[&kind] = entries,
            }
        }
        run["schema"] = "tabellio.run/v1".into();
        run
    }

    /// Append a hand-made commit (`message`) to run `id`'s ledger whose `run.json` is the
    /// current record changed by `edit`, as someone editing the ledger with stock git would
    /// (written the way the first version wrote ledgers: the whole record in `run.json`).
    pub fn forge_ledger(&self, id: &str, message: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let ledger = format!("refs/tabellio/runs/{id}");
        let mut run = self.ledger_record(&ledger);
        edit(&mut run);
        let path = self.path().join("forged-run.json");
        std::fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
        let blob = self.git_out(&["hash-object", "-w", path.to_str().unwrap()]);
        let entry = format!("100644 blob {blob}\trun.json\n");
        let mktree = self.command_with_input("git", &self.repo, &[], &["mktree"], &entry);
        mktree.ok();
        let tree = mktree.stdout.trim();
        let parent = self.git_out(&["rev-parse", &ledger]);
        let commit = self.git_out(&["commit-tree", tree, "-p", &parent, "-m", message]);
        self.git(&["update-ref", &ledger, &commit, &parent]).ok();
    }

    /// Replace the evidence note on `object` with `text`, using stock git.
    pub fn set_note(&self, object: &str, text: &str) {
        let file = self.path().join("note.txt");
        write_file(&file, text);
        let file = file.to_str().unwrap();
        let args = [
            "notes",
            "--ref=tabellio/evidence",
            "add",
            "-f",
            "-F",
            file,
            object,
        ];
        self.git(&args).ok();
    }

    /// Replace the evidence notes on `commit` and on its tree (where validate writes them).
    pub fn forge_evidence(&self, commit: &str, text: &str) {
        let tree = self.git_out(&["rev-parse", &format!("{commit}^{{tree}}")]);
        for object in [commit, &tree] {
            self.set_note(object, text);
        }
    }
}
