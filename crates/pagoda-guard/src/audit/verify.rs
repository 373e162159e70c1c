//! Checking a log: every line parses, hashes to its `hash`, and links to the line before.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::audit::canonical::record_hash;
use crate::audit::record::GENESIS;
use crate::error::GuardError;

/// An intact log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
}

/// `Ok` with the record count, or `GuardError::AuditTampered` naming the first bad line
/// (1-based). Truncating records off the end cannot be seen from the file alone.
pub fn verify(path: &Path) -> Result<Verified, GuardError> {
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
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| bad(n, &e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(|_| bad(n, "not a JSON record"))?;
        let hash = value["hash"].as_str().ok_or_else(|| bad(n, "no hash"))?;
        if value["prev_hash"].as_str() != Some(prev.as_str()) {
            return Err(bad(n, "prev_hash does not match the previous record"));
        }
        if record_hash(&value) != hash {
            return Err(bad(n, "the record does not match its hash"));
        }
        if value["seq"].as_u64() != Some(seq + 1) {
            return Err(bad(n, "sequence number out of order"));
        }
        seq += 1;
        prev = hash.to_string();
    }
    Ok(Verified { records: seq })
}
