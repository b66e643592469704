//! Restacking a run onto a target that moved: its commits replayed one by one (a cherry-pick per
//! commit, done in-process as three-way tree merges), or squashed into one commit.
//!
//! Guarantees: this module writes objects and never refs. A replay or squash either returns the
//! new commits or an error; on any error (a conflict included) nothing points at what was
//! written, so the objects are unreachable garbage that `git gc` removes, and no ref, index or
//! worktree has changed. Moving branches to the result is the caller's compare-and-swap
//! transaction. A textual or tree conflict is [`ReplayError::Conflict`], naming the run's commit
//! that failed to apply and every conflicting path (sorted); the commits before it are not
//! reported, because a run lands whole or not at all. The predictions
//! ([`would_replay_cleanly`], [`would_squash_cleanly`]) run the same computation against an
//! in-memory object store and write nothing at all.
//!
//! What a replayed commit keeps: the author header byte for byte (name, email, author date and
//! its time zone), the message and its encoding. What it changes: tree, parent and committer
//! (the given signature, see [`committer`]). Signatures (`gpgsig`, `mergetag`) are dropped:
//! they signed the old commit, not this one. A commit that becomes empty on the new tip (the
//! target already has its change) is kept as an empty commit, so every commit of the run has
//! exactly one replayed counterpart. Merge commits in the run's range are refused (see
//! [`ReplayError::MergeCommit`]); a squash handles them. Merging runs no program: external
//! merge drivers of git config are not run (see `merging` below).

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use super::Store;
use crate::error::{Context, Error};

/// One commit of the run and its replayed counterpart (equal when nothing had to move).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewritten {
    pub old: ObjectId,
    pub new: ObjectId,
}

/// The run's commits stacked on the new tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// One entry per input commit, in the same order (oldest first).
    pub commits: Vec<Rewritten>,
    /// The replayed last commit, or `onto` itself when there were no commits.
    pub tip: ObjectId,
    /// The tip's tree: what validation runs on and what evidence is looked up by.
    pub tree: ObjectId,
}

/// The run squashed into one commit on the new tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Squashed {
    pub commit: ObjectId,
    pub tree: ObjectId,
    /// The run's commits the squash stands for, oldest first.
    pub squashed: Vec<ObjectId>,
}

/// What a replay or squash would give, computed without writing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prediction {
    /// It applies cleanly; `tree` is the tree the top of the stack would have (deterministic,
    /// so evidence noted on that tree can be looked up before anything is written).
    Clean { tree: ObjectId },
    /// `commit` would conflict in `paths` (sorted).
    Conflict {
        commit: ObjectId,
        paths: Vec<String>,
    },
}

/// What to squash and how to describe it.
#[derive(Debug, Clone, Copy)]
pub struct SquashRequest<'a> {
    /// The run's frozen base.
    pub base: ObjectId,
    /// The run's head: its net change is `base` → `head`.
    pub head: ObjectId,
    /// Where the squashed commit goes (the target's current tip).
    pub onto: ObjectId,
    /// The message's first line (the run's task summary).
    pub summary: &'a str,
    /// Named in the message body, so the commit leads back to the run.
    pub run_id: &'a str,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Applying `commit` on the new tip conflicts; nothing of the replay is reachable.
    #[error("{commit} does not apply cleanly onto {onto}: conflicts in {}", .paths.join(", "))]
    Conflict {
        commit: ObjectId,
        onto: ObjectId,
        paths: Vec<String>,
    },
    /// A merge commit in the run's range. A cherry-pick against its first parent would replay
    /// whatever the merge brought in as if the run had written it (the target's own changes,
    /// when the target was merged into the run), and keeping its second parent would put a
    /// side history on the protected branch's first-parent line that no run landed. There is
    /// no choice between the two that is right without knowing what was merged, so we refuse;
    /// a squash needs only the run's net change and handles merges.
    #[error("{commit} is a merge commit ({parents} parents); a run with merge commits cannot be replayed commit by commit")]
    MergeCommit { commit: ObjectId, parents: usize },
    /// The commits given are not one chain starting at the base.
    #[error("{commit} is not a child of {expected}: the commits to replay must form one chain on the run's base")]
    NotAChain {
        commit: ObjectId,
        expected: ObjectId,
    },
    /// `base` is not an ancestor of `head`.
    #[error("{base} is not an ancestor of {head}")]
    NotAnAncestor { base: ObjectId, head: ObjectId },
    /// `base` is an ancestor of `head`, but only through a merge's second parent.
    #[error("{base} is not on the first-parent line of {head}")]
    NotOnFirstParentLine { base: ObjectId, head: ObjectId },
    /// Nothing to squash: `head` is `base`.
    #[error("the run has no commits since its base {base}")]
    NoCommits { base: ObjectId },
    /// Reading or writing objects failed.
    #[error(transparent)]
    Store(#[from] Error),
}

impl From<ReplayError> for Error {
    fn from(e: ReplayError) -> Self {
        let message = e.to_string();
        match e {
            ReplayError::Conflict { .. } => Error::refused(message).hint(
                "the run's change and the target's new commits conflict in these paths; start a new run on the target's tip",
            ),
            ReplayError::MergeCommit { .. } => Error::refused(message)
                .hint("land the run squashed, or rewrite its history without merge commits"),
            ReplayError::NotAChain { .. } => Error::internal(message),
            ReplayError::NotAnAncestor { .. } | ReplayError::NotOnFirstParentLine { .. } => {
                Error::refused(message)
                    .hint("the run branch was rewritten away from its base; restore it or start a new run")
            }
            ReplayError::NoCommits { .. } => Error::refused(message)
                .hint("commit the run's work before landing it"),
            ReplayError::Store(e) => e,
        }
    }
}

/// The committer of replayed and squashed commits: the user's configured identity, else the
/// fixed tabellio identity [`Store`] installs as a fallback when it opens the repository.
/// `GIT_COMMITTER_DATE` is honoured as git does.
pub fn committer(store: &Store) -> gix::actor::Signature {
    store.signature(super::identity::Role::Committer)
}

/// The commits on `head`'s first-parent line since `base`, oldest first: the run's commits.
/// Refuses when `base` is not an ancestor of `head`, or is one only through a merge's second
/// parent (the first-parent line never reaches it).
pub fn commits_since(
    store: &Store,
    base: ObjectId,
    head: ObjectId,
) -> Result<Vec<ObjectId>, ReplayError> {
    if !store.is_ancestor(base, head)? {
        return Err(ReplayError::NotAnAncestor { base, head });
    }
    let mut out = Vec::new();
    let mut cursor = head;
    while cursor != base {
        out.push(cursor);
        let commit = find_commit(&store.repo, cursor)?;
        let first_parent = commit.parent_ids().next().map(|p| p.detach());
        match first_parent {
            Some(parent) => cursor = parent,
            None => return Err(ReplayError::NotOnFirstParentLine { base, head }),
        }
    }
    out.reverse();
    Ok(out)
}

