//! `hook <name> [args…]`: run a hook (called by the installed shims). Its report goes to
//! stderr (git shows it; a server relays it to the pusher); the exit code refuses or allows.

use std::io::Read;

use tabellio::hooks::{self, HookName};
use tabellio::{Error, Result};

use crate::cli::format::to_json;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The hook git is running.
    pub name: HookArg,
    /// The hook's arguments, as git passes them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The hooks `hook` runs, as git names them.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HookArg {
    ReferenceTransaction,
    PrePush,
    PreReceive,
}

impl From<HookArg> for HookName {
    fn from(h: HookArg) -> HookName {
        match h {
            HookArg::ReferenceTransaction => HookName::ReferenceTransaction,
            HookArg::PrePush => HookName::PrePush,
            HookArg::PreReceive => HookName::PreReceive,
        }
    }
}

/// The arguments of the installed `reference-transaction` shim's call, exactly
/// `hook reference-transaction <phase>` (`args` after the program name), read without clap: git
/// starts it on every ref update that could be gated, and defining the command line costs more
/// than the rest of parsing it. Anything else (another hook, a flag, another count) is `None` and
/// goes through clap as before.
pub fn shim_call(mut args: impl Iterator<Item = String>) -> Option<HookArgs> {
    let (Some(hook), Some(name), Some(phase), None) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        return None;
    };
    (hook == "hook" && name == "reference-transaction" && !phase.starts_with('-')).then(|| {
        HookArgs {
            name: HookArg::ReferenceTransaction,
            args: vec![phase],
        }
    })
}

pub fn cmd_hook(ctx: &Ctx, args: &HookArgs) -> Result<Output> {
    let name = HookName::from(args.name);
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| Error::usage(format!("could not read the hook's standard input: {e}")))?;
    let outcome = match name {
        HookName::ReferenceTransaction => {
            let phase = args.args.first().map(String::as_str).unwrap_or_default();
            // `git merge` and `git pull` say who they are here; they move the files first.
            let action = std::env::var("GIT_REFLOG_ACTION").ok();
            hooks::reference_transaction(phase, &input, action.as_deref(), || ctx.store())?
        }
        HookName::PrePush => {
            let mut remote = args.args.first().cloned();
            if input.trim().is_empty() {
                // The pre-commit framework reads the push lines itself and hands over the
                // first pushed ref in PRE_COMMIT_* variables instead.
                if let Some((line, name)) = pre_commit_push_line() {
                    input = line;
                    remote = remote.or(name);
                }
            }
            let remote = remote.as_deref().unwrap_or("the remote");
            hooks::pre_push(ctx.store()?, remote, &input)?
        }
        HookName::PreReceive => hooks::pre_receive(&input, || hooks::quarantine::open(&ctx.cwd))?,
    };
    let report = outcome.report(name);
    if !report.is_empty() {
        eprint!("{report}");
    }
    let allowed = outcome.refused.is_empty();
    Ok(Output::new(to_json(&outcome), String::new()).verdict(allowed))
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

#[cfg(test)]
mod tests {
    use super::{shim_call, HookArg};

    fn call(args: &[&str]) -> Option<(String, Vec<String>)> {
        shim_call(args.iter().map(|a| a.to_string())).map(|h| {
            assert!(matches!(h.name, HookArg::ReferenceTransaction));
            ("reference-transaction".to_string(), h.args)
        })
    }

    /// Only the shim's exact call skips clap; every other command line is clap's.
    #[test]
    fn only_the_shims_exact_call_skips_clap() {
        assert_eq!(
            call(&["hook", "reference-transaction", "prepared"]),
            Some(("reference-transaction".into(), vec!["prepared".into()]))
        );
        for other in [
            &["hook", "reference-transaction"][..],
            &["hook", "reference-transaction", "prepared", "x"],
            &["hook", "reference-transaction", "--json"],
            &["hook", "pre-push", "origin"],
            &["--json", "hook", "reference-transaction"],
            &["status", "reference-transaction", "prepared"],
        ] {
            assert_eq!(call(other), None, "{other:?}");
        }
    }
}
