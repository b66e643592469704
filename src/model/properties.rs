//! Property tests of the policy parser and of `run.json`: any JSON is parsed or refused, never a
//! panic; what we write reads back as the same value, byte for byte; an unknown field anywhere
//! (but inside `loop`, which is exempt) is refused, naming the field.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::canonical::digest_of;
use super::evidence::CheckStatus;
use super::land::{LandAttempt, Restack, RestackMode};
use super::policy::{
    ApprovalPolicy, CheckDef, LandPolicy, OutputPolicy, PlansPolicy, Policy, RequireSigned,
    TrustPolicy, MAX_EXCERPT_BYTES, SCHEMA as POLICY_SCHEMA,
};
use super::run::{
    Actor, Attempt, AttemptCheck, Base, CheckpointEntry, Promotion, RunRecord, RunState, Task,
    Validated, SCHEMA as RUN_SCHEMA,
};
use super::run::{AttemptStatus, PromotionMode};
use super::{parse_record, to_value};

/// Any JSON value, its object keys often the names of policy and run fields, so that the parsers
/// get past the first field.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        3 => prop::sample::select(vec![
            "schema", "checks", "required", "protect", "output", "plans", "trust", "guarded",
            "approval", "land", "argv", "timeout_s", "excerpt_bytes", "require_hygiene",
            "allowed_signers", "require_signed", "distinct_from_actor", "squash",
        ])
        .prop_map(str::to_string),
        1 => "\\PC{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(json!(POLICY_SCHEMA)),
        Just(json!("*")),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A check or run name the parser accepts.
fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9_-]{0,10}"
}

fn check_def() -> impl Strategy<Value = CheckDef> {
    (prop::collection::vec("\\PC{1,10}", 1..4), 1u64..=86_400).prop_map(|(argv, timeout_s)| {
        CheckDef {
            timeout_s,
            ..CheckDef::of_argv(argv)
        }
    })
}

fn trust(names: Vec<String>) -> impl Strategy<Value = TrustPolicy> {
    let n = names.len();
    (
        "[a-z]{1,8}(/[a-z_]{1,8}){0,2}",
        prop_oneof![
            Just(RequireSigned::All),
            prop::sample::subsequence(names, 0..=n).prop_map(RequireSigned::Checks),
        ],
    )
        .prop_map(|(allowed_signers, require_signed)| TrustPolicy {
            allowed_signers,
            require_signed,
        })
}

/// A valid policy: defined checks, required ones among them, full ref patterns, an excerpt
/// cap within the limit, optional trust, guarded globs and approval rules.
fn policy() -> impl Strategy<Value = Policy> {
    prop::collection::btree_map(name(), check_def(), 0..4).prop_flat_map(
        |checks: BTreeMap<String, CheckDef>| {
            let names: Vec<String> = checks.keys().cloned().collect();
            let n = names.len();
            (
                Just(checks),
                prop::sample::subsequence(names.clone(), 0..=n),
                prop::collection::vec("refs/heads/[a-z]{1,8}(/\\*)?", 0..3),
                prop::option::of(1usize..=MAX_EXCERPT_BYTES),
                any::<bool>(),
                prop::option::of(trust(names)),
                prop::option::of(prop::collection::vec(
                    "!?[a-z]{1,6}(/(\\*\\*|[a-z]{1,4}))?",
                    0..3,
                )),
                prop::option::of(any::<bool>()),
                any::<bool>(),
            )
                .prop_map(
                    |(
                        checks,
                        required,
                        protect,
                        excerpt,
                        hygiene,
                        trust,
                        guarded,
                        approval,
                        squash,
                    )| {
                        Policy {
                            schema: POLICY_SCHEMA.into(),
                            checks,
                            required,
                            protect,
                            output: OutputPolicy {
                                excerpt_bytes: excerpt,
                            },
                            plans: PlansPolicy {
                                require_hygiene: hygiene,
                            },
                            trust,
                            guarded,
                            guarded_paths: Default::default(),
                            approval: approval.map(|distinct_from_actor| ApprovalPolicy {
                                distinct_from_actor,
                            }),
                            land: LandPolicy {
                                squash,
                                ..LandPolicy::default()
                            },
                            retention: None,
                        }
                    },
                )
        },
    )
}

