//! `log --html`: one self-contained HTML page about one run or many: an overview graph, and per
//! run its facts, its timeline, each attempt's checks with their output excerpts (from the
//! evidence notes), and the loop's iterations with their stop reasons.
//!
//! The page stands alone: inline CSS, no script, no external resource (fonts, images, links off
//! the page), so it can be mailed, attached to a CI job or opened years later. Every text from
//! the repository is HTML-escaped, and terminal escape sequences and other control characters in
//! check output are dropped. Like `export`, the page names no local path: the directories the
//! repository knows about are replaced by labels (`<worktree>`, `<repository>`, `~`, …) in
//! everything shown, the task text included, as the page is meant to be shared. The page is
//! the same for the same ledgers and notes (no generation time).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{graph, oneline, short_ref, RunTimeline, Timelines};
use crate::error::{Error, Result};
use crate::evidence::history::{executions_in, Execution};
use crate::evidence::read::records_for;
use crate::model::evidence::tool_id;
use crate::model::evidence::CheckStatus;
use crate::model::loop_state::{LoopIteration, LoopState};
use crate::model::run::{Attempt, AttemptCheck};
use crate::model::EvidenceRecord;
use crate::run::views::UnreadableRun;
use crate::run::{run_workspace, Env};
use crate::store::paths::LocalPaths;
use crate::store::Store;

/// One run as the page shows it.
#[derive(Debug, Clone)]
pub struct RunPage {
    pub timeline: RunTimeline,
    /// The run's attempts, oldest first, each with the evidence record of each of its checks.
    pub attempts: Vec<AttemptPage>,
}

/// An attempt and, per check in the attempt's order, its evidence record when the notes hold it.
#[derive(Debug, Clone)]
pub struct AttemptPage {
    pub attempt: Attempt,
    pub records: Vec<Option<EvidenceRecord>>,
    /// Every execution of the attempt's checks on its tree (same definitions), each with its
    /// attempt number: a later pass never hides a failure.
    pub executions: Vec<Execution>,
}

/// The page for `timelines`: evidence read from the notes, local paths replaced by labels.
pub fn report(env: &Env, timelines: Timelines) -> Result<String> {
    let store = &env.store;
    let mut pages = Vec::with_capacity(timelines.runs.len());
    for timeline in timelines.runs {
        let ledger = crate::run::find_readable(store, &timeline.run.run_id)?.ledger;
        let workspace = run_workspace(store, &ledger)?;
        let paths = LocalPaths::new(store, workspace.as_deref());
        let attempts = timeline
            .run
            .attempts
            .iter()
            .map(|a| attempt_page(store, &timeline.run.run_id, a))
            .collect::<Result<Vec<_>>>()?;
        pages.push(scrubbed(RunPage { timeline, attempts }, &paths)?);
    }
    let paths = LocalPaths::new(store, None);
    let unreadable: Vec<UnreadableRun> = timelines
        .unreadable
        .into_iter()
        .map(|u| UnreadableRun {
            message: paths.apply(&u.message),
            ..u
        })
        .collect();
    Ok(render(&store.repository_id(), &pages, &unreadable))
}

/// The attempt's records: for each check, this run's intact record of that check (same name,
/// definition and verdict) on the attempt's commit or tree that finished by the time the attempt
/// was recorded, the latest such (a check finished twice on one commit has one record each time).
fn attempt_page(store: &Store, run_id: &str, attempt: &Attempt) -> Result<AttemptPage> {
    let commit = store.parse_oid(&attempt.commit)?;
    let tree = store.parse_oid(&attempt.tree)?;
    let lines = records_for(store, commit, tree)?;
    let records = attempt
        .checks
        .iter()
        .map(|c| {
            lines
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .filter(|r| is_record_of(r, run_id, attempt, c))
                .max_by(|a, b| a.finished_at.cmp(&b.finished_at))
                .cloned()
        })
        .collect();
    let executions = executions_in(
        lines
            .iter()
            .filter(|(_, r)| r.as_ref().is_some_and(EvidenceRecord::digest_is_valid)),
        &attempt.tree,
    )
    .into_iter()
    .filter(|e| {
        attempt
            .checks
            .iter()
            .any(|c| c.name == e.check && c.digest == e.check_digest)
    })
    .collect();
    Ok(AttemptPage {
        attempt: attempt.clone(),
        records,
        executions,
    })
}

