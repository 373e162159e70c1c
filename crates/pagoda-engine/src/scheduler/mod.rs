//! The scheduler: decides which tokens of which requests run each step, under one token budget.
//!
//! Each request's computed tokens catch up with its total tokens; prefill, chunked prefill,
//! prefix-cache hits and decode are all "how many new tokens run now". Running requests are
//! served before waiting ones. When blocks run out, a running request of the lowest priority is
//! preempted by recompute: the most recently admitted one of the tenant holding the most.
//!
//! Within a priority class, running slots are shared between tenants (`fair.rs`): waiting
//! requests are admitted tenant by tenant, the tenant running least first; and a tenant with
//! nothing running gets a slot, budget and blocks in the very next step, if need be by
//! preempting one sequence of the tenant holding the most (when that tenant holds at least
//! two, so that tenants cannot take one slot from each other forever). With one tenant this
//! is plain priority-then-arrival order.
//!
//! Driving it, once per step:
//! 1. `schedule()` -> `ScheduledBatch`;
//! 2. the runner computes logits for the entries with `needs_logits`;
//! 3. `sample_inputs()` for those entries, sampled;
//! 4. `update_from_output(&batch, &sampled)` -> finished requests;
//! 5. `record_step_time(&batch, elapsed)`, for steps sized by time (`timed.rs`).
//!
//! `abort()` and `finish()` may be called between steps.

mod batch;
mod config;
mod fair;
mod queue;
mod step;
mod step_cost;
mod timed;
mod update;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod timed_tests;

pub use batch::{ScheduledBatch, ScheduledRequest};
pub use config::SchedulerConfig;
pub use step_cost::{StepCostFit, StepCostModel, StepShape};
pub use update::FinishedRequest;

use crate::error::EngineError;
use crate::ids::{RequestId, TokenId};
use crate::kv_cache::{BlockHasher, KvCacheManager};
use crate::request::{NewRequest, Request};
use crate::sampling::{SampleInput, SamplerRng};
use crate::stop::StopChecker;
use queue::{QueueKey, TenantSlot, WaitingQueue};
use std::collections::HashMap;

#[derive(Debug)]
pub struct Scheduler {
    config: SchedulerConfig,
    hasher: BlockHasher,
    kv: KvCacheManager,
    stop: StopChecker,
    requests: HashMap<RequestId, Request>,
    waiting: WaitingQueue,
    /// In admission order.
    running: Vec<RequestId>,
    /// Running sequences per tenant and priority class (entries are never zero).
    running_load: HashMap<TenantSlot, usize>,
    next_arrival: u64,
    /// Seeds requests that bring no seed of their own.
    seed_source: SamplerRng,
    /// What timed steps are sized with.
    cost: timed::CostSource,
}

impl Scheduler {
    /// `eos_token_ids` come from the model's generation config.
    pub fn new(config: SchedulerConfig, eos_token_ids: Vec<TokenId>) -> Result<Self, EngineError> {
        config.validate()?;
        let hasher = BlockHasher::new(config.hash_seed);
        let kv = KvCacheManager::new(
            config.num_blocks,
            config.block_size,
            config.enable_prefix_caching,
            hasher,
        );
        // A lone request must always fit in the cache, or preempting it could never help.
        let context_limit = config
            .max_model_len
            .min(config.num_blocks * config.block_size);
        let seed = config.sampling_seed.unwrap_or_else(clock_seed);
        Ok(Self {
            stop: StopChecker::new(eos_token_ids, context_limit),
            config,
            hasher,
            kv,
            requests: HashMap::new(),
            waiting: WaitingQueue::default(),
            running: Vec::new(),
            running_load: HashMap::new(),
            next_arrival: 0,
            seed_source: SamplerRng::from_seed(seed),
            cost: timed::CostSource::Fitted(Default::default()),
        })
    }

    /// Queues a new request after validating it.
    pub fn add_request(&mut self, new: NewRequest) -> Result<(), EngineError> {
        if self.requests.contains_key(&new.id) {
            return Err(EngineError::DuplicateRequest(new.id));
        }
        new.sampling.validate()?;
        let num_tokens = new.prompt_token_ids.len();
        if num_tokens == 0 {
            return Err(EngineError::EmptyPrompt);
        }
        let max_tokens = self.config.max_prompt_len();
        if num_tokens > max_tokens {
            return Err(EngineError::PromptTooLong {
                num_tokens,
                max_tokens,
            });
        }
        let seed = new
            .seed
            .or(new.sampling.seed)
            .unwrap_or_else(|| self.seed_source.next_u64());
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        let request = Request::new(
            new,
            arrival,
            SamplerRng::from_seed(seed),
            &self.hasher,
            self.config.block_size,
        );
        self.waiting.push(queue_key(&request), request.id);
        self.requests.insert(request.id, request);
        Ok(())
    }

    /// The sampling inputs of `ids` (each request's parameters, history and RNG), in their
    /// order, `None` for an id it does not hold (or one listed twice); `allowed` is left
    /// `None`. Each input borrows a different request, so a step's rows can be sampled in
    /// parallel.
    pub fn sample_inputs(&mut self, ids: &[RequestId]) -> Vec<Option<SampleInput<'_>>> {
        let place: HashMap<RequestId, usize> =
            ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        let mut inputs: Vec<Option<SampleInput<'_>>> = ids.iter().map(|_| None).collect();
        let eos_token_ids = self.stop.eos_token_ids();
        for (id, request) in self.requests.iter_mut() {
            let Some(&i) = place.get(id) else { continue };
            let (params, prompt, output, rng) = request.sampling_parts();
            inputs[i] = Some(SampleInput {
                params,
                prompt,
                output,
                eos_token_ids,
                rng,
                allowed: None,
            });
        }
        inputs
    }

    /// The model's end-of-sequence tokens.
    pub fn eos_token_ids(&self) -> &[TokenId] {
        self.stop.eos_token_ids()
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    pub fn kv_cache(&self) -> &KvCacheManager {
        &self.kv
    }

    /// See `KvCacheManager::enable_events`.
    pub fn enable_kv_events(&mut self) {
        self.kv.enable_events();
    }

    /// See `KvCacheManager::take_events`.
    pub fn take_kv_events(&mut self) -> Vec<crate::kv_cache::KvCacheEvent> {
        self.kv.take_events()
    }

    pub fn stop_checker(&self) -> &StopChecker {
        &self.stop
    }

    pub fn request(&self, id: RequestId) -> Option<&Request> {
        self.requests.get(&id)
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn has_unfinished_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Running requests in admission order.
    pub fn running_ids(&self) -> &[RequestId] {
        &self.running
    }

    /// Waiting requests in the order they would be admitted if nothing finished meanwhile.
    pub fn waiting_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.waiting.order(|slot| self.load(slot)).into_iter()
    }
}

fn tenant_slot(request: &Request) -> TenantSlot {
    TenantSlot {
        priority: request.priority,
        tenant: request.tenant.clone(),
    }
}

fn queue_key(request: &Request) -> QueueKey {
    QueueKey {
        slot: tenant_slot(request),
        arrival: request.arrival,
    }
}

fn clock_seed() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
