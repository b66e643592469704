//! `git tabellio worker [--remote <name>] [--lanes N] [--once] [--lease <seconds>] [--id <name>]`.

use std::time::Duration;

use tabellio::lifecycle::worker::{self, WorkerOptions, DEFAULT_LEASE_S};
use tabellio::{Error, Result};

use crate::cli::format::short;
use crate::cli::{Ctx, Output};

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Validate the candidates of this remote (fetch, claim and push there).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Validate this many candidates at once (one worker process each).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub lanes: usize,
    /// One pass over the candidates there are now, then stop.
    #[arg(long)]
    pub once: bool,
    /// Seconds a claim holds before another worker may take it over.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_LEASE_S)]
    pub lease: u64,
    /// This worker's name in its claims (default: host name and process id).
    #[arg(long, value_name = "NAME")]
    pub id: Option<String>,
    /// Seconds between looks for new candidates when there is nothing to do.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub poll: f64,
    #[command(flatten)]
    pub records: super::finish::RecordArgs,
}

pub fn cmd_worker(ctx: &Ctx, a: &WorkerArgs) -> Result<Output> {
    if a.lanes == 0 {
        return Err(Error::usage("--lanes must be at least 1"));
    }
    if !(a.poll.is_finite() && a.poll > 0.0) {
        return Err(Error::usage("--poll must be a positive number of seconds"));
    }
    let id = a.id.clone().unwrap_or_else(default_id);
    // Each lane past the first is a worker process of its own, with the same arguments.
    let mut lanes = Vec::new();
    for lane in 1..a.lanes {
        let mut child = std::process::Command::new(
            std::env::current_exe()
                .map_err(|e| Error::internal(format!("cannot find this program: {e}")))?,
        );
        child.arg("worker").arg("--lanes").arg("1");
        child.arg("--id").arg(format!("{id}-{lane}"));
        child.arg("--lease").arg(a.lease.to_string());
        child.arg("--poll").arg(a.poll.to_string());
        if let Some(r) = &a.remote {
            child.arg("--remote").arg(r);
        }
        if a.once {
            child.arg("--once");
        }
        if let Some(k) = &a.records.sign_key {
            child.arg("--sign-key").arg(k);
        }
        if a.records.no_sign {
            child.arg("--no-sign");
        }
        child.arg("-q").current_dir(&ctx.cwd);
        lanes.push(
            child
                .spawn()
                .map_err(|e| Error::internal(format!("could not start a worker lane: {e}")))?,
        );
    }
    let o = worker::worker(
        ctx.env()?,
        &WorkerOptions {
            remote: a.remote.clone(),
            once: a.once,
            lease_s: a.lease,
            id,
            sign_key: a.records.sign_key.clone(),
            no_sign: a.records.no_sign,
            stream: ctx.stream,
            poll: Duration::from_secs_f64(a.poll),
        },
    );
    // A stop (SIGTERM, SIGINT) reached this process only when it was sent to it by pid: pass
    // it on, so each lane releases its claim too; a failure stops the lanes outright.
    let stop = match &o {
        Ok(done) => done.interrupted,
        Err(_) => Some(libc::SIGKILL),
    };
    for mut lane in lanes {
        if let Some(sig) = stop {
            tabellio::sys::process::kill(lane.id() as i32, sig);
        }
        let _ = lane.wait();
    }
    let o = o?;
    if let Some(sig) = o.interrupted {
        tabellio::evidence::interrupt::reraise(sig);
    }
    let json = serde_json::to_value(&o)
        .map_err(|e| Error::internal(format!("could not serialize the outcome: {e}")))?;
    let mut human = String::new();
    for v in &o.validated {
        human.push_str(&format!(
            "{} candidate {} ({}) at {}: {}\n",
            if v.passed { "passed" } else { "failed" },
            v.candidate,
            v.runs.join(" "),
            short(&v.commit),
            if v.took_over {
                "claim taken over"
            } else {
                "claimed"
            }
        ));
    }
    for id in &o.lost {
        human.push_str(&format!(
            "lost candidate {id}: another worker took its claim over after this one stalled past its lease; the result was not noted\n"
        ));
    }
    if o.validated.is_empty() && o.lost.is_empty() {
        human.push_str("no candidate to validate");
    }
    Ok(Output::new(json, human.trim_end().to_string()))
}

/// `<host>/<pid>`: unique among the workers of one machine, and says where a claim came from.
fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    format!("{host}/{}", std::process::id())
}
