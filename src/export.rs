//! `git tabellio export`: one run as a self-contained document that can leave the repository.
//!
//! Two formats. `tabellio` (`tabellio.export/v1`) is everything the repository knows about the
//! run: `run.json`, the ledger, the evidence and checkpoint records from the notes (each with
//! its digest checked), the repository identity, and an `integrity` digest over the rest.
//! `in-toto` is an in-toto Statement v1 whose subject is the validated commit and whose
//! predicate names the checks that validated it and the digests of their evidence records; the
//! task text is left out (its SHA-256 stays), as an attestation is published more widely than
//! the repository. A signed record's `signature` is carried with its digest and the record
//! itself, so the statement can be checked offline.
//!
//! Guarantees: a document names no local path (every string but the verbatim task is scrubbed
//! as [`crate::store::paths`] does for records), `integrity` is reproducible by anyone with a
//! canonical JSON encoder, and nothing is written to the repository. An in-toto statement is
//! only made for a completed or promoted run whose validating evidence is in the notes, intact
//! and the same set the ledger recorded: an attestation the notes do not back is refused.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::evidence::read::records_for;
use crate::model::evidence::{set_digest, tool_id};
use crate::model::run::{Attempt, AttemptCheck, Validated};
use crate::model::{self, canonical, checkpoint, CheckpointRecord, EvidenceRecord, RunRecord};
use crate::model::{RunState, SchemaError};
use crate::run::views::{log_entries, LogEntry};
use crate::run::{run_workspace, Env};
use crate::store::notes::CHECKPOINTS;
use crate::store::paths::LocalPaths;
use crate::store::Store;

/// The schema of a `tabellio` export document.
pub const SCHEMA: &str = "tabellio.export/v1";
/// The `_type` of an in-toto Statement v1.
pub const IN_TOTO_STATEMENT: &str = "https://in-toto.io/Statement/v1";
/// The `predicateType` of the in-toto statements we make.
pub const PREDICATE_TYPE: &str = "https://git-tabellio.dev/evidence/v1";

/// How many combinations of candidate records are tried when looking for the records of the
/// validated attempt (one per check; usually there is exactly one candidate each).
const MAX_COMBINATIONS: usize = 4096;

/// The format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `tabellio.export/v1`: the whole run.
    Tabellio,
    /// An in-toto Statement v1 about the validated commit.
    InToto,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Tabellio => "tabellio",
            Format::InToto => "in-toto",
        }
    }
}

#[derive(Debug)]
pub struct ExportOutcome {
    pub run_id: String,
    pub format: Format,
    /// The exported document.
    pub document: Value,
    /// SHA-256 of the canonical JSON of `document` without its top-level `integrity` field
    /// (the `integrity` field itself for `tabellio`; the statement's digest for `in-toto`).
    pub integrity: String,
}

/// Export run `run` (an id: export never guesses the run from the current directory).
pub fn export(env: &Env, run: &str, format: Format) -> Result<ExportOutcome> {
    let store = &env.store;
    let ledger = crate::run::find_readable(store, run)?.ledger;
    let workspace = run_workspace(store, &ledger)?;
    let paths = LocalPaths::new(store, workspace.as_deref());
    let mut document = match format {
        Format::Tabellio => {
            let history = store.ledger_history_from(ledger.tip)?;
            // The ledger read twice must be one ledger: `run` and `ledger` describe one state.
            if history.last().map(|t| t.commit) != Some(ledger.tip) {
                return Err(Error::conflict(format!(
                    "the ledger of run {} moved while it was being exported",
                    ledger.record.run_id
                ))
                .hint("export again"));
            }
            let ledger_entries = log_entries(history);
            tabellio_document(store, &ledger.record, ledger_entries, &paths)?
        }
        Format::InToto => in_toto_statement(store, &ledger.record)?,
    };
    // The task text is the user's own words, pinned verbatim by its SHA-256: never rewritten.
    paths.apply_json(&mut document, "task");
    let integrity = integrity_of(&document);
    if format == Format::Tabellio {
        if let Value::Object(m) = &mut document {
            m.insert("integrity".into(), integrity.clone().into());
        }
    }
    Ok(ExportOutcome {
        run_id: ledger.record.run_id,
        format,
        document,
        integrity,
    })
}

