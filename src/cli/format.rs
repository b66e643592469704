//! Text shared by several commands' output: short ids, run objects, evidence lines.

use serde_json::{Map, Value};

use super::color::{self, Style};
use tabellio::runner::strip_escapes;

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

/// One line per evidence record, with the tail of the output of each that did not pass (its
/// escape sequences stripped: check output never drives the terminal). Status words are
/// coloured when stdout is.
pub fn evidence_lines(records: &[tabellio::model::EvidenceRecord]) -> String {
    let palette = color::stdout();
    let mut human = String::new();
    for r in records {
        if r.status == tabellio::model::evidence::CheckStatus::NotApplicable {
            human.push_str(&format!(
                "{} {} (its inputs are unchanged from scoped tree {}, which passed)\n",
                palette.status("not_applicable", 9),
                r.check.name,
                short(r.scoped_tree.as_deref().unwrap_or_default()),
            ));
            continue;
        }
        if r.reused_from.is_some() {
            human.push_str(&format!(
                "{} {} (tree {} passed at {})\n",
                palette.status("reused", 9),
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
            "{} {} ({how}{why} in {} ms)\n",
            palette.status(r.status.as_str(), 9),
            r.check.name,
            r.duration_ms
        ));
        for path in &r.undeclared_inputs {
            human.push_str(&format!("  undeclared input: {path}\n"));
        }
        if !r.passed() && !r.output.excerpt.is_empty() {
            let excerpt = strip_escapes(&r.output.excerpt);
            let tail: Vec<&str> = excerpt.lines().rev().take(10).collect();
            for l in tail.into_iter().rev() {
                human.push_str(&format!("  | {l}\n"));
            }
        }
    }
    human
}

/// Why checks that ran did not validate: `run.reason` when the run has one (required checks
/// missing, the plan gate), else the checks that did not pass and how each ended.
pub fn failure_reason(
    reason: Option<&str>,
    records: &[tabellio::model::EvidenceRecord],
) -> Option<String> {
    if let Some(reason) = reason {
        return Some(reason.to_string());
    }
    let failed: Vec<String> = records
        .iter()
        .filter(|r| !r.passed())
        .map(|r| {
            let how = match (r.stopped.tabellio.as_deref(), r.exit_code) {
                (Some(t), _) => t.to_string(),
                (None, Some(c)) => format!("exit {c}"),
                (None, None) => r.stopped.command.clone(),
            };
            format!("{} {} ({how})", r.check.name, r.status)
        })
        .collect();
    (!failed.is_empty()).then(|| format!("check {}", failed.join(", check ")))
}

/// The lines that say why validation failed and where the failing output is: `why: …` and
/// `output: …` (the packet with the excerpts for a run, the records on the commit), dimmed
/// detail when stdout is coloured.
pub fn failure_lines(why: Option<&str>, run_id: Option<&str>, commit: &str) -> String {
    let palette = color::stdout();
    let mut text = String::new();
    if let Some(why) = why {
        text.push_str(&format!("{} {why}\n", palette.paint(Style::Failed, "why:")));
    }
    let records = format!("git tabellio evidence {}", short(commit));
    let where_ = match run_id {
        Some(id) => format!("`git tabellio context {id}` (excerpts), `{records}` (records)"),
        None => format!("the excerpts above, `{records}` (records)"),
    };
    text.push_str(&format!(
        "output: {}\n",
        palette.paint(Style::Hint, &where_)
    ));
    text
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

pub use tabellio::model::ids::short;