fn is_record_of(r: &EvidenceRecord, run_id: &str, attempt: &Attempt, c: &AttemptCheck) -> bool {
    r.run_id.as_deref() == Some(run_id)
        && r.check.name == c.name
        && r.check.digest == c.digest
        && r.status == c.status
        && r.finished_at <= attempt.at
        && r.digest_is_valid()
}

/// `page` with every local path replaced by its label, in every string it shows.
fn scrubbed(page: RunPage, paths: &LocalPaths) -> Result<RunPage> {
    let RunPage {
        mut timeline,
        attempts,
    } = page;
    timeline.run = relabel(&timeline.run, paths)?;
    for e in &mut timeline.events {
        e.text = paths.apply(&e.text);
    }
    let attempts = attempts
        .into_iter()
        .map(|a| {
            let records = a
                .records
                .iter()
                .map(|r| r.as_ref().map(|r| relabel(r, paths)).transpose())
                .collect::<Result<_>>()?;
            // Executions hold names, digests and times: nothing local.
            Ok(AttemptPage {
                attempt: a.attempt,
                records,
                executions: a.executions,
            })
        })
        .collect::<Result<_>>()?;
    Ok(RunPage { timeline, attempts })
}

/// A record with its strings relabelled: through JSON, where [`LocalPaths`] works.
fn relabel<T: Serialize + DeserializeOwned>(value: &T, paths: &LocalPaths) -> Result<T> {
    let mut json = serde_json::to_value(value)
        .map_err(|e| Error::internal("could not read a record for the report").caused_by(e))?;
    // No key is empty: every string is relabelled, the task text included.
    paths.apply_json(&mut json, "");
    serde_json::from_value(json)
        .map_err(|e| Error::internal("could not relabel a record for the report").caused_by(e))
}

/// The page for `runs` of repository `repository`, naming the ledgers that could not be read.
pub fn render(repository: &str, runs: &[RunPage], unreadable: &[UnreadableRun]) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let title = match runs {
        [one] => format!(
            "git tabellio: run {} of {repository}",
            one.timeline.run.run_id
        ),
        _ => format!("git tabellio: runs of {repository}"),
    };
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(&format!(
        "<meta name=\"generator\" content=\"{}\">\n<title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        esc(&tool_id()),
        esc(&title)
    ));
    h.push_str(&format!(
        "<header class=\"report\">\n<h1>{}</h1>\n<p class=\"meta\">{} run{} · {}</p>\n",
        esc(&title),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        esc(&tool_id())
    ));
    if runs.len() > 1 {
        h.push_str("<nav>\n<ul class=\"runs\">\n");
        for r in runs {
            let run = &r.timeline.run;
            h.push_str(&format!(
                "<li><a href=\"#{}\">{}</a> <span class=\"state state-{}\">{}</span> {}</li>\n",
                anchor(&run.run_id),
                esc(&run.run_id),
                run.state,
                run.state,
                esc(&run.task.summary)
            ));
        }
        h.push_str("</ul>\n</nav>\n");
    }
    let timelines: Vec<RunTimeline> = runs.iter().map(|r| r.timeline.clone()).collect();
    h.push_str(&format!(
        "<section class=\"overview\">\n<h2>Graph</h2>\n<pre class=\"graph\">{}</pre>\n</section>\n</header>\n<main>\n",
        esc(&graph::render(&timelines))
    ));
    if !unreadable.is_empty() {
        h.push_str("<section class=\"unreadable\">\n<h2>Unreadable runs</h2>\n<ul>\n");
        for u in unreadable {
            h.push_str(&format!(
                "<li data-run=\"{id}\"><code>{id}</code>: {}</li>\n",
                esc(&u.message),
                id = esc(&u.run_id)
            ));
        }
        h.push_str("</ul>\n</section>\n");
    }
    for r in runs {
        run_section(&mut h, r);
    }
    h.push_str("</main>\n<footer>Made by ");
    h.push_str(&esc(&tool_id()));
    h.push_str(" from the run ledgers and evidence notes of the repository. Local paths are shown as labels such as &lt;worktree&gt; and ~.</footer>\n</body>\n</html>\n");
    h
}

