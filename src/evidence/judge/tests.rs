use super::*;

const COMMIT: &str = "1111111111111111111111111111111111111111";
const TREE: &str = "2222222222222222222222222222222222222222";

fn record(name: &str, status: &str, check_digest: &str) -> EvidenceRecord {
    record_on(name, status, check_digest, COMMIT, TREE)
}

/// A sealed record of check `name` with `status` and definition digest `check_digest`.
pub(crate) fn record_on(
    name: &str,
    status: &str,
    check_digest: &str,
    commit: &str,
    tree: &str,
) -> EvidenceRecord {
    let mut r = crate::model::evidence::tests::sample();
    r.commit = commit.into();
    r.tree = tree.into();
    r.check.name = name.into();
    r.check.digest = check_digest.into();
    r.status = match status {
        "passed" => crate::model::evidence::CheckStatus::Passed,
        "failed" => crate::model::evidence::CheckStatus::Failed,
        other => panic!("a status of the tests: {other}"),
    };
    r.seal()
}

fn req(name: &str, digest: Option<&str>) -> Requirement {
    Requirement::new(name, digest.map(str::to_string))
}

fn lines(records: &[EvidenceRecord]) -> Vec<Line> {
    records
        .iter()
        .map(|r| (r.to_line(), Some(r.clone())))
        .collect()
}

fn verdict(records: &[Line], r: &Requirement) -> Verdict {
    evaluate_records(records, COMMIT, TREE, std::slice::from_ref(r))[0].verdict
}

#[test]
fn every_verdict_of_one_record() {
    let r = req("test", Some("d1"));
    let ok = record("test", "passed", "d1");
    assert_eq!(judge(&ok, &r, COMMIT, TREE), Verdict::Satisfied);
    // Noted on the tree only (a rebase kept it): still this commit's evidence.
    assert_eq!(
        judge(&ok, &r, "9".repeat(40).as_str(), TREE),
        Verdict::Satisfied
    );
    assert_eq!(
        judge(&ok, &r, "9".repeat(40).as_str(), "8".repeat(40).as_str()),
        Verdict::MismatchedObject
    );
    assert_eq!(
        judge(&record("test", "failed", "d1"), &r, COMMIT, TREE),
        Verdict::Failed
    );
    assert_eq!(
        judge(&record("test", "passed", "d0"), &r, COMMIT, TREE),
        Verdict::StaleCheck
    );
    // A requirement without a known definition accepts any definition.
    let any = req("test", None);
    assert_eq!(
        judge(&record("test", "passed", "d0"), &any, COMMIT, TREE),
        Verdict::Satisfied
    );
    let mut forged = ok.clone();
    forged.status = crate::model::evidence::CheckStatus::Passed;
    forged.exit_code = Some(1);
    assert_eq!(judge(&forged, &r, COMMIT, TREE), Verdict::Tampered);
    assert_eq!(verdict(&[], &r), Verdict::Missing);
    for v in [
        Verdict::Satisfied,
        Verdict::Missing,
        Verdict::Failed,
        Verdict::StaleCheck,
        Verdict::Tampered,
        Verdict::MismatchedObject,
        Verdict::Unsigned,
        Verdict::BadSignature,
        Verdict::UnknownSigner,
        Verdict::SignerExpired,
        Verdict::NotApplicableRefused,
    ] {
        let json = serde_json::to_value(v).expect("a verdict serializes");
        assert_eq!(json.as_str(), Some(v.as_str()));
    }
}

