//! `.tabellio/policy.json` (`tabellio.policy/v1`): named checks, required checks, protected refs,
//! and optionally who may attest (`trust`), which paths need a person's approval (`guarded`) and
//! who may approve (`approval`).
//!
//! Parsing is strict: an unknown field, an unknown schema, an empty argv or a required check that
//! is not defined is an error naming the file and the field. The policy is always read from a
//! commit, never from a worktree, so what gates a commit is what is committed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::canonical;

mod trust;
pub use trust::{
    ActorKind, ApprovalPolicy, ApproverRole, GuardRule, GuardWhen, RequireSigned, TrustPolicy,
};

pub const SCHEMA: &str = "tabellio.policy/v1";
pub const PATH: &str = ".tabellio/policy.json";
pub const DEFAULT_TIMEOUT_S: u64 = 600;
pub const DEFAULT_EXCERPT_BYTES: usize = 16 * 1024;
/// The largest `output.excerpt_bytes`: the excerpt is kept in memory and stored in a note, so an
/// unbounded value turns a check's whole output into one huge note.
pub const MAX_EXCERPT_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckDef {
    pub argv: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// The paths the check reads (globs, see [`super::inputs`]): its evidence is keyed to the
    /// tree restricted to them, and it runs in a worktree holding only them. Absent: the
    /// whole tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<String>>,
    /// A required check with `when` is required only when it holds of who made the change
    /// (the condition `guarded_paths` globs take); always when absent. Not part of the
    /// digest: it says when the check is asked for, not what it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<GuardWhen>,
    /// Whether a `flaky-pass` (the same tree and check digest passed and failed) satisfies this
    /// check when it is required; `refuse` when absent (docs/verify.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flaky: Option<FlakyPolicy>,
    /// The check is known to fail spuriously: `land` confirms one of its failures once before a
    /// refusal depends on it (the default of `retries` becomes 1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky_prone: bool,
    /// How many times `land` re-runs a failing execution on the same tree before a refusal
    /// depends on it; default 1 when `flaky_prone`, else 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// The largest flake rate (failing then passing on one tree, over the check's last
    /// executions) under which a failure is confirmed and a flaky pass accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_flake_rate: Option<Rate>,
    /// A machine-readable test report the check writes, whose failing test ids are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportDecl>,
    /// `allow`: a run whose failing test ids are all failing on the target's tip too passes
    /// as `no-new-failures` (needs `report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselinePolicy>,
}

/// `"flaky": "accept" | "refuse"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlakyPolicy {
    Accept,
    #[default]
    Refuse,
}

/// `"baseline": "allow"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselinePolicy {
    Allow,
}

/// `"report": {"format": "junit" | "tap", "path": "<file in the worktree>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportDecl {
    pub format: ReportFormat,
    pub path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    Junit,
    Tap,
}

impl ReportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportFormat::Junit => "junit",
            ReportFormat::Tap => "tap",
        }
    }
}

/// A rate between 0 and 1 (`max_flake_rate`), compared by value.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub f64);

impl PartialEq for Rate {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Rate {}

/// The most retries a policy may give one failure: a budget, not a loop.
pub const MAX_RETRIES: u32 = 5;

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_S
}

impl CheckDef {
    /// SHA-256 of the canonical definition: evidence goes stale when argv, timeout or inputs
    /// change (not `when`). A check without `inputs` digests as it always has.
    pub fn digest(&self) -> String {
        let value = match &self.inputs {
            None => json!({"argv": self.argv, "timeout_s": self.timeout_s}),
            Some(inputs) => {
                json!({"argv": self.argv, "inputs": inputs, "timeout_s": self.timeout_s})
            }
        };
        canonical::digest_of(&value).expect("a check definition is canonical")
    }

    /// The compiled `inputs`, `None` for a check of the whole tree. Validated when the policy
    /// is parsed; a definition made by hand that does not compile reads the whole tree.
    pub fn scope(&self) -> Option<super::inputs::Inputs> {
        self.inputs
            .as_ref()
            .and_then(|i| super::inputs::Inputs::new(i).ok())
    }

