//! KV-cache events for prefix-aware routers (`--kv-events-endpoint`): each engine step's
//! prefix-cache changes, published on a ZeroMQ PUB socket in vLLM's wire format, with an
//! optional ROUTER socket that replays what a subscriber missed.
//!
//! The engine thread only pushes batches into a bounded queue (`KvEventSink`); encoding and
//! sending happen here, on the server's runtime.

mod publisher;
mod replay;
mod wire;

pub use publisher::{start, KvEventPublisher, KvEventStats};
pub use wire::{encode_batch, wire_hash};

/// Batches the engine may queue ahead of the publisher before it drops and counts them.
pub const QUEUE_BATCHES: usize = 4096;

/// `--kv-events-*`: where the events go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvEventsSettings {
    /// PUB endpoint, bound when it holds `*`, else connected (`tcp://*:5557`).
    pub endpoint: String,
    /// ROUTER endpoint for replays (always bound).
    pub replay_endpoint: Option<String>,
    /// The first frame of every message: `kv@<host>:<port>@<served model name>`.
    pub topic: String,
}

/// The topic llm-d's indexer parses: the pod's address and the model it serves.
pub fn default_topic(host: &str, port: u16, model: &str) -> String {
    format!("kv@{host}:{port}@{model}")
}