#[test]
fn a_required_signature_is_judged_after_everything_else() {
    use crate::trust::{AllowedSigners, SigningConfig, SigningKey};
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("ci");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "ci", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs");
    assert!(made.success());
    let public = std::fs::read_to_string(dir.path().join("ci.pub")).expect("public key");
    let signers = AllowedSigners::parse(&format!("ci@example.com {public}"), "signers")
        .expect("a valid signers file");
    let mut r = req("test", Some("d1"));
    r.signers = Some(std::sync::Arc::new(signers));

    let unsigned = record("test", "passed", "d1");
    // Without trust the same record satisfies; with it, it is shown but does not count.
    assert_eq!(
        judge(&unsigned, &req("test", Some("d1")), COMMIT, TREE),
        Verdict::Satisfied
    );
    assert_eq!(judge(&unsigned, &r, COMMIT, TREE), Verdict::Unsigned);
    // A record that fails for another reason says that reason, not `unsigned`.
    assert_eq!(
        judge(&record("test", "failed", "d1"), &r, COMMIT, TREE),
        Verdict::Failed
    );

    let sig = SigningConfig::new(SigningKey::File(key))
        .sign_digest(&unsigned.digest, "ci@example.com")
        .expect("ssh-keygen signs");
    let signed = EvidenceRecord {
        signature: Some(sig.clone()),
        ..unsigned.clone()
    };
    // The signature is outside the digest: adding it keeps the record intact.
    assert!(signed.digest_is_valid());
    let (v, signer) = judge_signed(&signed, &r, COMMIT, TREE);
    assert_eq!(v, Verdict::Satisfied);
    assert_eq!(
        signer.map(|s| s.principal),
        Some("ci@example.com".to_string())
    );

    // The same signature on another record does not verify there.
    let mut other = record("test", "passed", "d1");
    other.duration_ms += 1;
    let other = EvidenceRecord {
        signature: Some(sig),
        ..other.seal()
    };
    assert_eq!(judge(&other, &r, COMMIT, TREE), Verdict::BadSignature);
}

#[test]
fn a_satisfying_record_wins_and_otherwise_the_most_alarming() {
    let r = req("test", Some("d1"));
    let good = record("test", "passed", "d1");
    let failed = record("test", "failed", "d1");
    let mut tampered = record("test", "failed", "d1");
    tampered.status = crate::model::evidence::CheckStatus::Passed;
    // A pass beside a failure of the same tree and definition is a flaky pass, which
    // satisfies only where the policy accepts it.
    let both = lines(&[failed.clone(), good.clone()]);
    let judged = evaluate_records(&both, COMMIT, TREE, std::slice::from_ref(&r));
    assert_eq!(judged[0].verdict, Verdict::FlakyPass);
    assert_eq!(judged[0].failed_record.as_ref(), Some(&failed.digest));
    assert!(!judged[0].satisfies());
    let mut accepting = r.clone();
    accepting.flaky = FlakyPolicy::Accept;
    let judged = evaluate_records(&both, COMMIT, TREE, std::slice::from_ref(&accepting));
    assert_eq!(judged[0].verdict, Verdict::FlakyPass);
    assert!(judged[0].satisfies());
    // A failure on another tree (noted on this commit) says nothing about this tree.
    let elsewhere = record_on("test", "failed", "d1", COMMIT, &"7".repeat(40));
    assert_eq!(
        verdict(&lines(&[elsewhere, good.clone()]), &r),
        Verdict::Satisfied
    );
    // Nor does a failure of another definition, even where any definition is accepted.
    let other_failure = record("test", "failed", "d0");
    assert_eq!(
        verdict(&lines(&[other_failure.clone(), good.clone()]), &r),
        Verdict::Satisfied
    );
    assert_eq!(
        verdict(&lines(&[other_failure, good.clone()]), &req("test", None)),
        Verdict::Satisfied
    );
    assert_eq!(
        verdict(&lines(&[failed.clone(), tampered.clone()]), &r),
        Verdict::Tampered
    );
    let stale = record("test", "passed", "d0");
    assert_eq!(verdict(&lines(&[stale, failed]), &r), Verdict::Failed);
    // Another check's records say nothing about this one.
    assert_eq!(
        verdict(&lines(&[record("lint", "passed", "d1")]), &r),
        Verdict::Missing
    );
}

