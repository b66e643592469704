//! `run.json` as a ledger commit stores it (`tabellio.run/v2`), and the way back to the whole
//! run record (`tabellio.run/v1`, the shape every command reads, prints and exports).
//!
//! A v1 ledger commit held the whole record in `run.json`, so every transition re-wrote the task
//! text and every checkpoint, attempt and loop iteration so far. A v2 ledger commit's tree
//! splits it so that a transition writes only what it changes:
//!
//! ```text
//! run.json                                  the record without the parts below (tabellio.run/v2)
//! task.txt                                  the task text, verbatim: one blob for the run's life
//! history/<kind>/<bucket>/<n>.json          one entry each: checkpoints, attempts, loop iterations
//! ```
//!
//! Unchanged entries keep their blob (same content, same id), so git stores them once. `run.json`
//! counts the entries of each kind (`history{checkpoints, attempts, loop}`) so a tree that lost
//! or gained one is refused, and `task.sha256` pins the task blob. v1 commits stay readable:
//! old ledgers are read as they are, and the next transition writes v2 on top.

use serde::Serialize;
use serde_json::{Map, Value};

use super::canonical::sha256_hex;
use super::run::{RunRecord, SCHEMA};
use super::{RunState, SchemaError};

/// The schema of `run.json` in a ledger commit written by this version.
pub const STORED_SCHEMA: &str = "tabellio.run/v2";
/// The task text's file in a v2 ledger tree.
pub const TASK_FILE: &str = "task.txt";
/// The directory of the history entries in a v2 ledger tree.
pub const HISTORY_DIR: &str = "history";
/// Entries per bucket directory: a transition rewrites one bucket's tree, so its size is
/// bounded however old the run is.
pub const BUCKET: usize = 100;

/// The kinds of history entry; each has its own directory under `history/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryKind {
    /// `checkpoints[]`.
    Checkpoints,
    /// `attempts[]`.
    Attempts,
    /// `loop.history[]`.
    Loop,
}

impl HistoryKind {
    /// In the order of their directory names (git's tree order).
    pub const ALL: [HistoryKind; 3] = [
        HistoryKind::Attempts,
        HistoryKind::Checkpoints,
        HistoryKind::Loop,
    ];

    /// The directory under `history/` and the key of its count in `run.json`'s `history`.
    pub fn dir_name(self) -> &'static str {
        match self {
            HistoryKind::Checkpoints => "checkpoints",
            HistoryKind::Attempts => "attempts",
            HistoryKind::Loop => "loop",
        }
    }

    fn index(self) -> usize {
        match self {
            HistoryKind::Attempts => 0,
            HistoryKind::Checkpoints => 1,
            HistoryKind::Loop => 2,
        }
    }
}

/// The bucket directory and file name of the `n`-th entry (1-based) of a kind.
pub fn entry_names(n: usize) -> (String, String) {
    (format!("{:04}", n / BUCKET), format!("{n:06}.json"))
}

/// The history entries of a record, one list per kind (indexed like [`HistoryKind::ALL`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History([Vec<Value>; 3]);

impl History {
    pub fn of(&self, kind: HistoryKind) -> &[Value] {
        &self.0[kind.index()]
    }

    pub fn push(&mut self, kind: HistoryKind, entry: Value) {
        self.0[kind.index()].push(entry);
    }

    fn take(&mut self, kind: HistoryKind) -> Vec<Value> {
        std::mem::take(&mut self.0[kind.index()])
    }
}

/// A run record split into what a v2 ledger tree stores.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// `run.json` (`tabellio.run/v2`).
    pub run_json: Value,
    /// `task.txt`.
    pub task_text: String,
    pub history: History,
}

/// Split `record` into `run.json` v2, the task text and the history entries.
pub fn split(record: &RunRecord) -> Result<StoredRun, serde_json::Error> {
    let mut value = serde_json::to_value(record)?;
    let obj = value
        .as_object_mut()
        .expect("a run record serializes to an object");
    obj.insert("schema".into(), Value::String(STORED_SCHEMA.into()));
    let task_text = match obj.get_mut("task").and_then(Value::as_object_mut) {
        Some(task) => match task.remove("text") {
            Some(Value::String(text)) => text,
            _ => String::new(),
        },
        None => String::new(),
    };
    let mut history = History::default();
    for kind in [HistoryKind::Checkpoints, HistoryKind::Attempts] {
        if let Some(Value::Array(entries)) = obj.remove(kind.dir_name()) {
            history.0[kind.index()] = entries;
        }
    }
    if let Some(Value::Object(lp)) = obj.get_mut("loop") {
        if let Some(Value::Array(entries)) = lp.remove("history") {
            history.0[HistoryKind::Loop.index()] = entries;
        }
    }
    let counts: Map<String, Value> = HistoryKind::ALL
        .iter()
        .map(|k| (k.dir_name().to_string(), Value::from(history.of(*k).len())))
        .collect();
    obj.insert("history".into(), Value::Object(counts));
    Ok(StoredRun {
        run_json: value,
        task_text,
        history,
    })
}