/// Replay `commits` (oldest first, the run's commits since `old_base`, one chain) onto `onto`:
/// each commit's change (its parent's tree → its tree) merged into the stack so far, committed
/// with `committer`. When `onto == old_base` the commits are returned unchanged and nothing is
/// written.
pub fn replay(
    store: &Store,
    commits: &[ObjectId],
    old_base: ObjectId,
    onto: ObjectId,
    committer: &gix::actor::Signature,
) -> Result<Replayed, ReplayError> {
    let (repo, _head) = merging(store, store.repo.clone())?;
    replay_in(&repo, commits, old_base, onto, committer)
}

/// Would [`replay`] succeed, and with which tree? The same computation, with every object kept
/// in memory: nothing is written to the repository.
pub fn would_replay_cleanly(
    store: &Store,
    commits: &[ObjectId],
    old_base: ObjectId,
    onto: ObjectId,
) -> Result<Prediction, ReplayError> {
    let (repo, _head) = merging(store, store.repo.clone().with_object_memory())?;
    predict(replay_in(&repo, commits, old_base, onto, &placeholder()).map(|r| r.tree))
}

/// Squash the run's net change (`base` → `head`) onto `onto` as one commit: a three-way tree
/// merge with `base` as the ancestor, or exactly `head`'s tree when `onto == base`. The author
/// is the author of the run's first commit (as `git rebase -i` keeps it for a squash), the
/// message the summary and a body listing the run's commits and its id.
pub fn squash(
    store: &Store,
    request: &SquashRequest<'_>,
    committer: &gix::actor::Signature,
) -> Result<Squashed, ReplayError> {
    let squashed = commits_since(store, request.base, request.head)?;
    let (repo, _head) = merging(store, store.repo.clone())?;
    squash_in(&repo, request, squashed, committer)
}

fn squash_in(
    repo: &gix::Repository,
    request: &SquashRequest<'_>,
    squashed: Vec<ObjectId>,
    committer: &gix::actor::Signature,
) -> Result<Squashed, ReplayError> {
    let first = *squashed
        .first()
        .ok_or(ReplayError::NoCommits { base: request.base })?;
    let tree = squash_tree(repo, request.base, request.head, request.onto)?;
    let message = squash_message(repo, request, &squashed)?;
    let first = find_commit(repo, first)?;
    let first = first
        .decode()
        .context(|| format!("could not parse commit {}", first.id))?;
    let commit = write_commit(
        repo,
        CommitParts {
            tree,
            parent: request.onto,
            author: first.author,
            committer,
            encoding: None,
            message: message.as_bytes().as_bstr(),
        },
    )?;
    Ok(Squashed {
        commit,
        tree,
        squashed,
    })
}

/// Would [`squash`] succeed, and with which tree? Nothing is written.
pub fn would_squash_cleanly(
    store: &Store,
    base: ObjectId,
    head: ObjectId,
    onto: ObjectId,
) -> Result<Prediction, ReplayError> {
    if !store.is_ancestor(base, head)? {
        return Err(ReplayError::NotAnAncestor { base, head });
    }
    let (repo, _head) = merging(store, store.repo.clone().with_object_memory())?;
    predict(squash_tree(&repo, base, head, onto))
}

/// A stack of runs predicted in memory, as `land` would build it: each run replayed (or
/// squashed) onto the one before it, every commit and tree kept in memory, so the second run of
/// a stack is predicted on the first one's result, not on the bare tip. Nothing is written to the
/// repository.
pub struct StackPrediction {
    repo: gix::Repository,
    /// In a bare reftable repository, the scratch HEAD the merge reads attributes from.
    _shadow: Option<tempfile::TempDir>,
}

impl StackPrediction {
    pub fn new(store: &Store) -> Result<Self, ReplayError> {
        let (repo, shadow) = merging(store, store.repo.clone().with_object_memory())?;
        Ok(StackPrediction {
            repo,
            _shadow: shadow,
        })
    }

    /// The run's commits (`commits`, made on `old_base`) replayed onto `onto`, or squashed
    /// (`squash`; its own `onto` is replaced by `onto`), in memory.
    pub fn stack(
        &self,
        commits: &[ObjectId],
        old_base: ObjectId,
        onto: ObjectId,
        squash: Option<SquashRequest<'_>>,
    ) -> Result<StackStep, ReplayError> {
        let result = match squash {
            Some(request) => squash_in(
                &self.repo,
                &SquashRequest { onto, ..request },
                commits.to_vec(),
                &placeholder(),
            )
            .map(|s| (s.commit, s.tree)),
            None => replay_in(&self.repo, commits, old_base, onto, &placeholder())
                .map(|r| (r.tip, r.tree)),
        };
        match result {
            Ok((tip, tree)) => Ok(StackStep::Clean { tip, tree }),
            Err(ReplayError::Conflict { commit, paths, .. }) => {
                Ok(StackStep::Conflict { commit, paths })
            }
            Err(e) => Err(e),
        }
    }
}

/// One run put on a predicted stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackStep {
    /// It applies: the new top of the stack (a commit in memory) and its tree.
    Clean { tip: ObjectId, tree: ObjectId },
    /// `commit` would conflict in `paths` (sorted); the stack stays as it was.
    Conflict {
        commit: ObjectId,
        paths: Vec<String>,
    },
}

/// A conflict is the answer of a prediction, not its failure.
fn predict(result: Result<ObjectId, ReplayError>) -> Result<Prediction, ReplayError> {
    match result {
        Ok(tree) => Ok(Prediction::Clean { tree }),
        Err(ReplayError::Conflict { commit, paths, .. }) => {
            Ok(Prediction::Conflict { commit, paths })
        }
        Err(e) => Err(e),
    }
}

