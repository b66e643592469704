//! What a commit must prove and how its evidence is judged, in-process on real notes: the
//! requirement rules (the policy at a commit, the ad-hoc checks of a run's attempts) and every
//! verdict of the judge.

use tabellio::evidence::judge::{evaluate, judge, Verdict};
use tabellio::evidence::produce::CheckSelection;
use tabellio::evidence::requirements::{required_at, Claim, Requirement};
use tabellio::model::policy::{CheckDef, DEFAULT_TIMEOUT_S};
use tabellio::model::EvidenceRecord;
use tabellio::runner::Stream;
use tabellio::store::policy::PolicyAtError;

use crate::util::*;

/// The digest of the definition an ad-hoc check `argv` gets (no `--timeout`).
fn adhoc_digest(argv: &[&str]) -> String {
    CheckDef {
        timeout_s: DEFAULT_TIMEOUT_S,
        ..CheckDef::of_argv(argv.iter().map(|a| a.to_string()).collect())
    }
    .digest()
}

fn req(name: &str, digest: Option<String>) -> Requirement {
    Requirement::new(name, digest)
}

/// The verdicts on `reqs` at `rev`, by name.
fn verdicts(t: &TestEnv, rev: &str, reqs: &[Requirement]) -> Vec<(String, Verdict)> {
    let env = t.env();
    let commit = env.store.parse_oid(&t.rev(rev)).expect("an object id");
    evaluate(&env.store, commit, reqs)
        .expect("evaluate")
        .into_iter()
        .map(|v| (v.name, v.verdict))
        .collect()
}

fn one(name: &str, verdict: Verdict) -> Vec<(String, Verdict)> {
    vec![(name.to_string(), verdict)]
}

/// The evidence note on `rev` (its lines as stored).
fn note(t: &TestEnv, rev: &str) -> String {
    t.git_out(&["notes", "--ref=tabellio/evidence", "show", &t.rev(rev)])
}

#[test]
fn the_policy_at_the_commit_decides_with_its_current_definitions() {
    let t = TestEnv::for_lib();
    t.commit_policy(&policy(&[("ok", &["true"]), ("also", &["true"])]));
    t.lib_started("r1");
    let env = t.env();
    let head = env.store.parse_oid(&t.rev("tabellio/r1")).unwrap();
    let run = t.ledger("r1").record;
    let def = |argv: &str| CheckDef {
        timeout_s: 60,
        ..CheckDef::of_argv(vec![argv.into()])
    };
    let want = vec![
        req("ok", Some(def("true").digest())),
        req("also", Some(def("true").digest())),
    ];
    // Whoever asks, the policy decides.
    for claim in [Claim::Policy, Claim::RunHead(&run), Claim::Promotion(&run)] {
        assert_eq!(required_at(&env.store, head, claim).unwrap(), want);
    }
    assert!(t.lib_finish("r1", &[]).passed());
    let s = t.lib_status("r1");
    assert_eq!(s.satisfied_evidence, ["ok", "also"]);
}

#[test]
fn the_target_tips_policy_judges_a_head_that_redefined_its_check() {
    let t = TestEnv::for_lib();
    t.commit_policy(&policy(&[("ok", &["true"])]));
    let wt = t.lib_start("r1");
    // The run weakens its own gate: same check name, another definition.
    t.commit_file_in(
        &wt,
        ".tabellio/policy.json",
        &policy(&[("ok", &["test", "-d", "."])]),
    );
    assert!(t.lib_finish("r1", &[]).passed());
    let env = t.env();
    let tip = env.store.parse_oid(&t.rev("main")).unwrap();
    let head = env.store.parse_oid(&t.rev("tabellio/r1")).unwrap();
    let at_tip = required_at(&env.store, tip, Claim::Policy).unwrap();
    let at_head = required_at(&env.store, head, Claim::Policy).unwrap();
    assert_ne!(at_tip, at_head);
    assert_eq!(
        verdicts(&t, "tabellio/r1", &at_head),
        one("ok", Verdict::Satisfied)
    );
    // Judged by the target's policy, the record was made with a definition it does not have.
    assert_eq!(
        verdicts(&t, "tabellio/r1", &at_tip),
        one("ok", Verdict::StaleCheck)
    );
}

