//! Engine-wide figures the server exports as metrics.

use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    pub num_running: usize,
    pub num_waiting: usize,
    pub num_blocks: usize,
    pub num_free_blocks: usize,
    pub prefix_cache_queries: u64,
    pub prefix_cache_queried_tokens: u64,
    pub prefix_cache_hit_tokens: u64,
    pub preemptions_total: u64,
    pub prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub steps_total: u64,
    /// Time spent in the model's forward passes.
    pub forward_time_total: Duration,
    /// Time spent scheduling and updating (the pure core's share of each step).
    pub scheduler_time_total: Duration,
    /// Token masks computed for constrained outputs, and the time they took (on a worker,
    /// alongside the forward pass).
    pub constraint_masks_total: u64,
    pub constraint_mask_time_total: Duration,
    /// Time the engine thread spent handing KV events to the publisher's queue (logging them
    /// in the block pool is part of `scheduler_time_total`).
    pub kv_events_time_total: Duration,
    /// The step-cost model timed steps are sized with (`None` until fitted).
    pub step_cost: Option<pagoda_engine::StepCostModel>,
}

impl EngineStats {
    pub fn kv_usage(&self) -> f64 {
        if self.num_blocks == 0 {
            0.0
        } else {
            1.0 - self.num_free_blocks as f64 / self.num_blocks as f64
        }
    }

    pub fn num_used_blocks(&self) -> usize {
        self.num_blocks - self.num_free_blocks
    }
}