fn run_section(h: &mut String, page: &RunPage) {
    let run = &page.timeline.run;
    let id = &run.run_id;
    h.push_str(&format!(
        "<article class=\"run\" id=\"{}\" data-run=\"{}\" data-state=\"{}\">\n",
        anchor(id),
        esc(id),
        run.state
    ));
    h.push_str(&format!(
        "<h2>{} <span class=\"state state-{}\">{}</span></h2>\n<p class=\"summary\">{}</p>\n",
        esc(id),
        run.state,
        run.state,
        esc(&run.task.summary)
    ));
    h.push_str("<dl class=\"facts\">\n");
    let mut fact = |name: &str, value: String| {
        h.push_str(&format!("<dt>{name}</dt><dd>{value}</dd>\n"));
    };
    fact(
        "base",
        format!(
            "{} at <code>{}</code>",
            esc(short_ref(&run.base.reference)),
            esc(oneline(&run.base.commit))
        ),
    );
    fact("branch", esc(short_ref(&run.branch)));
    fact(
        "actor",
        format!("{}:{}", esc(&run.actor.kind), esc(&run.actor.id)),
    );
    fact("created", time(&run.created_at));
    fact("updated", time(&run.updated_at));
    if let Some(v) = &run.validated {
        fact(
            "validated",
            format!("<code>{}</code>", esc(oneline(&v.commit))),
        );
    }
    if let Some(p) = &run.promotion {
        fact(
            "promoted",
            format!(
                "{} <code>{}..{}</code> ({})",
                esc(short_ref(&p.target)),
                esc(oneline(&p.old)),
                esc(oneline(&p.new)),
                esc(p.mode.as_str())
            ),
        );
    }
    if let Some(reason) = &run.reason {
        fact("reason", esc(reason));
    }
    h.push_str("</dl>\n");
    h.push_str(&format!(
        "<details class=\"task\"><summary>Task</summary><pre>{}</pre></details>\n",
        esc(&run.task.text)
    ));

    h.push_str("<h3>Timeline</h3>\n<ol class=\"timeline\">\n");
    for e in &page.timeline.events {
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let (class, data) = e.status.as_deref().map_or_else(Default::default, |s| {
            let s = esc(s);
            (format!(" status-{s}"), format!(" data-status=\"{s}\""))
        });
        let commit = e.commit.as_deref().map_or(String::new(), |c| {
            format!(" <code class=\"commit\">{}</code>", esc(oneline(c)))
        });
        h.push_str(&format!(
            "<li class=\"event kind-{kind}{class}\" data-kind=\"{kind}\"{data}>{} <span class=\"what\">{}</span>{commit}</li>\n",
            time(&e.at),
            esc(&e.text),
        ));
    }
    h.push_str("</ol>\n");

    if !page.attempts.is_empty() {
        h.push_str("<h3>Attempts</h3>\n");
        for a in &page.attempts {
            attempt_section(h, id, a);
        }
    }
    if let Some(l) = &run.loop_state {
        loop_section(h, l);
    }
    h.push_str("</article>\n");
}

/// The executions on the attempt's tree when there was more than one of a check, and the
/// `flaky-pass` verdict of a check that both passed and failed there.
fn executions_list(h: &mut String, a: &Attempt, executions: &[Execution]) {
    for c in &a.checks {
        let runs: Vec<&Execution> = executions.iter().filter(|e| e.check == c.name).collect();
        if runs.len() < 2 {
            continue;
        }
        let passed = runs.iter().any(|e| e.status == CheckStatus::Passed);
        let failed = runs.iter().any(|e| e.status != CheckStatus::Passed);
        if passed && failed {
            h.push_str(&format!(
                "<p class=\"verdict flaky-pass\" data-check=\"{name}\" data-verdict=\"flaky-pass\">{name}: <span class=\"status\">flaky-pass</span> (passed and failed on this tree)</p>\n",
                name = esc(&c.name),
            ));
        }
        h.push_str(&format!(
            "<ol class=\"executions\" data-check=\"{}\">\n",
            esc(&c.name)
        ));
        for e in runs {
            h.push_str(&format!(
                "<li class=\"status-{s}\" data-attempt=\"{n}\" data-status=\"{s}\">{name} attempt {n}: <span class=\"status\">{s}</span> {} ({} ms)</li>\n",
                time(&e.started_at),
                e.duration_ms,
                name = esc(&c.name),
                n = e.attempt.map_or("–".to_string(), |n| n.to_string()),
                s = esc(e.status.as_str()),
            ));
        }
        h.push_str("</ol>\n");
    }
}

