//! Notes under `refs/notes/tabellio/*`: git's fanout layout (gix-note writes it like git), each
//! note a JSON Lines blob whose lines are sorted and unique, so our union merge and git's
//! `git notes merge -s cat_sort_uniq` agree.
//!
//! A notes ref is shared by every run, so losing a race on it is normal: callers re-read and
//! re-apply their additions ([`Store::prepare_notes`] is cheap to call again) instead of failing.

use gix::note::plumbing::State;

use crate::error::{Context, Error, Result};

use super::notes_index::NotesIndex;
use super::Store;

pub const CHECKPOINTS: &str = "refs/notes/tabellio/checkpoints";
pub const EVIDENCE: &str = "refs/notes/tabellio/evidence";
/// Approvals of changes to guarded paths (`tabellio.approval/v1`).
pub const APPROVALS: &str = "refs/notes/tabellio/approvals";
/// Verification summaries (SLSA VSAs in DSSE envelopes) of the tips `promote` and `land` made.
pub const VSA: &str = "refs/notes/tabellio/vsa";

/// The largest one note (the records on one commit or tree) may be when a server receives it:
/// 16 MiB. A record's output excerpt is at most 1 MiB (`output.excerpt_bytes`), so a note this
/// large is not the tool's writing, and one runaway note would otherwise reach every clone.
pub const NOTE_CAP_BYTES: u64 = 16 * 1024 * 1024;

/// The largest one record (one line of a note) may be when it is written: 4 MiB. An evidence
/// record's excerpt takes at most 2 MiB as stored, the rest is a few KiB; a larger line is not
/// a record of ours.
pub const RECORD_CAP_BYTES: usize = 4 * 1024 * 1024;

/// The notes blobs a move of the notes ref `name` from the commit `old` (`None`: created) to
/// `new` adds or changes that are larger than [`NOTE_CAP_BYTES`]: their path in the notes tree
/// and size.
pub fn oversized_notes(
    store: &Store,
    old: Option<gix::ObjectId>,
    new: gix::ObjectId,
) -> crate::error::Result<Vec<(String, u64)>> {
    let old_tree = old.map(|o| store.tree_of(o)).transpose()?;
    let changes =
        crate::store::diff::tree_changes_from(&store.objects(), old_tree, store.tree_of(new)?)?;
    let mut out = Vec::new();
    for change in changes {
        let Some((mode, id)) = change.new else {
            continue;
        };
        if !mode.is_blob() {
            continue;
        }
        let size = store
            .repo
            .find_header(id)
            .map_err(|e| {
                crate::error::Error::not_found(format!("the note blob {id} is not there: {e}"))
                    .caused_by(e)
            })?
            .size();
        if size > NOTE_CAP_BYTES {
            out.push((change.path.to_string(), size));
        }
    }
    Ok(out)
}

/// A notes commit ready to be put on its ref.
#[derive(Debug, Clone)]
pub struct PreparedNotes {
    pub notes_ref: &'static str,
    /// The ref's value we built on; the compare-and-swap expects it.
    pub previous: Option<gix::ObjectId>,
    pub commit: gix::ObjectId,
    /// False when every line was already there: no ref update needed.
    pub changed: bool,
}

