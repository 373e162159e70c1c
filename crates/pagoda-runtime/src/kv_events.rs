//! Hands each step's prefix-cache changes from the engine thread to a publisher without ever
//! blocking the engine: a bounded queue, and a batch that does not fit is dropped and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pagoda_engine::KvCacheEvent;
use tokio::sync::mpsc::{self, error::TrySendError};

/// The events of one engine step.
#[derive(Clone, Debug, PartialEq)]
pub struct KvEventBatch {
    /// Seconds since the Unix epoch when the step ended.
    pub timestamp: f64,
    pub events: Vec<KvCacheEvent>,
}

/// The engine's end of the queue (`EngineConfig::kv_events`).
#[derive(Clone)]
pub struct KvEventSink {
    sender: mpsc::Sender<KvEventBatch>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for KvEventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvEventSink")
            .field("capacity", &self.sender.max_capacity())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl KvEventSink {
    /// A sink holding up to `capacity` batches (at least 1) and the publisher's end.
    pub fn channel(capacity: usize) -> (KvEventSink, mpsc::Receiver<KvEventBatch>) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        let sink = KvEventSink {
            sender,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (sink, receiver)
    }

    /// Queues a step's events; when the queue is full (or the publisher gone) they are
    /// dropped and counted.
    pub(crate) fn send(&self, events: Vec<KvCacheEvent>) {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        match self.sender.try_send(KvEventBatch { timestamp, events }) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Closed(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Batches dropped because the queue was full or the publisher gone.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