/// `repo` set up to merge without running programs: the merge drivers of git config
/// (`merge.<name>.driver`) are dropped from this handle's configuration, so a path whose
/// attributes name one is merged by the built-in text driver. An external driver would run
/// arbitrary commands in the middle of a prediction (`status`, `land --dry-run`), could print
/// into the command's JSON output, and could resolve a conflict differently each time it runs.
/// The built-in drivers chosen by attributes (`merge=binary`, `merge=union`, `-merge`) apply.
///
/// In a bare repository the merge reads attributes from HEAD's tree, which gix cannot resolve
/// with reftable: there `repo` gets a scratch HEAD ([`worktree::shadow_head`]), returned as the
/// guard that must outlive it (`None` otherwise).
fn merging(
    store: &Store,
    mut repo: gix::Repository,
) -> Result<(gix::Repository, Option<tempfile::TempDir>), ReplayError> {
    let shadow = if repo.is_bare() {
        super::worktree::shadow_head(&mut repo, &store.head()?)?
    } else {
        None
    };
    let mut config = repo.config_snapshot_mut();
    let drivers: Vec<_> = config
        .sections_and_ids_by_name("merge")
        .into_iter()
        .flatten()
        .filter(|(section, _)| {
            section
                .header()
                .subsection_name()
                .is_some_and(|name| !name.is_empty())
        })
        .map(|(_, id)| id)
        .collect();
    for id in drivers {
        config.remove_section_by_id(id);
    }
    config
        .commit()
        .context(|| "could not set up merging".to_string())?;
    // A tree merge reads the same blobs and trees again for every commit of the stack.
    repo.object_cache_size_if_unset(16 * 1024 * 1024);
    Ok((repo, shadow))
}

/// The committer of commits that only ever live in memory (a prediction compares trees).
fn placeholder() -> gix::actor::Signature {
    gix::actor::Signature {
        name: super::repo::FALLBACK_NAME.into(),
        email: super::repo::FALLBACK_EMAIL.into(),
        time: gix::date::Time::new(0, 0),
    }
}

fn replay_in(
    repo: &gix::Repository,
    commits: &[ObjectId],
    old_base: ObjectId,
    onto: ObjectId,
    committer: &gix::actor::Signature,
) -> Result<Replayed, ReplayError> {
    // Check the whole range before writing anything: a merge commit at the end must not cost a
    // replay of everything before it.
    let mut parent_trees = Vec::with_capacity(commits.len());
    let mut expected = old_base;
    for &id in commits {
        let commit = find_commit(repo, id)?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        if parents.len() > 1 {
            return Err(ReplayError::MergeCommit {
                commit: id,
                parents: parents.len(),
            });
        }
        if parents.first() != Some(&expected) {
            return Err(ReplayError::NotAChain {
                commit: id,
                expected,
            });
        }
        parent_trees.push(tree_of(repo, expected)?);
        expected = id;
    }
    if onto == old_base {
        let tip = commits.last().copied().unwrap_or(onto);
        return Ok(Replayed {
            commits: commits
                .iter()
                .map(|&id| Rewritten { old: id, new: id })
                .collect(),
            tip,
            tree: tree_of(repo, tip)?,
        });
    }
    let options = merge_options(repo)?;
    let mut tip = onto;
    let mut tip_tree = tree_of(repo, onto)?;
    let mut out = Vec::with_capacity(commits.len());
    for (&id, &parent_tree) in commits.iter().zip(&parent_trees) {
        let commit = find_commit(repo, id)?;
        let decoded = commit
            .decode()
            .context(|| format!("could not parse commit {id}"))?;
        let their_tree = decoded.tree();
        let tree = merge(repo, &options, [parent_tree, tip_tree, their_tree], id, tip)?;
        let new = write_commit(
            repo,
            CommitParts {
                tree,
                parent: tip,
                author: decoded.author,
                committer,
                encoding: decoded.encoding,
                message: decoded.message,
            },
        )?;
        out.push(Rewritten { old: id, new });
        tip = new;
        tip_tree = tree;
    }
    Ok(Replayed {
        commits: out,
        tip,
        tree: tip_tree,
    })
}

fn squash_tree(
    repo: &gix::Repository,
    base: ObjectId,
    head: ObjectId,
    onto: ObjectId,
) -> Result<ObjectId, ReplayError> {
    let head_tree = tree_of(repo, head)?;
    if onto == base {
        return Ok(head_tree);
    }
    let trees = [tree_of(repo, base)?, tree_of(repo, onto)?, head_tree];
    merge(repo, &merge_options(repo)?, trees, head, onto)
}

fn merge_options(repo: &gix::Repository) -> Result<gix::merge::tree::Options, ReplayError> {
    Ok(repo
        .tree_merge_options()
        .context(|| "could not set up a tree merge".to_string())?)
}

/// Merge the trees `[ancestor, ours, theirs]` (`theirs` into `ours`, `ancestor` as the merge
/// base) and write the result: `commit` names the run's commit being applied and `onto` the
/// commit `ours` belongs to, for the conflict report.
fn merge(
    repo: &gix::Repository,
    options: &gix::merge::tree::Options,
    [ancestor, ours, theirs]: [ObjectId; 3],
    commit: ObjectId,
    onto: ObjectId,
) -> Result<ObjectId, ReplayError> {
    // The common cases need no merge: the stack has not changed what the commit started from,
    // or the commit changes nothing.
    if ours == ancestor {
        return Ok(theirs);
    }
    if theirs == ancestor {
        return Ok(ours);
    }
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: Some("parent".into()),
        current: Some("target".into()),
        other: Some("run".into()),
    };
    let mut outcome = repo
        .merge_trees(ancestor, ours, theirs, labels, options.clone())
        .context(|| format!("could not merge {commit} onto {onto}"))?;
    let paths = unresolved_paths(&outcome);
    if !paths.is_empty() {
        return Err(ReplayError::Conflict {
            commit,
            onto,
            paths,
        });
    }
    Ok(outcome
        .tree
        .write()
        .context(|| "could not write the merged tree".to_string())?
        .detach())
}

/// The paths of a tree merge's conflicts git would leave unresolved, sorted and unique.
fn unresolved_paths(outcome: &gix::merge::tree::Outcome<'_>) -> Vec<String> {
    let how = gix::merge::tree::TreatAsUnresolved::git();
    let mut paths: Vec<String> = outcome
        .conflicts
        .iter()
        .filter(|c| c.is_unresolved(how))
        .flat_map(|c| [c.ours.location(), c.theirs.location()])
        .map(|p| p.to_str_lossy().into_owned())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The parts of a commit we write. The author is the raw header of the original commit, so it
/// is kept byte for byte rather than re-serialized from a lenient parse.
struct CommitParts<'a> {
    tree: ObjectId,
    parent: ObjectId,
    author: &'a BStr,
    committer: &'a gix::actor::Signature,
    encoding: Option<&'a BStr>,
    message: &'a BStr,
}

