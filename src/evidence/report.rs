//! A check's machine-readable test report (`report` in the policy): which tests failed.
//!
//! JUnit XML is read with the `junit-parser` crate; TAP (versions 12 to 14) is a line protocol
//! read here: a `not ok` test point fails unless its directive is `# TODO` or `# SKIP`. The ids
//! kept are redacted like every stored text, cut to [`MAX_TEST_ID_BYTES`] and at most
//! [`MAX_FAILING_TESTS`] of them (sorted, unique); `failed` still counts them all. A report that
//! is missing or does not parse gives no [`TestReport`]: the record then says nothing about
//! tests, and a baseline cannot be judged from it (docs/verify.md).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::model::evidence::{TestReport, MAX_FAILING_TESTS, MAX_TEST_ID_BYTES};
use crate::model::policy::{ReportDecl, ReportFormat};
use crate::runner::Redactor;

/// The largest report read: a report is parsed in memory.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// The report `decl` names in `worktree`, if it is there, was written since `not_before` (the
/// check's start: a report left by an earlier execution says nothing about this one) and parses.
pub fn read_report(
    worktree: &Path,
    decl: &ReportDecl,
    redactor: &Redactor,
    not_before: SystemTime,
) -> Option<TestReport> {
    let file = std::fs::File::open(worktree.join(&decl.path)).ok()?;
    let written = file.metadata().ok()?.modified().ok()?;
    // File times have a coarser grain than the clock on some filesystems.
    if written + Duration::from_secs(1) < not_before {
        return None;
    }
    let mut text = Vec::new();
    file.take(MAX_REPORT_BYTES).read_to_end(&mut text).ok()?;
    let (total, failing) = match decl.format {
        ReportFormat::Junit => parse_junit(&text)?,
        ReportFormat::Tap => parse_tap(&String::from_utf8_lossy(&text)),
    };
    Some(bounded(decl.format, total, failing, redactor))
}

/// The tests of a JUnit XML document and the names of the failing ones (a failure or an error).
pub fn parse_junit(xml: &[u8]) -> Option<(u64, Vec<String>)> {
    let suites = junit_parser::from_reader(std::io::Cursor::new(xml)).ok()?;
    let mut total = 0;
    let mut failing = Vec::new();
    let mut stack: Vec<&junit_parser::TestSuite> = suites.suites.iter().collect();
    while let Some(suite) = stack.pop() {
        stack.extend(suite.suites.iter());
        for case in &suite.cases {
            total += 1;
            if case.status.is_failure() || case.status.is_error() {
                failing.push(case.name.clone());
            }
        }
    }
    Some((total, failing))
}

/// The test points of a TAP stream and the descriptions (else numbers) of the failing ones.
/// Lines of nested subtests (indented) are left to their parent's summary point.
pub fn parse_tap(text: &str) -> (u64, Vec<String>) {
    let mut total = 0;
    let mut failing = Vec::new();
    for line in text.lines() {
        let (ok, rest) = if let Some(rest) = line.strip_prefix("not ok") {
            (false, rest)
        } else if let Some(rest) = line.strip_prefix("ok") {
            (true, rest)
        } else {
            continue;
        };
        // `ok` must be a word of its own: `okay` is not a test point.
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        total += 1;
        let (body, directive) = match rest.split_once('#') {
            Some((body, directive)) => (body, directive.trim_start().to_ascii_lowercase()),
            None => (rest, String::new()),
        };
        if ok || directive.starts_with("todo") || directive.starts_with("skip") {
            continue;
        }
        let body = body.trim();
        let (number, description) = match body.split_once(char::is_whitespace) {
            Some((n, d)) if n.chars().all(|c| c.is_ascii_digit()) => (n, d.trim()),
            _ if body.chars().all(|c| c.is_ascii_digit()) => (body, ""),
            _ => ("", body),
        };
        let description = description.strip_prefix("- ").unwrap_or(description).trim();
        failing.push(if description.is_empty() {
            format!("#{number}")
        } else {
            description.to_string()
        });
    }
    (total, failing)
}

/// The report as stored: ids redacted, cut, sorted, unique, at most [`MAX_FAILING_TESTS`].
fn bounded(
    format: ReportFormat,
    total: u64,
    failing: Vec<String>,
    redactor: &Redactor,
) -> TestReport {
    let ids: BTreeSet<String> = failing
        .iter()
        .map(|id| cut(&redactor.redact(id).0, MAX_TEST_ID_BYTES))
        .collect();
    let failed = ids.len() as u64;
    TestReport {
        format: format.as_str().to_string(),
        total,
        failed,
        failing: ids.into_iter().take(MAX_FAILING_TESTS).collect(),
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_failures_and_errors_are_failing() {
        let xml = br#"<?xml version="1.0"?>
<testsuites><testsuite name="s">
  <testcase classname="a" name="t_ok"/>
  <testcase classname="a" name="t_old"><failure message="boom"/></testcase>
  <testcase classname="b" name="t_err"><error/></testcase>
  <testcase classname="b" name="t_skip"><skipped/></testcase>
</testsuite></testsuites>"#;
        let (total, failing) = parse_junit(xml).expect("valid JUnit");
        assert_eq!(total, 4);
        assert_eq!(failing, ["a::t_old", "b::t_err"]);
    }

    #[test]
    fn tap_not_ok_fails_unless_todo_or_skip() {
        let tap = "TAP version 13\n1..5\nok 1 - t_ok\nnot ok 2 - t_old\nnot ok 3 # TODO later\nnot ok 4 t_new # skip no db\nnot ok 5\n    not ok 1 - nested\nokay\n";
        let (total, failing) = parse_tap(tap);
        assert_eq!(total, 5);
        assert_eq!(failing, ["t_old", "#5"]);
    }

    #[test]
    fn ids_are_redacted_cut_sorted_and_bounded() {
        let redactor = Redactor::from_env_with(&[("TOKEN".into(), "s3cr3t-value-xyz".into())]);
        let mut failing: Vec<String> = (0..MAX_FAILING_TESTS + 5)
            .map(|i| format!("t{i:04}"))
            .collect();
        failing.push("leaks s3cr3t-value-xyz".into());
        failing.push("x".repeat(MAX_TEST_ID_BYTES * 2));
        let r = bounded(ReportFormat::Tap, 999, failing, &redactor);
        assert_eq!(r.failed, MAX_FAILING_TESTS as u64 + 7);
        assert_eq!(r.failing.len(), MAX_FAILING_TESTS);
        assert!(!r.complete());
        assert!(r.failing.iter().all(|id| !id.contains("s3cr3t")));
        assert!(r.failing.iter().all(|id| id.len() <= MAX_TEST_ID_BYTES));
        assert!(r.failing.windows(2).all(|w| w[0] < w[1]));
    }
}
