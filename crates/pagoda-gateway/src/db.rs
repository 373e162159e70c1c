//! The gateway's SQLite database: API keys and, with the default sink, cost events.
//! WAL mode lets the request path read keys while the metering writer commits, and a commit
//! in WAL mode is in the operating system's hands as soon as it returns, so it survives the
//! process being killed (`synchronous=NORMAL` gives up only durability against power loss,
//! for commits several times cheaper than `FULL`).

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use crate::error::GatewayError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    key_id     TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    name       TEXT,
    hash       TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    revoked_ms INTEGER
);
CREATE TABLE IF NOT EXISTS cost_events (
    event_id          TEXT PRIMARY KEY,
    request_id        TEXT NOT NULL,
    tenant            TEXT NOT NULL,
    key_id            TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    compute_ms        REAL NOT NULL,
    queue_ms          REAL NOT NULL,
    ttft_ms           REAL,
    e2e_ms            REAL NOT NULL,
    status            TEXT NOT NULL,
    finish_reason     TEXT,
    cost              TEXT NOT NULL,
    currency          TEXT NOT NULL,
    ts_ms             INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS cost_events_tenant_ts ON cost_events (tenant, ts_ms);
CREATE TABLE IF NOT EXISTS admin_actions (
    ts_ms        INTEGER NOT NULL,
    actor_tenant TEXT NOT NULL,
    actor_key    TEXT NOT NULL,
    action       TEXT NOT NULL,
    target       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_anchors (
    log   TEXT NOT NULL,
    seq   INTEGER NOT NULL,
    hash  TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    PRIMARY KEY (log, seq)
);
";

pub fn open(path: &Path) -> Result<Connection, GatewayError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(SCHEMA)?;
    migrate(&conn)?;
    Ok(conn)
}

/// Columns added after the first release, to databases made before them.
fn migrate(conn: &Connection) -> Result<(), GatewayError> {
    let has_last_used = conn
        .prepare("SELECT 1 FROM pragma_table_info('api_keys') WHERE name = 'last_used_ms'")?
        .exists([])?;
    if !has_last_used {
        // Another process sharing the database may have added it since the check.
        if let Err(e) = conn.execute_batch("ALTER TABLE api_keys ADD COLUMN last_used_ms INTEGER") {
            if !e.to_string().contains("duplicate column") {
                return Err(e.into());
            }
        }
    }
    Ok(())
}