fn attempt_section(h: &mut String, run_id: &str, page: &AttemptPage) {
    let a = &page.attempt;
    h.push_str(&format!(
        "<section class=\"attempt status-{s}\" id=\"{}-attempt-{n}\" data-attempt=\"{n}\" data-status=\"{s}\">\n",
        anchor(run_id),
        n = a.n,
        s = esc(a.status.as_str()),
    ));
    h.push_str(&format!(
        "<h4>Attempt {} <span class=\"status\">{}</span> on <code>{}</code> {}</h4>\n",
        a.n,
        esc(a.status.as_str()),
        esc(oneline(&a.commit)),
        time(&a.at)
    ));
    h.push_str("<table class=\"checks\">\n<thead><tr><th>check</th><th>status</th><th>exit</th><th>time</th><th>output</th></tr></thead>\n<tbody>\n");
    for (c, r) in a.checks.iter().zip(&page.records) {
        let exit = c.exit_code.map_or_else(
            || r.as_ref().map_or("–".into(), |r| esc(&r.stopped.command)),
            |c| c.to_string(),
        );
        let (took, output) = match r {
            Some(r) if r.reused_from.is_some() => (
                "–".to_string(),
                "reused a passing record on the same tree".to_string(),
            ),
            Some(r) => (
                format!("{} ms", r.duration_ms),
                format!(
                    "{} bytes{}{}{}",
                    r.output.bytes,
                    if r.output.truncated {
                        ", truncated"
                    } else {
                        ""
                    },
                    if r.output.redactions > 0 {
                        format!(", {} redacted", r.output.redactions)
                    } else {
                        String::new()
                    },
                    r.stopped
                        .tabellio
                        .as_deref()
                        .map_or(String::new(), |t| format!(", {}", esc(t)))
                ),
            ),
            None => ("–".to_string(), "no record in the notes".to_string()),
        };
        h.push_str(&format!(
            "<tr class=\"check status-{s}\" data-check=\"{name}\" data-status=\"{s}\"><td>{name}</td><td><span class=\"status\">{s}</span></td><td>{exit}</td><td>{took}</td><td>{output}</td></tr>\n",
            name = esc(&c.name),
            s = esc(c.status.as_str()),
        ));
    }
    h.push_str("</tbody>\n</table>\n");
    executions_list(h, a, &page.executions);
    for (c, r) in a.checks.iter().zip(&page.records) {
        let Some(r) = r else { continue };
        if r.output.excerpt.is_empty() {
            continue;
        }
        // What failed is what a reader came for: open; passing output stays folded.
        let open = if c.status == crate::model::evidence::CheckStatus::Passed {
            ""
        } else {
            " open"
        };
        h.push_str(&format!(
            "<details class=\"excerpt\" data-check=\"{name}\"{open}><summary>{name}: output{}</summary><pre>{}</pre></details>\n",
            if r.output.truncated { " (excerpt: head and tail)" } else { "" },
            esc(&r.output.excerpt),
            name = esc(&c.name),
        ));
    }
    h.push_str("</section>\n");
}

