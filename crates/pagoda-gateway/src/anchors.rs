//! Anchors of the guardrails' audit log, kept in the gateway database: every so often the
//! server records the log's last sequence number and hash here, so that a log cut short
//! after an anchor (records deleted off its end, which its own chain cannot show) fails
//! verification against this table.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection};

use crate::db;
use crate::error::GatewayError;

pub struct AuditAnchors {
    conn: Mutex<Connection>,
}

impl AuditAnchors {
    pub fn open(db_path: &Path) -> Result<AuditAnchors, GatewayError> {
        Ok(AuditAnchors {
            conn: Mutex::new(db::open(db_path)?),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `log` had record `seq` with `hash` (once per number).
    pub fn record(&self, log: &str, seq: u64, hash: &str, ts_ms: i64) -> Result<(), GatewayError> {
        self.conn().execute(
            "INSERT OR IGNORE INTO audit_anchors (log, seq, hash, ts_ms) VALUES (?1, ?2, ?3, ?4)",
            params![log, seq as i64, hash, ts_ms],
        )?;
        Ok(())
    }

    /// Every anchor of `log`, by sequence number.
    pub fn list(&self, log: &str) -> Result<Vec<(u64, String)>, GatewayError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT seq, hash FROM audit_anchors WHERE log = ?1 ORDER BY seq")?;
        let rows = stmt.query_map(params![log], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_kept_per_log_and_number() {
        let dir = tempfile::tempdir().unwrap();
        let a = AuditAnchors::open(&dir.path().join("gw.db")).unwrap();
        a.record("/l1", 3, "aa", 1).unwrap();
        a.record("/l1", 3, "bb", 2).unwrap();
        a.record("/l1", 9, "cc", 3).unwrap();
        a.record("/l2", 1, "dd", 4).unwrap();
        assert_eq!(
            a.list("/l1").unwrap(),
            vec![(3, "aa".to_string()), (9, "cc".to_string())]
        );
    }
}