#[test]
fn a_baseline_lets_inherited_failures_pass_and_names_new_ones() {
    use crate::evidence::requirements::Baseline;
    use crate::model::evidence::TestReport;
    let failing = |ids: &[&str]| {
        let mut r = record("test", "failed", "d1");
        r.tests = Some(TestReport {
            format: "junit".into(),
            total: 3,
            failed: ids.len() as u64,
            failing: ids.iter().map(|s| s.to_string()).collect(),
        });
        r.seal()
    };
    let mut r = req("test", Some("d1"));
    // Allowed but not read (no tip evidence): a failure is a failure.
    r.baseline = Some(Baseline::default());
    assert_eq!(verdict(&lines(&[failing(&["t_old"])]), &r), Verdict::Failed);
    r.baseline = Some(Baseline {
        inherited: Some(std::sync::Arc::new(["t_old".to_string()].into())),
    });
    let judged = |recs: &[EvidenceRecord]| {
        evaluate_records(&lines(recs), COMMIT, TREE, std::slice::from_ref(&r)).remove(0)
    };
    let inherited = judged(&[failing(&["t_old"])]);
    assert_eq!(inherited.verdict, Verdict::NoNewFailures);
    assert!(inherited.satisfies());
    assert_eq!(inherited.inherited, ["t_old"]);
    assert_eq!(
        inherited.describe(),
        "test (no-new-failures: t_old inherited)"
    );
    let new = judged(&[failing(&["t_new", "t_old"])]);
    assert_eq!(new.verdict, Verdict::Failed);
    assert!(!new.satisfies());
    assert_eq!(new.new_failures, ["t_new"]);
    assert_eq!(new.describe(), "test (failed: new failures t_new)");
    // A new failure among the records beats an inherited one.
    assert_eq!(
        judged(&[failing(&["t_old"]), failing(&["t_new"])]).verdict,
        Verdict::Failed
    );
    // A failure naming no test, or a list that was cut, proves nothing about the rest.
    assert_eq!(judged(&[failing(&[])]).verdict, Verdict::Failed);
    let mut cut = failing(&["t_old"]);
    cut.tests.as_mut().unwrap().failed = 2;
    assert_eq!(judged(&[cut.seal()]).verdict, Verdict::Failed);
    // A pass says which inherited failures it fixed.
    let mut fixed = record("test", "passed", "d1");
    fixed.tests = Some(TestReport {
        format: "junit".into(),
        total: 3,
        failed: 0,
        failing: Vec::new(),
    });
    let fixed = judged(&[fixed.seal()]);
    assert_eq!(fixed.verdict, Verdict::Satisfied);
    assert_eq!(fixed.fixed, ["t_old"]);
}

#[test]
fn an_unreadable_line_is_tampered_unless_it_is_a_genuine_newer_record() {
    let r = req("test", Some("d1"));
    let junk = vec![("not json".to_string(), None)];
    assert_eq!(verdict(&junk, &r), Verdict::Tampered);
    // A record with its schema edited: its digest no longer matches.
    let mut value: serde_json::Value =
        serde_json::from_str(&record("test", "passed", "d1").to_line()).expect("json");
    value["schema"] = "tabellio.evidence/v9".into();
    let edited = vec![(value.to_string(), None)];
    assert_eq!(verdict(&edited, &r), Verdict::Tampered);
    // A genuine record of a newer schema (digest intact) never satisfies, never alarms.
    let digest = crate::model::canonical::digest_without_field(&value).expect("digest");
    value["digest"] = digest.into();
    let newer = vec![(value.to_string(), None)];
    assert_eq!(verdict(&newer, &r), Verdict::Missing);
    // A readable-JSON line naming another check is not ours.
    let other = vec![(
        r#"{"check":{"name":"lint"},"digest":"x"}"#.to_string(),
        None,
    )];
    assert_eq!(verdict(&other, &r), Verdict::Missing);
    let ours = vec![(
        r#"{"check":{"name":"test"},"digest":"x"}"#.to_string(),
        None,
    )];
    assert_eq!(verdict(&ours, &r), Verdict::Tampered);
}