/// Merge `existing` note text and `additions` into sorted unique lines.
pub fn merge_lines(existing: &str, additions: &[String]) -> String {
    let mut lines: Vec<&str> = existing
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .chain(additions.iter().map(String::as_str))
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// How to repair the notes ref `name` that does not point at a commit. git keeps a reflog of
/// `refs/notes/*`, so the last good notes commit is usually in it.
pub fn notes_repair(name: &str) -> String {
    format!(
        "point it back at its last notes commit from the reflog: `git rev-parse '{name}@{{1}}'` \
         (`@{{2}}`, … for older values; `git reflog show` lists nothing while the ref is at a blob \
         or a tree), then `git update-ref {name} <commit>`; or delete it with \
         `git update-ref -d {name}` (its notes are lost here; `git tabellio sync` fetches them \
         again from a remote that has them)"
    )
}

impl Store {
    /// The tree of a notes ref's tip, or `None` when the ref does not exist.
    fn notes_tree(&self, notes_ref: &str) -> Result<Option<(gix::ObjectId, gix::ObjectId)>> {
        let Some(tip) = self.ref_target(notes_ref)? else {
            return Ok(None);
        };
        self.ensure_commit_ref(notes_ref, tip, &notes_repair(notes_ref))?;
        Ok(Some((tip, self.tree_of(tip)?)))
    }

    /// The note lines on `object` in `notes_ref`.
    ///
    /// The notes tree is parsed once per command and tree id: a command looks up the notes of
    /// a commit and of its tree, often more than once (the evidence, promote's preconditions),
    /// and with 100,000 notes each lookup parsed the root's 256 fanout entries and a fanout
    /// tree again (about a tenth of a `status`).
    pub fn note_lines(&self, notes_ref: &str, object: gix::ObjectId) -> Result<Vec<String>> {
        let Some((_, tree)) = self.notes_tree(notes_ref)? else {
            return Ok(Vec::new());
        };
        let mut trees = self
            .note_trees
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = match trees.entry(tree) {
            std::collections::hash_map::Entry::Occupied(parsed) => parsed.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(
                NotesIndex::new(self, tree).context(|| format!("could not read {notes_ref}"))?,
            ),
        };
        let blob = index
            .get(self, object)
            .context(|| format!("could not look up the note on {object} in {notes_ref}"))?;
        self.note_blob_lines(blob, object)
    }

    /// The note lines on `object` in the notes tree being edited (`state`).
    fn lines_in(
        &self,
        state: &mut State,
        notes_ref: &str,
        object: gix::ObjectId,
    ) -> Result<Vec<String>> {
        let blob = state
            .get(&object, &self.objects())
            .context(|| format!("could not look up the note on {object} in {notes_ref}"))?;
        self.note_blob_lines(blob, object)
    }

    /// The non-empty lines of the note blob `blob` on `object` (none without a blob).
    fn note_blob_lines(
        &self,
        blob: Option<gix::ObjectId>,
        object: gix::ObjectId,
    ) -> Result<Vec<String>> {
        let Some(blob) = blob else {
            return Ok(Vec::new());
        };
        let blob = self
            .read_blob(blob)
            .context(|| format!("could not read the note on {object}"))?;
        Ok(note_text(&blob)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Build (but do not publish) a notes commit adding `additions[i].1` lines to the note on
    /// `additions[i].0`, on top of the ref's current value.
    pub fn prepare_notes(
        &self,
        notes_ref: &'static str,
        additions: &[(gix::ObjectId, Vec<String>)],
        message: &str,
    ) -> Result<PreparedNotes> {
        let existing = self.notes_tree(notes_ref)?;
        let root =
            existing.map_or_else(|| gix::ObjectId::empty_tree(self.object_hash()), |(_, t)| t);
        let mut state =
            State::new(root, &self.objects()).context(|| format!("could not read {notes_ref}"))?;
        let mut changed = false;
        for (object, lines) in additions {
            if let Some(line) = lines.iter().find(|l| l.len() > RECORD_CAP_BYTES) {
                return Err(Error::refused(format!(
                    "a record for {object} in {notes_ref} is {} bytes, over the cap of {RECORD_CAP_BYTES} bytes (4 MiB) for one record",
                    line.len()
                ))
                .hint("nothing was written; the size caps are in docs/storage.md (\"Size caps\")"));
            }
            let current = self.lines_in(&mut state, notes_ref, *object)?.join("\n");
            let merged = merge_lines(&current, lines);
            if merged == merge_lines(&current, &[]) {
                continue;
            }
            if merged.len() as u64 > NOTE_CAP_BYTES {
                return Err(Error::refused(format!(
                    "the note on {object} in {notes_ref} would be {} bytes, over the cap of {NOTE_CAP_BYTES} bytes (16 MiB) for one note",
                    merged.len()
                ))
                .hint("nothing was written: a server refuses a note this large; the records already on that object are many or large (docs/storage.md, \"Size caps\")"));
            }
            let blob = self.write_blob(merged.as_bytes())?;
            state
                .edit(*object, Some(blob), &self.objects())
                .context(|| format!("could not note {object} in {notes_ref}"))?;
            changed = true;
        }
        let previous = existing.map(|(tip, _)| tip);
        if !changed {
            return Ok(PreparedNotes {
                notes_ref,
                previous,
                commit: previous.unwrap_or_else(|| gix::ObjectId::null(self.object_hash())),
                changed,
            });
        }
        self.commit_notes(notes_ref, &mut state, previous, message)
    }
}

impl Store {
    /// Every note of `notes_ref`: annotated object → note blob (empty without the ref).
    pub fn all_notes(
        &self,
        notes_ref: &str,
    ) -> Result<std::collections::BTreeMap<gix::ObjectId, gix::ObjectId>> {
        let Some((_, tree)) = self.notes_tree(notes_ref)? else {
            return Ok(Default::default());
        };
        Ok(super::remote::notes_merge::diff(self, None, Some(tree))?
            .into_iter()
            .filter_map(|(object, (_, blob))| Some((object, blob?)))
            .collect())
    }

    /// Build (but do not publish) a notes commit without the notes on `remove`'s objects, each
    /// removed only while it is still the blob given (a note another writer changed since it
    /// was chosen is kept).
    pub fn prepare_notes_removal(
        &self,
        notes_ref: &'static str,
        remove: &std::collections::BTreeMap<gix::ObjectId, gix::ObjectId>,
        message: &str,
    ) -> Result<(PreparedNotes, usize)> {
        let existing = self.notes_tree(notes_ref)?;
        let previous = existing.map(|(tip, _)| tip);
        let unchanged = PreparedNotes {
            notes_ref,
            previous,
            commit: previous.unwrap_or_else(|| gix::ObjectId::null(self.object_hash())),
            changed: false,
        };
        let Some((_, root)) = existing else {
            return Ok((unchanged, 0));
        };
        let mut state =
            State::new(root, &self.objects()).context(|| format!("could not read {notes_ref}"))?;
        let mut removed = 0;
        for (object, blob) in remove {
            let now = state
                .get(object, &self.objects())
                .context(|| format!("could not look up the note on {object} in {notes_ref}"))?;
            if now != Some(*blob) {
                continue;
            }
            state
                .remove(*object, &self.objects())
                .context(|| format!("could not remove the note on {object} from {notes_ref}"))?;
            removed += 1;
        }
        if removed == 0 {
            return Ok((unchanged, 0));
        }
        Ok((
            self.commit_notes(notes_ref, &mut state, previous, message)?,
            removed,
        ))
    }
}

impl Store {
    /// The notes commit of the edited `state` on top of `previous`, ready to be put on
    /// `notes_ref`.
    fn commit_notes(
        &self,
        notes_ref: &'static str,
        state: &mut State,
        previous: Option<gix::ObjectId>,
        message: &str,
    ) -> Result<PreparedNotes> {
        let tree = state
            .write(&self.objects())
            .context(|| format!("could not write the {notes_ref} tree"))?;
        let commit = self
            .write_commit(message, tree, previous)
            .context(|| format!("could not write the {notes_ref} commit"))?;
        Ok(PreparedNotes {
            notes_ref,
            previous,
            commit,
            changed: true,
        })
    }
}

/// A note's text: its bytes when they are UTF-8 (a validation that runs a word at a time over
/// ASCII, where the lossy decoding goes byte by byte), else with each invalid sequence
/// replaced.
pub(crate) fn note_text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(data) {
        Ok(text) => text.into(),
        Err(_) => String::from_utf8_lossy(data),
    }
}

/// The notes trees a [`Store`] has parsed, by tree id (see [`Store::note_lines`]).
#[derive(Default)]
pub struct NoteTrees(std::sync::Mutex<std::collections::HashMap<gix::ObjectId, NotesIndex>>);

impl std::fmt::Debug for NoteTrees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoteTrees")
    }
}

