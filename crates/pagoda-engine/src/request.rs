//! One request's state as the scheduler sees it: its tokens, progress and sampling state.

use crate::ids::{BlockHash, CacheSalt, RequestId, TenantKey, TokenId};
use crate::kv_cache::block_hash::{BlockHasher, ExtraKeys};
use crate::sampling::{SamplerRng, SamplingParams};
use crate::stop::FinishReason;
use std::sync::Arc;

/// Where a request is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestStatus {
    Waiting,
    Running,
    /// Preempted by recompute: back in the waiting queue, its output kept.
    Preempted,
    Finished(FinishReason),
}

/// What the engine hands the scheduler to start a request.
#[derive(Clone, Debug)]
pub struct NewRequest {
    pub id: RequestId,
    pub prompt_token_ids: Vec<TokenId>,
    /// Shared, not copied, by the choices of one request (`n > 1`).
    pub sampling: Arc<SamplingParams>,
    /// Seeds this sequence's RNG instead of `sampling.seed`, so that choices sharing one set
    /// of parameters can still draw differently yet reproducibly.
    pub seed: Option<u64>,
    /// Lower runs first; ties are served in arrival order (and shared fairly between tenants).
    pub priority: i32,
    /// Requests with different salts never share KV blocks (per tenant by default).
    pub cache_salt: Option<CacheSalt>,
    /// Whose work this is, for fair queueing; `None` is the anonymous tenant.
    pub tenant: Option<TenantKey>,
    /// Inter-token latency this request's SLO class asks for: while it runs, steps are sized
    /// to stay under it (the tightest running target wins).
    pub itl_target_ms: Option<u32>,
}

impl NewRequest {
    /// A request with priority 0, no cache salt and no tenant.
    pub fn new(
        id: RequestId,
        prompt_token_ids: Vec<TokenId>,
        sampling: impl Into<Arc<SamplingParams>>,
    ) -> Self {
        Self {
            id,
            prompt_token_ids,
            sampling: sampling.into(),
            seed: None,
            priority: 0,
            cache_salt: None,
            tenant: None,
            itl_target_ms: None,
        }
    }

    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    pub fn with_cache_salt(mut self, salt: CacheSalt) -> Self {
        self.cache_salt = Some(salt);
        self
    }

    pub fn with_tenant(mut self, tenant: TenantKey) -> Self {
        self.tenant = Some(tenant);
        self
    }

    pub fn with_itl_target_ms(mut self, ms: u32) -> Self {
        self.itl_target_ms = Some(ms);
        self
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

/// A request inside the scheduler.
#[derive(Clone, Debug)]
pub struct Request {
    pub(crate) id: RequestId,
    pub(crate) priority: i32,
    /// Order of arrival; preserved across preemption so a preempted request keeps its place.
    pub(crate) arrival: u64,
    pub(crate) cache_salt: Option<CacheSalt>,
    pub(crate) tenant: Option<TenantKey>,
    pub(crate) itl_target_ms: Option<u32>,
    pub(crate) sampling: Arc<SamplingParams>,
    pub(crate) rng: SamplerRng,
    /// Prompt followed by the output so far.
    tokens: Vec<TokenId>,
    num_prompt_tokens: usize,
    /// Hashes of every full block of `tokens`.
    block_hashes: Vec<BlockHash>,
    /// Tokens whose KV is in this request's blocks.
    pub(crate) num_computed_tokens: usize,
    /// Prompt tokens served from the prefix cache at first admission (for usage reporting).
    pub(crate) num_cached_tokens: Option<usize>,
    pub(crate) num_preemptions: usize,
    pub(crate) status: RequestStatus,
}

impl Request {
    pub(crate) fn new(
        new: NewRequest,
        arrival: u64,
        rng: SamplerRng,
        hasher: &BlockHasher,
        block_size: usize,
    ) -> Self {
        let mut request = Self {
            id: new.id,
            priority: new.priority,
            arrival,
            cache_salt: new.cache_salt,
            tenant: new.tenant,
            itl_target_ms: new.itl_target_ms,
            sampling: new.sampling,
            rng,
            num_prompt_tokens: new.prompt_token_ids.len(),
            tokens: new.prompt_token_ids,
            block_hashes: Vec::new(),
            num_computed_tokens: 0,
            num_cached_tokens: None,
            num_preemptions: 0,
            status: RequestStatus::Waiting,
        };
        request.update_block_hashes(hasher, block_size);
        request
    }

    pub fn id(&self) -> RequestId {
        self.id
    }

    pub fn priority(&self) -> i32 {
        self.priority
    }

    pub fn status(&self) -> RequestStatus {
        self.status
    }

    pub fn sampling(&self) -> &SamplingParams {
        &self.sampling
    }

    pub fn cache_salt(&self) -> Option<&CacheSalt> {
        self.cache_salt.as_ref()
    }

    pub fn tenant(&self) -> Option<&TenantKey> {
        self.tenant.as_ref()
    }

    /// The parameters, shared with the request's other choices.
    pub fn shared_sampling(&self) -> &Arc<SamplingParams> {
        &self.sampling
    }

    /// Prompt followed by output.
    pub fn all_token_ids(&self) -> &[TokenId] {
        &self.tokens
    }

    pub fn prompt_token_ids(&self) -> &[TokenId] {
        &self.tokens[..self.num_prompt_tokens]
    }

    pub fn output_token_ids(&self) -> &[TokenId] {
        &self.tokens[self.num_prompt_tokens..]
    }

    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn num_prompt_tokens(&self) -> usize {
        self.num_prompt_tokens
    }

    pub fn num_output_tokens(&self) -> usize {
        self.tokens.len() - self.num_prompt_tokens
    }

    pub fn num_computed_tokens(&self) -> usize {
        self.num_computed_tokens
    }

    /// Prompt tokens served from the prefix cache when the request was first admitted.
    pub fn num_cached_tokens(&self) -> Option<usize> {
        self.num_cached_tokens
    }

    pub fn num_preemptions(&self) -> usize {
        self.num_preemptions
    }

    pub fn block_hashes(&self) -> &[BlockHash] {
        &self.block_hashes
    }

    pub fn extra_keys(&self) -> ExtraKeys<'_> {
        ExtraKeys {
            cache_salt: self.cache_salt.as_ref(),
        }
    }

    pub(crate) fn append_token(&mut self, token: TokenId, hasher: &BlockHasher, block_size: usize) {
        self.tokens.push(token);
        self.update_block_hashes(hasher, block_size);
    }

    fn update_block_hashes(&mut self, hasher: &BlockHasher, block_size: usize) {
        let extra = ExtraKeys {
            cache_salt: self.cache_salt.as_ref(),
        };
        hasher.extend_hashes(&self.tokens, block_size, extra, &mut self.block_hashes);
    }

    /// The parts the sampler needs, borrowed together.
    pub(crate) fn sampling_parts(
        &mut self,
    ) -> (&SamplingParams, &[TokenId], &[TokenId], &mut SamplerRng) {
        let (prompt, output) = self.tokens.split_at(self.num_prompt_tokens);
        (&self.sampling, prompt, output, &mut self.rng)
    }
}