#[test]
fn without_a_policy_the_runs_own_attempts_decide() {
    let t = TestEnv::for_lib();
    let wt = t.lib_started("r1");
    let env = t.env();
    let base = env.store.parse_oid(&t.rev("main")).unwrap();
    assert!(required_at(&env.store, base, Claim::Policy)
        .unwrap()
        .is_empty());
    assert!(t.lib_finish("r1", &["true"]).passed());
    let validated = t.rev("tabellio/r1");
    let validated_id = env.store.parse_oid(&validated).unwrap();
    let run = t.ledger("r1").record;
    let adhoc = vec![req("adhoc", Some(adhoc_digest(&["true"])))];
    assert_eq!(
        required_at(&env.store, validated_id, Claim::RunHead(&run)).unwrap(),
        adhoc
    );
    assert_eq!(
        required_at(&env.store, validated_id, Claim::Promotion(&run)).unwrap(),
        adhoc
    );
    assert!(required_at(&env.store, validated_id, Claim::Policy)
        .unwrap()
        .is_empty());

    // A later, failed attempt under another name: the head is judged by it, the validated
    // commit still by the passing attempt that validated it.
    t.commit_file_in(&wt, "more.txt", "more\n");
    let sel = CheckSelection {
        names: vec!["second".into()],
        argv: vec!["false".into()],
        ..CheckSelection::default()
    };
    let out = tabellio::lifecycle::finish::finish(
        &env,
        &tabellio::lifecycle::finish::FinishOptions {
            run: Some("r1"),
            checks: &sel,
            stream: Stream::Quiet,
        },
    )
    .unwrap();
    assert!(!out.passed());
    let head = env.store.parse_oid(&t.rev("tabellio/r1")).unwrap();
    let run = t.ledger("r1").record;
    let second = vec![req("second", Some(adhoc_digest(&["false"])))];
    assert_eq!(
        required_at(&env.store, head, Claim::RunHead(&run)).unwrap(),
        second
    );
    assert_eq!(
        required_at(&env.store, validated_id, Claim::Promotion(&run)).unwrap(),
        adhoc
    );
    // No passing attempt of the head: a promotion of it has nothing that proves it.
    assert!(required_at(&env.store, head, Claim::Promotion(&run))
        .unwrap()
        .is_empty());
    assert_eq!(
        verdicts(&t, "tabellio/r1", &second),
        one("second", Verdict::Failed)
    );
}

#[test]
fn an_invalid_policy_is_an_error_naming_it_not_an_empty_gate() {
    let t = TestEnv::for_lib();
    t.commit_policy("{\"schema\": \"tabellio.policy/v1\", \"checks\": 3}");
    let env = t.env();
    let tip = env.store.parse_oid(&t.rev("main")).unwrap();
    let err = required_at(&env.store, tip, Claim::Policy).unwrap_err();
    assert!(matches!(err, PolicyAtError::Invalid { .. }), "{err:?}");
}

#[test]
fn passing_and_failing_records_are_satisfied_and_failed() {
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    assert!(!t.lib_finish("r1", &["false"]).passed());
    let fails = vec![req("adhoc", Some(adhoc_digest(&["false"])))];
    assert_eq!(
        verdicts(&t, "tabellio/r1", &fails),
        one("adhoc", Verdict::Failed)
    );
    assert!(t.lib_finish("r1", &["true"]).passed());
    // A passing record beside the failed one of the same name satisfies.
    assert_eq!(
        verdicts(&t, "tabellio/r1", &[req("adhoc", None)]),
        one("adhoc", Verdict::Satisfied)
    );
    let passes = vec![req("adhoc", Some(adhoc_digest(&["true"])))];
    assert_eq!(
        verdicts(&t, "tabellio/r1", &passes),
        one("adhoc", Verdict::Satisfied)
    );
    // Judged by the failing definition, the passing record is stale and the failed one
    // decides: the most alarming verdict is reported.
    assert_eq!(
        verdicts(&t, "tabellio/r1", &fails),
        one("adhoc", Verdict::Failed)
    );
    // Nothing noted on the base, and nothing for a check never run.
    assert_eq!(
        verdicts(&t, "main", &passes),
        one("adhoc", Verdict::Missing)
    );
    assert_eq!(
        verdicts(&t, "tabellio/r1", &[req("lint", None)]),
        one("lint", Verdict::Missing)
    );
}

