//! Output: one JSON object with `--json`, lines for people otherwise. A closed stdout (a pager
//! quit early, `| head`) is not an error.

use std::io::Write;

use serde_json::{json, Map, Value};

use tabellio::Error;

/// What a command produced: the JSON object (without `ok`), the text for a person, and the
/// exit code (0, or 1 for a recorded negative verdict).
pub struct Output {
    pub json: Map<String, Value>,
    pub human: String,
    pub exit: i32,
}

impl Output {
    pub fn new(json: Value, human: impl Into<String>) -> Self {
        let json = match json {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("result".into(), other);
                m
            }
        };
        Output {
            json,
            human: human.into(),
            exit: 0,
        }
    }
    pub fn exit(mut self, code: i32) -> Self {
        self.exit = code;
        self
    }
}

/// Write `text` to stdout; a closed stdout is ignored.
pub fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    // A broken pipe means the reader has seen enough: not our failure.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

pub fn success(out: Output, json_mode: bool, quiet: bool) -> i32 {
    if json_mode {
        let mut m = Map::new();
        m.insert("ok".into(), Value::Bool(true));
        m.extend(out.json);
        print_stdout(&format!("{}\n", Value::Object(m)));
    } else if !quiet && !out.human.is_empty() {
        let mut text = out.human;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        print_stdout(&text);
    }
    out.exit
}

pub fn failure(err: &Error, json_mode: bool) -> i32 {
    if json_mode {
        let v = json!({"ok": false, "error": {"code": err.kind.as_str(), "exit_code": err.exit_code(), "message": err.message, "hint": err.hint}});
        print_stdout(&format!("{v}\n"));
    } else {
        let mut text = format!("error: {}\n", err.message);
        if let Some(h) = &err.hint {
            text.push_str(&format!("hint: {h}\n"));
        }
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    err.exit_code()
}

/// `{"run": …, "workspace": …}` plus `extra`.
pub fn run_json(
    run: &impl serde::Serialize,
    workspace: Option<&std::path::Path>,
    extra: Value,
) -> Value {
    let mut m = Map::new();
    m.insert(
        "run".into(),
        serde_json::to_value(run).unwrap_or(Value::Null),
    );
    m.insert(
        "workspace".into(),
        workspace.map_or(Value::Null, |p| Value::String(p.display().to_string())),
    );
    if let Value::Object(e) = extra {
        m.extend(e);
    }
    Value::Object(m)
}

/// One line per evidence record, with the tail of the output of each that did not pass.
pub fn evidence_lines(records: &[tabellio::model::EvidenceRecord]) -> String {
    let mut human = String::new();
    for r in records {
        if r.reused_from.is_some() {
            human.push_str(&format!(
                "reused    {} (tree {} passed at {})\n",
                r.check.name,
                short(&r.tree),
                r.finished_at
            ));
            continue;
        }
        let how = r
            .exit_code
            .map_or_else(|| r.stopped.command.clone(), |c| format!("exit {c}"));
        let why = r
            .stopped
            .tabellio
            .as_deref()
            .map_or(String::new(), |t| format!(", {t}"));
        human.push_str(&format!(
            "{:<9} {} ({how}{why} in {} ms)\n",
            r.status, r.check.name, r.duration_ms
        ));
        if !r.passed() && !r.output.excerpt.is_empty() {
            let tail: Vec<&str> = r.output.excerpt.lines().rev().take(10).collect();
            for l in tail.into_iter().rev() {
                human.push_str(&format!("  | {l}\n"));
            }
        }
    }
    human
}

/// Text from records (which may come from other machines) as the terminal should see it:
/// control characters, escape sequences included, become U+FFFD.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// The line for a promotion that had already happened (local and remote promote alike).
pub fn already_promoted(run_id: &str, target: &str, new: &str) -> String {
    format!(
        "run {run_id} is already promoted ({target} at {}); nothing to do",
        short(new)
    )
}

/// An object id shortened for people (12 hex digits).
pub fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}