fn write_commit(repo: &gix::Repository, parts: CommitParts<'_>) -> Result<ObjectId, ReplayError> {
    let tree = parts.tree.to_string();
    let parent = parts.parent.to_string();
    let mut committer = Vec::new();
    parts
        .committer
        .write_to(&mut committer)
        .context(|| "could not encode the committer".to_string())?;
    let commit = gix::objs::CommitRef {
        tree: tree.as_bytes().as_bstr(),
        parents: std::iter::once(parent.as_bytes().as_bstr()).collect(),
        author: parts.author,
        committer: committer.as_bstr(),
        encoding: parts.encoding,
        message: parts.message,
        extra_headers: Vec::new(),
    };
    Ok(repo
        .write_object(&commit)
        .context(|| "could not write a commit".to_string())?
        .detach())
}

/// `summary`, then the run's commits (short id and subject) and the run id.
fn squash_message(
    repo: &gix::Repository,
    request: &SquashRequest<'_>,
    commits: &[ObjectId],
) -> Result<String, ReplayError> {
    let summary = request.summary.trim();
    let mut message = if summary.is_empty() {
        format!("Land run {}", request.run_id)
    } else {
        summary.to_string()
    };
    message.push_str(&format!(
        "\n\nSquashed from the {} commit{} of run {}:\n",
        commits.len(),
        if commits.len() == 1 { "" } else { "s" },
        request.run_id
    ));
    for &id in commits {
        let commit = find_commit(repo, id)?;
        let subject: BString = commit
            .message_raw_sloppy()
            .lines()
            .next()
            .unwrap_or_default()
            .into();
        message.push_str(&format!(
            "  {} {}\n",
            commit.id().shorten_or_id(),
            subject.to_str_lossy().trim_end()
        ));
    }
    message.push_str(&format!("\nTabellio-Run: {}\n", request.run_id));
    Ok(message)
}

fn find_commit(repo: &gix::Repository, id: ObjectId) -> Result<gix::Commit<'_>, ReplayError> {
    Ok(repo
        .find_commit(id)
        .map_err(|e| Error::not_found(format!("commit {id} not found: {e:#}")).caused_by(e))?)
}

fn tree_of(repo: &gix::Repository, commit: ObjectId) -> Result<ObjectId, ReplayError> {
    Ok(find_commit(repo, commit)?
        .tree_id()
        .context(|| format!("could not read the tree of {commit}"))?
        .detach())
}