    /// A definition of `argv` with the default timeout and nothing else set.
    pub fn of_argv(argv: Vec<String>) -> CheckDef {
        CheckDef {
            argv,
            timeout_s: DEFAULT_TIMEOUT_S,
            flaky: None,
            flaky_prone: false,
            retries: None,
            max_flake_rate: None,
            report: None,
            baseline: None,
            inputs: None,
            when: None,
        }
    }

    /// How many times `land` re-runs a failing execution before a refusal depends on it.
    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(u32::from(self.flaky_prone))
    }

    /// Does a `flaky-pass` satisfy this check?
    pub fn accepts_flaky(&self) -> bool {
        self.flaky == Some(FlakyPolicy::Accept)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OutputPolicy {
    #[serde(default)]
    pub excerpt_bytes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PlansPolicy {
    #[serde(default)]
    pub require_hygiene: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub schema: String,
    #[serde(default, deserialize_with = "unique_keys")]
    pub checks: BTreeMap<String, CheckDef>,
    #[serde(default)]
    pub required: Vec<String>,
    #[serde(default)]
    pub protect: Vec<String>,
    #[serde(default)]
    pub output: OutputPolicy,
    #[serde(default)]
    pub plans: PlansPolicy,
    /// Who may sign evidence, and which checks need a signature to count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustPolicy>,
    /// Gitignore-style globs of paths whose change needs an approval before promotion; when
    /// present the policy file itself is always guarded too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarded: Option<Vec<String>>,
    /// Who may approve a change to guarded paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicy>,
    /// Globs guarded under a condition on who made the change (`when`) and with approvers they
    /// exclude (`approver_not`), docs/verify.md#provenance-in-the-policy. Like `guarded`, they
    /// guard the policy file and the allowed-signers file always.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guarded_paths: BTreeMap<String, GuardRule>,
    /// How `land` puts runs on the target (docs/land.md).
    #[serde(default, skip_serializing_if = "LandPolicy::is_default")]
    pub land: LandPolicy,
    /// What `gc` archives and prunes (docs/lifecycle.md, "Retention").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionPolicy>,
}

/// `"retention": {"archive_after": "<age>", "notes": "keep" | "prune"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicy {
    /// How long after a run ended (`90d`, `12w`, `36h`, `0`) `gc` archives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_after: Option<String>,
    /// What `gc` does with the notes of commits nothing reaches any more.
    #[serde(default)]
    pub notes: NotesRetention,
}

/// The notes of commits (and trees) that no ref reaches any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NotesRetention {
    /// Kept (the default).
    #[default]
    Keep,
    /// Removed from the notes trees by `gc`.
    Prune,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LandPolicy {
    /// Land every run as one commit, as `land --squash` does.
    #[serde(default)]
    pub squash: bool,
    /// What `land` does with a run it refuses: `reopen` moves it onto the new tip at once, as
    /// `land --reopen` does (absent: it stays as refused, for `git tabellio reopen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_refuse: Option<OnRefuse>,
    /// How many repair rounds an agent gets on a reopened run (default
    /// [`DEFAULT_REPAIR_ROUNDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_rounds: Option<u32>,
}

/// The repair rounds of a reopened run when the policy does not say.
pub const DEFAULT_REPAIR_ROUNDS: u32 = 2;

/// `land.on_refuse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRefuse {
    /// Reopen the refused run onto the new tip.
    Reopen,
}

impl LandPolicy {
    fn is_default(&self) -> bool {
        self == &LandPolicy::default()
    }

    /// `repair_rounds`, or the default.
    pub fn repair_rounds(&self) -> u32 {
        self.repair_rounds.unwrap_or(DEFAULT_REPAIR_ROUNDS)
    }
}