/// The whole run record from a v2 ledger tree's parts; `what` names the ledger commit in errors.
/// Refused: a `run.json` that still holds a part that moved out, counts that do not match the
/// entries found, a task text whose SHA-256 is not `task.sha256`, or any field v1 does not know.
pub fn assemble(stored: StoredRun, what: &str) -> Result<RunRecord, SchemaError> {
    let StoredRun {
        run_json,
        task_text,
        history,
    } = stored;
    put_back(run_json, Some((task_text, history)), what)
}

/// [`assemble`] of `run_json` with `parts` (the task text and the history); without them, the
/// record of `run_json` alone, its task text empty and its history lists empty, whose counts and
/// task digest are not checked (nothing to check them against).
fn put_back(
    mut run_json: Value,
    parts: Option<(String, History)>,
    what: &str,
) -> Result<RunRecord, SchemaError> {
    let invalid = |message: String| SchemaError::Invalid {
        what: what.into(),
        message,
    };
    let checked = parts.is_some();
    let (task_text, mut history) = parts.unwrap_or_default();
    let obj = run_json
        .as_object_mut()
        .ok_or_else(|| invalid("not a JSON object".into()))?;
    for moved in ["checkpoints", "attempts"] {
        if obj.contains_key(moved) {
            return Err(invalid(format!(
                "unknown field `{moved}` (a {STORED_SCHEMA} ledger keeps it under {HISTORY_DIR}/)"
            )));
        }
    }
    let counts = match obj.remove("history") {
        Some(Value::Object(counts)) => counts,
        _ => return Err(invalid("no `history` counts".into())),
    };
    if let Some(key) = counts.keys().find(|k| {
        !HistoryKind::ALL
            .iter()
            .any(|kind| kind.dir_name() == k.as_str())
    }) {
        return Err(invalid(format!("unknown field `history.{key}`")));
    }
    for kind in HistoryKind::ALL.into_iter().filter(|_| checked) {
        let want = counts.get(kind.dir_name()).and_then(Value::as_u64);
        let found = history.of(kind).len() as u64;
        if want != Some(found) {
            return Err(invalid(format!(
                "`history.{}` says {}, but {HISTORY_DIR}/{}/ holds {found} entries",
                kind.dir_name(),
                want.map_or("nothing".to_string(), |n| n.to_string()),
                kind.dir_name()
            )));
        }
    }
    let task = obj
        .get_mut("task")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| invalid("no `task` object".into()))?;
    if task.contains_key("text") {
        return Err(invalid(format!(
            "unknown field `task.text` (a {STORED_SCHEMA} ledger keeps it in {TASK_FILE})"
        )));
    }
    let pinned = task.get("sha256").and_then(Value::as_str).unwrap_or("");
    let actual = sha256_hex(task_text.as_bytes());
    if checked && pinned != actual {
        return Err(invalid(format!(
            "{TASK_FILE} has SHA-256 {actual}, but `task.sha256` pins {pinned:?}"
        )));
    }
    task.insert("text".into(), Value::String(task_text));
    obj.insert(
        "checkpoints".into(),
        Value::Array(history.take(HistoryKind::Checkpoints)),
    );
    obj.insert(
        "attempts".into(),
        Value::Array(history.take(HistoryKind::Attempts)),
    );
    let loop_entries = history.take(HistoryKind::Loop);
    match obj.get_mut("loop") {
        Some(Value::Object(lp)) => {
            if lp.contains_key("history") {
                return Err(invalid(format!(
                    "unknown field `loop.history` (a {STORED_SCHEMA} ledger keeps it under \
                     {HISTORY_DIR}/loop/)"
                )));
            }
            lp.insert("history".into(), Value::Array(loop_entries));
        }
        _ if !loop_entries.is_empty() => {
            return Err(invalid(format!(
                "{HISTORY_DIR}/loop/ holds entries, but the run has no `loop`"
            )))
        }
        _ => {}
    }
    obj.insert("schema".into(), Value::String(SCHEMA.into()));
    super::parse_value_stored_as(run_json, SCHEMA, STORED_SCHEMA, what)
}

/// What a listing shows of a run, read from `run.json` alone, v1 or v2: no task text and no
/// history, so a run of a thousand checkpoints is listed as fast as a new one. `run.json` is
/// checked as the whole read checks it (its schema, every field known); the task text and the
/// history are read and checked by every command that reads the whole record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunHead {
    pub run_id: String,
    pub state: RunState,
    pub branch: String,
    /// `base.ref`.
    pub base: String,
    /// `task.summary`.
    pub summary: String,
    pub updated_at: String,
    /// The commit a run landed as (`land`), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landed: Option<String>,
}