fn loop_section(h: &mut String, l: &LoopState) {
    h.push_str("<h3>Loop</h3>\n");
    let stop = l
        .why_harness_stopped
        .map_or("running (or interrupted)", |w| w.as_str());
    let done = l.done_reason.map_or("–", |d| d.as_str());
    h.push_str(&format!(
        "<p class=\"loop-summary\" data-stop=\"{stop}\">harness stop: <strong>{stop}</strong> · status {} · done: {done} · {} of at most {} iterations · resumed {} time{} · agent <code>{}</code></p>\n",
        l.status,
        l.history.len(),
        l.max_loops,
        l.resumes,
        if l.resumes == 1 { "" } else { "s" },
        esc(&l.agent.argv.join(" ")),
    ));
    h.push_str("<table class=\"iterations\">\n<thead><tr><th>#</th><th>agent</th><th>commit</th><th>checks</th><th>decision</th><th>stop</th></tr></thead>\n<tbody>\n");
    for it in l.history.iter().chain(l.current.as_ref()) {
        iteration_row(h, it);
    }
    h.push_str("</tbody>\n</table>\n");
}

fn iteration_row(h: &mut String, it: &LoopIteration) {
    let agent = it.agent.as_ref().map_or("–".to_string(), |a| {
        let code = a.exit_code.map_or(String::new(), |c| format!(" {c}"));
        let done = if a.claimed_done { ", claimed DONE" } else { "" };
        let output = if a.output.excerpt.is_empty() {
            String::new()
        } else {
            format!(
                "<details><summary>output</summary><pre>{}</pre></details>",
                esc(&a.output.excerpt)
            )
        };
        format!(
            "{}{code}{done}, {} ms{output}",
            a.stopped.as_str(),
            a.duration_ms
        )
    });
    let commit = it.collect.as_ref().map_or("–".to_string(), |c| {
        let by = match c.committed_by {
            crate::model::loop_state::CommittedBy::Tabellio => "committed by tabellio",
            crate::model::loop_state::CommittedBy::Agent => "committed by the agent",
            crate::model::loop_state::CommittedBy::Nobody => "unchanged",
        };
        let failure = c
            .failure
            .as_deref()
            .map_or(String::new(), |f| format!("; {}", esc(f)));
        format!("<code>{}</code> {by}{failure}", esc(oneline(&c.head)))
    });
    let checks = it.evaluate.as_ref().map_or("–".to_string(), |e| {
        let list: Vec<String> = e
            .checks
            .iter()
            .map(|c| format!("{} {}", esc(&c.name), esc(c.status.as_str())))
            .collect();
        let mut s = format!("<strong>{}</strong>", esc(&e.verdict));
        if !list.is_empty() {
            s.push_str(&format!(": {}", list.join(", ")));
        }
        if let Some(why) = e.skipped.as_deref().or(e.plan_gate.as_deref()) {
            s.push_str(&format!(" ({})", esc(why)));
        }
        s
    });
    let decision = it.status.map_or("–".to_string(), |s| s.to_string());
    let stop = it.why_harness_stopped.map_or("–", |s| s.as_str());
    h.push_str(&format!(
        "<tr class=\"iteration\" data-iteration=\"{n}\" data-decision=\"{decision}\"><td>{n}</td><td>{agent}</td><td>{commit}</td><td>{checks}</td><td>{decision}</td><td class=\"stop\">{stop}</td></tr>\n",
        n = it.n,
    ));
}

/// A `<time>` element for an RFC 3339 instant, shown as `2026-01-01 12:00:00Z`.
fn time(at: &str) -> String {
    format!(
        "<time datetime=\"{}\">{}</time>",
        esc(at),
        esc(&at.replacen('T', " ", 1))
    )
}

/// An id attribute value for run `id` (run ids are `[A-Za-z0-9._-]`, valid in ids as they are).
fn anchor(id: &str) -> String {
    format!("run-{}", esc(id))
}

/// `text` for HTML text and attribute values: `& < > " '` escaped; terminal escape sequences
/// (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`, and two-byte ones) and other control
/// characters except newline and tab dropped, as a browser would show them as garbage.
pub fn esc(text: &str) -> String {
    let shown = crate::runner::strip_escapes(text);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's style: system fonts, a vertical timeline with a dot per event, colours by state
/// and verdict that also read in print (text says the same as the colour).
const CSS: &str = r#":root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #ffffff; --soft: #f6f8fa;
  --pass: #1a7f37; --fail: #cf222e; --warn: #9a6700; --info: #0969da; --gone: #6e7781; --loop: #8250df; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 24px 32px; color: var(--fg); background: var(--bg);
  font: 15px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 0 0 6px; }