/// A guarded glob: not empty, no surrounding spaces, compiles.
fn check_glob(field: &str, pattern: &str) -> Result<(), PolicyError> {
    let body = pattern.strip_prefix('!').unwrap_or(pattern);
    if body.trim() != body || body.is_empty() {
        return Err(PolicyError(format!(
            "{field}: {pattern:?} is empty or has surrounding spaces; write the glob alone, e.g. \"tests/**\""
        )));
    }
    if gix::glob::parse(pattern.as_bytes()).is_none() {
        return Err(PolicyError(format!(
            "{field}: {pattern:?} is not a glob; see the guarded paths syntax in the docs"
        )));
    }
    Ok(())
}

/// A map whose keys must be unique (serde_json would keep the last of two).
fn unique_keys<'de, D>(de: D) -> Result<BTreeMap<String, CheckDef>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Unique;
    impl<'de> serde::de::Visitor<'de> for Unique {
        type Value = BTreeMap<String, CheckDef>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of check definitions")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                if out.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "check {name:?} is defined twice"
                    )));
                }
                let def = map.next_value::<CheckDef>()?;
                out.insert(name, def);
            }
            Ok(out)
        }
    }
    de.deserialize_map(Unique)
}

/// A policy file that cannot be used; the message names the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("{PATH}: {0}")]
pub struct PolicyError(pub String);