/// The [`RunHead`] of a ledger commit's `run.json` (`what` names it in errors), refused as
/// [`assemble`] refuses it apart from what only the task text and the history can show.
pub fn head(run_json: Value, what: &str) -> Result<RunHead, SchemaError> {
    let record: RunRecord = match run_json.get("schema").and_then(Value::as_str) {
        Some(STORED_SCHEMA) => put_back(run_json, None, what)?,
        _ => super::parse_value(run_json, SCHEMA, what)?,
    };
    Ok(RunHead {
        run_id: record.run_id,
        state: record.state,
        branch: record.branch,
        base: record.base.reference,
        summary: record.task.summary,
        updated_at: record.updated_at,
        landed: record.landed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run::tests::sample;

    fn record_with_history() -> RunRecord {
        let mut r = sample(RunState::Active);
        r.task.text = "the task\nin two lines\n".into();
        r.task.sha256 = sha256_hex(r.task.text.as_bytes());
        r.checkpoints = (0..3)
            .map(|i| crate::model::run::CheckpointEntry {
                commit: format!("{i:040}"),
                tree: "5".repeat(40),
                summary: format!("step {i}"),
                at: "2026-01-01T00:00:00Z".into(),
                snapshot: None,
            })
            .collect();
        r
    }

    #[test]
    fn split_then_assemble_gives_the_record_back() {
        let r = record_with_history();
        let stored = split(&r).expect("split");
        assert_eq!(stored.run_json["schema"], STORED_SCHEMA);
        assert!(stored.run_json["task"].get("text").is_none());
        assert!(stored.run_json.get("checkpoints").is_none());
        assert_eq!(stored.run_json["history"]["checkpoints"], 3);
        assert_eq!(stored.task_text, r.task.text);
        assert_eq!(stored.history.of(HistoryKind::Checkpoints).len(), 3);
        assert_eq!(assemble(stored, "t").expect("assemble"), r);
    }

    #[test]
    fn a_lost_entry_or_an_edited_task_is_refused() {
        let r = record_with_history();
        let mut lost = split(&r).expect("split");
        lost.history.0[HistoryKind::Checkpoints.index()].pop();
        let e = assemble(lost, "t").expect_err("an entry is missing");
        assert!(e.to_string().contains("history.checkpoints"), "{e}");

        let mut edited = split(&r).expect("split");
        edited.task_text.push('!');
        let e = assemble(edited, "t").expect_err("the task was edited");
        assert!(e.to_string().contains("task.sha256"), "{e}");

        let mut inline = split(&r).expect("split");
        inline.run_json["attempts"] = Value::Array(vec![]);
        let e = assemble(inline, "t").expect_err("attempts moved out");
        assert!(e.to_string().contains("`attempts`"), "{e}");

        let mut unknown = split(&r).expect("split");
        unknown.run_json["extra"] = Value::Bool(true);
        let e = assemble(unknown, "t").expect_err("unknown field");
        assert!(e.to_string().contains("extra"), "{e}");
    }

    #[test]
    fn the_head_is_read_from_run_json_alone_of_either_schema() {
        let mut r = record_with_history();
        r.landed = Some("7".repeat(40));
        let want = RunHead {
            run_id: r.run_id.clone(),
            state: r.state,
            branch: r.branch.clone(),
            base: r.base.reference.clone(),
            summary: r.task.summary.clone(),
            updated_at: r.updated_at.clone(),
            landed: r.landed.clone(),
        };
        let v2 = split(&r).expect("split").run_json;
        assert_eq!(head(v2.clone(), "t").expect("v2"), want);
        let v1 = serde_json::to_value(&r).expect("v1");
        assert_eq!(head(v1.clone(), "t").expect("v1"), want);

        let mut newer = v1.clone();
        newer["schema"] = "tabellio.run/v3".into();
        let e = head(newer, "t").expect_err("a newer schema");
        assert!(matches!(e, SchemaError::Unsupported { .. }), "{e}");
        let mut bad = v1;
        bad["state"] = "flying".into();
        head(bad, "t").expect_err("an unknown state");
        // What the whole read refuses in run.json alone, the head refuses too.
        let mut unknown = v2.clone();
        unknown["added_later"] = Value::Bool(true);
        let e = head(unknown, "t").expect_err("a field of a newer tool");
        assert!(e.to_string().contains("added_later"), "{e}");
        let mut inline = v2;
        inline["task"]["text"] = "moved back".into();
        let e = head(inline, "t").expect_err("the task text in run.json");
        assert!(e.to_string().contains("task.text"), "{e}");
    }

    #[test]
    fn entries_are_bucketed_by_hundreds() {
        assert_eq!(entry_names(1), ("0000".into(), "000001.json".into()));
        assert_eq!(entry_names(99), ("0000".into(), "000099.json".into()));
        assert_eq!(entry_names(100), ("0001".into(), "000100.json".into()));
        assert_eq!(entry_names(12345), ("0123".into(), "012345.json".into()));
    }
}
