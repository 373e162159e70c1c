//! Scheduler limits.

use crate::error::EngineError;

/// Limits for one engine. The defaults run out of the box on a small model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Token budget of one step, over all requests.
    pub max_num_batched_tokens: usize,
    /// Most requests running at once.
    pub max_num_seqs: usize,
    /// Most tokens one request may run in one step (chunked prefill).
    pub max_prefill_chunk: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// KV blocks the runner allocated.
    pub num_blocks: usize,
    /// Context limit: prompt plus output.
    pub max_model_len: usize,
    pub enable_prefix_caching: bool,
    /// Seed of the block-hash root; replicas that route by prefix must agree on it.
    pub hash_seed: u64,
    /// Seed for requests that bring none of their own; `None` seeds from the clock.
    pub sampling_seed: Option<u64>,
    /// Step time to stay under (ms) for every request; requests may ask for less
    /// (`NewRequest::itl_target_ms`). With a target, steps are sized by the fitted step-cost
    /// model: decodes first, then prefill chunks in the time left. `None` and no request
    /// targets: steps are sized by `max_num_batched_tokens` alone.
    pub target_itl_ms: Option<u32>,
    /// Prefill tokens a timed step runs even when the decodes leave no time, so that waiting
    /// prompts always progress.
    pub min_prefill_tokens: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            max_num_batched_tokens: 2048,
            max_num_seqs: 64,
            max_prefill_chunk: 512,
            block_size: 16,
            num_blocks: 1024,
            max_model_len: 4096,
            enable_prefix_caching: true,
            hash_seed: crate::kv_cache::block_hash::DEFAULT_HASH_SEED,
            sampling_seed: None,
            target_itl_ms: None,
            min_prefill_tokens: 16,
        }
    }
}

fn positive(field: &'static str, value: usize) -> Result<(), EngineError> {
    if value == 0 {
        return Err(EngineError::InvalidConfig {
            field,
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

impl SchedulerConfig {
    pub fn validate(&self) -> Result<(), EngineError> {
        positive("max_num_batched_tokens", self.max_num_batched_tokens)?;
        positive("max_num_seqs", self.max_num_seqs)?;
        positive("max_prefill_chunk", self.max_prefill_chunk)?;
        positive("block_size", self.block_size)?;
        positive("num_blocks", self.num_blocks)?;
        positive("max_model_len", self.max_model_len)?;
        if self.target_itl_ms == Some(0) {
            return Err(EngineError::InvalidConfig {
                field: "target_itl_ms",
                reason: "must be at least 1 ms".into(),
            });
        }
        if self.num_blocks > u32::MAX as usize {
            return Err(EngineError::InvalidConfig {
                field: "num_blocks",
                reason: "must fit in 32 bits".into(),
            });
        }
        Ok(())
    }

    /// Longest prompt accepted: one token must still fit after it, and the whole sequence must
    /// fit in the KV cache on its own.
    pub fn max_prompt_len(&self) -> usize {
        (self.max_model_len - 1).min(self.num_blocks * self.block_size - 1)
    }
}