impl Policy {
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| PolicyError(format!("not valid JSON: {e}")))?;
        match value.get("schema") {
            None => return Err(PolicyError("no \"schema\" field".into())),
            Some(serde_json::Value::String(found)) if found != SCHEMA => {
                return Err(PolicyError(format!(
                    "unsupported schema {found:?} (this tabellio reads {SCHEMA:?}); upgrade git-tabellio"
                )))
            }
            Some(serde_json::Value::String(_)) => {}
            Some(other) => return Err(PolicyError(format!("schema: must be a string, not {other}"))),
        }
        // Parsed from the text, not from the value: a duplicate key (two definitions of one
        // check) must be an error, not "the last one wins". The path names the field at fault.
        let mut de = serde_json::Deserializer::from_str(text);
        let policy: Policy = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            let inner = inner
                .split(" at line ")
                .next()
                .unwrap_or(&inner)
                .to_string();
            if path.is_empty() || path == "." {
                PolicyError(inner)
            } else {
                PolicyError(format!("{path}: {inner}"))
            }
        })?;
        for (i, pattern) in policy.protect.iter().enumerate() {
            if !pattern.starts_with("refs/") {
                return Err(PolicyError(format!(
                    "protect[{i}]: {pattern:?} is not a full ref name and would protect nothing; write \"refs/heads/{pattern}\""
                )));
            }
        }
        if let Some(name) = first_duplicate(&policy.required) {
            return Err(PolicyError(format!("required: {name:?} is listed twice")));
        }
        match policy.output.excerpt_bytes {
            Some(0) => {
                return Err(PolicyError(
                    "output.excerpt_bytes: must be at least 1".into(),
                ))
            }
            Some(n) if n > MAX_EXCERPT_BYTES => {
                return Err(PolicyError(format!(
                    "output.excerpt_bytes: {n} is more than the limit of {MAX_EXCERPT_BYTES} (1 MiB); \
                     the excerpt is stored in a note, keep it small and read the full output where the check runs"
                )))
            }
            _ => {}
        }
        for (name, def) in &policy.checks {
            if super::ids::check_run_id(name).is_err() {
                return Err(PolicyError(format!(
                    "checks.{name}: a check name may only contain A-Z a-z 0-9 . _ - and must start with a letter or digit"
                )));
            }
            if def.argv.is_empty() || def.argv[0].is_empty() {
                return Err(PolicyError(format!(
                    "checks.{name}.argv: must name a command"
                )));
            }
            if def.timeout_s == 0 {
                return Err(PolicyError(format!(
                    "checks.{name}.timeout_s: must be at least 1"
                )));
            }
            if let Some(inputs) = &def.inputs {
                super::inputs::Inputs::new(inputs)
                    .map_err(|why| PolicyError(format!("checks.{name}.inputs{why}")))?;
            }
            def.validate_verdicts(name)?;
        }
        for name in &policy.required {
            if !policy.checks.contains_key(name) {
                return Err(PolicyError(format!(
                    "required: check {name:?} is not defined under \"checks\""
                )));
            }
        }
        // A commit is never proved by zero records: some required check must be asked of
        // every change, whoever made it.
        if !policy.required.is_empty()
            && policy
                .required
                .iter()
                .all(|n| policy.checks.get(n).is_some_and(|c| c.when.is_some()))
        {
            return Err(PolicyError(
                "required: every required check has \"when\", so a change by anyone else would need none; require at least one check without \"when\"".into(),
            ));
        }
        policy.validate_trust()?;
        if let Some(age) = policy
            .retention
            .as_ref()
            .and_then(|r| r.archive_after.as_deref())
        {
            super::time::parse_age(age)
                .map_err(|why| PolicyError(format!("retention.archive_after: {why}")))?;
        }
        Ok(policy)
    }

    /// `trust` and `guarded`: paths that can be found in a commit, checks that exist, globs
    /// that compile.
    fn validate_trust(&self) -> Result<(), PolicyError> {
        if let Some(trust) = &self.trust {
            check_repo_path(&trust.allowed_signers).map_err(|why| {
                PolicyError(format!(
                    "trust.allowed_signers: {:?} {why}; write a path inside the repository such as \".tabellio/allowed_signers\"",
                    trust.allowed_signers
                ))
            })?;
            if let RequireSigned::Checks(names) = &trust.require_signed {
                if let Some(name) = first_duplicate(names) {
                    return Err(PolicyError(format!(
                        "trust.require_signed: {name:?} is listed twice"
                    )));
                }
                for name in names {
                    if !self.checks.contains_key(name) {
                        return Err(PolicyError(format!(
                            "trust.require_signed: check {name:?} is not defined under \"checks\"; define it or write \"*\" for every check"
                        )));
                    }
                }
            }
        }
        for (i, pattern) in self.guarded.iter().flatten().enumerate() {
            check_glob(&format!("guarded[{i}]"), pattern)?;
        }
        for (pattern, rule) in &self.guarded_paths {
            let field = format!("guarded_paths.{pattern}");
            if pattern.starts_with('!') {
                return Err(PolicyError(format!(
                    "{field}: a negated glob guards nothing here; list the exception in \"guarded\" or narrow the glob"
                )));
            }
            check_glob(&field, pattern)?;
            if rule.approvals != 1 {
                return Err(PolicyError(format!(
                    "{field}.approvals: {} is not supported; a guarded change needs one approval (write 1)",
                    rule.approvals
                )));
            }
            if let Some(role) = first_duplicate(&rule.approver_not) {
                return Err(PolicyError(format!(
                    "{field}.approver_not: {:?} is listed twice",
                    role.as_str()
                )));
            }
        }
        Ok(())
    }

    /// Does the policy guard any path (`guarded` or `guarded_paths`)?
    pub fn guards_paths(&self) -> bool {
        self.guarded.is_some() || !self.guarded_paths.is_empty()
    }

    pub fn excerpt_bytes(&self) -> usize {
        self.output.excerpt_bytes.unwrap_or(DEFAULT_EXCERPT_BYTES)
    }

    /// Does `refname` match one of the `protect` patterns (`*` within one path component, a
    /// trailing `/*` or `/**` for everything below)?
    pub fn protects(&self, refname: &str) -> bool {
        self.protect.iter().any(|p| ref_pattern_matches(p, refname))
    }
}

