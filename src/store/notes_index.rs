//! Finding the note on an object in a notes tree, as git lays notes out.
//!
//! A notes tree holds each note as a blob named by the hexadecimal id of the object it annotates,
//! either whole at the root or under fanout directories named by the id's leading bytes (`ab/`,
//! then `cd/`, and the rest of the id as the blob's name), as deep as the number of notes made
//! git choose. A lookup descends the fanout the id names; each fanout tree is read once, when a
//! lookup first needs it, and what is kept of it is the notes it holds (two ids each) and the
//! fanout trees below it, not yet read. Entries that are neither (a file with another name) are
//! not notes and are left out, as git leaves them out. A tree as git and gix-note write it holds
//! each object's note once, at one depth; one that holds two for the same object (written by
//! hand) gives the note nearest the root, where git would join the two.
//!
//! Every lookup of a note reads through it (a notes view, [`Store::note_lines`]); editing a
//! notes tree goes through gix-note, which writes the fanout as git does.
//!
//! Verifying a range of 10,000 commits looks a note up for every commit and every tree, so the
//! whole notes tree is read; keeping 40 bytes a note rather than a node per hexadecimal digit
//! keeps that memory a small part of the command's.

use crate::error::{Context, Result};

use super::Store;

/// The notes of one notes tree, read as lookups need them.
pub struct NotesIndex {
    root: Fanout,
    /// The length of an object id in bytes.
    width: usize,
}

/// One fanout level: its notes, and the fanout trees below it.
struct Fanout {
    /// Each note as the annotated object's id and then the note blob's, `width` bytes each,
    /// sorted by the annotated object's: two ids a note, nothing more.
    notes: Box<[u8]>,
    /// (the next byte of the annotated id, the tree holding the notes whose ids continue with it),
    /// sorted by that byte.
    below: Box<[(u8, Below)]>,
}

enum Below {
    Unread(gix::ObjectId),
    Read(Box<Fanout>),
}

impl NotesIndex {
    /// The notes in the notes tree `tree`: its root read now, the fanout below it on demand.
    pub fn new(store: &Store, tree: gix::ObjectId) -> Result<NotesIndex> {
        let width = store.object_hash().len_in_bytes();
        Ok(NotesIndex {
            root: Fanout::read(store, tree, &[], width)?,
            width,
        })
    }

    /// The note blob on `object`, `None` when it has none.
    pub fn get(&mut self, store: &Store, object: gix::ObjectId) -> Result<Option<gix::ObjectId>> {
        let (id, width) = (object.as_bytes(), self.width);
        let mut level = &mut self.root;
        let mut depth = 0;
        loop {
            if let Some(blob) = level.note(id, width) {
                return Ok(Some(blob));
            }
            let Some(&byte) = id.get(depth) else {
                return Ok(None);
            };
            let Ok(i) = level.below.binary_search_by_key(&byte, |(b, _)| *b) else {
                return Ok(None);
            };
            let slot = &mut level.below[i].1;
            if let Below::Unread(tree) = *slot {
                let read = Fanout::read(store, tree, &id[..=depth], width)?;
                *slot = Below::Read(Box::new(read));
            }
            let Below::Read(next) = slot else {
                unreachable!("read just above")
            };
            level = next;
            depth += 1;
        }
    }
}

impl Fanout {
    /// The notes and fanout trees in `tree`, whose notes annotate ids starting with `prefix`.
    fn read(store: &Store, tree: gix::ObjectId, prefix: &[u8], width: usize) -> Result<Fanout> {
        use gix::objs::FindExt as _;
        let mut buf = Vec::new();
        let entries = store
            .objects_read_once()
            .find_tree_iter(&tree, &mut buf)
            .context(|| format!("could not read the notes tree {tree}"))?;
        let rest = 2 * (width - prefix.len());
        let (mut notes, mut below) = (Vec::new(), Vec::new());
        for entry in entries {
            let entry = entry.context(|| format!("could not read the notes tree {tree}"))?;
            let name: &[u8] = entry.filename;
            if entry.mode.is_blob() && name.len() == rest {
                let start = notes.len();
                notes.extend_from_slice(prefix);
                if push_hex(&mut notes, name) {
                    notes.extend_from_slice(entry.oid.as_bytes());
                } else {
                    notes.truncate(start);
                }
            } else if entry.mode.is_tree() && name.len() == 2 && rest > 2 {
                let mut byte = Vec::with_capacity(1);
                if push_hex(&mut byte, name) {
                    below.push((byte[0], Below::Unread(entry.oid.to_owned())));
                }
            }
        }
        // A tree lists its entries by name, which for hexadecimal names of one length in
        // lowercase (as git writes them) is the order of the ids they spell; sorted again
        // otherwise, the first of two notes on one object kept.
        let record = 2 * width;
        let sorted = notes
            .chunks_exact(record)
            .zip(notes.chunks_exact(record).skip(1))
            .all(|(a, b)| a[..width] < b[..width]);
        if !sorted {
            let mut records: Vec<&[u8]> = notes.chunks_exact(record).collect();
            records.sort_by(|a, b| a[..width].cmp(&b[..width]));
            records.dedup_by(|a, b| a[..width] == b[..width]);
            notes = records.concat();
        }
        below.sort_by_key(|(b, _)| *b);
        below.dedup_by(|a, b| a.0 == b.0);
        Ok(Fanout {
            notes: notes.into_boxed_slice(),
            below: below.into_boxed_slice(),
        })
    }

