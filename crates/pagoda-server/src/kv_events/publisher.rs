//! Binds (or connects) the sockets and runs the task that numbers, encodes and sends batches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pagoda_runtime::{KvEventBatch, KvEventSink};
use tokio::sync::mpsc::Receiver;
use zeromq::{PubSocket, RouterSocket, Socket, SocketSend};

use super::replay::{self, frames, ReplayBuffer};
use super::wire::encode_batch;
use super::{KvEventsSettings, QUEUE_BATCHES};
use crate::error::ServerError;

/// Counters for /metrics.
#[derive(Debug)]
pub struct KvEventStats {
    published: AtomicU64,
    sink: KvEventSink,
}

impl KvEventStats {
    /// Batches sent (the next sequence number).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Batches the engine dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.sink.dropped()
    }

    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "# HELP pagoda:kv_events_published_total KV-event batches (one per engine step with prefix-cache changes) published.\n\
             # TYPE pagoda:kv_events_published_total counter\n\
             pagoda:kv_events_published_total {}\n\
             # HELP pagoda:kv_events_dropped_total KV-event batches dropped because the publisher fell behind (a router's copy of the prefix cache is then stale).\n\
             # TYPE pagoda:kv_events_dropped_total counter\n\
             pagoda:kv_events_dropped_total {}\n",
            self.published(),
            self.dropped()
        );
    }
}

/// A running publisher: give `sink` to the engine (`EngineConfig::kv_events`).
pub struct KvEventPublisher {
    pub sink: KvEventSink,
    pub stats: Arc<KvEventStats>,
    /// Where the PUB socket is, resolved (a bound port 0 becomes the real port).
    pub endpoint: String,
    pub replay_endpoint: Option<String>,
}

/// Opens the sockets and starts the publishing (and replay) tasks on the current runtime.
/// `block_size` is the engine's, announced with every stored block.
pub async fn start(
    settings: &KvEventsSettings,
    block_size: usize,
) -> Result<KvEventPublisher, ServerError> {
    let mut socket = PubSocket::new();
    let endpoint = open(&mut socket, &settings.endpoint, "kv-events-endpoint").await?;
    let buffer = Arc::new(Mutex::new(ReplayBuffer::default()));
    let replay_endpoint = match &settings.replay_endpoint {
        Some(address) => {
            let mut router = RouterSocket::new();
            let resolved = bind(&mut router, address, "kv-events-replay-endpoint").await?;
            tokio::spawn(replay::serve(router, buffer.clone()));
            Some(resolved)
        }
        None => None,
    };
    let (sink, receiver) = KvEventSink::channel(QUEUE_BATCHES);
    let stats = Arc::new(KvEventStats {
        published: AtomicU64::new(0),
        sink: sink.clone(),
    });
    let topic = Bytes::from(settings.topic.clone().into_bytes());
    tokio::spawn(publish(
        receiver,
        socket,
        topic,
        block_size,
        buffer,
        stats.clone(),
    ));
    tracing::info!(%endpoint, replay = ?replay_endpoint, topic = %settings.topic, "publishing KV events");
    Ok(KvEventPublisher {
        sink,
        stats,
        endpoint,
        replay_endpoint,
    })
}

async fn publish(
    mut receiver: Receiver<KvEventBatch>,
    mut socket: PubSocket,
    topic: Bytes,
    block_size: usize,
    buffer: Arc<Mutex<ReplayBuffer>>,
    stats: Arc<KvEventStats>,
) {
    let mut seq: u64 = 0;
    while let Some(batch) = receiver.recv().await {
        let payload = Bytes::from(encode_batch(&batch, block_size));
        let seq_frame = Bytes::copy_from_slice(&seq.to_be_bytes());
        // Kept for replay first: a subscriber that asks right after seeing it gets it.
        buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(seq, payload.clone());
        // PUB never waits for a slow subscriber; what it drops, the replay socket has.
        if let Err(error) = socket
            .send(frames([topic.clone(), seq_frame, payload]))
            .await
        {
            tracing::warn!(%error, seq, "KV-event batch not sent (kept for replay)");
        }
        seq += 1;
        stats.published.store(seq, Ordering::Relaxed);
    }
}

/// Binds when the address has a `*` (any interface), else connects, as vLLM does.
async fn open(
    socket: &mut PubSocket,
    address: &str,
    field: &'static str,
) -> Result<String, ServerError> {
    if address.contains('*') {
        return bind(socket, address, field).await;
    }
    socket
        .connect(address)
        .await
        .map_err(|e| invalid(field, address, e))?;
    Ok(address.to_string())
}

async fn bind(
    socket: &mut impl Socket,
    address: &str,
    field: &'static str,
) -> Result<String, ServerError> {
    let local = address.replace('*', "0.0.0.0");
    let endpoint = socket
        .bind(&local)
        .await
        .map_err(|e| invalid(field, address, e))?;
    Ok(endpoint.to_string())
}

fn invalid(field: &'static str, address: &str, error: zeromq::ZmqError) -> ServerError {
    ServerError::Setting {
        field,
        reason: format!("cannot open `{address}`: {error}"),
    }
}