#[test]
fn a_record_of_another_check_definition_is_stale() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let other = vec![req("adhoc", Some(adhoc_digest(&["true", "--changed"])))];
    assert_eq!(
        verdicts(&t, "tabellio/r1", &other),
        one("adhoc", Verdict::StaleCheck)
    );
}

#[test]
fn an_edited_record_is_tampered() {
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    assert!(!t.lib_finish("r1", &["false"]).passed());
    let head = t.rev("tabellio/r1");
    let line = note(&t, &head);
    let forged = line.replace("\"status\":\"failed\"", "\"status\":\"passed\"");
    assert_ne!(forged, line);
    t.forge_evidence(&head, &forged);
    let any = [req("adhoc", None)];
    assert_eq!(verdicts(&t, &head, &any), one("adhoc", Verdict::Tampered));
    // The record still parses: judged alone it is tampered too.
    let rec = EvidenceRecord::from_line(&forged).expect("still a record");
    let tree = t.rev(&format!("{head}^{{tree}}"));
    assert_eq!(judge(&rec, &any[0], &head, &tree), Verdict::Tampered);
}

#[test]
fn a_record_copied_to_another_commit_names_the_wrong_objects() {
    let t = TestEnv::for_lib();
    let wt = t.lib_completed("r1");
    let line = note(&t, "tabellio/r1");
    t.commit_file_in(&wt, "other.txt", "another tree\n");
    let other = t.rev("tabellio/r1");
    t.set_note(&other, &line);
    assert_eq!(
        verdicts(&t, &other, &[req("adhoc", None)]),
        one("adhoc", Verdict::MismatchedObject)
    );
}

#[test]
fn a_record_on_the_tree_proves_another_commit_of_that_tree() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let tree = t.rev("tabellio/r1^{tree}");
    let copy = t.git_out(&["commit-tree", &tree, "-m", "same tree, new commit"]);
    assert_eq!(
        verdicts(&t, &copy, &[req("adhoc", None)]),
        one("adhoc", Verdict::Satisfied)
    );
}

#[test]
fn an_unreadable_line_is_tampered_unless_it_is_another_checks() {
    let t = TestEnv::for_lib();
    t.lib_started("r1");
    let head = t.rev("tabellio/r1");
    let any = [req("adhoc", None)];
    for (line, want) in [
        ("this is not json", Verdict::Tampered),
        ("{\"schema\":\"tabellio.evidence/v1\"}", Verdict::Tampered),
        (
            "{\"check\":{\"name\":\"adhoc\"},\"digest\":\"0000\"}",
            Verdict::Tampered,
        ),
        // An unreadable line that names another check is not this check's evidence.
        (
            "{\"check\":{\"name\":\"lint\"},\"digest\":\"0000\"}",
            Verdict::Missing,
        ),
    ] {
        t.set_note(&head, line);
        assert_eq!(verdicts(&t, &head, &any), one("adhoc", want), "{line}");
    }
}

#[test]
fn a_newer_schema_is_ignored_when_intact_and_tampered_when_edited() {
    let t = TestEnv::for_lib();
    t.lib_completed("r1");
    let head = t.rev("tabellio/r1");
    let line = note(&t, &head);
    let mut value: serde_json::Value = serde_json::from_str(&line).unwrap();
    value["schema"] = "tabellio.evidence/v2".into();
    // Only the schema edited: the digest no longer matches.
    t.forge_evidence(&head, &value.to_string());
    let any = [req("adhoc", None)];
    assert_eq!(verdicts(&t, &head, &any), one("adhoc", Verdict::Tampered));
    // A genuine record of a schema this tool cannot read: never satisfies, never alarms.
    let digest = tabellio::model::canonical::digest_without_field(&value).unwrap();
    value["digest"] = digest.into();
    t.forge_evidence(&head, &value.to_string());
    assert_eq!(verdicts(&t, &head, &any), one("adhoc", Verdict::Missing));
}
