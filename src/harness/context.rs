//! The context packet (`tabellio.context/v1`): what an agent reads at the start of an
//! iteration and a person reads in a review — the task verbatim with its SHA-256, base, head and
//! merge-base, the files changed since the base, checkpoints, attempts and their verdicts, the
//! last failure excerpt, a merge preview against the target's current tip, the loop so far, and
//! what to do next.
//!
//! Guarantees: the packet holds no local path (every string but the verbatim task is scrubbed
//! of the worktree, repository and home directories), and `integrity` is the SHA-256 of the
//! canonical JSON of the packet without `integrity`, so anyone can check it. The markdown form
//! is rendered from the same JSON value and ends with the same digest.

use std::path::PathBuf;

use gix::bstr::ByteSlice;
use serde_json::{json, Map, Value};

use crate::error::{Context, Result};
use crate::evidence::read::records_for;
use crate::lifecycle::status::status_of;
use crate::model::canonical;
use crate::model::run::Attempt;
use crate::model::RunRecord;
use crate::run::{resolve_run, run_workspace, Env};
use crate::store::ledger::Ledger;
use crate::store::merge::merge_preview;
use crate::store::Store;

pub const SCHEMA: &str = "tabellio.context/v1";

/// Who the packet is for; it changes only `next_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// A person or a tool looking at the run: `next_action` is `status`'s.
    Review,
    /// The agent of loop iteration `iteration` of `max_loops`.
    LoopAgent { iteration: u32, max_loops: u32 },
}

#[derive(Debug)]
pub struct ContextOutcome {
    pub run: RunRecord,
    pub workspace: Option<PathBuf>,
    /// The packet, `integrity` included.
    pub packet: Value,
}

/// `git tabellio context`.
pub fn context(env: &Env, run: Option<&str>) -> Result<ContextOutcome> {
    let ledger = resolve_run(env, run)?;
    let workspace = run_workspace(&env.store, &ledger)?;
    let packet = build(&env.store, &ledger, Audience::Review)?;
    Ok(ContextOutcome {
        run: ledger.record,
        workspace,
        packet,
    })
}

/// SHA-256 of the canonical JSON of `packet` without its `integrity` field.
pub fn integrity_of(packet: &Value) -> String {
    let mut v = packet.clone();
    if let Value::Object(m) = &mut v {
        m.remove("integrity");
    }
    canonical::digest_of(&v).expect("a context packet holds no floats")
}