impl CheckDef {
    /// `retries`, `max_flake_rate`, `report` and `baseline` make sense together.
    fn validate_verdicts(&self, name: &str) -> Result<(), PolicyError> {
        if let Some(n) = self.retries.filter(|n| *n > MAX_RETRIES) {
            return Err(PolicyError(format!(
                "checks.{name}.retries: {n} is more than {MAX_RETRIES}; a check that needs more is flaky, set \"max_flake_rate\" instead"
            )));
        }
        if let Some(Rate(r)) = self.max_flake_rate {
            if !(0.0..=1.0).contains(&r) {
                return Err(PolicyError(format!(
                    "checks.{name}.max_flake_rate: {r} is not between 0 and 1; write e.g. 0.2 for 20 %"
                )));
            }
        }
        if let Some(report) = &self.report {
            check_repo_path(&report.path).map_err(|why| {
                PolicyError(format!(
                    "checks.{name}.report.path: {:?} {why}; write a path relative to the worktree such as \"target/junit.xml\"",
                    report.path
                ))
            })?;
        }
        if self.baseline.is_some() && self.report.is_none() {
            return Err(PolicyError(format!(
                "checks.{name}.baseline: needs \"report\" (the failing test ids are compared); add \"report\": {{\"format\": \"junit\", \"path\": \"…\"}}"
            )));
        }
        Ok(())
    }
}

/// The first name listed a second time.
fn first_duplicate<T: Ord>(names: &[T]) -> Option<&T> {
    let mut seen = std::collections::BTreeSet::new();
    names.iter().find(|name| !seen.insert(*name))
}

/// Why `path` is not a plain repository-relative path, if it is not.
fn check_repo_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.starts_with('/') || path.contains('\\') {
        return Err("is not a relative path with '/' separators");
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == ".." || c == ".git")
    {
        return Err("has an empty, '.', '..' or '.git' component");
    }
    Ok(())
}

