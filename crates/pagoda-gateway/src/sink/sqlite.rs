//! The default sink: the gateway's SQLite database, written by a group-commit thread.

use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use rusqlite::{params, Connection};
use rust_decimal::Decimal;

use super::batcher::{Batcher, Message, SinkHealth};
use crate::db;
use crate::error::GatewayError;
use crate::event::CostEvent;
use crate::usage::{Aggregator, EventFigures, UsageQuery, UsageRow};

pub struct SqliteSink {
    batcher: Batcher,
    reader: Mutex<Connection>,
    /// Dropping it stops the checkpoint thread.
    _checkpoints: std::sync::mpsc::Sender<()>,
}

impl SqliteSink {
    pub fn open(path: &Path) -> Result<SqliteSink, GatewayError> {
        let mut writer = db::open(path)?;
        // Checkpoints copy the WAL into the database file and sync it, which can take
        // milliseconds; left automatic they would run inside the writer's commit and stall
        // every response waiting on it. A thread of their own runs them instead.
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        let reader = db::open(path)?;
        let checkpointer = db::open(path)?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("metering-checkpoint".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(std::time::Duration::from_millis(500))
                {
                    if let Err(e) =
                        checkpointer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::warn!(error = %e, "WAL checkpoint failed");
                    }
                }
            })?;
        let batcher = Batcher::start("metering-sqlite", move |events| {
            insert(&mut writer, events).map_err(|e| e.to_string())
        });
        Ok(SqliteSink {
            batcher,
            reader: Mutex::new(reader),
            _checkpoints: stop,
        })
    }

    pub fn send(&self, message: Message) {
        self.batcher.send(message);
    }

    pub fn health(&self) -> &SinkHealth {
        self.batcher.health()
    }

    pub fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        usage(&conn, query)
    }
}

/// One transaction per batch; `OR IGNORE` makes a re-sent event a no-op.
fn insert(conn: &mut Connection, events: &[CostEvent]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR IGNORE INTO cost_events (event_id, request_id, tenant, key_id, model,
                prompt_tokens, cached_tokens, completion_tokens, compute_ms, queue_ms, ttft_ms,
                e2e_ms, status, finish_reason, cost, currency, ts_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        )?;
        for e in events {
            stmt.execute(params![
                e.event_id.as_str(),
                e.request_id.as_str(),
                e.tenant.as_str(),
                e.key_id.as_str(),
                e.model,
                e.prompt_tokens as i64,
                e.cached_tokens as i64,
                e.completion_tokens as i64,
                e.compute_ms,
                e.queue_ms,
                e.ttft_ms,
                e.e2e_ms,
                e.status.as_str(),
                e.finish_reason,
                e.cost.to_string(),
                e.currency,
                e.ts_ms,
            ])?;
        }
    }
    tx.commit()
}

/// Costs are stored as decimal text (exact), so they are summed here rather than in SQL.
pub fn usage(conn: &Connection, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
    let mut stmt = conn.prepare_cached(
        "SELECT tenant, model, ts_ms, prompt_tokens, cached_tokens, completion_tokens, cost,
                compute_ms
         FROM cost_events
         WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR ts_ms >= ?2)
           AND (?3 IS NULL OR ts_ms < ?3)",
    )?;
    let mut rows = stmt.query(params![query.tenant, query.from_ms, query.to_ms])?;
    let mut agg = Aggregator::default();
    while let Some(row) = rows.next()? {
        let tenant: String = row.get(0)?;
        let model: String = row.get(1)?;
        let cost: String = row.get(6)?;
        agg.add(
            query,
            EventFigures {
                tenant: &tenant,
                model: &model,
                ts_ms: row.get(2)?,
                prompt_tokens: row.get::<_, i64>(3)? as u64,
                cached_tokens: row.get::<_, i64>(4)? as u64,
                completion_tokens: row.get::<_, i64>(5)? as u64,
                cost: Decimal::from_str(&cost).map_err(|e| GatewayError::Sink(e.to_string()))?,
                compute_ms: row.get(7)?,
            },
        );
    }
    Ok(agg.finish())
}

/// Every event stored in the database at `path`, oldest first (for tests and exports).
pub fn read_events(path: &Path) -> Result<Vec<CostEvent>, GatewayError> {
    events(&db::open(path)?)
}

/// Every stored event, oldest first.
pub fn events(conn: &Connection) -> Result<Vec<CostEvent>, GatewayError> {
    let mut stmt = conn.prepare(
        "SELECT event_id, request_id, tenant, key_id, model, prompt_tokens, cached_tokens,
                completion_tokens, compute_ms, queue_ms, ttft_ms, e2e_ms, status,
                finish_reason, cost, currency, ts_ms
         FROM cost_events ORDER BY ts_ms, event_id",
    )?;
    let rows = stmt.query_map([], |r| {
        let status: String = r.get(12)?;
        let cost: String = r.get(14)?;
        Ok(CostEvent {
            event_id: crate::ids::EventId::new(r.get::<_, String>(0)?),
            request_id: crate::ids::RequestId::new(r.get::<_, String>(1)?),
            tenant: crate::ids::TenantId::new(r.get::<_, String>(2)?),
            key_id: crate::ids::KeyId::new(r.get::<_, String>(3)?),
            model: r.get(4)?,
            prompt_tokens: r.get::<_, i64>(5)? as u64,
            cached_tokens: r.get::<_, i64>(6)? as u64,
            completion_tokens: r.get::<_, i64>(7)? as u64,
            compute_ms: r.get(8)?,
            queue_ms: r.get(9)?,
            ttft_ms: r.get(10)?,
            e2e_ms: r.get(11)?,
            status: crate::event::Status::parse(&status).unwrap_or(crate::event::Status::Failed),
            finish_reason: r.get(13)?,
            cost: Decimal::from_str(&cost).unwrap_or(Decimal::ZERO),
            currency: r.get(15)?,
            ts_ms: r.get(16)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