/// Would `land` take this completed run onto its target's current tip? True when the tip's
/// policy requires checks it defines (so a restack can be validated) and the run's commits
/// replay cleanly onto the tip (or squash cleanly, when that policy squashes). `status` uses it
/// to say `land` instead of `restart`; it predicts in memory and writes nothing.
pub fn would_land(store: &Store, run: &crate::model::RunRecord) -> crate::error::Result<bool> {
    let (Some(tip), Some(head)) = (
        store.ref_target(&run.base.reference)?,
        store.ref_target(&run.branch)?,
    ) else {
        return Ok(false);
    };
    let validatable = crate::store::policy::policy_at(store, tip)?.is_some_and(|p| {
        !p.required.is_empty() && p.required.iter().all(|n| p.checks.contains_key(n))
    });
    if !validatable {
        return Ok(false);
    }
    let base = store.parse_oid(&run.base.commit)?;
    let prediction = if crate::store::policy::squash_at(store, &run.base.reference)? {
        would_squash_cleanly(store, base, head, tip)
    } else {
        commits_since(store, base, head)
            .and_then(|commits| would_replay_cleanly(store, &commits, base, tip))
    };
    // A run that cannot be restacked at all (merge commits, rewritten away from its base) is
    // not one `land` would take either.
    Ok(matches!(prediction, Ok(Prediction::Clean { .. })))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::store::repo::{FALLBACK_EMAIL, FALLBACK_NAME};

    /// The committer every test replays with, and the one stock git uses as the oracle.
    const COMMITTER_NAME: &str = "Land Tester";
    const COMMITTER_EMAIL: &str = "land@example.com";
    const COMMITTER_DATE: &str = "2024-02-01T00:00:00Z";
    const COMMITTER_SECONDS: i64 = 1_706_745_600;

    fn signature() -> gix::actor::Signature {
        gix::actor::Signature {
            name: COMMITTER_NAME.into(),
            email: COMMITTER_EMAIL.into(),
            time: gix::date::Time::new(COMMITTER_SECONDS, 0),
        }
    }

    /// A temp repository with its own HOME; git runs in the hermetic environment with this
    /// module's identities and dates.
    struct Repo {
        _dir: tempfile::TempDir,
        home: PathBuf,
        root: PathBuf,
    }

    impl Repo {
        fn new(object_format: &str) -> Repo {
            let dir = tempfile::tempdir().expect("temp dir");
            let home = dir.path().join("home");
            let root = dir.path().join("repo");
            std::fs::create_dir_all(&home).expect("mkdir home");
            std::fs::create_dir_all(&root).expect("mkdir repo");
            let repo = Repo {
                _dir: dir,
                home,
                root,
            };
            let format = format!("--object-format={object_format}");
            repo.git(&["init", "-q", "-b", "main", &format]);
            repo
        }

        fn git(&self, args: &[&str]) -> String {
            self.git_with(args, "2024-01-01T00:00:00Z")
        }

        /// git with the author date `date` (and the oracle committer).
        fn git_with(&self, args: &[&str], date: &str) -> String {
            // The hermetic environment, with this oracle's own author, committer and dates.
            let output = crate::store::hermetic::git(&self.home, &self.root)
                .args(args)
                .env("GIT_AUTHOR_NAME", "Run Author")
                .env("GIT_AUTHOR_EMAIL", "author@example.com")
                .env("GIT_AUTHOR_DATE", date)
                .env("GIT_COMMITTER_NAME", COMMITTER_NAME)
                .env("GIT_COMMITTER_EMAIL", COMMITTER_EMAIL)
                .env("GIT_COMMITTER_DATE", COMMITTER_DATE)
                .output()
                .expect("git can be spawned");
            assert!(
                output.status.success(),
                "git {args:?} in {} failed ({})\nstdout:\n{}\nstderr:\n{}",
                self.root.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
            );
            String::from_utf8(output.stdout)
                .expect("git prints UTF-8 here")
                .trim_end()
                .to_string()
        }

        fn write(&self, rel: &str, content: &str) {
            let path = self.root.join(rel);
            std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir -p");
            std::fs::write(path, content).expect("write file");
        }

        /// Commit everything with author date `date`.
        fn commit(&self, message: &str, date: &str) -> ObjectId {
            self.git(&["add", "-A"]);
            self.git_with(&["commit", "-q", "-m", message], date);
            self.oid("HEAD")
        }

        /// Commit `base` on `main`, then one commit per entry of `run` on the new branch `run`,
        /// then let `main` move by what `main` does, committed. Returns (base, run commits, tip).
        fn diverge(
            &self,
            base: &[(&str, &str)],
            run: &[&[(&str, &str)]],
            main: impl FnOnce(&Repo),
        ) -> (ObjectId, Vec<ObjectId>, ObjectId) {
            let write_all = |files: &[(&str, &str)]| {
                for (path, content) in files {
                    self.write(path, content);
                }
            };
            write_all(base);
            let base = self.commit("base", "2024-01-01T00:00:00Z");
            self.git(&["checkout", "-q", "-b", "run"]);
            let mut commits = Vec::new();
            for (i, files) in run.iter().enumerate() {
                write_all(files);
                let date = format!("2024-01-{:02}T00:00:00Z", i + 2);
                commits.push(self.commit(&format!("run {}", i + 1), &date));
            }
            self.git(&["checkout", "-q", "main"]);
            main(self);
            let tip = self.commit("main moves", "2024-01-20T00:00:00Z");
            (base, commits, tip)
        }

        fn oid(&self, rev: &str) -> ObjectId {
            ObjectId::from_hex(self.git(&["rev-parse", rev]).as_bytes()).expect("an object id")
        }

        fn show(&self, rev: &str) -> String {
            self.git(&["cat-file", "-p", rev])
        }

        fn store(&self) -> Store {
            let repo = gix::open_opts(&self.root, gix::open::Options::isolated()).expect("open");
            Store::from_repo(repo).expect("a files repository")
        }

        fn refs(&self) -> String {
            self.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
        }

        fn object_count(&self) -> String {
            self.git(&["count-objects", "-v"])
        }

        fn fsck(&self) {
            self.git(&["fsck", "--strict", "--no-dangling"]);
        }
    }

    /// A file of `n` numbered lines, with line `i` replaced by `text`.
    fn lines(n: usize, edits: &[(usize, &str)]) -> String {
        (1..=n)
            .map(|i| {
                edits
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map_or(format!("line {i}\n"), |(_, t)| format!("{t}\n"))
            })
            .collect()
    }

    /// `main` with a base commit, the run branch `run` with three commits on it, and `main`
    /// moved by two commits that touch other lines and files. Returns (base, run commits).
    fn diverged(repo: &Repo) -> (ObjectId, Vec<ObjectId>) {
        repo.write("a.txt", &lines(20, &[]));
        repo.write("b.txt", "b\n");
        let base = repo.commit("base", "2024-01-01T00:00:00Z");
        repo.git(&["checkout", "-q", "-b", "run"]);
        repo.write("a.txt", &lines(20, &[(20, "run edits the end")]));
        let c1 = repo.commit("run: edit the end of a", "2024-01-02T10:00:00+02:00");
        repo.write("src/new.rs", "fn main() {}\n");
        let c2 = repo.commit(
            "run: add src/new.rs\n\nWith a body.",
            "2024-01-03T00:00:00Z",
        );
        repo.write("b.txt", "b\nrun appends\n");
        let c3 = repo.commit("run: append to b", "2024-01-04T00:00:00-05:00");
        repo.git(&["checkout", "-q", "main"]);
        repo.write("a.txt", &lines(20, &[(1, "main edits the start")]));
        repo.commit("main: edit the start of a", "2024-01-05T00:00:00Z");
        repo.write("docs/main.md", "main\n");
        repo.commit("main: add docs", "2024-01-06T00:00:00Z");
        (base, vec![c1, c2, c3])
    }

    /// The raw header `name` of a commit.
    fn header(repo: &Repo, commit: ObjectId, name: &str) -> String {
        repo.show(&commit.to_string())
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
            .unwrap_or_else(|| panic!("{commit} has no {name} header"))
    }

    fn message(repo: &Repo, commit: ObjectId) -> String {
        repo.git(&["log", "-1", "--format=%B", &commit.to_string()])
    }

    fn clean_replay_is_a_cherry_pick(object_format: &str) {
        let repo = Repo::new(object_format);
        let (base, commits) = diverged(&repo);
        let tip = repo.oid("main");
        let store = repo.store();
        assert_eq!(
            commits_since(&store, base, repo.oid("run")).expect("range"),
            commits
        );

        let predicted = would_replay_cleanly(&store, &commits, base, tip).expect("predict");
        let refs_before = repo.refs();
        let replayed = replay(&store, &commits, base, tip, &signature()).expect("replay");
        assert_eq!(repo.refs(), refs_before, "a replay writes no ref");
        assert_eq!(
            predicted,
            Prediction::Clean {
                tree: replayed.tree
            }
        );
        assert_eq!(replayed.commits.len(), 3);
        let mut parent = tip;
        for (rewritten, &old) in replayed.commits.iter().zip(&commits) {
            assert_eq!(rewritten.old, old);
            assert_ne!(rewritten.new, old);
            assert_eq!(repo.oid(&format!("{}^", rewritten.new)), parent);
            assert_eq!(
                header(&repo, rewritten.new, "author"),
                header(&repo, old, "author")
            );
            assert_eq!(
                header(&repo, rewritten.new, "committer"),
                format!("{COMMITTER_NAME} <{COMMITTER_EMAIL}> {COMMITTER_SECONDS} +0000")
            );
            assert_eq!(message(&repo, rewritten.new), message(&repo, old));
            parent = rewritten.new;
        }
        assert_eq!(replayed.tip, parent);
        assert_eq!(
            replayed.tree,
            repo.oid(&format!("{}^{{tree}}", replayed.tip))
        );
        // Both sides are in the new tip.
        let tip_rev = replayed.tip.to_string();
        let a = repo.git(&["show", &format!("{tip_rev}:a.txt")]);
        assert!(a.starts_with("main edits the start\n"), "{a}");
        assert!(a.ends_with("run edits the end"), "{a}");
        repo.git(&["cat-file", "-e", &format!("{tip_rev}:docs/main.md")]);
        repo.git(&["cat-file", "-e", &format!("{tip_rev}:src/new.rs")]);
        // Keep the replay reachable for fsck, then compare with stock git's cherry-pick, which
        // with the same committer and date writes the very same commits.
        repo.git(&["branch", "replayed", &tip_rev]);
        repo.fsck();
        repo.git(&["checkout", "-q", "--detach", &tip.to_string()]);
        let picks: Vec<String> = commits.iter().map(ToString::to_string).collect();
        let mut args = vec!["cherry-pick"];
        args.extend(picks.iter().map(String::as_str));
        repo.git(&args);
        for (i, rewritten) in replayed.commits.iter().rev().enumerate() {
            let theirs = format!("HEAD~{i}");
            assert_eq!(
                repo.oid(&format!("{theirs}^{{tree}}")),
                repo.oid(&format!("{}^{{tree}}", rewritten.new)),
                "tree of {theirs}"
            );
            assert_eq!(
                repo.oid(&theirs),
                rewritten.new,
                "{theirs} is the same commit"
            );
        }
    }

    #[test]
    fn clean_replay_keeps_author_and_message_and_matches_cherry_pick() {
        clean_replay_is_a_cherry_pick("sha1");
    }

    #[test]
    fn a_rename_on_the_target_carries_the_run_edit_like_cherry_pick() {
        let repo = Repo::new("sha1");
        let (base, run, tip) = repo.diverge(
            &[("old/name.txt", &lines(30, &[]))],
            &[&[("old/name.txt", &lines(30, &[(15, "run edits the middle")]))]],
            |repo| {
                repo.git(&["mv", "old", "new"]);
            },
        );
        let c1 = run[0];
        let store = repo.store();
        let replayed = replay(&store, &[c1], base, tip, &signature()).expect("replay");
        repo.git(&["checkout", "-q", "--detach", &tip.to_string()]);
        repo.git(&["cherry-pick", &c1.to_string()]);
        assert_eq!(replayed.tree, repo.oid("HEAD^{tree}"));
        let moved = repo.git(&["show", &format!("{}:new/name.txt", replayed.tip)]);
        assert!(moved.contains("run edits the middle"), "{moved}");
    }

    #[test]
    fn clean_replay_in_a_sha256_repository() {
        clean_replay_is_a_cherry_pick("sha256");
    }

    #[test]
    fn a_conflict_names_every_path_and_writes_no_ref() {
        let repo = Repo::new("sha1");
        let (base, run, tip) = repo.diverge(
            &[
                ("a.txt", &lines(5, &[])),
                ("dir/x.txt", "x\n"),
                ("keep.txt", "keep\n"),
            ],
            &[
                &[("keep.txt", "keep\nrun\n")],
                &[
                    ("a.txt", &lines(5, &[(3, "run's line 3")])),
                    ("dir/x.txt", "run's x\n"),
                ],
            ],
            |repo| {
                repo.write("a.txt", &lines(5, &[(3, "main's line 3")]));
                repo.write("dir/x.txt", "main's x\n");
            },
        );
        let (c1, c2) = (run[0], run[1]);
        let store = repo.store();
        let commits = commits_since(&store, base, repo.oid("run")).expect("range");
        assert_eq!(commits, vec![c1, c2]);

        let objects_before = repo.object_count();
        let predicted = would_replay_cleanly(&store, &commits, base, tip).expect("predict");
        assert_eq!(
            repo.object_count(),
            objects_before,
            "a prediction writes nothing"
        );
        let want = vec!["a.txt".to_string(), "dir/x.txt".to_string()];
        assert_eq!(
            predicted,
            Prediction::Conflict {
                commit: c2,
                paths: want.clone()
            }
        );

        let refs_before = repo.refs();
        match replay(&store, &commits, base, tip, &signature()) {
            Err(ReplayError::Conflict {
                commit,
                onto,
                paths,
            }) => {
                assert_eq!((commit, paths), (c2, want));
                assert_ne!(
                    onto, tip,
                    "the conflict is on top of the replayed first commit"
                );
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(repo.refs(), refs_before, "no ref changed");
        let error = Error::from(
            replay(&store, &commits, base, tip, &signature()).expect_err("conflicts again"),
        );
        assert_eq!(error.kind, crate::ErrorKind::Refused);
        assert!(
            error.message.contains("a.txt, dir/x.txt"),
            "{}",
            error.message
        );
        repo.fsck();
    }

    #[test]
    fn configured_merge_drivers_do_not_run() {
        let repo = Repo::new("sha1");
        let marker = repo.home.join("driver-ran");
        repo.git(&[
            "config",
            "merge.custom.driver",
            &format!("touch '{}' && echo driver >%A", marker.display()),
        ]);
        let (base, run, tip) = repo.diverge(
            &[
                (".gitattributes", "a.txt merge=custom\n"),
                ("a.txt", "base\n"),
            ],
            &[&[("a.txt", "run\n")]],
            |repo| repo.write("a.txt", "main\n"),
        );
        let c1 = run[0];
        let store = repo.store();
        assert_eq!(
            would_replay_cleanly(&store, &[c1], base, tip).expect("predict"),
            Prediction::Conflict {
                commit: c1,
                paths: vec!["a.txt".into()]
            }
        );
        assert!(matches!(
            replay(&store, &[c1], base, tip, &signature()),
            Err(ReplayError::Conflict { .. })
        ));
        assert!(!marker.exists(), "no merge driver ran");
        // Stock git runs it, so the setup above is one that would.
        repo.git(&["cherry-pick", &c1.to_string()]);
        assert!(marker.exists(), "git ran the driver");
    }

    #[test]
    fn a_commit_the_target_already_has_stays_as_an_empty_commit() {
        let repo = Repo::new("sha1");
        let (base, run, tip) = repo.diverge(
            &[("a.txt", "a\n")],
            &[&[("same.txt", "both\n")], &[("run.txt", "run\n")]],
            |repo| repo.write("same.txt", "both\n"),
        );
        let store = repo.store();
        let replayed = replay(&store, &run, base, tip, &signature()).expect("replay");
        let first = replayed.commits[0].new;
        assert_eq!(repo.oid(&format!("{first}^")), tip);
        assert_eq!(
            repo.oid(&format!("{first}^{{tree}}")),
            repo.oid(&format!("{tip}^{{tree}}")),
            "the change is there already"
        );
        assert_eq!(message(&repo, first), "run 1");
        repo.git(&["cat-file", "-e", &format!("{}:run.txt", replayed.tip)]);
    }

    #[test]
    fn signatures_are_dropped_and_the_encoding_kept() {
        let repo = Repo::new("sha1");
        let (base, run, tip) = repo.diverge(&[("a.txt", "a\n")], &[&[("b.txt", "b\n")]], |repo| {
            repo.write("c.txt", "c\n")
        });
        // The run's commit as a signing, non-UTF-8 git would have written it.
        let original = repo.show(&run[0].to_string());
        let (headers, body) = original.split_once("\n\n").expect("headers and message");
        let signed = format!(
            "{headers}\nencoding ISO-8859-1\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n sig\n -----END PGP SIGNATURE-----\n\n{body}\n"
        );
        let path = repo.home.join("signed-commit");
        std::fs::write(&path, signed).expect("write the commit");
        let path = path.to_str().expect("a UTF-8 temp path");
        let signed = repo.git(&["hash-object", "-t", "commit", "-w", path]);
        let signed = ObjectId::from_hex(signed.as_bytes()).expect("an object id");
        assert!(repo.show(&signed.to_string()).contains("\ngpgsig "));
        let store = repo.store();
        let replayed = replay(&store, &[signed], base, tip, &signature()).expect("replay");
        let new = repo.show(&replayed.tip.to_string());
        assert!(new.contains("\nencoding ISO-8859-1\n"), "{new}");
        assert!(!new.contains("gpgsig"), "{new}");
        assert_eq!(
            header(&repo, replayed.tip, "author"),
            header(&repo, signed, "author")
        );
        repo.git(&["branch", "replayed", &replayed.tip.to_string()]);
        repo.fsck();
    }

    #[test]
    fn onto_the_base_is_the_identity_and_writes_nothing() {
        let repo = Repo::new("sha1");
        let (base, commits) = diverged(&repo);
        let store = repo.store();
        let objects_before = repo.object_count();
        let replayed = replay(&store, &commits, base, base, &signature()).expect("replay");
        assert_eq!(repo.object_count(), objects_before);
        assert_eq!(replayed.tip, repo.oid("run"));
        assert_eq!(replayed.tree, repo.oid("run^{tree}"));
        assert!(replayed.commits.iter().all(|r| r.old == r.new));
        assert_eq!(
            replayed.commits.iter().map(|r| r.old).collect::<Vec<_>>(),
            commits
        );
        // No commits at all: the tip is where they would have gone.
        let tip = repo.oid("main");
        let empty = replay(&store, &[], base, tip, &signature()).expect("replay nothing");
        assert_eq!((empty.tip, empty.commits.len()), (tip, 0));
    }

    #[test]
    fn squash_onto_the_base_is_the_head_tree() {
        let repo = Repo::new("sha1");
        let (base, commits) = diverged(&repo);
        let store = repo.store();
        let head = repo.oid("run");
        let request = SquashRequest {
            base,
            head,
            onto: base,
            summary: "Teach the run a trick",
            run_id: "r-17",
        };
        let squashed = squash(&store, &request, &signature()).expect("squash");
        assert_eq!(squashed.tree, repo.oid("run^{tree}"));
        assert_eq!(squashed.squashed, commits);
        assert_eq!(repo.oid(&format!("{}^", squashed.commit)), base);
        assert_eq!(
            header(&repo, squashed.commit, "author"),
            header(&repo, commits[0], "author")
        );
        let text = message(&repo, squashed.commit);
        assert!(text.starts_with("Teach the run a trick\n\n"), "{text}");
        for &c in &commits {
            let short = repo.git(&["rev-parse", "--short", &c.to_string()]);
            let subject = repo.git(&["log", "-1", "--format=%s", &c.to_string()]);
            assert!(text.contains(&format!("  {short} {subject}\n")), "{text}");
        }
        assert!(text.ends_with("Tabellio-Run: r-17"), "{text}");
        assert_eq!(
            would_squash_cleanly(&store, base, head, base).expect("predict"),
            Prediction::Clean {
                tree: squashed.tree
            }
        );
        repo.git(&["branch", "squashed", &squashed.commit.to_string()]);
        repo.fsck();
    }

    #[test]
    fn squash_onto_a_moved_tip_is_git_merge_squash() {
        let repo = Repo::new("sha256");
        let (base, _) = diverged(&repo);
        let store = repo.store();
        let (head, tip) = (repo.oid("run"), repo.oid("main"));
        let request = SquashRequest {
            base,
            head,
            onto: tip,
            summary: "",
            run_id: "r-18",
        };
        let squashed = squash(&store, &request, &signature()).expect("squash");
        assert_eq!(repo.oid(&format!("{}^", squashed.commit)), tip);
        assert!(message(&repo, squashed.commit).starts_with("Land run r-18\n"));
        repo.git(&["merge", "--squash", "-q", "run"]);
        assert_eq!(squashed.tree, repo.oid(&repo.git(&["write-tree"])));
        repo.git(&["branch", "squashed", &squashed.commit.to_string()]);
        repo.fsck();
    }

    #[test]
    fn merge_commits_are_refused_before_anything_is_written() {
        let repo = Repo::new("sha1");
        let (base, _) = diverged(&repo);
        repo.git(&["checkout", "-q", "run"]);
        repo.git(&["merge", "-q", "--no-edit", "main"]);
        let merge = repo.oid("HEAD");
        repo.write("late.txt", "late\n");
        repo.commit("after the merge", "2024-01-09T00:00:00Z");
        let store = repo.store();
        let commits = commits_since(&store, base, repo.oid("run")).expect("range");
        assert_eq!(
            commits.len(),
            5,
            "first-parent line: 3 run commits, merge, one more"
        );
        let objects_before = repo.object_count();
        let tip = repo.oid("main");
        match replay(&store, &commits, base, tip, &signature()) {
            Err(ReplayError::MergeCommit { commit, parents }) => {
                assert_eq!((commit, parents), (merge, 2));
            }
            other => panic!("expected a merge-commit refusal, got {other:?}"),
        }
        assert_eq!(repo.object_count(), objects_before);
        // A squash needs only the net change.
        let request = SquashRequest {
            base,
            head: repo.oid("run"),
            onto: tip,
            summary: "merged",
            run_id: "r-19",
        };
        let squashed = squash(&store, &request, &signature()).expect("squash");
        repo.git(&["cat-file", "-e", &format!("{}:late.txt", squashed.commit)]);
    }

    #[test]
    fn ranges_must_start_at_the_base() {
        let repo = Repo::new("sha1");
        let (base, commits) = diverged(&repo);
        let store = repo.store();
        let tip = repo.oid("main");
        assert!(matches!(
            commits_since(&store, tip, repo.oid("run")),
            Err(ReplayError::NotAnAncestor { .. })
        ));
        assert!(matches!(
            replay(&store, &commits[1..], base, tip, &signature()),
            Err(ReplayError::NotAChain { commit, expected }) if commit == commits[1] && expected == base
        ));
        assert!(matches!(
            squash(
                &store,
                &SquashRequest {
                    base,
                    head: base,
                    onto: tip,
                    summary: "nothing",
                    run_id: "r-20"
                },
                &signature()
            ),
            Err(ReplayError::NoCommits { .. })
        ));
    }

    #[test]
    fn the_committer_is_the_user_else_the_tabellio_identity() {
        let repo = Repo::new("sha1");
        // Opened isolated, the repository sees no identity from the environment: none is
        // configured, so the fallback `Store` installs on opening applies.
        let mut store = repo.store();
        store
            .repo
            .committer_or_set_fallback(FALLBACK_NAME, FALLBACK_EMAIL)
            .expect("set the fallback");
        let fallback = committer(&store);
        assert_eq!(
            (fallback.name.to_string(), fallback.email.to_string()),
            (FALLBACK_NAME.to_string(), FALLBACK_EMAIL.to_string())
        );
        repo.git(&["config", "user.name", "Configured User"]);
        repo.git(&["config", "user.email", "user@example.com"]);
        let mut store = repo.store();
        store
            .repo
            .committer_or_set_fallback(FALLBACK_NAME, FALLBACK_EMAIL)
            .expect("keep the configured identity");
        let configured = committer(&store);
        assert_eq!(
            (configured.name.to_string(), configured.email.to_string()),
            (
                "Configured User".to_string(),
                "user@example.com".to_string()
            )
        );
    }
}

/// The run's net change (`base` → `head`) merged onto `onto` with every conflict written out:
/// conflicting text files hold git's conflict markers (`<<<<<<< target`, `=======`,
/// `>>>>>>> run`), as `git merge` leaves them in a worktree. What a reopened run's worktree
/// gets when its commits do not replay cleanly, and where the hunks of a refusal come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicted {
    /// The merged tree, conflict markers included.
    pub tree: ObjectId,
    /// The paths that conflict, sorted (empty: the change merges cleanly).
    pub paths: Vec<String>,
}

/// Whether [`merge_with_conflicts`] keeps its objects in memory or writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objects {
    /// Nothing is written to the repository (a refusal's hunks).
    InMemory,
    /// The merged tree and its blobs are written (a reopen checks them out).
    Written,
}

