//! The layer table of `docs/architecture.md`, asserted against the code.
//!
//! Every library file's `crate::` and `super::` paths are read (comments left out, doc links
//! kept; re-exports of `src/lib.rs` such as `crate::Error` resolved to the room that defines
//! them) and judged by the table: a room names only rooms of the layers below it; within one
//! layer only where the table lists the pair; and no file of one operation of `lifecycle/`
//! names another operation. No two library files import each other either. So the document
//! cannot drift from the code: a sideways import fails here, with the file, the line and the
//! rule it breaks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer table: rooms per layer, top first, and the same-layer imports it allows.
struct Table {
    layers: Vec<Vec<String>>,
    allowed: BTreeSet<(String, String)>,
}

impl Table {
    /// Read from the two fenced blocks under "## Layers" in `docs/architecture.md`: the first
    /// lists the layers, the second the same-layer imports (`a -> b, c`).
    fn read(doc: &str) -> Table {
        let section = doc
            .split("\n## Layers")
            .nth(1)
            .expect("docs/architecture.md has a `## Layers` section");
        let mut blocks = section.split("```").skip(1).step_by(2);
        let layers_block = blocks.next().expect("the layer table's fenced block");
        let allowed_block = blocks.next().expect("the same-layer imports' fenced block");
        let mut layers = Vec::new();
        for line in layers_block.lines().filter(|l| !l.trim().is_empty()) {
            // `a · b · c    what they are`: the rooms come before the run of spaces.
            let rooms = line.split("   ").next().unwrap_or_default();
            let rooms: Vec<String> = rooms
                .split('·')
                .map(|r| r.split_whitespace().next().unwrap_or_default().to_string())
                .filter(|r| !r.is_empty())
                .collect();
            layers.push(rooms);
        }
        let mut allowed = BTreeSet::new();
        for line in allowed_block.lines().filter(|l| !l.trim().is_empty()) {
            let (from, to) = line
                .split_once("->")
                .unwrap_or_else(|| panic!("a same-layer line is `a -> b, c`: {line:?}"));
            for to in to.split(',') {
                allowed.insert((from.trim().to_string(), to.trim().to_string()));
            }
        }
        Table { layers, allowed }
    }

    /// The layer of `room`, 0 at the top.
    fn layer(&self, room: &str) -> Option<usize> {
        self.layers.iter().position(|l| l.iter().any(|r| r == room))
    }
}

/// One `crate::`/`super::` path of a file, resolved to module segments from the crate root.
struct Named {
    line: usize,
    path: Vec<String>,
    /// Named in a doc comment's link, not imported.
    in_doc: bool,
}

/// The library's source files (the binary's `main.rs` and `cli/` are the top layer and may
/// name anything), with their module paths.
fn library_files(src: &Path) -> Vec<(PathBuf, Vec<String>)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).expect("under src").to_path_buf();
            let mut segs: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if segs == ["main"] || segs == ["lib"] || segs[0] == "cli" {
                return None;
            }
            if segs.last().is_some_and(|s| s == "mod") {
                segs.pop();
            }
            Some((f, segs))
        })
        .collect()
}

/// The code of a file as it names things: `//` comments blanked (doc comments kept, their
/// links name modules too), everything from a column-0 `#[cfg(test)]` on left out (unit tests
/// may reach wherever they test).
fn code_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let t = line.trim_start();
        if t.starts_with("///") || t.starts_with("//!") {
            out.push(line.to_string());
        } else if let Some(i) = line.find("//").filter(|_| !t.starts_with("\"")) {
            out.push(line[..i].to_string());
        } else {
            out.push(line.to_string());
        }
    }
    out
}

/// Expand the path text after `crate::` or `super::` (which may be a `{…}` group) into paths.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    let ident_end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return items
            .into_iter()
            .filter(|i| !i.trim().is_empty())
            .flat_map(expand)
            .collect();
    }
    if ident_end == 0 {
        return Vec::new();
    }
    let head = rest[..ident_end].to_string();
    let after = &rest[ident_end..];
    match after.strip_prefix("::") {
        Some(tail) if !tail.trim_start().starts_with('<') => {
            let tails = expand(tail);
            if tails.is_empty() {
                vec![vec![head]]
            } else {
                tails
                    .into_iter()
                    .map(|mut t| {
                        t.insert(0, head.clone());
                        t
                    })
                    .collect()
            }
        }
        _ => vec![vec![head]],
    }
}