/// Match a protect pattern: `*` matches any run of characters except `/`, `**` any run at all.
pub fn ref_pattern_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => (0..=n.len()).any(|i| go(&p[2..], &n[i..])),
            Some(b'*') => {
                let mut i = 0;
                loop {
                    if go(&p[1..], &n[i..]) {
                        return true;
                    }
                    if i == n.len() || n[i] == b'/' {
                        return false;
                    }
                    i += 1;
                }
            }
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// A check to run, with its definition (whose digest the evidence carries).
#[derive(Debug, Clone)]
pub struct ResolvedCheck {
    pub name: String,
    pub def: CheckDef,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_policy() {
        let p = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","checks":{"test":{"argv":["cargo","test"],"timeout_s":60}},
               "required":["test"],"protect":["refs/heads/main","refs/heads/release/*"],
               "output":{"excerpt_bytes":4096},"plans":{"require_hygiene":true}}"#,
        )
        .unwrap();
        assert_eq!(p.excerpt_bytes(), 4096);
        assert!(p.protects("refs/heads/main"));
        assert!(p.protects("refs/heads/release/1.0"));
        assert!(!p.protects("refs/heads/release/1.0/x"));
        assert!(!p.protects("refs/heads/mainline"));
        assert!(p.plans.require_hygiene);
    }

    #[test]
    fn excerpt_bytes_are_capped_at_one_mib() {
        let with = |n: usize| {
            Policy::parse(&format!(
                r#"{{"schema":"tabellio.policy/v1","output":{{"excerpt_bytes":{n}}}}}"#
            ))
        };
        assert_eq!(with(MAX_EXCERPT_BYTES).unwrap().excerpt_bytes(), 1 << 20);
        let err = with(MAX_EXCERPT_BYTES + 1).unwrap_err().to_string();
        assert!(
            err.contains("output.excerpt_bytes") && err.contains("1 MiB"),
            "{err}"
        );
        assert!(with(usize::MAX).is_err());
    }

    #[test]
    fn strict_errors_name_the_field() {
        let cases = [
            (r#"{"schema":"tabellio.policy/v2"}"#, "tabellio.policy/v2"),
            (r#"{"schema":"tabellio.policy/v1","extra":1}"#, "extra"),
            (
                r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":[]}}}"#,
                "checks.t.argv",
            ),
            (
                r#"{"schema":"tabellio.policy/v1","required":["nope"]}"#,
                "nope",
            ),
            (
                r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"],"shell":true}}}"#,
                "shell",
            ),
        ];
        for (text, needle) in cases {
            let err = Policy::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(PATH), "{text}: {err}");
        }
    }

    #[test]
    fn trust_guarded_and_approval() {
        let p = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","checks":{"test":{"argv":["t"]},"lint":{"argv":["l"]}},
               "required":["test","lint"],
               "trust":{"allowed_signers":".tabellio/allowed_signers","require_signed":["test"]},
               "guarded":[".tabellio/**","tests/**","!tests/free/**"],
               "approval":{"distinct_from_actor":true}}"#,
        )
        .unwrap();
        let trust = p.trust.as_ref().unwrap();
        assert_eq!(trust.allowed_signers, ".tabellio/allowed_signers");
        assert!(trust.require_signed.covers("test"));
        assert!(!trust.require_signed.covers("lint"));
        assert_eq!(p.guarded.as_ref().map(Vec::len), Some(3));
        assert!(p.approval.as_ref().unwrap().distinct_from_actor);

        let star = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","trust":{"allowed_signers":"signers","require_signed":"*"}}"#,
        )
        .unwrap();
        assert_eq!(
            star.trust.as_ref().unwrap().require_signed,
            RequireSigned::All
        );
        let default = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","trust":{"allowed_signers":"signers"}}"#,
        )
        .unwrap();
        assert!(default.trust.unwrap().require_signed.covers("anything"));
        assert_eq!(
            serde_json::to_value(&star.trust).unwrap(),
            serde_json::json!({"allowed_signers":"signers","require_signed":"*"})
        );
    }

    #[test]
    fn a_policy_without_trust_is_unchanged() {
        let text =
            r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"]}},"required":["t"]}"#;
        let p = Policy::parse(text).unwrap();
        assert_eq!((&p.trust, &p.guarded, &p.approval), (&None, &None, &None));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"],"timeout_s":600}},
                "required":["t"],"protect":[],"output":{"excerpt_bytes":null},"plans":{"require_hygiene":false}})
        );
    }

    #[test]
    fn trust_errors_name_the_field_and_say_what_to_write() {
        let cases = [
            (
                r#""trust":{"allowed_signers":"/etc/signers"}"#,
                "trust.allowed_signers",
            ),
            (r#""trust":{"allowed_signers":"../signers"}"#, "'..'"),
            (
                r#""trust":{"allowed_signers":"s","require_signed":"test"}"#,
                "[\"test\"]",
            ),
            (
                r#""trust":{"allowed_signers":"s","require_signed":["nope"]}"#,
                "\"nope\" is not defined",
            ),
            (
                r#""trust":{"allowed_signers":"s","require_signed":["t","t"]}"#,
                "listed twice",
            ),
            (r#""trust":{"allowed_signers":"s","extra":1}"#, "extra"),
            (r#""trust":{"require_signed":"*"}"#, "allowed_signers"),
            (r#""guarded":["tests/**",""]"#, "guarded[1]"),
            (r#""guarded":["!"]"#, "guarded[0]"),
            (r#""guarded":[" tests/**"]"#, "surrounding spaces"),
            (r#""guarded":"tests/**""#, "guarded"),
            (
                r#""approval":{"distinct_from_actor":"yes"}"#,
                "approval.distinct_from_actor",
            ),
            (r#""approval":{"two_people":true}"#, "two_people"),
        ];
        for (field, needle) in cases {
            let text = format!(
                r#"{{"schema":"tabellio.policy/v1","checks":{{"t":{{"argv":["x"]}}}},{field}}}"#
            );
            let err = Policy::parse(&text).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(PATH), "{field}: {err}");
        }
    }

    #[test]
    fn a_required_check_may_carry_when_which_its_digest_ignores() {
        let text = |required: &str| {
            format!(
                r#"{{"schema":"tabellio.policy/v1","checks":{{"t":{{"argv":["x"]}},
                   "scan":{{"argv":["x"],"when":{{"actor.kind":"agent"}}}}}},"required":{required}}}"#
            )
        };
        let p = Policy::parse(&text(r#"["t","scan"]"#)).unwrap();
        let scan = &p.checks["scan"];
        assert_eq!(
            scan.when.as_ref().map(|w| w.actor_kind),
            Some(ActorKind::Agent)
        );
        assert_eq!(scan.digest(), p.checks["t"].digest());
        assert!(scan.when.as_ref().unwrap().holds(None));
        assert!(scan.when.as_ref().unwrap().holds(Some("agent")));
        assert!(!scan.when.as_ref().unwrap().holds(Some("human")));
        let err = Policy::parse(&text(r#"["scan"]"#)).unwrap_err().to_string();
        assert!(
            err.contains("required:") && err.contains("\"when\""),
            "{err}"
        );
        let bad = text(r#"["t"]"#).replace("agent", "robot");
        let err = Policy::parse(&bad).unwrap_err().to_string();
        assert!(err.contains("checks.scan.when"), "{err}");
    }

    #[test]
    fn verdict_settings_parse_and_are_checked() {
        let p = Policy::parse(
            r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"],"flaky":"accept",
               "flaky_prone":true,"max_flake_rate":0.2,
               "report":{"format":"junit","path":"target/junit.xml"},"baseline":"allow"},
               "u":{"argv":["y"],"retries":2}}}"#,
        )
        .unwrap();
        let t = &p.checks["t"];
        assert!(t.accepts_flaky());
        assert_eq!(t.retries(), 1);
        assert_eq!(t.max_flake_rate, Some(Rate(0.2)));
        assert_eq!(t.report.as_ref().unwrap().format, ReportFormat::Junit);
        assert_eq!(t.baseline, Some(BaselinePolicy::Allow));
        let u = &p.checks["u"];
        assert!(!u.accepts_flaky());
        assert_eq!(u.retries(), 2);
        // Unset, nothing is written back: older policies serialize as they did.
        assert_eq!(
            serde_json::to_value(u).unwrap(),
            serde_json::json!({"argv":["y"],"timeout_s":600,"retries":2})
        );
        let cases = [
            (r#""retries":9"#, "checks.t.retries"),
            (r#""max_flake_rate":1.5"#, "checks.t.max_flake_rate"),
            (r#""flaky":"sometimes""#, "checks.t.flaky"),
            (r#""baseline":"allow""#, "needs \"report\""),
            (
                r#""report":{"format":"junit","path":"/abs.xml"}"#,
                "checks.t.report.path",
            ),
            (
                r#""report":{"format":"xunit","path":"r.xml"}"#,
                "checks.t.report.format",
            ),
        ];
        for (field, needle) in cases {
            let text = format!(
                r#"{{"schema":"tabellio.policy/v1","checks":{{"t":{{"argv":["x"],{field}}}}}}}"#
            );
            let err = Policy::parse(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{field}: {err}");
        }
    }

    #[test]
    fn check_digest_changes_with_definition() {
        let a = CheckDef {
            timeout_s: 60,
            ..CheckDef::of_argv(vec!["make".into()])
        };
        let b = CheckDef {
            timeout_s: 61,
            ..CheckDef::of_argv(vec!["make".into()])
        };
        // The verdict settings are not part of what the check runs: the digest stays.
        let c = CheckDef {
            flaky: Some(FlakyPolicy::Accept),
            flaky_prone: true,
            retries: Some(2),
            ..a.clone()
        };
        assert_eq!(a.digest(), c.digest());
        assert_ne!(a.digest(), b.digest());
        // Declared inputs are part of the definition; without them the digest is as before.
        let scoped = CheckDef {
            inputs: Some(vec!["a/**".into()]),
            ..a.clone()
        };
        assert_ne!(scoped.digest(), a.digest());
        assert_eq!(
            scoped.digest(),
            canonical::sha256_hex(br#"{"argv":["make"],"inputs":["a/**"],"timeout_s":60}"#)
        );
        let bad =
            r#"{"schema":"tabellio.policy/v1","checks":{"t":{"argv":["x"],"inputs":["/etc/**"]}}}"#;
        let err = Policy::parse(bad).unwrap_err().to_string();
        assert!(err.contains("checks.t.inputs[0]"), "{err}");
        assert_eq!(
            a.digest(),
            canonical::sha256_hex(br#"{"argv":["make"],"timeout_s":60}"#)
        );
    }
}
