//! Declared inputs: evidence keyed to the part of the tree a check reads.
//!
//! A check with `inputs` in the policy is judged, reused and run on its commit's scoped tree
//! (the tree restricted to the inputs, [`crate::store::scoped`]): its records carry
//! `scoped_tree` and are noted on that id as well as on the commit and its tree, so every tree
//! with the same inputs finds them. Whether a record about a scoped tree counts is decided by
//! the requirement, which carries the inputs of the *judging* policy: a run's own policy never
//! narrows what a gate reads. A `not_applicable` record counts only beside the passing record
//! it names, on the same scoped tree (the judge checks both).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::model::inputs::Inputs;
use crate::model::EvidenceRecord;
use crate::store::scoped::Materialise;
use crate::store::Store;

use super::requirements::Requirement;

/// Fill in the scoped tree of `tree` for every requirement with declared inputs; the distinct
/// scoped trees, whose notes hold the records about them.
pub fn scope_requirements(
    store: &Store,
    tree: gix::ObjectId,
    reqs: &mut [Requirement],
) -> Result<Vec<gix::ObjectId>> {
    let mut seen: Vec<(Inputs, gix::ObjectId)> = Vec::new();
    let mut out = Vec::new();
    for req in reqs.iter_mut() {
        let Some(scope) = req.scope.as_mut() else {
            continue;
        };
        let id = match seen.iter().find(|(i, _)| *i == scope.inputs) {
            Some((_, id)) => *id,
            None => {
                let id = store.scoped_tree(tree, &scope.inputs, Materialise::HashOnly)?;
                seen.push((scope.inputs.clone(), id));
                if !out.contains(&id) {
                    out.push(id);
                }
                id
            }
        };
        scope.tree = Some(id.to_string());
    }
    Ok(out)
}

/// Where `records` of `commit` (with tree `tree`) are noted: on the commit and the tree, and
/// each record with a scoped tree on that too.
pub fn note_targets(
    commit: gix::ObjectId,
    tree: gix::ObjectId,
    records: &[EvidenceRecord],
) -> Result<Vec<(gix::ObjectId, Vec<String>)>> {
    let lines: Vec<String> = records.iter().map(EvidenceRecord::to_line).collect();
    let mut scoped: BTreeMap<gix::ObjectId, Vec<String>> = BTreeMap::new();
    for (rec, line) in records.iter().zip(&lines) {
        if let Some(hex) = &rec.scoped_tree {
            let id = gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| {
                crate::error::Error::internal(format!("a record's scoped tree {hex:?}: {e}"))
            })?;
            if id != tree {
                scoped.entry(id).or_default().push(line.clone());
            }
        }
    }
    let mut out = vec![(commit, lines.clone()), (tree, lines)];
    out.extend(scoped);
    Ok(out)
}

/// The paths a failing check's `output` names that are not in its scoped tree `scoped` but are
/// in the full tree `tree`: inputs it reads without declaring them (best effort: a path is a
/// word of the output, relative to the worktree, or under `worktree` when absolute).
pub fn undeclared_inputs(
    store: &Store,
    (tree, scoped): (gix::ObjectId, gix::ObjectId),
    output: &str,
    worktree: &std::path::Path,
) -> Vec<String> {
    let root = worktree.to_string_lossy().to_string();
    let mut out: Vec<String> = Vec::new();
    for word in output.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '\'' | '"' | '`' | ':' | ',' | ';' | '(' | ')' | '[' | ']'
            )
    }) {
        let word = word.strip_prefix(root.as_str()).unwrap_or(word);
        let path = word.trim_start_matches("./").trim_start_matches('/');
        let path = path.trim_end_matches(['.', '/']);
        if path.is_empty()
            || path.len() > 4096
            || path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
            || out.iter().any(|p| p == path)
        {
            continue;
        }
        if store.has_path(tree, path) && !store.has_path(scoped, path) {
            out.push(path.to_string());
        }
        if out.len() >= 16 {
            break;
        }
    }
    out
}