/// Merge `base` → `head` onto `onto`, conflicts written out (see [`Conflicted`]), together
/// with the bounded hunks of the conflicting paths (each at most `hunk_bytes`).
pub fn merge_with_conflicts(
    store: &Store,
    [base, head, onto]: [ObjectId; 3],
    objects: Objects,
    hunk_bytes: usize,
) -> Result<(Conflicted, Vec<Hunk>), ReplayError> {
    let repo = match objects {
        Objects::InMemory => store.repo.clone().with_object_memory(),
        Objects::Written => store.repo.clone(),
    };
    let (repo, _shadow) = merging(store, repo)?;
    let trees = [
        tree_of(&repo, base)?,
        tree_of(&repo, onto)?,
        tree_of(&repo, head)?,
    ];
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: Some("base".into()),
        current: Some("target".into()),
        other: Some("run".into()),
    };
    let mut outcome = repo
        .merge_trees(trees[0], trees[1], trees[2], labels, merge_options(&repo)?)
        .context(|| format!("could not merge {head} onto {onto}"))?;
    let paths = unresolved_paths(&outcome);
    let tree = outcome
        .tree
        .write()
        .context(|| "could not write the merged tree".to_string())?
        .detach();
    let mut hunks = Vec::new();
    for path in &paths {
        let Some(entry) = repo
            .find_tree(tree)
            .context(|| format!("could not read the merged tree {tree}"))?
            .lookup_entry_by_path(path)
            .context(|| format!("could not look up {path} in the merged tree"))?
        else {
            continue;
        };
        if !entry.mode().is_blob() {
            continue;
        }
        let blob = repo
            .find_blob(entry.object_id())
            .context(|| format!("could not read {path} of the merged tree"))?;
        hunks.extend(conflict_hunks(path, &blob.data, hunk_bytes));
    }
    Ok((Conflicted { tree, paths }, hunks))
}

