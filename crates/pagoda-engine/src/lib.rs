//! The tensor-free core of the Pagoda engine: request state, KV-block bookkeeping with automatic
//! prefix caching, the scheduler, the sampler and the stop rules. Plain data structures driven
//! with `&mut self` from the engine loop; no async, no locks, no tensors.
//!
//! One engine step, with a stand-in for the model runner:
//!
//! ```
//! use pagoda_engine::{NewRequest, RequestId, Sampler, SamplingParams, Scheduler, SchedulerConfig};
//!
//! let eos = 2;
//! let mut scheduler = Scheduler::new(SchedulerConfig::default(), vec![eos]).unwrap();
//! let mut sampler = Sampler::new();
//! let params = SamplingParams { seed: Some(7), max_tokens: Some(4), ..SamplingParams::default() };
//! scheduler.add_request(NewRequest::new(RequestId(1), vec![5, 6, 7], params)).unwrap();
//!
//! while scheduler.has_unfinished_requests() {
//!     let batch = scheduler.schedule();
//!     // The runner writes each entry's KV at `entry.slot_mapping(batch.block_size)` and returns
//!     // one logits row per entry with `needs_logits`.
//!     let ids: Vec<RequestId> = batch.sampled_ids().collect();
//!     let mut sampled = Vec::new();
//!     for (&id, input) in ids.iter().zip(scheduler.sample_inputs(&ids)) {
//!         let mut logits = vec![0.0f32; 10];
//!         let token = sampler.sample(&mut logits, input.unwrap());
//!         sampled.push((id, token.token));
//!     }
//!     for finished in scheduler.update_from_output(&batch, &sampled) {
//!         assert!(finished.output_token_ids.len() <= 4);
//!     }
//! }
//! assert_eq!(scheduler.kv_cache().num_free_blocks(), 1024);
//! ```

pub mod error;
pub mod ids;
pub mod kv_cache;
pub mod request;
pub mod sampling;
pub mod scheduler;
pub mod stop;

pub use error::EngineError;
pub use ids::{BlockHash, BlockId, CacheSalt, RequestId, TenantKey, TokenId};
pub use kv_cache::{KvCacheEvent, KvCacheManager, PrefixCacheStats};
pub use request::{NewRequest, Request, RequestStatus};
pub use sampling::{AllowedTokens, SampleInput, SampledToken, Sampler, SamplerRng, SamplingParams};
pub use scheduler::{
    FinishedRequest, ScheduledBatch, ScheduledRequest, Scheduler, SchedulerConfig, StepCostModel,
    StepShape,
};
pub use stop::{
    FinishReason, StopChecker, StopHit, StopStringMatcher, StopStringOutput, StopStringSet,
};
