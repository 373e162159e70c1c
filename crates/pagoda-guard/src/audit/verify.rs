//! Checking a log: every line parses, hashes to its `hash`, and links to the line before.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::audit::canonical;
use crate::audit::key::AuditKey;
use crate::audit::record::GENESIS;
use crate::error::GuardError;

/// An intact log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
}

/// A sequence number and hash kept outside the log (in the metering store) at some point:
/// a log that no longer reaches it, or differs there, was truncated or rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: u64,
    pub hash: String,
}

/// `Ok` with the record count, or `GuardError::AuditTampered` naming the first bad line
/// (1-based). Truncating records off the end cannot be seen from the file alone.
pub fn verify(path: &Path) -> Result<Verified, GuardError> {
    verify_with(path, None, &[])
}

/// `verify` of a keyed chain (`key`), checked against `anchors` as well: a truncated log is
/// caught at the last anchor it no longer reaches.
pub fn verify_with(
    path: &Path,
    key: Option<&AuditKey>,
    anchors: &[Anchor],
) -> Result<Verified, GuardError> {
    let file = std::fs::File::open(path).map_err(|e| GuardError::Audit {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let bad = |line: usize, reason: &str| GuardError::AuditTampered {
        line,
        reason: reason.to_string(),
    };
    let mut prev = GENESIS.to_string();
    let mut seq = 0u64;
    let mut keyed = false;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| bad(n, &e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(|_| bad(n, "not a JSON record"))?;
        let hash = value["hash"].as_str().ok_or_else(|| bad(n, "no hash"))?;
        if value["prev_hash"].as_str() != Some(prev.as_str()) {
            return Err(bad(n, "prev_hash does not match the previous record"));
        }
        // A log may begin unkeyed and go on keyed, never back: unkeyed records after a keyed
        // one are what a forger without the key would have to write.
        let this_keyed = value.get("chain").is_some();
        if keyed && !this_keyed {
            return Err(bad(n, "an unkeyed record after keyed ones"));
        }
        keyed = this_keyed;
        let expected = match (this_keyed, key) {
            (false, _) => canonical::record_hash(&value),
            _ => canonical::expected_hash(&value, key).map_err(|r| bad(n, r))?,
        };
        if expected != hash {
            return Err(bad(n, "the record does not match its hash"));
        }
        if value["seq"].as_u64() != Some(seq + 1) {
            return Err(bad(n, "sequence number out of order"));
        }
        seq += 1;
        if let Some(a) = anchors.iter().find(|a| a.seq == seq) {
            if a.hash != hash {
                return Err(bad(
                    n,
                    "the record differs from the one anchored at this number",
                ));
            }
        }
        prev = hash.to_string();
    }
    if key.is_some() && seq > 0 && !keyed {
        return Err(GuardError::AuditTampered {
            line: seq as usize,
            reason: "the log does not end with keyed records: it was not written with this key"
                .into(),
        });
    }
    if let Some(last) = anchors.iter().map(|a| a.seq).max().filter(|&s| s > seq) {
        return Err(GuardError::AuditTampered {
            line: seq as usize + 1,
            reason: format!(
                "the log ends at record {seq}, but record {last} was anchored: it was truncated"
            ),
        });
    }
    Ok(Verified { records: seq })
}