/// SHA-256 of the canonical JSON of `document` without its top-level `integrity` field.
pub fn integrity_of(document: &Value) -> String {
    let mut v = document.clone();
    if let Value::Object(m) = &mut v {
        m.remove("integrity");
    }
    canonical::digest_of(&v).expect("export documents hold no floats")
}

fn tabellio_document(
    store: &Store,
    run: &RunRecord,
    ledger: Vec<LogEntry>,
    paths: &LocalPaths,
) -> Result<Value> {
    // Evidence of every attempt, once each, in attempt order.
    let mut seen = HashSet::new();
    let mut evidence = Vec::new();
    for a in &run.attempts {
        let commit = store.parse_oid(&a.commit)?;
        let tree = store.parse_oid(&a.tree)?;
        for (line, rec) in records_for(store, commit, tree)? {
            if seen.insert(line.clone()) {
                let valid = rec.as_ref().is_some_and(EvidenceRecord::digest_is_valid);
                let parsed = match rec {
                    Some(r) => Ok(model::to_value(&r)),
                    None => Err(EvidenceRecord::from_line(&line).err()),
                };
                evidence.push(entry(line, parsed, valid, paths));
            }
        }
    }

    let mut seen_commits = HashSet::new();
    let mut seen = HashSet::new();
    let mut checkpoints = Vec::new();
    for c in &run.checkpoints {
        if !seen_commits.insert(c.commit.as_str()) {
            continue;
        }
        let mut lines = store.note_lines(CHECKPOINTS, store.parse_oid(&c.commit)?)?;
        lines.sort();
        for line in lines {
            if !seen.insert(line.clone()) {
                continue;
            }
            let parsed: Result<CheckpointRecord, SchemaError> =
                model::parse_record(&line, checkpoint::SCHEMA, "checkpoint record");
            let (parsed, valid) = match parsed {
                Ok(r) => {
                    let value = model::to_value(&r);
                    let valid =
                        canonical::digest_without_field(&value).is_ok_and(|d| d == r.digest);
                    (Ok(value), valid)
                }
                Err(e) => (Err(Some(e)), false),
            };
            checkpoints.push(entry(line, parsed, valid, paths));
        }
    }

    Ok(json!({
        "schema": SCHEMA,
        "run": model::to_value(run),
        "ledger": serde_json::to_value(ledger).expect("ledger entries serialize"),
        "evidence": evidence,
        "checkpoints": checkpoints,
        "repository": store.repository_id(),
        "tool": tool_id(),
    }))
}

/// One notes line as exported: `{valid, paths_scrubbed, record, raw, problem}`. `valid` is the
/// digest check of the line as stored; `paths_scrubbed` says the export had to replace a local
/// path in it, so the exported copy no longer reproduces its own digest.
fn entry(
    line: String,
    parsed: std::result::Result<Value, Option<SchemaError>>,
    valid: bool,
    paths: &LocalPaths,
) -> Value {
    let (record, raw, problem) = match parsed {
        Ok(v) => (v, Value::Null, Value::Null),
        Err(e) => {
            let problem = e.map_or_else(|| "unreadable record".to_string(), |e| e.to_string());
            (Value::Null, Value::String(line), Value::String(problem))
        }
    };
    let mut scrubbed = json!({"record": record, "raw": raw});
    paths.apply_json(&mut scrubbed, "task");
    let paths_scrubbed = scrubbed["record"] != record || scrubbed["raw"] != raw;
    json!({
        "valid": valid,
        "paths_scrubbed": paths_scrubbed,
        "record": scrubbed["record"],
        "raw": scrubbed["raw"],
        "problem": problem,
    })
}

