//! Why promote refuses: one variant per precondition, so a caller (status, a remote
//! promotion) can tell them apart without reading messages. Each converts to the one
//! [`crate::Error`] with the message, hint and exit code the command line shows.

use std::path::PathBuf;

use crate::error::Error;

#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    #[error("run {run_id} is {state}; only a completed run can be promoted")]
    NotCompleted { run_id: String, state: String },
    #[error("the run's target {target} is not a branch under refs/heads/")]
    TargetNotABranch { target: String },
    #[error("run {run_id} says completed but names no validated commit")]
    NoValidatedCommit { run_id: String },
    #[error("the run branch {branch} is not in this repository")]
    BranchNotHere { branch: String },
    #[error("run branch changed after validation: {branch} is at {head}, the validated commit is {validated}")]
    BranchChanged {
        run_id: String,
        branch: String,
        /// The branch's tip, or `nothing`.
        head: String,
        validated: String,
    },
    #[error("run {run_id} has no record of which checks validated {validated}")]
    NoRecordOfChecks { run_id: String, validated: String },
    #[error("the evidence for {validated} does not hold: {}", unsatisfied.join(", "))]
    EvidenceDoesNotHold {
        run_id: String,
        validated: String,
        /// `name (verdict)` of each check that is not satisfied.
        unsatisfied: Vec<String>,
        /// When a record is refused for its signature: how to make one that counts.
        signing: Option<String>,
    },
    #[error("target moved: {target} is at {current}, the run started from {base}{}", preview.as_ref().map_or_else(String::new, |p| format!("; {p}")))]
    TargetMoved {
        run_id: String,
        target: String,
        /// The target's tip, or `nothing (deleted)`.
        current: String,
        base: String,
        /// Whether the run would merge onto the new tip, described.
        preview: Option<String>,
    },
    #[error("target moved: another promotion of {target} is under way or just happened")]
    PromotionUnderWay { target: String },
    #[error("the validated commit {validated} does not descend from the base {base}")]
    NotAFastForward {
        validated: gix::ObjectId,
        base: gix::ObjectId,
    },
    #[error("{target} is being {what} in {}: moving it now would break that operation", path.display())]
    TargetInOperation {
        target: String,
        what: String,
        path: PathBuf,
    },
    #[error("run {run_id}: {}", approval.describe())]
    ApprovalNeeded {
        run_id: String,
        approval: crate::trust::approval::ApprovalCheck,
    },
    /// Anything else: a ref lock, an unmovable target worktree, a repository read.
    #[error("{}", .0.message)]
    Other(Error),
}

impl From<Error> for PromoteError {
    fn from(e: Error) -> Self {
        PromoteError::Other(e)
    }
}

impl From<PromoteError> for Error {
    fn from(e: PromoteError) -> Self {
        use PromoteError as P;
        let message = e.to_string();
        let (error, hint) = match e {
            P::Other(e) => return e,
            P::NotCompleted { run_id, .. } => (
                Error::refused(message),
                format!("`git tabellio status {run_id}` says what to do next"),
            ),
            P::TargetNotABranch { .. } => (
                Error::refused(message),
                "promote only moves local branches".into(),
            ),
            P::NoValidatedCommit { run_id } => (
                Error::refused(message),
                format!("finish it again: `git tabellio finish {run_id}`"),
            ),
            P::BranchNotHere { .. } => (
                Error::refused(message),
                "promote from the machine that has the run branch (runs travel with sync, branches do not)".into(),
            ),
            P::BranchChanged { run_id, .. } => (
                Error::refused(message),
                format!("validate the new head first: `git tabellio finish {run_id}`"),
            ),
            P::NoRecordOfChecks { run_id, .. } => (
                Error::refused(message),
                format!("finish it: `git tabellio finish {run_id}`"),
            ),
            P::EvidenceDoesNotHold {
                signing: Some(hint),
                ..
            } => (Error::refused(message), hint),
            P::EvidenceDoesNotHold { run_id, .. } => (
                Error::refused(message),
                format!("run the checks again: `git tabellio finish {run_id}`"),
            ),
            P::ApprovalNeeded { run_id, approval } => {
                return crate::trust::approval::refusal(&run_id, &approval)
            }
            P::TargetMoved { run_id, .. } => (
                Error::conflict(message),
                format!("promote only fast-forwards: `git tabellio land {run_id}` restacks the run onto the new tip, validates it and moves the target"),
            ),
            P::PromotionUnderWay { .. } => (
                Error::conflict(message),
                "look at the new state with `git tabellio status`".into(),
            ),
            P::NotAFastForward { .. } => (
                Error::refused(message),
                "promote only fast-forwards; rebase the run onto its base".into(),
            ),
            P::TargetInOperation { .. } => (
                Error::refused(message),
                "finish or abort it there (e.g. `git rebase --continue` / `--abort`), then promote again".into(),
            ),
        };
        error.hint(hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_refusal_keeps_its_message_hint_and_exit_code() {
        let e = Error::from(PromoteError::BranchChanged {
            run_id: "r1".into(),
            branch: "refs/heads/tabellio/r1".into(),
            head: "nothing".into(),
            validated: "abc".into(),
        });
        assert_eq!(e.kind, ErrorKind::Refused);
        assert_eq!(
            e.message,
            "run branch changed after validation: refs/heads/tabellio/r1 is at nothing, the validated commit is abc"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("validate the new head first: `git tabellio finish r1`")
        );
        let moved = |preview: Option<&str>| {
            Error::from(PromoteError::TargetMoved {
                run_id: "r".into(),
                target: "refs/heads/main".into(),
                current: "nothing (deleted)".into(),
                base: "abc".into(),
                preview: preview.map(str::to_string),
            })
        };
        let e = moved(None);
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(
            e.message,
            "target moved: refs/heads/main is at nothing (deleted), the run started from abc"
        );
        assert!(moved(Some("it merges cleanly"))
            .message
            .ends_with("from abc; it merges cleanly"));
        let e = Error::from(PromoteError::EvidenceDoesNotHold {
            run_id: "r1".into(),
            validated: "abc".into(),
            unsatisfied: vec!["test (tampered)".into(), "lint (missing)".into()],
            signing: None,
        });
        assert_eq!(
            e.message,
            "the evidence for abc does not hold: test (tampered), lint (missing)"
        );
        let other = Error::usage("x").hint("y");
        let e = Error::from(PromoteError::from(other));
        assert_eq!(
            (e.kind, e.message.as_str(), e.hint.as_deref()),
            (ErrorKind::Usage, "x", Some("y"))
        );
    }
}