h3 { font-size: 16px; margin: 20px 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
h4 { font-size: 15px; margin: 0 0 8px; }
code, pre { font: 13px/1.45 ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px;
  overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: 6px 0; }
.meta, .summary { color: var(--muted); margin: 0 0 12px; }
.summary { font-size: 16px; color: var(--fg); }
ul.runs { list-style: none; padding: 0; margin: 8px 0 16px; }
ul.runs li { margin: 2px 0; }
.graph { background: var(--soft); }
.state, .status { display: inline-block; padding: 0 8px; border-radius: 12px; font-size: 12px; font-weight: 600;
  line-height: 20px; vertical-align: middle; color: #fff; background: var(--gone); }
.state-promoted, .state-completed, .status-passed > h4 .status, tr.status-passed .status { background: var(--pass); }
.flaky-pass .status { background: var(--fail); }
.state-validation_failed, .status-failed > h4 .status, tr.status-failed .status,
  tr.status-timed_out .status, tr.status-error .status { background: var(--fail); }
.state-active { background: var(--info); }
.state-looping { background: var(--loop); }
.state-blocked { background: var(--warn); }
article.run { border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; margin: 24px 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 12px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
ol.timeline { list-style: none; margin: 0; padding: 0 0 0 6px; }
ol.timeline li { position: relative; padding: 4px 0 10px 26px; border-left: 2px solid var(--line); }
ol.timeline li:last-child { border-left-color: transparent; }
ol.timeline li::before { content: ""; position: absolute; left: -7px; top: 8px; width: 12px; height: 12px;
  border-radius: 50%; background: var(--bg); border: 2px solid var(--info); }
ol.timeline li.kind-start::before { background: var(--info); }
ol.timeline li.kind-checkpoint::before { border-color: var(--muted); }
ol.timeline li.status-passed::before { background: var(--pass); border-color: var(--pass); }
ol.timeline li.status-failed::before, ol.timeline li.kind-land_refused::before { background: var(--fail); border-color: var(--fail); }
ol.timeline li.kind-restack::before { border-color: var(--warn); }
ol.timeline li.kind-promoted::before { background: var(--pass); border-color: var(--pass); border-radius: 2px; }
ol.timeline li.kind-abandoned::before { background: var(--gone); border-color: var(--gone); border-radius: 2px; }
ol.timeline li.kind-blocked::before { background: var(--warn); border-color: var(--warn); }
ol.timeline li.kind-loop_started::before, ol.timeline li.kind-loop_stopped::before { border-color: var(--loop); }
ol.timeline time { color: var(--muted); font-size: 13px; margin-right: 8px; }
section.attempt { border-left: 4px solid var(--line); padding: 4px 0 4px 14px; margin: 12px 0; }
section.attempt.status-passed { border-left-color: var(--pass); }
section.attempt.status-failed { border-left-color: var(--fail); }
h4 time { color: var(--muted); font-weight: 400; font-size: 13px; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; font-size: 14px; }
th, td { text-align: left; vertical-align: top; padding: 4px 10px; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; }
details summary { cursor: pointer; color: var(--muted); }
details.excerpt[open] summary { color: var(--fg); }
footer { color: var(--muted); font-size: 13px; border-top: 1px solid var(--line); padding-top: 12px; margin-top: 32px; }
@media print { details > pre { display: block; } article.run { break-inside: avoid-page; } }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_drops_terminal_escapes() {
        assert_eq!(
            esc("<b a=\"1\" b='2'>&</b>"),
            "&lt;b a=&quot;1&quot; b=&#39;2&#39;&gt;&amp;&lt;/b&gt;"
        );
        assert_eq!(
            esc("\u{1b}[1;31merror\u{1b}[0m: x\r\n\tok"),
            "error: x\n\tok"
        );
        assert_eq!(esc("\u{1b}]0;title\u{7}a\u{1b}]8;;u\u{1b}\\b"), "ab");
        assert_eq!(esc("bell\u{7} nul\u{0} ünï"), "bell nul ünï");
    }
}