#[test]
fn a_not_applicable_record_counts_only_beside_the_record_it_stands_on() {
    let scoped = "5".repeat(40);
    let mut on = record_on("test", "passed", "d1", &"9".repeat(40), &"8".repeat(40));
    on.scoped_tree = Some(scoped.clone());
    let on = on.seal();
    let mut na = record("test", "passed", "d1");
    na.status = CheckStatus::NotApplicable;
    na.reused_from = Some(on.digest.clone());
    na.scoped_tree = Some(scoped.clone());
    let na = na.seal();
    let mut scoped_req = req("test", Some("d1"));
    scoped_req.scope = Some(super::super::requirements::Scope {
        inputs: crate::model::inputs::Inputs::new(&["a/**".into()]).expect("valid"),
        tree: Some(scoped.clone()),
    });
    assert_eq!(
        verdict(&lines(&[na.clone(), on.clone()]), &scoped_req),
        Verdict::Satisfied
    );
    // Alone, or judged by a policy without inputs, or on other inputs: refused.
    assert_eq!(
        verdict(&lines(std::slice::from_ref(&na)), &scoped_req),
        Verdict::NotApplicableRefused
    );
    assert_eq!(
        verdict(&lines(&[na.clone(), on.clone()]), &req("test", Some("d1"))),
        Verdict::NotApplicableRefused
    );
    let mut elsewhere = scoped_req.clone();
    if let Some(scope) = elsewhere.scope.as_mut() {
        scope.tree = Some("6".repeat(40));
    }
    assert_eq!(
        verdict(&lines(&[na.clone(), on.clone()]), &elsewhere),
        Verdict::NotApplicableRefused
    );
    // Standing on a failing record, or on another not_applicable one: refused.
    let mut failed = on.clone();
    failed.status = CheckStatus::Failed;
    let failed = failed.seal();
    let mut on_failed = na.clone();
    on_failed.reused_from = Some(failed.digest.clone());
    let on_failed = on_failed.seal();
    assert_eq!(
        verdict(&lines(&[on_failed, failed]), &scoped_req),
        Verdict::NotApplicableRefused
    );
    let mut chained = na.clone();
    chained.reused_from = Some(na.digest.clone());
    let chained = chained.seal();
    assert_eq!(
        verdict(&lines(&[chained, na]), &scoped_req),
        Verdict::NotApplicableRefused
    );
    // The passing record itself counts on the scoped tree, whatever tree it names.
    assert_eq!(verdict(&lines(&[on]), &scoped_req), Verdict::Satisfied);
}

#[test]
fn a_gate_of_any_passing_check_needs_one_and_names_the_absent() {
    let junk = vec![("not json".to_string(), None)];
    let (checks, verified) = judge_gate(&junk, COMMIT, TREE, &Gate::AnyPassing);
    assert!(!verified);
    assert_eq!(checks[0].verdict, Verdict::Tampered);
    let (checks, verified) = judge_gate(&[], COMMIT, TREE, &Gate::AnyPassing);
    assert!(!verified);
    assert_eq!(checks.len(), 1);
    assert_eq!(
        (checks[0].name.as_str(), checks[0].verdict),
        (ANY_CHECK, Verdict::Missing)
    );
    let some = lines(&[record("lint", "failed", "d"), record("test", "passed", "d")]);
    let (checks, verified) = judge_gate(&some, COMMIT, TREE, &Gate::AnyPassing);
    assert!(verified);
    assert_eq!(checks.len(), 2);
    let gate = Gate::Required(vec![req("lint", None), req("test", None)]);
    let (checks, verified) = judge_gate(&some, COMMIT, TREE, &gate);
    assert!(!verified);
    assert_eq!(checks[0].verdict, Verdict::Failed);
    assert_eq!(checks[1].verdict, Verdict::Satisfied);
}
