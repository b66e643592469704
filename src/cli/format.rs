//! Text shared by several commands' output: short ids, run objects, evidence lines.

use serde_json::{Map, Value};

/// Any serializable value as JSON (`null` if it cannot be: it never fails for our records).
pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `{"run": …, "workspace": …}` plus `extra`.
pub fn run_json(
    run: &impl serde::Serialize,
    workspace: Option<&std::path::Path>,
    extra: Value,
) -> Value {
    let mut m = Map::new();
    m.insert("run".into(), to_json(run));
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

/// `would promote: ` or `promoted: `.
pub fn promote_prefix(dry_run: bool) -> &'static str {
    if dry_run {
        "would promote: "
    } else {
        "promoted: "
    }
}

/// The `next:` line of a next action, with its command indented below it.
pub fn next_line(action: &str, blocking: &str, reason: &str, command: Option<&str>) -> String {
    format!(
        "next: {action}{blocking} — {reason}{}",
        command.map_or(String::new(), |c| format!("\n      {c}"))
    )
}

/// One `unreadable:` line per ref that cannot be read, with its repair commands indented below.
pub fn unreadable_ref_lines(refs: &[tabellio::lifecycle::status::UnreadableRef]) -> String {
    let mut out = String::new();
    for r in refs {
        out.push_str(&format!("unreadable: {}\n", r.message));
        for (i, command) in r.repair.iter().enumerate() {
            let label = if i == 0 { "repair:" } else { "    or:" };
            out.push_str(&format!("  {label} {command}\n"));
        }
    }
    out
}

/// `passed` or `failed`: the `verdict` field of a command that runs checks.
pub fn verdict_word(passed: bool) -> &'static str {
    if passed {
        "passed"
    } else {
        "failed"
    }
}

/// An object id shortened for people (12 hex digits).
pub fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}
