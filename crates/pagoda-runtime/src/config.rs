//! Engine settings, with defaults that work out of the box on a CPU.

use std::path::PathBuf;

use pagoda_models::{KvCacheDtype, LoadOptions};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// A local model directory (hub ids are resolved before this point).
    pub model_dir: PathBuf,
    pub load: LoadOptions,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Bytes of KV cache; the number of blocks follows from it.
    pub kv_cache_memory: u64,
    /// What the KV cache stores (`Auto`: the weights' dtype).
    pub kv_cache_dtype: KvCacheDtype,
    /// Longest sequence (prompt + output); defaults to the model's `max_position_embeddings`.
    pub max_model_len: Option<usize>,
    pub max_num_seqs: usize,
    /// Token budget of one step, shared by prefill chunks and decodes.
    pub max_num_batched_tokens: usize,
    /// Largest prefill chunk one request may take in a step.
    pub max_prefill_chunk: usize,
    /// Step time (ms) to stay under for every request, by sizing prefill chunks with the
    /// fitted step-cost model; requests may ask for less (`GenerateRequest::itl_target_ms`).
    /// `None`: steps are sized by `max_num_batched_tokens` alone.
    pub target_itl_ms: Option<u32>,
    /// Prefill tokens a timed step runs even when its decodes use up the target.
    pub min_prefill_tokens: usize,
    pub enable_prefix_caching: bool,
    /// Sequences in flight (waiting or running; a request counts `n`) before `submit` answers
    /// `QueueFull`.
    pub max_pending_requests: usize,
    /// Sequences in flight for one tenant before `submit` answers `TenantQueueFull`, so that
    /// one caller cannot fill the queue for everyone. `new` sets half of
    /// `max_pending_requests` (at least 1); set it again after changing that.
    pub max_pending_per_tenant: usize,
    /// Outputs per choice a caller may leave unread before its request is aborted (its
    /// stream would otherwise queue everything the engine makes); 0: no limit.
    pub max_unread_outputs: usize,
    /// Where each step's prefix-cache changes go (KV events for prefix-aware routers); `None`:
    /// not logged at all.
    pub kv_events: Option<crate::KvEventSink>,
    /// Deliberate failures, for tests of the engine loop's recovery.
    #[cfg(feature = "fault-injection")]
    pub faults: crate::faults::FaultInjection,
}

impl EngineConfig {
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        EngineConfig {
            model_dir: model_dir.into(),
            load: LoadOptions::default(),
            block_size: 16,
            kv_cache_memory: 2 << 30,
            kv_cache_dtype: KvCacheDtype::Auto,
            max_model_len: None,
            max_num_seqs: 64,
            // Small steps keep inter-token latency bounded on a CPU while prompts prefill.
            max_num_batched_tokens: 512,
            max_prefill_chunk: 512,
            target_itl_ms: None,
            min_prefill_tokens: 16,
            enable_prefix_caching: true,
            max_pending_requests: 1024,
            max_pending_per_tenant: 512,
            max_unread_outputs: 512,
            kv_events: None,
            #[cfg(feature = "fault-injection")]
            faults: Default::default(),
        }
    }
}
