//! `log --graph`: runs as lanes off their base, drawn as `git log --graph --oneline` draws
//! branches. Runs with the same frozen base (ref and commit) share one base point; the first of
//! them runs straight down into it, the others fork off on their own lane and join with `|/`.
//! Each lane lists its run's events newest first; its top line carries the run id and state as
//! git carries a branch name. Plain text, no colour, the same bytes for the same ledgers.

use super::{oneline, short_ref, EventKind, RunTimeline};

/// The graph of `runs`, in the order given (lanes of one base stay together, bases in the
/// order their first run comes). Empty when there are no runs.
pub fn render(runs: &[RunTimeline]) -> String {
    let mut bases: Vec<((&str, &str), Vec<&RunTimeline>)> = Vec::new();
    for run in runs {
        let key = (
            run.run.base.reference.as_str(),
            run.run.base.commit.as_str(),
        );
        match bases.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(run),
            None => bases.push((key, vec![run])),
        }
    }
    // The run whose landing made a base: `promote` moved the target to it, so later runs start
    // from it. A run landed in a batch landed as its own commit; the target went to the top.
    let landed_by = |commit: &str| {
        runs.iter().find(|r| {
            let p = r.run.promotion.as_ref();
            r.run.landed.as_deref().or(p.map(|p| p.new.as_str())) == Some(commit)
        })
    };
    let mut out = String::new();
    let mut continues = false;
    for (i, ((reference, commit), members)) in bases.iter().enumerate() {
        // A base that is the landing of the next base's first run continues into that run's
        // lane (its top line is the same commit), as one history; unrelated bases stand apart.
        if i > 0 && !continues {
            out.push('\n');
        }
        for (j, run) in members.iter().enumerate() {
            // The first run is the trunk's own lane (column 0); the others fork off beside it.
            let lane = if j == 0 { "" } else { "| " };
            for (k, event) in run.events.iter().rev().enumerate() {
                let mut line = format!("{lane}*");
                // The start's commit is the base, drawn once below as the base point.
                if let (Some(c), false) = (&event.commit, event.kind == EventKind::Start) {
                    line.push(' ');
                    line.push_str(oneline(c));
                }
                if k == 0 {
                    line.push_str(&format!(" ({}: {})", run.run.run_id, run.run.state));
                }
                line.push(' ');
                line.push_str(&one_line(&event.text));
                out.push_str(&line);
                out.push('\n');
            }
            if j > 0 {
                out.push_str("|/\n");
            }
        }
        let ids: Vec<&str> = members.iter().map(|r| r.run.run_id.as_str()).collect();
        let landing =
            landed_by(commit).map_or(String::new(), |r| format!(", landed by {}", r.run.run_id));
        out.push_str(&format!(
            "* {} ({}) base of {}{landing}\n",
            oneline(commit),
            short_ref(reference),
            ids.join(", ")
        ));
        continues = bases
            .get(i + 1)
            .is_some_and(|(_, next)| landed_by(commit).is_some_and(|r| std::ptr::eq(r, next[0])));
    }
    out
}

/// `text` on one line: a reason or summary with line breaks would break the lanes, and other
/// control characters (escape sequences from another machine's records) become U+FFFD.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Event, RunTimeline};
    use super::*;
    use crate::model::run::tests::sample;
    use crate::model::RunState;

    fn run(id: &str, base: &str, events: &[(EventKind, Option<&str>, &str)]) -> RunTimeline {
        let mut rec = sample(RunState::Active);
        rec.run_id = id.into();
        rec.base.commit = base.repeat(40);
        RunTimeline {
            run: rec,
            events: events
                .iter()
                .map(|(kind, commit, text)| Event {
                    kind: *kind,
                    commit: commit.map(|c| c.repeat(40)),
                    status: None,
                    at: "2026-01-01T00:00:00Z".into(),
                    text: (*text).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn lanes_fork_off_a_shared_base_and_other_bases_stand_apart() {
        let a = run(
            "a",
            "1",
            &[
                (EventKind::Start, Some("1"), "start from main: t"),
                (EventKind::Checkpoint, Some("a"), "checkpoint 1: wip"),
            ],
        );
        let b = run(
            "b",
            "1",
            &[
                (EventKind::Start, Some("1"), "start from main: t"),
                (
                    EventKind::Abandoned,
                    None,
                    "abandoned: no\nlonger \u{1b}[1mneeded",
                ),
            ],
        );
        let c = run(
            "c",
            "2",
            &[(EventKind::Start, Some("2"), "start from main: t")],
        );
        assert_eq!(
            render(&[a, b, c]),
            "\
* aaaaaaa (a: active) checkpoint 1: wip
* start from main: t
| * (b: active) abandoned: no longer \u{fffd}[1mneeded
| * start from main: t
|/
* 1111111 (main) base of a, b

* (c: active) start from main: t
* 2222222 (main) base of c
"
        );
        assert_eq!(render(&[]), "");
    }

    #[test]
    fn a_base_made_by_a_landing_continues_into_that_run() {
        let mut landed = run(
            "d",
            "4",
            &[
                (EventKind::Start, Some("4"), "start from main: t"),
                (
                    EventKind::Promoted,
                    Some("3"),
                    "promoted main 4444444..3333333",
                ),
            ],
        );
        landed.run.state = RunState::Promoted;
        landed.run.promotion = Some(crate::model::run::Promotion {
            target: "refs/heads/main".into(),
            old: "4".repeat(40),
            new: "3".repeat(40),
            mode: crate::model::run::PromotionMode::Ref,
            remote: None,
            at: "2026-01-01T00:00:00Z".into(),
        });
        let next = run(
            "e",
            "3",
            &[(EventKind::Start, Some("3"), "start from main: t")],
        );
        assert_eq!(
            render(&[next, landed]),
            "\
* (e: active) start from main: t
* 3333333 (main) base of e, landed by d
* 3333333 (d: promoted) promoted main 4444444..3333333
* start from main: t
* 4444444 (main) base of d
"
        );
    }
}
