//! Where cost events go: SQLite (default, durable), ClickHouse (scale), JSONL (debugging).

mod batcher;
pub mod clickhouse;
pub mod jsonl;
mod spool;
pub mod sqlite;

use std::path::PathBuf;

use tokio::sync::oneshot;

pub use batcher::{Message, SinkHealth};
pub use clickhouse::ClickHouseSink;
pub use jsonl::JsonlSink;
pub use sqlite::SqliteSink;

use crate::error::GatewayError;
use crate::event::CostEvent;
use crate::usage::{UsageQuery, UsageRow};

/// `--metering-sink`: `sqlite` (the gateway database), `sqlite=PATH`, `jsonl=PATH` or
/// `clickhouse=URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkSpec {
    Sqlite(Option<PathBuf>),
    Jsonl(PathBuf),
    ClickHouse(String),
}

impl SinkSpec {
    pub fn parse(text: &str) -> Result<SinkSpec, GatewayError> {
        let (kind, arg) = match text.split_once('=') {
            Some((k, a)) => (k.trim(), Some(a.trim())),
            None => (text.trim(), None),
        };
        match (kind, arg) {
            ("sqlite", None) => Ok(SinkSpec::Sqlite(None)),
            ("sqlite", Some(p)) if !p.is_empty() => Ok(SinkSpec::Sqlite(Some(p.into()))),
            ("jsonl", Some(p)) if !p.is_empty() => Ok(SinkSpec::Jsonl(p.into())),
            ("clickhouse", Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {
                Ok(SinkSpec::ClickHouse(u.trim_end_matches('/').to_string()))
            }
            _ => Err(GatewayError::invalid(
                "metering sink",
                format!("`{text}` is not sqlite, sqlite=PATH, jsonl=PATH or clickhouse=http://HOST:PORT"),
            )),
        }
    }
}

pub enum Sink {
    Sqlite(SqliteSink),
    Jsonl(JsonlSink),
    ClickHouse(ClickHouseSink),
}

impl Sink {
    /// Queues an event; `ack` is told once it is durable.
    pub fn record(&self, event: CostEvent, ack: Option<oneshot::Sender<()>>) {
        let message = Message::Event(Box::new(event), ack);
        match self {
            Sink::Sqlite(s) => s.send(message),
            Sink::Jsonl(s) => s.send(message),
            Sink::ClickHouse(s) => s.send(message),
        }
    }

    /// Whether the store is taking writes; events queued meanwhile are kept and retried.
    pub fn health(&self) -> &SinkHealth {
        match self {
            Sink::Sqlite(s) => s.health(),
            Sink::Jsonl(s) => s.health(),
            Sink::ClickHouse(s) => s.health(),
        }
    }

    /// Resolves when every event recorded before is durable (for ClickHouse: spooled, and
    /// delivered unless that takes longer than ten seconds; the spool keeps the rest).
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        match self {
            Sink::Sqlite(s) => s.send(Message::Flush(tx)),
            Sink::Jsonl(s) => s.send(Message::Flush(tx)),
            Sink::ClickHouse(s) => s.send(Message::Flush(tx)),
        }
        let _ = rx.await;
        if let Sink::ClickHouse(s) = self {
            if !s.delivered(std::time::Duration::from_secs(10)).await {
                tracing::warn!(
                    "ClickHouse has not confirmed every cost event yet; they stay spooled"
                );
            }
        }
    }

    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
        match self {
            // Admin queries are rare; reading on the calling task keeps this simple.
            Sink::Sqlite(s) => s.usage(query),
            Sink::Jsonl(s) => s.usage(query),
            Sink::ClickHouse(s) => s.usage(query).await,
        }
    }
}