    /// The note blob on the object `id` at this level, found by a binary search of its notes.
    fn note(&self, id: &[u8], width: usize) -> Option<gix::ObjectId> {
        let record = 2 * width;
        let (mut low, mut high) = (0, self.notes.len() / record);
        while low < high {
            let middle = (low + high) / 2;
            let at = &self.notes[middle * record..][..record];
            match at[..width].cmp(id) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return gix::ObjectId::try_from(&at[width..]).ok(),
            }
        }
        None
    }
}

/// Append the bytes the hexadecimal `text` spells (either case) to `out`; false, with `out`
/// left as it was, when `text` is not hexadecimal or of odd length.
fn push_hex(out: &mut Vec<u8>, text: &[u8]) -> bool {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let start = out.len();
    let (pairs, odd) = text.as_chunks::<2>();
    for &[high, low] in pairs {
        match (nibble(high), nibble(low)) {
            (Some(h), Some(l)) => out.push(h << 4 | l),
            _ => {
                out.truncate(start);
                return false;
            }
        }
    }
    if !odd.is_empty() {
        out.truncate(start);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::path::Path;

    use crate::store::test_git as git;
    use crate::store::test_git_command;
    use crate::store::test_repo as repo;
    use crate::store::Store;

    use super::NotesIndex;

    fn git_with_input(home: &Path, dir: &Path, args: &[&str], input: &str) -> String {
        let mut child = test_git_command(home, dir, args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("input");
        let out = child.wait_with_output().expect("git runs");
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    }

    /// Notes at the root, under one and under two fanout levels, beside entries that are not
    /// notes, are found where git finds them; an object without a note has none.
    #[test]
    fn finds_each_note_at_any_fanout_as_git_does() {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path();
        let path = repo(home, "r");
        let blob =
            |text: &str| git_with_input(home, &path, &["hash-object", "-w", "--stdin"], text);
        let mktree = |entries: &[String]| {
            git_with_input(home, &path, &["mktree"], &(entries.join("\n") + "\n"))
        };
        // Annotated objects with distinct first bytes: 56…, f7…, 2b…, 85…, 54….
        let objects: Vec<String> = ["one\n", "two\n", "three\n", "four\n", "five\n"]
            .iter()
            .map(|t| blob(t))
            .collect();
        let notes: Vec<String> = (0..3).map(|i| blob(&format!("note {i}\n"))).collect();
        let (o1, o2, o3, o4) = (&objects[0], &objects[1], &objects[2], &objects[3]);
        let readme = blob("not a note\n");
        // Beside it, two notes on objects f7b0… and f7a1… (not in the repository), the first
        // named in capitals: the tree lists `B0…` before `a1…`, the reverse of their ids.
        let (upper, lower) = (
            format!("B0{}", "0".repeat(36)),
            format!("a1{}", "0".repeat(36)),
        );
        let one_level = mktree(&[
            format!("100644 blob {}\t{}", notes[1], &o2[2..]),
            format!("100644 blob {}\t{upper}", notes[0]),
            format!("100644 blob {}\t{lower}", notes[2]),
        ]);
        let inner = mktree(&[format!("100644 blob {}\t{}", notes[2], &o3[4..])]);
        let two_levels = mktree(&[format!("040000 tree {inner}\t{}", &o3[2..4])]);
        let not_notes = mktree(&[format!("100644 blob {readme}\tREADME")]);
        let root = mktree(&[
            format!("100644 blob {}\t{o1}", notes[0]),
            format!("040000 tree {one_level}\t{}", &o2[..2]),
            format!("040000 tree {two_levels}\t{}", &o3[..2]),
            format!("040000 tree {not_notes}\t{}", &o4[..2]),
            format!("100644 blob {readme}\tREADME"),
        ]);
        let commit = git_with_input(home, &path, &["commit-tree", &root], "notes\n");
        git(home, &path, &["update-ref", "refs/notes/t", &commit]);

        let store = Store::open(&path).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("an id");
        let mut index = NotesIndex::new(&store, id(&root)).expect("index");
        for (object, note) in [o1, o2, o3].into_iter().zip(&notes) {
            assert_eq!(index.get(&store, id(object)).expect("get"), Some(id(note)));
            let shown = git_with_input(home, &path, &["notes", "--ref=t", "show", object], "");
            let written = git_with_input(home, &path, &["cat-file", "blob", note], "");
            assert_eq!(shown, written, "git finds the same note");
        }
        let (upper, lower) = (
            id(&format!("f7b0{}", "0".repeat(36))),
            id(&format!("f7a1{}", "0".repeat(36))),
        );
        assert_eq!(index.get(&store, upper).expect("get"), Some(id(&notes[0])));
        assert_eq!(index.get(&store, lower).expect("get"), Some(id(&notes[2])));
        for object in [o4, &objects[4]] {
            assert_eq!(index.get(&store, id(object)).expect("get"), None);
        }
    }
}
