//! What would happen if the run were merged onto the target's current tip: when the target
//! moved, a preview against the frozen base would always be clean and tell nobody anything.

use gix::bstr::ByteSlice;
use serde::Serialize;

use super::Store;
use crate::error::{Context, Result};

#[derive(Debug, Clone, Serialize)]
pub struct MergePreview {
    /// The tip the run was merged onto.
    pub onto: String,
    pub clean: bool,
    /// Paths with conflicts that a merge could not resolve.
    pub conflicts: Vec<String>,
}

impl MergePreview {
    pub fn describe(&self) -> String {
        if self.clean {
            format!("the run would merge cleanly onto {}", self.onto)
        } else {
            format!(
                "merging the run onto {} would conflict in {}",
                self.onto,
                self.conflicts.join(", ")
            )
        }
    }
}

/// Merge `run_head` onto `tip` in memory (nothing is written to the object database).
pub fn merge_preview(
    store: &Store,
    tip: gix::ObjectId,
    run_head: gix::ObjectId,
) -> Result<MergePreview> {
    let mut repo = store.repo.clone().with_object_memory();
    // A bare repository's merge reads attributes from HEAD, which gix cannot resolve with
    // reftable: give it a scratch HEAD that outlives the merge.
    let _head = if repo.is_bare() {
        super::worktree::shadow_head(&mut repo, &store.head()?)?
    } else {
        None
    };
    let options = repo
        .tree_merge_options()
        .context(|| "could not set up a merge".into())?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: None,
        current: Some("target".into()),
        other: Some("run".into()),
    };
    let outcome = repo
        .merge_commits(tip, run_head, labels, options.into())
        .context(|| format!("could not merge {run_head} onto {tip}"))?;
    let how = gix::merge::tree::TreatAsUnresolved::default();
    let mut conflicts: Vec<String> = outcome
        .tree_merge
        .conflicts
        .iter()
        .filter(|c| c.is_unresolved(how))
        .map(|c| c.ours.location().to_str_lossy().into_owned())
        .collect();
    conflicts.sort();
    conflicts.dedup();
    Ok(MergePreview {
        onto: tip.to_string(),
        clean: conflicts.is_empty(),
        conflicts,
    })
}