/// The objects of a policy's JSON that a field can be added to, and the fields each knows.
fn policy_objects(v: &Value) -> Vec<(Vec<String>, &'static [&'static str])> {
    let mut out: Vec<(Vec<String>, &'static [&'static str])> = vec![
        (
            vec![],
            &[
                "schema", "checks", "required", "protect", "output", "plans", "trust", "guarded",
                "approval", "land",
            ],
        ),
        (vec!["output".into()], &["excerpt_bytes"]),
        (vec!["plans".into()], &["require_hygiene"]),
    ];
    for name in v["checks"].as_object().into_iter().flat_map(|m| m.keys()) {
        out.push((vec!["checks".into(), name.clone()], &["argv", "timeout_s"]));
    }
    if v["trust"].is_object() {
        out.push((vec!["trust".into()], &["allowed_signers", "require_signed"]));
    }
    if v["approval"].is_object() {
        out.push((vec!["approval".into()], &["distinct_from_actor"]));
    }
    if v["land"].is_object() {
        out.push((vec!["land".into()], &["squash"]));
    }
    out
}

/// The object at `path` in `v`.
fn object_at<'v>(v: &'v mut Value, path: &[String]) -> &'v mut serde_json::Map<String, Value> {
    let mut at = v;
    for step in path {
        at = match at {
            Value::Array(items) => &mut items[step.parse::<usize>().expect("an index")],
            other => &mut other[step.as_str()],
        };
    }
    at.as_object_mut().expect("the path names an object")
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn hex(len: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(b"0123456789abcdef".to_vec()), len)
        .prop_map(|bytes| bytes.into_iter().map(char::from).collect())
}

fn attempt() -> impl Strategy<Value = Attempt> {
    let check_status = prop::sample::select(vec![
        CheckStatus::Passed,
        CheckStatus::Failed,
        CheckStatus::TimedOut,
        CheckStatus::Error,
    ]);
    let check = (name(), hex(64), check_status, any::<Option<i32>>()).prop_map(
        |(name, digest, status, exit_code)| AttemptCheck {
            name,
            digest,
            status,
            exit_code,
        },
    );
    (
        any::<u32>(),
        hex(40),
        hex(40),
        prop::collection::vec(check, 0..3),
        prop::sample::select(vec![AttemptStatus::Passed, AttemptStatus::Failed]),
        hex(64),
        text(),
    )
        .prop_map(
            |(n, commit, tree, checks, status, evidence_digest, at)| Attempt {
                n,
                commit,
                tree,
                checks,
                status,
                evidence_digest,
                at,
            },
        )
}

fn land_parts() -> impl Strategy<Value = (Option<String>, Option<Restack>, Vec<LandAttempt>)> {
    let mode = prop::sample::select(vec![
        RestackMode::None,
        RestackMode::Replay,
        RestackMode::Squash,
    ]);
    let restack = (mode, hex(40), hex(40), hex(40), hex(40)).prop_map(
        |(mode, base_before, base_after, head_before, head_after)| Restack {
            mode,
            base_before,
            base_after,
            head_before,
            head_after,
        },
    );
    let attempt = (
        text(),
        hex(40),
        hex(40),
        prop::collection::vec(text(), 0..3),
        text(),
    )
        .prop_map(|(target, onto, commit, paths, at)| LandAttempt {
            target,
            onto,
            commit,
            paths,
            at,
            result: None,
            head: None,
            hunks: Vec::new(),
            failed: Vec::new(),
            isolated: None,
            reason: None,
        });
    (
        prop::option::of(hex(40)),
        prop::option::of(restack),
        prop::collection::vec(attempt, 0..2),
    )
}