impl Store {
    /// Every line of every note in `notes_ref`, each note's lines as stored (for statistics over
    /// all records; a lookup of one object's notes is [`Store::note_lines`]).
    pub fn all_note_lines(&self, notes_ref: &str) -> Result<Vec<String>> {
        let Some((_, tree)) = self.notes_tree(notes_ref)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut trees = vec![tree];
        while let Some(id) = trees.pop() {
            let tree = self
                .object(id)?
                .try_into_tree()
                .context(|| format!("{notes_ref} holds {id}, which is not a tree"))?;
            for entry in tree.iter() {
                let entry = entry.context(|| format!("could not read tree {id} of {notes_ref}"))?;
                let oid = entry.oid().to_owned();
                if entry.mode().is_tree() {
                    trees.push(oid);
                } else if entry.mode().is_blob() {
                    let text = String::from_utf8_lossy(&self.read_blob(oid)?).into_owned();
                    out.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::merge_lines;

    /// The parsed notes tree a store keeps is the tree the ref points at: notes another
    /// process adds in the meantime are read by the next lookup of the same store.
    #[test]
    fn note_lines_follow_the_ref_within_one_store() {
        use crate::store::{test_git as git, test_repo as repo, test_rev, Store};
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        git(
            home,
            &path,
            &["commit", "-q", "--allow-empty", "-m", "second"],
        );
        let rev = |spec: &str| test_rev(home, &path, spec);
        let (head, parent) = (rev("HEAD"), rev("HEAD~1"));
        let store = Store::open(&path).expect("open");
        let lines = |id| store.note_lines("refs/notes/x", id).expect("read");
        assert!(lines(head).is_empty());
        git(home, &path, &["notes", "--ref=x", "add", "-m", "a", "HEAD"]);
        assert_eq!(lines(head), ["a"]);
        assert!(lines(parent).is_empty());
        git(
            home,
            &path,
            &["notes", "--ref=x", "append", "-m", "b", "HEAD"],
        );
        git(
            home,
            &path,
            &["notes", "--ref=x", "add", "-m", "c", "HEAD~1"],
        );
        assert_eq!(lines(head), ["a", "b"]);
        assert_eq!(lines(parent), ["c"]);
        assert_eq!(lines(head), ["a", "b"], "asked again, from the parsed tree");
    }

    #[test]
    fn note_text_borrows_utf8_and_replaces_the_rest() {
        assert!(matches!(
            super::note_text(b"a\n"),
            std::borrow::Cow::Borrowed("a\n")
        ));
        assert_eq!(super::note_text(b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn lines_sorted_unique() {
        assert_eq!(
            merge_lines("b\na\n", &["c".into(), "a".into()]),
            "a\nb\nc\n"
        );
        assert_eq!(merge_lines("", &[]), "");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::merge_lines;

        /// Note text as stock git or a hand edit may leave it: lines with trailing blanks, empty
        /// lines, `\r\n` endings, with or without a final newline.
        fn note_text() -> impl Strategy<Value = String> {
            prop::collection::vec(("[ -~]{0,12}", "[ \t]{0,2}", "\r?\n\n?"), 0..8).prop_map(
                |lines| {
                    lines
                        .into_iter()
                        .map(|(text, blanks, end)| format!("{text}{blanks}{end}"))
                        .collect()
                },
            )
        }

        fn line() -> impl Strategy<Value = String> {
            "[!-~][ -~]{0,10}[!-~]".prop_map(String::from)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Merged notes are sorted, unique, without empty lines, newline-terminated, and hold
            /// every line that was there or added.
            #[test]
            fn merged_notes_are_sorted_unique_lines(
                existing in note_text(),
                additions in prop::collection::vec(line(), 0..6),
            ) {
                let merged = merge_lines(&existing, &additions);
                let lines: Vec<&str> = merged.lines().collect();
                prop_assert!(merged.is_empty() || merged.ends_with('\n'));
                prop_assert!(lines.windows(2).all(|w| w[0] < w[1]), "{:?}", merged);
                prop_assert!(lines.iter().all(|l| !l.is_empty() && *l == l.trim_end()));
                for added in &additions {
                    prop_assert!(lines.contains(&added.as_str()));
                }
                for old in existing.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
                    prop_assert!(lines.contains(&old));
                }
            }

            /// Merging is idempotent and does not depend on the order of the additions: the
            /// union `git notes merge -s cat_sort_uniq` makes.
            #[test]
            fn merging_is_an_order_free_union(
                existing in note_text(),
                mut additions in prop::collection::vec(line(), 0..6),
            ) {
                let once = merge_lines(&existing, &additions);
                prop_assert_eq!(merge_lines(&once, &additions), once.clone());
                prop_assert_eq!(merge_lines(&once, &[]), once.clone());
                additions.reverse();
                prop_assert_eq!(merge_lines(&existing, &additions), once);
            }
        }
    }
}