/// Build the packet of a run.
pub fn build(store: &Store, ledger: &Ledger, audience: Audience) -> Result<Value> {
    let run = &ledger.record;
    let status = status_of(store, ledger)?;
    let workspace = status.workspace.clone();
    let head_hex = status.live.head.clone();
    let head = head_hex
        .as_deref()
        .map(|h| store.parse_oid(h))
        .transpose()?;
    let base = store.parse_oid(&run.base.commit)?;
    let target_tip = store.ref_target(&run.base.reference)?;

    let merge_base = match (head, target_tip) {
        (Some(h), Some(t)) => store
            .repo
            .merge_base(h, t)
            .context(|| format!("could not compute the merge base of {h} and {t}"))?
            .map(|id| id.detach().to_string()),
        _ => None,
    };
    let changes = match head {
        Some(h) if h != base => changes_between(store, base, h)?,
        _ => Vec::new(),
    };
    let preview = match (head, target_tip) {
        (Some(h), Some(t)) if h != t => Some(merge_preview(store, t, h)?),
        _ => None,
    };

    let next_action = match audience {
        Audience::Review => serde_json::to_value(&status.next_action)
            .context(|| "could not serialize the next action".into())?,
        Audience::LoopAgent {
            iteration,
            max_loops,
        } => json!({
            "action": "edit",
            "blocking": false,
            "reason": format!(
                "iteration {iteration} of {max_loops}: change the worktree so that the checks pass \
                 (and the plan-hygiene gate, when the last failure names it); \
                 the harness commits what you leave behind and runs the checks after you exit. \
                 Print DONE as the last line when you believe the task is done (a claim the \
                 checks still decide)."
            ),
            "command": Value::Null,
        }),
    };

    let mut packet = Map::new();
    packet.insert("schema".into(), SCHEMA.into());
    packet.insert("run_id".into(), run.run_id.clone().into());
    packet.insert("repository".into(), run.repository.clone().into());
    packet.insert("state".into(), run.state.as_str().into());
    packet.insert(
        "previous_state".into(),
        run.previous_state.map(|s| s.as_str()).into(),
    );
    packet.insert(
        "task".into(),
        json!({"summary": run.task.summary, "text": run.task.text, "sha256": run.task.sha256}),
    );
    packet.insert(
        "base".into(),
        json!({"ref": run.base.reference, "commit": run.base.commit}),
    );
    packet.insert("branch".into(), run.branch.clone().into());
    packet.insert("head".into(), head_hex.clone().into());
    packet.insert(
        "target".into(),
        json!({"ref": run.base.reference, "tip": target_tip.map(|t| t.to_string())}),
    );
    packet.insert("merge_base".into(), merge_base.into());
    packet.insert("changes".into(), Value::Array(changes));
    packet.insert(
        "checkpoints".into(),
        run.checkpoints
            .iter()
            .map(|c| json!({"commit": c.commit, "summary": c.summary, "at": c.at}))
            .collect(),
    );
    packet.insert(
        "attempts".into(),
        run.attempts
            .iter()
            .map(|a| {
                let gate = plan_gate_of(run, a);
                let mut checks: Vec<Value> = a
                    .checks
                    .iter()
                    .map(|c| json!({"name": c.name, "status": c.status, "exit_code": c.exit_code}))
                    .collect();
                if gate.is_some() {
                    checks.push(
                        json!({"name": PLAN_GATE, "status": "failed", "exit_code": Value::Null}),
                    );
                }
                // An attempt the plan gate held back did not pass, whatever its checks did.
                let status = if gate.is_some() {
                    "failed"
                } else {
                    a.status.as_str()
                };
                json!({
                    "n": a.n, "commit": a.commit, "status": status, "at": a.at,
                    "checks": checks,
                })
            })
            .collect(),
    );
    packet.insert("last_failure".into(), last_failure(store, run)?);
    packet.insert(
        "merge_preview".into(),
        match preview {
            Some(p) => json!({"onto": p.onto, "clean": p.clean, "conflicts": p.conflicts}),
            None => Value::Null,
        },
    );
    packet.insert("loop".into(), loop_summary(run));
    packet.insert(
        "allowed_actions".into(),
        status.allowed_actions.clone().into(),
    );
    packet.insert("next_action".into(), next_action);
    packet.insert(
        "satisfied_evidence".into(),
        status.satisfied_evidence.clone().into(),
    );
    packet.insert(
        "missing_evidence".into(),
        status.missing_evidence.clone().into(),
    );

    let mut packet = Value::Object(packet);
    crate::store::paths::LocalPaths::new(store, workspace.as_deref())
        .apply_json(&mut packet, "task");
    let integrity = integrity_of(&packet);
    if let Value::Object(m) = &mut packet {
        m.insert("integrity".into(), integrity.into());
    }
    Ok(packet)
}