/// Any `run.json` this version writes (`loop` left out: it is exempt from the unknown-field
/// rule and has its own tests).
fn run_record() -> impl Strategy<Value = RunRecord> {
    let state = prop::sample::select(RunState::ALL.to_vec());
    let head = (
        name(),
        state.clone(),
        prop::option::of(state),
        (text(), text(), hex(64)),
        (text(), text()),
        text(),
        (text(), hex(40)),
        text(),
    );
    let checkpoint = (hex(40), hex(40), text(), text(), prop::option::of(hex(40))).prop_map(
        |(commit, tree, summary, at, snapshot)| CheckpointEntry {
            commit,
            tree,
            summary,
            at,
            snapshot,
        },
    );
    let promotion = (
        text(),
        hex(40),
        hex(40),
        prop::sample::select(vec![
            PromotionMode::Ref,
            PromotionMode::Worktree,
            PromotionMode::Remote,
        ]),
        prop::option::of(text()),
        text(),
    )
        .prop_map(|(target, old, new, mode, remote, at)| Promotion {
            target,
            old,
            new,
            mode,
            remote,
            at,
        });
    let tail = (
        prop::collection::vec(checkpoint, 0..3),
        prop::collection::vec(attempt(), 0..3),
        prop::option::of((hex(40), hex(40), hex(64))),
        prop::option::of(promotion),
        prop::option::of(text()),
        land_parts(),
        (text(), text()),
    );
    (head, tail).prop_map(
        |(
            (run_id, state, previous_state, task, actor, repository, base, branch),
            (checkpoints, attempts, validated, promotion, reason, land, times),
        )| RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id,
            state,
            previous_state,
            task: Task {
                summary: task.0,
                text: task.1,
                sha256: task.2,
            },
            actor: Actor::new(actor.0, actor.1),
            repository,
            base: Base {
                reference: base.0,
                commit: base.1,
            },
            branch,
            checkpoints,
            attempts,
            validated: validated.map(|(commit, tree, evidence_digest)| Validated {
                commit,
                tree,
                evidence_digest,
            }),
            promotion,
            loop_state: None,
            reason,
            landed: land.0,
            restack: land.1,
            land_attempts: land.2,
            rewound: None,
            completion: None,
            initiator: None,
            reopens: Vec::new(),
            repair: None,
            superseded_by: None,
            supersedes: None,
            created_at: times.0,
            updated_at: times.1,
        },
    )
}

/// The objects of a run record's JSON a field can be added to, and the fields each knows.
fn run_objects(v: &Value) -> Vec<(Vec<String>, &'static [&'static str])> {
    const TOP: &[&str] = &[
        "schema",
        "run_id",
        "state",
        "previous_state",
        "task",
        "actor",
        "repository",
        "base",
        "branch",
        "checkpoints",
        "attempts",
        "validated",
        "promotion",
        "loop",
        "reason",
        "landed",
        "restack",
        "land_attempts",
        "rewound",
        "completion",
        "reopens",
        "repair",
        "superseded_by",
        "supersedes",
        "created_at",
        "updated_at",
    ];
    let mut out: Vec<(Vec<String>, &'static [&'static str])> = vec![
        (vec![], TOP),
        (vec!["task".into()], &["summary", "text", "sha256"]),
        (vec!["actor".into()], &["type", "id"]),
        (vec!["base".into()], &["ref", "commit"]),
    ];
    let list = |key: &str| v[key].as_array().map_or(0, Vec::len);
    for i in 0..list("checkpoints") {
        out.push((
            vec!["checkpoints".into(), i.to_string()],
            &["commit", "tree", "summary", "at", "snapshot"],
        ));
    }
    for i in 0..list("attempts") {
        let at = vec!["attempts".into(), i.to_string()];
        out.push((
            at.clone(),
            &[
                "n",
                "commit",
                "tree",
                "checks",
                "status",
                "evidence_digest",
                "at",
            ],
        ));
        for j in 0..v["attempts"][i]["checks"].as_array().map_or(0, Vec::len) {
            let mut check = at.clone();
            check.extend(["checks".to_string(), j.to_string()]);
            out.push((check, &["name", "digest", "status", "exit_code"]));
        }
    }
    for i in 0..list("land_attempts") {
        out.push((
            vec!["land_attempts".into(), i.to_string()],
            &[
                "target", "onto", "commit", "paths", "at", "result", "head", "hunks", "failed",
                "isolated", "reason",
            ],
        ));
    }
    for (key, fields) in [
        ("validated", &["commit", "tree", "evidence_digest"][..]),
        (
            "promotion",
            &["target", "old", "new", "mode", "remote", "at"],
        ),
        (
            "restack",
            &[
                "mode",
                "base_before",
                "base_after",
                "head_before",
                "head_after",
            ],
        ),
    ] {
        if v[key].is_object() {
            out.push((vec![key.into()], fields));
        }
    }
    out
}