/// Every path a file names, from the crate root. A `use` group spanning lines is read whole.
fn named_paths(text: &str, module: &[String], is_mod_root: bool) -> Vec<Named> {
    let lines = code_lines(text);
    let joined = lines.join("\n");
    let line_of = |offset: usize| joined[..offset].matches('\n').count() + 1;
    let mut out = Vec::new();
    for (keyword, from_root) in [("crate::", true), ("super::", false)] {
        let mut at = 0;
        while let Some(i) = joined[at..].find(keyword) {
            let start = at + i;
            at = start + keyword.len();
            let before = joined[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Vec<String> = if from_root {
                Vec::new()
            } else {
                // `super` of `a/b/c.rs` (module a::b::c) is a::b; of `a/b/mod.rs` (a::b), a.
                let _ = is_mod_root;
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let mut rest = &joined[at..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            for tail in expand(rest) {
                let mut path = base.clone();
                path.extend(tail);
                let line = line_of(start);
                let doc = lines[line - 1].trim_start();
                out.push(Named {
                    line,
                    path,
                    in_doc: doc.starts_with("///") || doc.starts_with("//!"),
                });
            }
        }
    }
    out
}

/// `pub use x::{A, B}` of `src/lib.rs`: the room that defines each re-exported name.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        for path in expand(rest.trim_end_matches(';')) {
            if let (Some(room), Some(name)) = (path.first(), path.last()) {
                out.insert(name.clone(), room.clone());
            }
        }
    }
    out
}

/// The rule broken by `from` (room, and its operation when in `lifecycle`) naming `to`, if any.
fn broken_rule(
    table: &Table,
    from: (&str, Option<&str>),
    to: (&str, Option<&str>),
) -> Option<String> {
    let (from_room, from_op) = from;
    let (to_room, to_op) = to;
    if from_room == to_room {
        return match (from_room, from_op, to_op) {
            ("lifecycle", Some(a), Some(b)) if a != b => Some(format!(
                "no file of one operation names another operation (`{a}` names `{b}`): move \
                 what both need one layer down"
            )),
            _ => None,
        };
    }
    let (Some(lf), Some(lt)) = (table.layer(from_room), table.layer(to_room)) else {
        return Some(format!(
            "`{from_room}` or `{to_room}` is not a room of the layer table: add it there"
        ));
    };
    if lt < lf {
        return Some(format!(
            "`{from_room}` names `{to_room}`, a layer above it: rooms name only layers below"
        ));
    }
    if lt == lf
        && !table
            .allowed
            .contains(&(from_room.to_string(), to_room.to_string()))
    {
        return Some(format!(
            "`{from_room}` names `{to_room}` in its own layer, and the table does not list \
             `{from_room} -> {to_room}`"
        ));
    }
    None
}