fn in_toto_statement(store: &Store, run: &RunRecord) -> Result<Value> {
    let id = &run.run_id;
    let validated = match &run.validated {
        Some(v) if matches!(run.state, RunState::Completed | RunState::Promoted) => v,
        _ => {
            // Only a run that can still be finished is sent to `finish`: an abandoned run
            // refuses it.
            let hint = if run.state.is_terminal() {
                format!(
                    "an in-toto statement is about a validated commit, and run {id} ended \
                     without one; its whole history exports with \
                     `git tabellio export {id} --format tabellio`"
                )
            } else {
                format!(
                    "an in-toto statement is about a validated commit: `git tabellio finish {id}` \
                     first (or export everything with `--format tabellio`)"
                )
            };
            return Err(Error::refused(format!(
                "run {id} is {} and has no validated commit to attest",
                run.state
            ))
            .hint(hint));
        }
    };
    let attempt = run
        .attempts
        .iter()
        .rev()
        .find(|a| {
            a.commit == validated.commit && a.status == crate::model::run::AttemptStatus::Passed
        })
        .ok_or_else(|| {
            Error::refused(format!(
                "run {id} names {} as validated but has no passing attempt on it",
                validated.commit
            ))
            .hint(format!("finish it again: `git tabellio finish {id}`"))
        })?;
    let records = validating_records(store, id, validated, attempt)?;
    let checks: Vec<Value> = attempt
        .checks
        .iter()
        .zip(&records)
        .map(|(c, r)| {
            let mut check = json!({
                "name": c.name, "digest": c.digest, "status": c.status, "exit_code": c.exit_code,
                "evidence_digest": r.digest, "started_at": r.started_at,
                "finished_at": r.finished_at,
            });
            // The record's SSH signature over `evidence_digest`, so the statement can be
            // checked offline with `ssh-keygen -Y verify -n tabellio` (docs/export.md), and the
            // signed record itself: without it a signature proves only that some digest was
            // signed, and one copied from a record about another commit would verify as well.
            if let Some(sig) = &r.signature {
                check["signature"] = model::to_value(sig);
                check["record"] = model::to_value(r);
            }
            check
        })
        .collect();
    let repository = store.repository_id();
    // A landed run's target points at the commit it landed as (restacked onto the moved
    // target): that is the subject, with the validated commit beside it in the predicate.
    let landed = run
        .landed
        .as_deref()
        .filter(|l| *l != validated.commit)
        .map(|l| -> Result<(String, String)> {
            let tree = store.tree_of(store.parse_oid(l)?)?;
            Ok((l.to_string(), tree.to_string()))
        })
        .transpose()?;
    let (subject_commit, subject_tree) = landed
        .clone()
        .unwrap_or_else(|| (validated.commit.clone(), validated.tree.clone()));
    let mut statement = json!({
        "_type": IN_TOTO_STATEMENT,
        "subject": [{
            "name": format!("{repository}@{subject_commit}"),
            // `gitCommit`/`gitTree` are the in-toto names for git object ids of either object
            // format (40 hex digits for SHA-1, 64 for SHA-256), so the key does not change.
            "digest": {"gitCommit": subject_commit, "gitTree": subject_tree},
        }],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "run_id": id,
            "task": {"summary": run.task.summary, "sha256": run.task.sha256},
            "state": run.state.as_str(),
            "base": {"ref": run.base.reference, "commit": run.base.commit},
            "branch": run.branch,
            "validated": model::to_value(validated),
            "promotion": run.promotion.as_ref().map(model::to_value),
            "checks": checks,
            "tool": tool_id(),
        },
    });
    if let Some((commit, tree)) = landed {
        statement["predicate"]["landed"] = json!({"commit": commit, "tree": tree});
    }
    Ok(statement)
}

/// The evidence records of the validated attempt, one per check in the attempt's order: intact
/// records of this run on the validated commit (or its tree) with the check's name, definition
/// and status, chosen so that their set digest is the one the ledger recorded. The ledger is
/// never trusted alone: without such records there is no statement.
fn validating_records(
    store: &Store,
    run_id: &str,
    validated: &Validated,
    attempt: &Attempt,
) -> Result<Vec<EvidenceRecord>> {
    let commit = store.parse_oid(&validated.commit)?;
    let tree = store.parse_oid(&validated.tree)?;
    let all: Vec<EvidenceRecord> = records_for(store, commit, tree)?
        .into_iter()
        .filter_map(|(_, r)| r)
        .filter(|r| {
            r.digest_is_valid()
                && r.run_id.as_deref() == Some(run_id)
                && (r.commit == validated.commit || r.tree == validated.tree)
        })
        .collect();
    let candidates: Vec<Vec<&EvidenceRecord>> = attempt
        .checks
        .iter()
        .map(|c| {
            let mut found: Vec<&EvidenceRecord> = all.iter().filter(|r| matches(r, c)).collect();
            // The latest first: the likeliest to be the attempt's own.
            found.sort_by(|a, b| b.finished_at.cmp(&a.finished_at));
            found
        })
        .collect();
    let not_backed = || {
        Error::refused(format!(
            "the evidence of run {run_id}'s validated commit {} is not in the notes as the \
             ledger recorded it (missing, tampered or from other checks)",
            validated.commit
        ))
        .hint(format!(
            "fetch the notes with `git tabellio sync`, or see what is there: \
             `git tabellio verify {}`",
            validated.commit
        ))
    };
    if candidates.iter().any(Vec::is_empty) {
        return Err(not_backed());
    }
    // An odometer over the candidates of each check.
    let mut pick = vec![0usize; candidates.len()];
    for _ in 0..MAX_COMBINATIONS {
        let chosen: Vec<&EvidenceRecord> =
            pick.iter().zip(&candidates).map(|(&i, c)| c[i]).collect();
        if set_digest(chosen.iter().map(|r| r.digest.as_str())) == validated.evidence_digest {
            return Ok(chosen.into_iter().cloned().collect());
        }
        let mut wheel = 0;
        loop {
            let Some(n) = candidates.get(wheel).map(Vec::len) else {
                return Err(not_backed());
            };
            pick[wheel] += 1;
            if pick[wheel] < n {
                break;
            }
            pick[wheel] = 0;
            wheel += 1;
        }
    }
    Err(not_backed())
}