/// One conflicting region of a merged file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub path: String,
    /// The lines from `<<<<<<<` to `>>>>>>>`, cut at the bound.
    pub text: String,
    pub truncated: bool,
}

/// The regions of `data` between conflict markers, each at most `bound` bytes (cut on a
/// character boundary, `truncated` set).
pub fn conflict_hunks(path: &str, data: &[u8], bound: usize) -> Vec<Hunk> {
    let text = String::from_utf8_lossy(data);
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.split_inclusive('\n') {
        if line.starts_with("<<<<<<< ") || line.trim_end() == "<<<<<<<" {
            current = Some(String::new());
        }
        if let Some(hunk) = current.as_mut() {
            hunk.push_str(line);
            if line.starts_with(">>>>>>> ") || line.trim_end() == ">>>>>>>" {
                let mut text = current.take().unwrap_or_default();
                let truncated = text.len() > bound;
                if truncated {
                    let mut cut = bound;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                }
                out.push(Hunk {
                    path: path.to_string(),
                    text,
                    truncated,
                });
            }
        }
    }
    out
}

/// Whether `data` still holds a conflict marker line (`<<<<<<< `, `>>>>>>> `, or a bare
/// `=======` between them): a conflict written out by a reopen and not yet resolved.
pub fn has_conflict_markers(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let mut open = false;
    for line in text.lines() {
        if line.starts_with("<<<<<<< ") || line == "<<<<<<<" {
            open = true;
        } else if open && (line.starts_with(">>>>>>> ") || line == ">>>>>>>") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod conflict_tests {
    use super::*;

    #[test]
    fn hunks_are_the_marked_regions_and_bounded() {
        let file = "a\n<<<<<<< target\nx\n=======\ny\n>>>>>>> run\nb\n<<<<<<< target\nlong line here\n=======\n>>>>>>> run\n";
        let hunks = conflict_hunks("f.txt", file.as_bytes(), 1000);
        assert_eq!(hunks.len(), 2);
        assert_eq!(
            hunks[0].text,
            "<<<<<<< target\nx\n=======\ny\n>>>>>>> run\n"
        );
        assert!(!hunks[0].truncated);
        let cut = conflict_hunks("f.txt", file.as_bytes(), 10);
        assert!(cut.iter().all(|h| h.truncated && h.text.len() <= 10));
        assert!(has_conflict_markers(file.as_bytes()));
        assert!(!has_conflict_markers(b"a\n=======\nb\n"));
        assert!(!has_conflict_markers(b"<<<<<<< only an opening\n"));
    }
}