/// Files changed from `base` to `head`: status, path, previous path for renames.
fn changes_between(store: &Store, base: gix::ObjectId, head: gix::ObjectId) -> Result<Vec<Value>> {
    let repo = &store.repo;
    let tree = |c: gix::ObjectId| -> Result<gix::Tree<'_>> {
        repo.find_commit(c)
            .context(|| format!("could not read commit {c}"))?
            .tree()
            .context(|| format!("could not read the tree of {c}"))
    };
    let (old, new) = (tree(base)?, tree(head)?);
    let changes = repo
        .diff_tree_to_tree(&old, &new, None)
        .context(|| format!("could not diff {base} and {head}"))?;
    use gix::object::tree::diff::ChangeDetached as C;
    let mut out: Vec<(String, Value)> = Vec::new();
    for change in changes {
        let (status, path, previous, mode) = match &change {
            C::Addition {
                location,
                entry_mode,
                ..
            } => ("added", location, None, entry_mode),
            C::Deletion {
                location,
                entry_mode,
                ..
            } => ("deleted", location, None, entry_mode),
            C::Modification {
                location,
                entry_mode,
                previous_entry_mode,
                ..
            } => (
                if entry_mode.kind() == previous_entry_mode.kind() {
                    "modified"
                } else {
                    "type_changed"
                },
                location,
                None,
                entry_mode,
            ),
            C::Rewrite {
                source_location,
                location,
                entry_mode,
                copy,
                ..
            } => (
                if *copy { "copied" } else { "renamed" },
                location,
                Some(source_location),
                entry_mode,
            ),
        };
        if mode.is_tree() {
            continue;
        }
        let path = path.to_str_lossy().into_owned();
        out.push((
            path.clone(),
            json!({"status": status, "path": path, "previous_path": previous.map(|p| p.to_str_lossy().into_owned())}),
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out.into_iter().map(|(_, v)| v).collect())
}

/// The name the plan-hygiene gate goes by among the checks of an attempt in the packet.
pub const PLAN_GATE: &str = "plan-hygiene";

/// The plan-hygiene gate's reason when it kept `attempt` from completing the run, else `None`.
///
/// Known from the loop's evaluate record of that attempt, or — for the last attempt — from the
/// run's `reason` (a gated `finish` sets it to `plan-hygiene: …`). An attempt recorded as
/// failed whose checks all passed was held back by the gate too, its reason no longer known.
fn plan_gate_of(run: &RunRecord, attempt: &Attempt) -> Option<String> {
    if let Some(l) = &run.loop_state {
        let evaluated = l
            .history
            .iter()
            .chain(l.current.as_ref())
            .filter_map(|i| i.evaluate.as_ref())
            .find(|e| e.attempt == Some(attempt.n));
        if let Some(e) = evaluated {
            if let Some(gate) = &e.plan_gate {
                return Some(gate.clone());
            }
            if e.missing_evidence.iter().any(|m| m == PLAN_GATE) {
                // Recorded before the reason was kept: its masked form is in the signature.
                return Some(
                    e.failure_signature
                        .iter()
                        .find(|s| s.starts_with(PLAN_GATE))
                        .cloned()
                        .unwrap_or_else(|| format!("{PLAN_GATE}: the plans block completion")),
                );
            }
        }
    }
    if run.last_attempt().is_some_and(|last| last.n == attempt.n) {
        if let Some(reason) = run
            .reason
            .as_deref()
            .filter(|r| r.starts_with(&format!("{PLAN_GATE}:")))
        {
            return Some(reason.to_string());
        }
    }
    (attempt.status != "passed"
        && !attempt.checks.is_empty()
        && attempt.checks.iter().all(|c| c.status == "passed"))
    .then(|| format!("{PLAN_GATE}: the plans blocked completion (`git tabellio plans` names them)"))
}

/// The most recent attempt that did not pass — a failing check, or the plan-hygiene gate —
/// with the failing checks' excerpts, and the gate's reason as the excerpt of a `plan-hygiene`
/// entry when the gate held it back.
fn last_failure(store: &Store, run: &RunRecord) -> Result<Value> {
    let Some((attempt, gate)) = run.attempts.iter().rev().find_map(|a| {
        let gate = plan_gate_of(run, a);
        (a.status != "passed" || gate.is_some()).then_some((a, gate))
    }) else {
        return Ok(Value::Null);
    };
    let mut checks = failing_excerpts(store, &run.run_id, attempt)?;
    if let Some(gate) = gate {
        checks.push(json!({
            "name": PLAN_GATE,
            "status": "failed",
            "exit_code": Value::Null,
            "excerpt": gate,
            "truncated": false,
        }));
    }
    Ok(json!({
        "attempt": attempt.n,
        "commit": attempt.commit,
        "checks": checks,
    }))
}

/// (name, status, exit code, excerpt) of the failing checks of `attempt`, read from the
/// evidence notes (the record of that attempt: same run, check and status, latest by then).
pub fn failing_excerpts(store: &Store, run_id: &str, attempt: &Attempt) -> Result<Vec<Value>> {
    let commit = store.parse_oid(&attempt.commit)?;
    let tree = store.parse_oid(&attempt.tree)?;
    let records = records_for(store, commit, tree)?;
    let mut out = Vec::new();
    for check in attempt.checks.iter().filter(|c| c.status != "passed") {
        let record = records
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .filter(|r| {
                r.digest_is_valid()
                    && r.run_id.as_deref() == Some(run_id)
                    && r.check.name == check.name
                    && r.status == check.status
                    && r.finished_at <= attempt.at
            })
            .max_by(|a, b| a.finished_at.cmp(&b.finished_at));
        out.push(json!({
            "name": check.name,
            "status": check.status,
            "exit_code": check.exit_code,
            "excerpt": record.map(|r| r.output.excerpt.clone()),
            "truncated": record.map(|r| r.output.truncated),
        }));
    }
    Ok(out)
}

fn loop_summary(run: &RunRecord) -> Value {
    let Some(l) = &run.loop_state else {
        return Value::Null;
    };
    json!({
        "iteration": l.iteration,
        "phase": l.phase.as_str(),
        "max_loops": l.max_loops,
        "status": l.status.as_str(),
        "why_agent_stopped": l.why_agent_stopped.map(|w| w.as_str()),
        "why_harness_stopped": l.why_harness_stopped.map(|w| w.as_str()),
        "done_reason": l.done_reason.map(|d| d.as_str()),
        "history": l.history.iter().map(|h| json!({
            "n": h.n,
            "status": h.status.map(|s| s.as_str()),
            "changed": h.collect.as_ref().map(|c| c.changed),
            "verdict": h.evaluate.as_ref().map(|e| e.verdict.clone()),
            "failing": h.evaluate.as_ref().map(|e| {
                let mut failing: Vec<String> = e.checks.iter().filter(|c| c.status != "passed").map(|c| c.name.clone()).collect();
                if e.plan_gate.is_some() || e.missing_evidence.iter().any(|m| m == PLAN_GATE) {
                    failing.push(PLAN_GATE.to_string());
                }
                failing
            }),
            "claimed_done": h.agent.as_ref().map(|a| a.claimed_done),
            "fingerprint": h.fingerprint,
        })).collect::<Vec<_>>(),
    })
}

/// The markdown form of a packet: the same content, for a prompt.
pub fn to_markdown(packet: &Value) -> String {
    let s = |v: &Value| -> String {
        match v {
            Value::Null => "-".into(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    };
    let p = packet;
    let mut md = String::new();
    md.push_str(&format!(
        "# Run {} ({})\n\nrepository: {}  \nstate: {}{}\n\n",
        s(&p["run_id"]),
        s(&p["schema"]),
        s(&p["repository"]),
        s(&p["state"]),
        if p["previous_state"].is_null() {
            String::new()
        } else {
            format!(" (was {})", s(&p["previous_state"]))
        }
    ));
    md.push_str(&format!(
        "## Task\n\nsha256: {}\n\n{}\n",
        s(&p["task"]["sha256"]),
        fenced(&s(&p["task"]["text"]), "text")
    ));
    md.push_str(&format!(
        "## Commits\n\n- base: {} at {}\n- branch: {}\n- head: {}\n- target: {} at {}\n- merge base: {}\n",
        s(&p["base"]["ref"]),
        s(&p["base"]["commit"]),
        s(&p["branch"]),
        s(&p["head"]),
        s(&p["target"]["ref"]),
        s(&p["target"]["tip"]),
        s(&p["merge_base"]),
    ));
    match &p["merge_preview"] {
        Value::Null => md.push_str("- merge preview: none (the head is the target's tip)\n"),
        mp if mp["clean"] == true => md.push_str(&format!(
            "- merge preview: merges cleanly onto {}\n",
            s(&mp["onto"])
        )),
        mp => md.push_str(&format!(
            "- merge preview: conflicts onto {} in {}\n",
            s(&mp["onto"]),
            list(&mp["conflicts"])
        )),
    }
    md.push_str("\n## Changes since the base\n\n");
    let changes = p["changes"].as_array().cloned().unwrap_or_default();
    if changes.is_empty() {
        md.push_str("none\n");
    }
    for c in &changes {
        match &c["previous_path"] {
            Value::Null => md.push_str(&format!("- {} {}\n", s(&c["status"]), s(&c["path"]))),
            prev => md.push_str(&format!(
                "- {} {} (from {})\n",
                s(&c["status"]),
                s(&c["path"]),
                s(prev)
            )),
        }
    }
    md.push_str("\n## Checkpoints\n\n");
    let cps = p["checkpoints"].as_array().cloned().unwrap_or_default();
    if cps.is_empty() {
        md.push_str("none\n");
    }
    for (i, c) in cps.iter().enumerate() {
        md.push_str(&format!(
            "{}. {} {} ({})\n",
            i + 1,
            s(&c["commit"]),
            s(&c["summary"]),
            s(&c["at"])
        ));
    }
    md.push_str("\n## Attempts\n\n");
    let attempts = p["attempts"].as_array().cloned().unwrap_or_default();
    if attempts.is_empty() {
        md.push_str("none\n");
    }
    for a in &attempts {
        let checks: Vec<String> = a["checks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|c| {
                format!(
                    "{} {} (exit {})",
                    s(&c["name"]),
                    s(&c["status"]),
                    s(&c["exit_code"])
                )
            })
            .collect();
        md.push_str(&format!(
            "- attempt {} on {}: {} — {} ({})\n",
            s(&a["n"]),
            s(&a["commit"]),
            s(&a["status"]),
            checks.join(", "),
            s(&a["at"])
        ));
    }
    md.push_str("\n## Last failure\n\n");
    match &p["last_failure"] {
        Value::Null => md.push_str("none\n"),
        f => {
            md.push_str(&format!(
                "attempt {} on {}\n",
                s(&f["attempt"]),
                s(&f["commit"])
            ));
            for c in f["checks"].as_array().cloned().unwrap_or_default() {
                md.push_str(&format!(
                    "\n### {} ({}, exit {}){}\n\n{}",
                    s(&c["name"]),
                    s(&c["status"]),
                    s(&c["exit_code"]),
                    if c["truncated"] == true {
                        " — excerpt truncated"
                    } else {
                        ""
                    },
                    fenced(&s(&c["excerpt"]), "text")
                ));
            }
        }
    }
    md.push_str("\n## Loop\n\n");
    match &p["loop"] {
        Value::Null => md.push_str("no loop\n"),
        l => {
            md.push_str(&format!(
                "iteration {} of {}, phase {}, status {}; agent stopped: {}; harness stopped: {}; done: {}\n",
                s(&l["iteration"]),
                s(&l["max_loops"]),
                s(&l["phase"]),
                s(&l["status"]),
                s(&l["why_agent_stopped"]),
                s(&l["why_harness_stopped"]),
                s(&l["done_reason"]),
            ));
            for h in l["history"].as_array().cloned().unwrap_or_default() {
                md.push_str(&format!(
                    "- iteration {}: {} (changed: {}, checks: {}, failing: {}, claimed DONE: {}, fingerprint {})\n",
                    s(&h["n"]),
                    s(&h["status"]),
                    s(&h["changed"]),
                    s(&h["verdict"]),
                    list(&h["failing"]),
                    s(&h["claimed_done"]),
                    s(&h["fingerprint"]),
                ));
            }
        }
    }
    md.push_str(&format!(
        "\n## Next\n\n- allowed actions: {}\n- next action: {}{} — {}\n- command: {}\n- satisfied evidence: {}\n- missing evidence: {}\n",
        list(&p["allowed_actions"]),
        s(&p["next_action"]["action"]),
        if p["next_action"]["blocking"] == true {
            " (blocking)"
        } else {
            ""
        },
        s(&p["next_action"]["reason"]),
        s(&p["next_action"]["command"]),
        list(&p["satisfied_evidence"]),
        list(&p["missing_evidence"]),
    ));
    md.push_str(&format!(
        "\n---\nintegrity: sha256:{}\n",
        s(&p["integrity"])
    ));
    md
}

fn list(v: &Value) -> String {
    match v.as_array() {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".into(),
    }
}

/// `text` in a code fence longer than any backtick run inside it, so it cannot be closed early.
fn fenced(text: &str, info: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    let mut body = text.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    format!("{fence}{info}\n{body}{fence}\n")
}

/// Write the markdown packet for the agent of a loop iteration; returns its path, which is
/// outside every worktree (a file inside the run worktree would be collected as a change).
pub fn write_agent_context(store: &Store, ledger: &Ledger, audience: Audience) -> Result<PathBuf> {
    let packet = build(store, ledger, audience)?;
    let dir = store.repo.common_dir().join("tabellio").join("context");
    std::fs::create_dir_all(&dir)
        .map_err(|e| crate::Error::internal(format!("could not create {}: {e}", dir.display())))?;
    // The agent gets a plain absolute path: with GIT_DIR in a linked worktree the common dir
    // reads `.git/worktrees/<name>/../..`.
    let dir = std::fs::canonicalize(&dir)
        .map_err(|e| crate::Error::internal(format!("could not resolve {}: {e}", dir.display())))?;
    let path = dir.join(format!("{}.md", ledger.record.run_id));
    let tmp = dir.join(format!("{}.md.tmp", ledger.record.run_id));
    std::fs::write(&tmp, to_markdown(&packet))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| crate::Error::internal(format!("could not write {}: {e}", path.display())))?;
    Ok(path)
}