/// Every broken rule of the library under `root`, one line each.
fn violations(root: &Path) -> Vec<String> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let table = Table::read(&doc);
    let src = root.join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let reexported = reexports(&lib);
    let files = library_files(&src);
    let modules: BTreeMap<Vec<String>, PathBuf> =
        files.iter().map(|(f, m)| (m.clone(), f.clone())).collect();
    let mut out = Vec::new();
    let mut edges: BTreeMap<(PathBuf, PathBuf), usize> = BTreeMap::new();
    for (file, module) in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let is_mod_root = file.ends_with("mod.rs");
        let rel = file.strip_prefix(root).expect("under the root").display();
        let from_room = module[0].as_str();
        let from_op = (from_room == "lifecycle").then(|| module.get(1).map(String::as_str));
        for named in named_paths(&text, module, is_mod_root) {
            let mut path = named.path;
            if path.len() == 1 || !modules.keys().any(|m| m[0] == path[0]) {
                match path.first().and_then(|p| reexported.get(p)) {
                    Some(room) => path.insert(0, room.clone()),
                    None if path.len() == 1 => continue,
                    None => {}
                }
            }
            let to_room = path[0].as_str();
            if !modules.keys().any(|m| m[0] == to_room) {
                continue; // `super::` inside a nested module, or a local name.
            }
            let to_op = (to_room == "lifecycle").then(|| path.get(1).map(String::as_str));
            if let Some(rule) = broken_rule(
                &table,
                (from_room, from_op.flatten()),
                (to_room, to_op.flatten()),
            ) {
                out.push(format!(
                    "{rel}:{}: names {}: {rule}",
                    named.line,
                    path.join("::")
                ));
            }
            // The longest module prefix is the file named, for the two-file rings of imports.
            if named.in_doc {
                continue;
            }
            if let Some(target) = (1..=path.len()).rev().find_map(|n| modules.get(&path[..n])) {
                if target != file {
                    edges
                        .entry((file.clone(), target.clone()))
                        .or_insert(named.line);
                }
            }
        }
    }
    for ((a, b), line) in &edges {
        if a < b && edges.contains_key(&(b.clone(), a.clone())) {
            out.push(format!(
                "{}:{line}: {} and {} import each other: move what both need into one of them \
                 or below both",
                a.strip_prefix(root).expect("under the root").display(),
                a.strip_prefix(root).expect("under the root").display(),
                b.strip_prefix(root).expect("under the root").display(),
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_code_keeps_the_layer_table_of_the_architecture_doc() {
    let broken = violations(&root());
    assert!(
        broken.is_empty(),
        "the code breaks docs/architecture.md's layer table:\n{}",
        broken.join("\n")
    );
}

/// Every room of the library is in the table, and every room of the table exists.
#[test]
fn the_layer_table_lists_every_room() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("the doc");
    let table = Table::read(&doc);
    let listed: BTreeSet<String> = table.layers.iter().flatten().cloned().collect();
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).expect("src/lib.rs");
    let mut rooms: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    rooms.insert("cli".into());
    assert_eq!(
        listed, rooms,
        "the layer table and src/lib.rs's rooms differ"
    );
}

/// The test fails when the code breaks the table: a copy of the tree with one sideways import
/// added (an operation naming another) and one upward import (the store naming an operation).
#[test]
fn a_sideways_or_upward_import_is_named_with_its_file_line_and_rule() {
    let copy = tempfile::tempdir().expect("a temp dir");
    let copy_dir = |from: &Path, to: &Path| {
        fn rec(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).expect("mkdir");
            for e in std::fs::read_dir(from).expect("read") {
                let p = e.expect("entry").path();
                let dest = to.join(p.file_name().expect("a name"));
                if p.is_dir() {
                    rec(&p, &dest);
                } else {
                    std::fs::copy(&p, &dest).expect("copy");
                }
            }
        }
        rec(from, to)
    };
    copy_dir(&root().join("src"), &copy.path().join("src"));
    copy_dir(&root().join("docs"), &copy.path().join("docs"));
    assert!(violations(copy.path()).is_empty(), "the copy starts clean");
    let append = |file: &str, line: &str| {
        let path = copy.path().join(file);
        let text = std::fs::read_to_string(&path).expect("read");
        // Before the unit tests, where the test reads.
        let text = match text.find("\n#[cfg(test)]") {
            Some(i) => format!("{}\n{line}\n{}", &text[..i], &text[i..]),
            None => format!("{text}\n{line}\n"),
        };
        std::fs::write(&path, text).expect("write");
    };
    append(
        "src/lifecycle/finish.rs",
        "use crate::lifecycle::land::land;",
    );
    append("src/store/ledger/mod.rs", "use crate::verify::verify;");
    let broken = violations(copy.path());
    let finish_line = std::fs::read_to_string(copy.path().join("src/lifecycle/finish.rs"))
        .expect("read")
        .lines()
        .position(|l| l == "use crate::lifecycle::land::land;")
        .expect("the added line")
        + 1;
    assert!(
        broken.iter().any(|b| b.starts_with(&format!(
            "src/lifecycle/finish.rs:{finish_line}: names lifecycle::land::land: no file of one \
             operation names another operation (`finish` names `land`)"
        ))),
        "{broken:#?}"
    );
    assert!(
        broken
            .iter()
            .any(|b| b.starts_with("src/store/ledger/mod.rs:")
                && b.contains("`store` names `verify`, a layer above it")),
        "{broken:#?}"
    );
    assert_eq!(broken.len(), 2, "{broken:#?}");
}
