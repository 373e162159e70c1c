//! ClickHouse over its HTTP interface. Events are acknowledged once they are in the local
//! spool; a shipper thread sends them in batches of up to 10,000 rows per INSERT, retrying
//! with exponential backoff (100 ms to 5 s) while ClickHouse is unreachable, and replays
//! the spool when it returns. The table is a ReplacingMergeTree keyed by the event id and
//! every query reads it with FINAL, so a replayed batch never counts twice.
//!
//! The SQL is what ClickHouse 18.16 (Debian's package) accepts: no DateTime64, no query
//! parameters (literals are escaped here), JSONEachRow in and out.

use std::fmt::Write as _;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::Value;

use super::batcher::{Batcher, Message, SinkHealth};
use super::spool::Spool;
use crate::error::GatewayError;
use crate::event::CostEvent;
use crate::usage::{UsageQuery, UsageRow};

pub const TABLE: &str = "pagoda_cost_events";
const BATCH: usize = 10_000;

const CREATE: &str = "CREATE TABLE IF NOT EXISTS pagoda_cost_events (
    event_id String, request_id String, tenant String, key_id String, model String,
    prompt_tokens UInt64, cached_tokens UInt64, completion_tokens UInt64,
    compute_ms Float64, queue_ms Float64, ttft_ms Nullable(Float64), e2e_ms Float64,
    status String, finish_reason Nullable(String), cost Decimal(38, 12), currency String,
    ts_ms Int64
) ENGINE = ReplacingMergeTree() ORDER BY (tenant, ts_ms, event_id)";

/// What the shipper and the sink share.
struct Shared {
    spool: Spool,
    wake: (Mutex<bool>, Condvar),
    stop: AtomicBool,
}

impl Shared {
    fn wake(&self) {
        *self.wake.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.1.notify_one();
    }
}

pub struct ClickHouseSink {
    url: String,
    http: reqwest::Client,
    shared: Arc<Shared>,
    batcher: Batcher,
    shipper: Option<std::thread::JoinHandle<()>>,
}

impl ClickHouseSink {
    /// `url` is the HTTP interface, e.g. `http://127.0.0.1:8123`; `spool` a directory.
    pub fn open(url: &str, spool: &Path) -> Result<ClickHouseSink, GatewayError> {
        let shared = Arc::new(Shared {
            spool: Spool::open(spool)?,
            wake: (Mutex::new(false), Condvar::new()),
            stop: AtomicBool::new(false),
        });
        let writer = shared.clone();
        let batcher = Batcher::start("metering-spool", move |events| {
            writer.spool.append(events).map_err(|e| e.to_string())?;
            writer.wake();
            Ok(())
        });
        let shipper = {
            let shared = shared.clone();
            let url = url.to_string();
            std::thread::Builder::new()
                .name("metering-clickhouse".into())
                .spawn(move || ship(&url, &shared))?
        };
        Ok(ClickHouseSink {
            url: url.to_string(),
            http: reqwest::Client::new(),
            shared,
            batcher,
            shipper: Some(shipper),
        })
    }

    pub fn send(&self, message: Message) {
        self.batcher.send(message);
    }

    pub fn health(&self) -> &SinkHealth {
        self.batcher.health()
    }

    /// Waits until everything spooled so far is in ClickHouse, or `timeout` passes;
    /// `true` when it all arrived.
    pub async fn delivered(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.shared.spool.all_confirmed() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.shared.wake();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
        let sql = usage_sql(query);
        let text = post(&self.http, &self.url, &sql, String::new())
            .await
            .map_err(GatewayError::Sink)?;
        let mut rows = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value =
                serde_json::from_str(line).map_err(|e| GatewayError::Sink(e.to_string()))?;
            rows.push(UsageRow {
                tenant: v["tenant"].as_str().unwrap_or_default().to_string(),
                model: v.get("model").and_then(Value::as_str).map(str::to_string),
                hour: v
                    .get("hour")
                    .map(|h| crate::clock::hour_label(int(h) as i64)),
                requests: int(&v["requests"]),
                prompt_tokens: int(&v["prompt_tokens"]),
                cached_tokens: int(&v["cached_tokens"]),
                completion_tokens: int(&v["completion_tokens"]),
                cost: Decimal::from_str(v["cost"].as_str().unwrap_or("0"))
                    .map_err(|e| GatewayError::Sink(e.to_string()))?
                    .normalize(),
                compute_ms: v["compute_ms"].as_f64().unwrap_or(0.0),
            });
        }
        Ok(rows)
    }
}

impl Drop for ClickHouseSink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
        if let Some(t) = self.shipper.take() {
            let _ = t.join();
        }
    }
}

/// ClickHouse writes 64-bit integers as JSON strings by default.
fn int(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_u64().unwrap_or(0),
    }
}

