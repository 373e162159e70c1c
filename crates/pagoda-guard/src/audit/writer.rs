//! Appending to the log from many requests at once: one mutex around the file and the chain
//! head, each record written whole and flushed before the lock is released.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::audit::canonical::{record_hash, record_mac};
use crate::audit::key::{AuditKey, KEYED};
use crate::audit::record::{AuditEvent, AuditRecord, GENESIS};
use crate::error::GuardError;

struct Head {
    file: File,
    seq: u64,
    hash: String,
}

pub struct AuditLog {
    path: PathBuf,
    head: Mutex<Head>,
    key: Option<AuditKey>,
}

impl AuditLog {
    /// Opens (or creates) the log and continues the chain from its last record.
    pub fn open(path: &Path) -> Result<AuditLog, GuardError> {
        AuditLog::open_with(path, None)
    }

    /// `open`, keyed: every record's hash is an HMAC with `key` (a log begun unkeyed goes on
    /// keyed from here; `verify_with` then needs the key).
    pub fn open_with(path: &Path, key: Option<AuditKey>) -> Result<AuditLog, GuardError> {
        let err = |reason: String| GuardError::Audit {
            path: path.to_path_buf(),
            reason,
        };
        let (seq, hash) = match File::open(path) {
            Ok(f) => last_link(BufReader::new(f), key.as_ref()).map_err(err)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, GENESIS.to_string()),
            Err(e) => return Err(err(e.to_string())),
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| err(e.to_string()))?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            head: Mutex::new(Head { file, seq, hash }),
            key,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last record's sequence number and hash (0 and the genesis hash when empty): what
    /// an anchor keeps.
    pub fn head(&self) -> (u64, String) {
        let head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        (head.seq, head.hash.clone())
    }

    /// Writes one record; returns it as written.
    pub fn append(&self, event: AuditEvent) -> Result<AuditRecord, GuardError> {
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        let mut record = AuditRecord {
            seq: head.seq + 1,
            ts_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            event,
            prev_hash: head.hash.clone(),
            chain: self.key.as_ref().map(|_| KEYED.to_string()),
            hash: String::new(),
        };
        // Hash what a reader will parse back (floats are written in their shortest form).
        let value: serde_json::Value = serde_json::to_string(&record)
            .and_then(|text| serde_json::from_str(&text))
            .map_err(|e| self.error(e.to_string()))?;
        record.hash = match &self.key {
            Some(key) => record_mac(&value, key),
            None => record_hash(&value),
        };
        let mut line = serde_json::to_string(&record).map_err(|e| self.error(e.to_string()))?;
        line.push('\n');
        head.file
            .write_all(line.as_bytes())
            .and_then(|_| head.file.flush())
            .map_err(|e| self.error(e.to_string()))?;
        head.seq = record.seq;
        head.hash = record.hash.clone();
        Ok(record)
    }

    fn error(&self, reason: String) -> GuardError {
        GuardError::Audit {
            path: self.path.clone(),
            reason,
        }
    }
}

/// The sequence number and hash of the last record, checked to be intact (a keyed last
/// record with the key, an unkeyed one without).
fn last_link(reader: impl BufRead, key: Option<&AuditKey>) -> Result<(u64, String), String> {
    let mut last = None;
    for line in reader.lines() {
        let line = line.map_err(|e| e.to_string())?;
        if !line.trim().is_empty() {
            last = Some(line);
        }
    }
    let Some(line) = last else {
        return Ok((0, GENESIS.to_string()));
    };
    let value: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("last record is not JSON: {e}"))?;
    let hash = value["hash"].as_str().unwrap_or_default().to_string();
    let keyed = value.get("chain").is_some();
    let expected = match (keyed, key) {
        (true, Some(key)) => record_mac(&value, key),
        (true, None) => return Err("the log is keyed; start with its --audit-key".into()),
        // Unkeyed so far: checked as such, and a key (if any) applies from here on.
        (false, _) => record_hash(&value),
    };
    if expected != hash {
        return Err("the last record's hash does not match; run `pagoda audit verify`".into());
    }
    let seq = value["seq"].as_u64().ok_or("the last record has no seq")?;
    Ok((seq, hash))
}