fn parse_run(text: &str) -> Result<RunRecord, super::SchemaError> {
    parse_record(text, RUN_SCHEMA, "run.json")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any JSON value is a policy or a policy error; never a panic. What parses is a fixed
    /// point: written back and read again, it is the same policy.
    #[test]
    fn any_json_is_a_policy_or_an_error(v in json_value()) {
        if let Ok(p) = Policy::parse(&v.to_string()) {
            let again = Policy::parse(&serde_json::to_string(&p).expect("serializable"));
            prop_assert_eq!(again.ok(), Some(p));
        }
    }

    /// Any text at all, too.
    #[test]
    fn any_text_is_a_policy_or_an_error(text in "\\PC{0,64}") {
        let _ = Policy::parse(&text);
    }

    /// A valid policy round-trips through its JSON, compact or pretty.
    #[test]
    fn valid_policies_round_trip(p in policy()) {
        for text in [
            serde_json::to_string(&p).expect("serializable"),
            serde_json::to_string_pretty(&p).expect("serializable"),
        ] {
            prop_assert_eq!(Policy::parse(&text).map_err(|e| e.to_string()), Ok(p.clone()));
        }
    }

    /// A field the policy does not define, anywhere, is refused, naming it.
    #[test]
    fn unknown_policy_fields_are_refused(
        p in policy(),
        pick in any::<prop::sample::Index>(),
        field in "[a-z][a-z_]{0,11}",
    ) {
        let mut v = serde_json::to_value(&p).expect("serializable");
        let objects = policy_objects(&v);
        let (path, known) = &objects[pick.index(objects.len())];
        prop_assume!(!known.contains(&field.as_str()));
        object_at(&mut v, path).insert(field.clone(), json!(1));
        let err = Policy::parse(&v.to_string()).expect_err("an unknown field").to_string();
        prop_assert!(err.contains(&field), "{} at {:?}: {}", field, path, err);
    }

    /// `run.json` as the ledger writes it (pretty) reads back as the same record, and is
    /// written again byte for byte the same (the ledger blob, and so its id, is stable); its
    /// canonical digest does not depend on the formatting.
    #[test]
    fn run_records_round_trip_with_a_stable_digest(rec in run_record()) {
        let pretty = serde_json::to_string_pretty(&rec).expect("serializable");
        let back = parse_run(&pretty).expect("our own run.json parses");
        prop_assert_eq!(&back, &rec);
        prop_assert_eq!(serde_json::to_string_pretty(&back).expect("serializable"), pretty);
        let compact = parse_run(&serde_json::to_string(&rec).expect("serializable"))
            .expect("compact parses too");
        let digest = digest_of(&to_value(&rec)).expect("no floats in a run record");
        prop_assert_eq!(digest_of(&to_value(&compact)).expect("no floats"), digest.clone());
        prop_assert_eq!(digest_of(&to_value(&back)).expect("no floats"), digest);
    }

    /// A field `run.json` does not define, at any depth but inside `loop`, is refused, naming
    /// it.
    #[test]
    fn unknown_run_fields_are_refused(
        rec in run_record(),
        pick in any::<prop::sample::Index>(),
        field in "[a-z][a-z_]{0,11}",
    ) {
        let mut v = to_value(&rec);
        let objects = run_objects(&v);
        let (path, known) = &objects[pick.index(objects.len())];
        prop_assume!(!known.contains(&field.as_str()));
        object_at(&mut v, path).insert(field.clone(), json!(true));
        let err = parse_run(&v.to_string()).expect_err("an unknown field").to_string();
        prop_assert!(err.contains(&field), "{} at {:?}: {}", field, path, err);
    }

    /// Any JSON with the run schema is a run record or an error; never a panic.
    #[test]
    fn any_json_is_a_run_record_or_an_error(mut v in json_value()) {
        if let Some(map) = v.as_object_mut() {
            map.insert("schema".into(), json!(RUN_SCHEMA));
        }
        let _ = parse_run(&v.to_string());
    }
}

/// Found by `unknown_run_fields_are_refused`: the additions `land` makes to `run.json` took
/// unknown fields silently, against the one rule of every record.
#[test]
fn an_unknown_field_in_a_landing_of_a_run_is_refused() {
    let mut run = to_value(&super::run::tests::sample(RunState::Completed));
    run["restack"] = json!({
        "mode": "replay", "base_before": "a", "base_after": "b", "head_before": "c",
        "head_after": "d", "forced": true,
    });
    let err = parse_run(&run.to_string())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("forced"), "{err}");
    let mut run = to_value(&super::run::tests::sample(RunState::Completed));
    run["land_attempts"] = json!([{
        "target": "t", "onto": "o", "commit": "c", "paths": [], "at": "x", "ok": true,
    }]);
    let err = parse_run(&run.to_string())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("ok"), "{err}");
}