/// A string literal for ClickHouse SQL.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn usage_sql(q: &UsageQuery) -> String {
    let mut keys = vec!["tenant".to_string()];
    if q.by_model {
        keys.push("model".into());
    }
    if q.by_hour {
        keys.push("intDiv(ts_ms, 3600000) * 3600000 AS hour".into());
    }
    let mut filters = vec!["1".to_string()];
    if let Some(t) = &q.tenant {
        filters.push(format!("tenant = {}", quote(t)));
    }
    if let Some(f) = q.from_ms {
        filters.push(format!("ts_ms >= {f}"));
    }
    if let Some(t) = q.to_ms {
        filters.push(format!("ts_ms < {t}"));
    }
    let group: Vec<&str> = keys
        .iter()
        .map(|k| k.rsplit(" AS ").next().unwrap_or(k))
        .collect();
    format!(
        "SELECT {}, count() AS requests, sum(prompt_tokens) AS prompt_tokens, \
         sum(cached_tokens) AS cached_tokens, sum(completion_tokens) AS completion_tokens, \
         toString(sum(cost)) AS cost, sum(compute_ms) AS compute_ms FROM {TABLE} FINAL WHERE {} GROUP BY {} ORDER BY {} \
         FORMAT JSONEachRow",
        keys.join(", "),
        filters.join(" AND "),
        group.join(", "),
        group.join(", ")
    )
}

/// One JSONEachRow line; the cost is written as a bare decimal so ClickHouse parses it
/// exactly (a JSON string is refused, a float would round).
fn row(e: &CostEvent, out: &mut String) {
    let s = |v: &str| serde_json::to_string(v).unwrap_or_default();
    let cost = e.cost.round_dp(12).normalize();
    let _ = writeln!(
        out,
        "{{\"event_id\":{},\"request_id\":{},\"tenant\":{},\"key_id\":{},\"model\":{},\
         \"prompt_tokens\":{},\"cached_tokens\":{},\"completion_tokens\":{},\"compute_ms\":{},\
         \"queue_ms\":{},\"ttft_ms\":{},\"e2e_ms\":{},\"status\":{},\"finish_reason\":{},\
         \"cost\":{},\"currency\":{},\"ts_ms\":{}}}",
        s(e.event_id.as_str()),
        s(e.request_id.as_str()),
        s(e.tenant.as_str()),
        s(e.key_id.as_str()),
        s(&e.model),
        e.prompt_tokens,
        e.cached_tokens,
        e.completion_tokens,
        finite(e.compute_ms),
        finite(e.queue_ms),
        e.ttft_ms
            .map_or("null".to_string(), |t| finite(t).to_string()),
        finite(e.e2e_ms),
        s(e.status.as_str()),
        e.finish_reason.as_deref().map_or("null".to_string(), s),
        cost,
        s(&e.currency),
        e.ts_ms,
    );
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    body: String,
) -> Result<String, String> {
    let request = if body.is_empty() {
        http.post(url).body(query.to_string())
    } else {
        http.post(url).query(&[("query", query)]).body(body)
    };
    let response = request
        .timeout(Duration::from_secs(30))
        .send()
        .await
        // reqwest's message names the URL, credentials and all: never in a log.
        .map_err(|e| format!("ClickHouse unreachable: {}", e.without_url()))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| e.without_url().to_string())?;
    if !status.is_success() {
        return Err(format!("ClickHouse answered {status}: {}", text.trim()));
    }
    Ok(text)
}

/// The shipper: spool -> ClickHouse, in order, until told to stop and nothing is left (or
/// ClickHouse is down at that moment; the spool keeps the rest for the next start).
fn ship(url: &str, shared: &Shared) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the ClickHouse shipper");
            return;
        }
    };
    let http = reqwest::Client::new();
    let mut table_ready = false;
    let mut backoff = Duration::from_millis(100);
    loop {
        let pending = match shared.spool.pending(BATCH) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "reading the metering spool failed");
                None
            }
        };
        let Some((events, next)) = pending else {
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            let (lock, cv) = &shared.wake;
            let mut woken = lock.lock().unwrap_or_else(|e| e.into_inner());
            if !*woken {
                woken = cv
                    .wait_timeout(woken, Duration::from_millis(200))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *woken = false;
            continue;
        };
        let mut body = String::with_capacity(events.len() * 400);
        for e in &events {
            row(e, &mut body);
        }
        let result = runtime.block_on(async {
            if !table_ready {
                post(&http, url, CREATE, String::new()).await?;
            }
            if !events.is_empty() {
                post(
                    &http,
                    url,
                    &format!("INSERT INTO {TABLE} FORMAT JSONEachRow"),
                    body,
                )
                .await?;
            }
            Ok::<(), String>(())
        });
        match result {
            Ok(()) => {
                table_ready = true;
                backoff = Duration::from_millis(100);
                if let Err(e) = shared.spool.confirm(next) {
                    // Shipped again after a restart; the table counts it once.
                    tracing::error!(error = %e, "recording shipped events failed");
                }
            }
            Err(e) => {
                table_ready = false;
                if shared.stop.load(Ordering::SeqCst) {
                    tracing::warn!(error = %e, "stopping with events left in the spool; they are sent on the next start");
                    return;
                }
                tracing::warn!(error = %e, retry_in = ?backoff, events = events.len(), "shipping cost events failed");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_never_carry_the_url_or_its_credentials() {
        // Nothing listens on port 9: the connection is refused.
        let url = "http://metering:s3cret-pass@127.0.0.1:9/?password=hunter2";
        let err = post(&reqwest::Client::new(), url, "SELECT 1", String::new())
            .await
            .unwrap_err();
        assert!(err.starts_with("ClickHouse unreachable"), "{err}");
        assert!(
            !err.contains("s3cret") && !err.contains("hunter2") && !err.contains("metering:"),
            "{err}"
        );
    }
}
