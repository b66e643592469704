//! Distributed landing in refs: candidate stacks and the claims of the workers validating them.
//!
//! - `refs/tabellio/candidates/<target>/<id>`: a commit whose tree is exactly the stacked tree
//!   and whose parent is the stack's top commit (so the stack stays reachable and a worker
//!   validates exactly the tree that lands); its message carries the
//!   [`CandidateRecord`](crate::model::candidate::CandidateRecord) as JSON after a subject line.
//!   `<id>` is derived from the tip and the runs, so two landers planning the same stack name
//!   it alike and the second finds the first's (created only, `MustNotExist`).
//! - `refs/tabellio/claims/<id>`: a root commit whose tree holds `claim.json`. Created only;
//!   taken over by compare-and-swap on the expired claim; deleted by compare-and-swap on the
//!   claim read.
//!
//! Nothing here moves a ref by itself except through the [`Cas`] edits it hands out.

use gix::objs::tree::{Entry as TreeEntry, EntryKind};

use crate::error::{Context, Error, Result};
use crate::model::candidate::{
    CandidateRecord, ClaimRecord, CANDIDATE_SCHEMA, CLAIM_FILE, CLAIM_SCHEMA,
};
use crate::model::canonical::sha256_hex;
use crate::model::{self, time};
use crate::store::queue::target_short;
use crate::store::Store;

pub const CANDIDATES: &str = "refs/tabellio/candidates/";
pub const CLAIMS: &str = "refs/tabellio/claims/";

/// The subject line of every candidate commit; the record follows after a blank line.
const SUBJECT: &str = "tabellio: candidate";

/// `refs/tabellio/candidates/<target>/`
pub fn target_prefix(target: &str) -> String {
    format!("{CANDIDATES}{}/", target_short(target))
}

pub fn candidate_ref(target: &str, id: &str) -> String {
    format!("{}{id}", target_prefix(target))
}

pub fn claim_ref(id: &str) -> String {
    format!("{CLAIMS}{id}")
}

/// The id of the stack of `record.runs` on `record.tip`: 24 hex digits of a SHA-256 over the
/// target, the tip and each run with its head, in order.
pub fn candidate_id(record: &CandidateRecord) -> String {
    let mut text = format!("{}\n{}\n", record.target, record.tip);
    for r in &record.runs {
        text.push_str(&format!("{} {}\n", r.run, r.head));
    }
    sha256_hex(text.as_bytes())[..24].to_string()
}

/// One candidate as read.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: String,
    pub name: String,
    pub commit: gix::ObjectId,
    pub record: CandidateRecord,
}

/// The candidates read, and the refs among them that are not candidates (name, why).
pub type Candidates = (Vec<Candidate>, Vec<(String, String)>);

/// One claim as read.
#[derive(Debug, Clone)]
pub struct Claim {
    pub name: String,
    pub commit: gix::ObjectId,
    pub record: ClaimRecord,
}

impl Claim {
    /// Whether its lease ran out at `now` (RFC 3339, seconds, as [`time::now`] gives).
    pub fn expired_at(&self, now: &str) -> bool {
        self.record.lease_expires_at.as_str() <= now
    }
}

impl Store {
    /// Write a candidate commit (objects only): `tree` with `top` as its parent, the record in
    /// its message.
    pub fn write_candidate(
        &self,
        record: &CandidateRecord,
        top: gix::ObjectId,
    ) -> Result<gix::ObjectId> {
        let json = serde_json::to_string_pretty(&model::to_value(record))
            .context(|| "could not serialize the candidate".into())?;
        let tree = self.tree_of(top)?;
        let message = format!("{SUBJECT}\n\n{json}\n");
        self.write_commit(&message, tree, [top])
    }

