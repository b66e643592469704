//! `validate`, `verify`, `hooks install` and `hook <name>`: the commands CI and protected
//! branches rely on.

use super::render::short;
use std::io::Read;
use std::path::Path;

use serde_json::json;

use tabellio::hooks::{self, install::InstallOptions, HookName};
use tabellio::lifecycle::finish::CheckSelection;
use tabellio::store::Store;
use tabellio::validate::Stream;
use tabellio::verify::{self, interrupt, validate::ValidateOptions, VerifyOptions};
use tabellio::{Error, Result};

use super::render::Output;

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The commit to validate (default: HEAD).
    pub rev: Option<String>,
    /// A policy check to run (repeatable), or the name of the ad-hoc check after `--`.
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Timeout in seconds of the ad-hoc check.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Take the check definitions from the policy at this revision (default: the commit's own).
    #[arg(long, value_name = "REV")]
    pub policy_from: Option<String>,
    /// Run every check, even where the commit's tree already has passing evidence for it.
    #[arg(long)]
    pub no_reuse: bool,
    /// An ad-hoc check command, run directly (never through a shell).
    #[arg(last = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Commits and ranges `a..b` to verify (default: HEAD).
    #[arg(value_name = "REV|A..B")]
    pub revs: Vec<String>,
    /// Also require evidence for this check (repeatable).
    #[arg(long = "check", value_name = "NAME")]
    pub checks: Vec<String>,
    /// Apply the policy at this revision to every commit (default: each commit's own).
    #[arg(long, value_name = "REV")]
    pub policy_from: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub action: HooksAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum HooksAction {
    /// Write the hook shims into the hooks directory (honours core.hooksPath).
    Install(HooksInstallArgs),
}

#[derive(Debug, clap::Args)]
pub struct HooksInstallArgs {
    /// Install the server hook (pre-receive) instead of the client hooks.
    #[arg(long)]
    pub server: bool,
    /// Replace hooks git-tabellio did not install, moving each aside to NAME.pre-tabellio.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The hook git is running.
    #[arg(value_parser = ["reference-transaction", "pre-push", "pre-receive"])]
    pub name: String,
    /// The hook's arguments, as git passes them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

pub fn validate(a: &ValidateArgs, cwd: &Path, stream: Stream) -> Result<Output> {
    let store = Store::discover(cwd)?;
    let opts = ValidateOptions {
        rev: a.rev.clone(),
        selection: CheckSelection {
            names: a.checks.clone(),
            argv: a.argv.clone(),
            timeout_s: a.timeout,
            reuse: tabellio::lifecycle::reuse::Reuse::from_flag(a.no_reuse),
        },
        policy_from: a.policy_from.clone(),
        stream,
    };
    let o = match verify::validate::validate(&store, &opts) {
        Ok(o) => o,
        Err(e) => {
            if let Some(sig) = interrupt::received() {
                // Cleaned up and wrote nothing; end the way an interrupted program ends.
                eprintln!("error: {}", e.message);
                interrupt::reraise(sig);
            }
            return Err(e);
        }
    };
    let mut human = super::render::evidence_lines(&o.evidence);
    human.push_str(&format!(
        "{} {}: evidence noted on the commit and its tree in refs/notes/tabellio/evidence",
        if o.passed { "validated" } else { "FAILED" },
        short(&o.commit)
    ));
    let json = json!({
        "commit": o.commit, "tree": o.tree,
        "verdict": if o.passed { "passed" } else { "failed" },
        "evidence": to_json(&o.evidence),
    });
    Ok(Output::new(json, human).exit(if o.passed { 0 } else { 1 }))
}

pub fn verify(a: &VerifyArgs, cwd: &Path) -> Result<Output> {
    let store = Store::discover(cwd)?;
    let o = verify::verify(
        &store,
        &VerifyOptions {
            revs: a.revs.clone(),
            checks: a.checks.clone(),
            policy_from: a.policy_from.clone(),
        },
    )?;
    let mut human = String::new();
    for c in &o.commits {
        let checks: Vec<String> = c
            .checks
            .iter()
            .map(|v| format!("{}: {}", v.name, v.verdict.as_str()))
            .collect();
        human.push_str(&format!(
            "{:<12} {} ({})\n",
            if c.verified {
                "verified"
            } else {
                "NOT VERIFIED"
            },
            short(&c.commit),
            checks.join(", ")
        ));
    }
    if o.commits.is_empty() {
        human.push_str("no commits to verify\n");
    } else if !o.verified {
        let bad = o.commits.iter().filter(|c| !c.verified).count();
        human.push_str(&format!(
            "{bad} of {} commit(s) not verified; make evidence with `git tabellio validate <commit>`",
            o.commits.len()
        ));
    }
    Ok(Output::new(to_json(&o), human).exit(if o.verified { 0 } else { 1 }))
}

pub fn hooks_install(a: &HooksArgs, cwd: &Path) -> Result<Output> {
    let HooksAction::Install(args) = &a.action;
    let store = Store::discover(cwd)?;
    let o = hooks::install::install(
        &store,
        &InstallOptions {
            server: args.server,
            force: args.force,
        },
    )?;
    let mut human = String::new();
    for h in &o.hooks {
        human.push_str(&format!(
            "{:<9} {}{}\n",
            to_json(&h.action).as_str().unwrap_or("?"),
            h.path.display(),
            h.backup.as_ref().map_or(String::new(), |b| format!(
                " (previous hook moved to {})",
                b.display()
            ))
        ));
    }
    Ok(Output::new(to_json(&o), human.trim_end().to_string()))
}

/// Run a hook. Its report goes to stderr (git shows it; a server relays it to the pusher); the
/// exit code refuses or allows.
pub fn hook(a: &HookArgs, cwd: &Path) -> Result<Output> {
    let name = HookName::parse(&a.name)
        .ok_or_else(|| Error::usage(format!("unknown hook {:?}", a.name)))?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| Error::usage(format!("could not read the hook's standard input: {e}")))?;
    let outcome = match name {
        HookName::ReferenceTransaction => {
            let phase = a.args.first().map(String::as_str).unwrap_or_default();
            hooks::reference_transaction(phase, &input, || Store::discover(cwd))?
        }
        HookName::PrePush => {
            let mut remote = a.args.first().cloned();
            if input.trim().is_empty() {
                // The pre-commit framework reads the push lines itself and hands over the
                // first pushed ref in PRE_COMMIT_* variables instead.
                if let Some((line, name)) = pre_commit_push_line() {
                    input = line;
                    remote = remote.or(name);
                }
            }
            let store = Store::discover(cwd)?;
            hooks::pre_push(&store, remote.as_deref().unwrap_or("the remote"), &input)?
        }
        HookName::PreReceive => hooks::pre_receive(&input, || hooks::quarantine::open(cwd))?,
    };
    let report = outcome.report(name);
    if !report.is_empty() {
        eprint!("{report}");
    }
    Ok(Output::new(to_json(&outcome), String::new()).exit(outcome.exit_code()))
}

/// The push line the pre-commit framework describes in its environment (it consumes the real
/// standard input and passes on only the first pushed ref), with the remote's name.
fn pre_commit_push_line() -> Option<(String, Option<String>)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let to = var("PRE_COMMIT_TO_REF")?;
    let remote_branch = var("PRE_COMMIT_REMOTE_BRANCH")?;
    let local = var("PRE_COMMIT_LOCAL_BRANCH").unwrap_or_else(|| to.clone());
    let from = var("PRE_COMMIT_FROM_REF").unwrap_or_else(|| "0".repeat(to.len()));
    Some((
        format!("{local} {to} {remote_branch} {from}\n"),
        var("PRE_COMMIT_REMOTE_NAME"),
    ))
}