fn matches(r: &EvidenceRecord, c: &AttemptCheck) -> bool {
    r.check.name == c.name && r.check.digest == c.digest && r.status == c.status
}

/// Write `document` (pretty JSON and a newline) to `path` atomically, as [`write_file`] does.
pub fn write_document(path: &Path, document: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(document).expect("a JSON value serializes");
    text.push('\n');
    write_file(path, text.as_bytes(), "--out")
}

/// Write `bytes` to `path` atomically: to `<path>.tmp` in the same directory, then renamed over
/// `path`. An existing file at `path` is replaced (as `git archive --output` does); on failure
/// `path` is untouched and the temporary file removed. `option` names the flag that gave the
/// path, for the hint.
pub fn write_file(path: &Path, bytes: &[u8], option: &str) -> Result<()> {
    let unwritable = |e: &dyn std::fmt::Display| {
        Error::usage(format!("could not write {}: {e}", path.display())).hint(format!(
            "give {option} a file path in an existing directory you can write to"
        ))
    };
    let Some(name) = path.file_name() else {
        return Err(unwritable(&"not a file name"));
    };
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(unwritable(&e));
    }
    Ok(())
}

/// `export --vsa <rev>`: the verification summaries noted on a commit
/// (`refs/notes/tabellio/vsa`), each a DSSE envelope as stored; not found (exit 5) without one.
pub fn vsa(store: &crate::store::Store, rev: &str) -> Result<Vec<serde_json::Value>> {
    let commit = store.resolve_commit(rev)?;
    let mut notes =
        crate::store::notes_view::NotesView::at_ref_and_tracking(store, crate::store::notes::VSA)?;
    let lines = notes.lines(store, commit)?;
    if lines.is_empty() {
        return Err(crate::error::Error::not_found(format!(
            "no verification summary is noted on {commit}"
        ))
        .hint("promote and land note one on the tip they move a target to; fetch them with `git fetch <remote> 'refs/notes/tabellio/*:refs/notes/tabellio/*'`"));
    }
    lines
        .iter()
        .map(|l| {
            serde_json::from_str(l).map_err(|e| {
                crate::error::Error::refused(format!("the summary on {commit} is not JSON: {e}"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_leaves_out_only_the_top_level_field() {
        let doc = json!({"a": 1, "integrity": "x", "b": {"integrity": "kept"}});
        assert_eq!(
            integrity_of(&doc),
            canonical::sha256_hex(br#"{"a":1,"b":{"integrity":"kept"}}"#)
        );
    }

    #[test]
    fn writes_atomically_and_replaces() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("run.json");
        write_document(&out, &json!({"a": 1})).expect("written");
        write_document(&out, &json!({"a": 2})).expect("replaced");
        let text = std::fs::read_to_string(&out).expect("read back");
        assert_eq!(
            serde_json::from_str::<Value>(&text).expect("JSON"),
            json!({"a": 2})
        );
        assert!(!dir.path().join("run.json.tmp").exists());
        let err = write_document(&dir.path().join("missing/x.json"), &json!({})).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(!dir.path().join("missing").exists());
    }
}