    /// The candidate `name` points at (`commit`); refused (exit 3) when it is not one.
    pub fn read_candidate(&self, name: &str, commit: gix::ObjectId) -> Result<Candidate> {
        let not_one = |why: String| {
            Error::refused(format!("the candidate ref {name} ({commit}) {why}"))
                .hint(format!("delete it: `git update-ref -d {name}`"))
        };
        let message = self
            .commit(commit)
            .map_err(|_| not_one("is not a commit".into()))?
            .message_raw_sloppy()
            .to_string();
        let Some(json) = message
            .strip_prefix(SUBJECT)
            .map(|rest| rest.trim_start_matches('\n'))
        else {
            return Err(not_one("is not a candidate commit".into()));
        };
        let record: CandidateRecord = model::parse_record(json, CANDIDATE_SCHEMA, name)?;
        let id = candidate_id(&record);
        // Read under our own namespace or a remote's tracking copy of it.
        let tail = format!("/{}/{id}", target_short(&record.target));
        if !name.ends_with(&tail) {
            return Err(not_one(
                "names other runs or another tip than its id".into(),
            ));
        }
        Ok(Candidate {
            id,
            name: name.to_string(),
            commit,
            record,
        })
    }

    /// The candidates of `target` (`None`: of every target), and the refs there that are not
    /// candidates (name, why).
    pub fn read_candidates(&self, target: Option<&str>) -> Result<Candidates> {
        let prefix = target.map_or_else(|| CANDIDATES.to_string(), target_prefix);
        self.read_candidates_under(&prefix, target)
    }

    /// The candidates under `prefix` (ours, or a remote's tracking copy), of `target` if given.
    pub fn read_candidates_under(&self, prefix: &str, target: Option<&str>) -> Result<Candidates> {
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        for (name, commit) in self.refs_under(prefix)? {
            match self.read_candidate(&name, commit) {
                Ok(c) if target.is_none_or(|t| c.record.target == t) => ok.push(c),
                Ok(_) => {}
                Err(e) => bad.push((name, e.message.clone())),
            }
        }
        Ok((ok, bad))
    }

    /// Write a claim commit (objects only); a takeover has the expired claim as its parent, so
    /// the claim ref only moves forward (a remote takes it as a fast-forward).
    pub fn write_claim(
        &self,
        record: &ClaimRecord,
        expired: Option<gix::ObjectId>,
    ) -> Result<gix::ObjectId> {
        let mut json = serde_json::to_string_pretty(&model::to_value(record))
            .context(|| "could not serialize the claim".into())?;
        json.push('\n');
        let blob = self.write_blob(json.as_bytes())?;
        let tree = self.write_object(&gix::objs::Tree {
            entries: vec![TreeEntry {
                mode: EntryKind::Blob.into(),
                filename: CLAIM_FILE.into(),
                oid: blob,
            }],
        })?;
        let message = format!(
            "tabellio: claim {} by {}\n",
            record.candidate, record.worker
        );
        self.write_commit(&message, tree, expired)
    }

    /// The claim on candidate `id`, if any (`under`: the claims namespace, ours or a remote's
    /// tracking copy).
    pub fn try_find_claim(&self, under: &str, id: &str) -> Result<Option<Claim>> {
        let name = format!("{under}{id}");
        let Some(commit) = self.ref_target_now(&name)? else {
            return Ok(None);
        };
        let bytes = self.read_file_at(commit, CLAIM_FILE)?.ok_or_else(|| {
            Error::refused(format!("the claim {name} ({commit}) holds no {CLAIM_FILE}"))
                .hint(format!("delete it: `git update-ref -d {name}`"))
        })?;
        let record: ClaimRecord =
            model::parse_record(&String::from_utf8_lossy(&bytes), CLAIM_SCHEMA, &name)?;
        Ok(Some(Claim {
            name: claim_ref(id),
            commit,
            record,
        }))
    }
}

/// A new claim record on `candidate` by `worker`, leased for `lease_s` seconds from now.
pub fn new_claim(candidate: &Candidate, worker: &str, lease_s: u64) -> ClaimRecord {
    let now = std::time::SystemTime::now();
    ClaimRecord {
        schema: CLAIM_SCHEMA.into(),
        candidate: candidate.id.clone(),
        commit: candidate.commit.to_string(),
        worker: worker.to_string(),
        claimed_at: time::rfc3339(now),
        lease_expires_at: time::rfc3339(now + std::time::Duration::from_secs(lease_s)),
    }
}
