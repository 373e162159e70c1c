//! What callers hand the engine and what comes back on a request's stream.

use std::time::Duration;

use pagoda_engine::{CacheSalt, FinishReason, SamplingParams, TenantKey};
use pagoda_structured::Constraint;

#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub prompt_token_ids: Vec<u32>,
    pub sampling: SamplingParams,
    /// Lower runs first.
    pub priority: i32,
    /// Inter-token latency its SLO class targets: while it runs, steps are sized to stay
    /// under it.
    pub itl_target_ms: Option<u32>,
    /// Requests share prefix-cache entries only when their salts are equal.
    pub cache_salt: Option<CacheSalt>,
    /// Whose work this is: pending sequences are bounded per tenant, and the scheduler shares
    /// running slots fairly between tenants. `None` is the anonymous tenant, one group.
    pub tenant: Option<TenantKey>,
    pub skip_special_tokens: bool,
    /// What the output must match (compiled by `EngineHandle::grammars`); every choice starts
    /// from its own copy.
    pub constraint: Option<Constraint>,
}

impl GenerateRequest {
    pub fn new(prompt_token_ids: Vec<u32>, sampling: SamplingParams) -> Self {
        GenerateRequest {
            prompt_token_ids,
            sampling,
            priority: 0,
            itl_target_ms: None,
            cache_salt: None,
            tenant: None,
            skip_special_tokens: true,
            constraint: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token_id: u32,
    pub logprob: f32,
    /// Most likely alternatives, most likely first.
    pub top: Vec<(u32, f32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache (part of `prompt_tokens`).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
}

/// Times since the request was submitted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Until it was first scheduled.
    pub queued: Duration,
    pub first_token: Option<Duration>,
    pub finished: Duration,
    /// Its share of the steps it took part in (each step's time split by tokens run).
    pub compute: Duration,
    /// Engine steps that ran after it reached the engine and before it was first scheduled:
    /// 0 when it ran in the very next step.
    pub steps_waited: u64,
}

/// The end of one completion (choice).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub timings: Timings,
    /// Set when the engine failed the request rather than finishing it.
    pub error: Option<String>,
    /// Whose fault a failure was.
    pub cause: FailureCause,
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailureCause {
    /// The engine or a bug (the server answers 500).
    #[default]
    Internal,
    /// The request's output constraint could not continue (a grammar that compiled but
    /// exceeds llguidance's limits once generation starts): the client's to fix.
    Constraint,
}

/// One message on a request's stream: new tokens of choice `index`, and on its last message
/// how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOutput {
    pub index: usize,
    pub token_ids: Vec<u32>,
    /// Text that is now final (held-back partial characters and possible stop-string
    /// prefixes are not in it yet).
    pub text: String,
    pub logprobs: Vec<TokenLogprob>,
    /// Prompt tokens served from the prefix cache, known from the request's first scheduled
    /// step on: a meter can then bill an aborted request's prompt as it was computed.
    pub cached_tokens: Option<usize>,
    pub finished: Option<Completion>,
}

impl RequestOutput {
    /// A final message with no new tokens.
    pub fn last(index: usize, completion: Completion) -> Self {
        RequestOutput {
            index,
            token_ids: Vec::new(),
            text: String::new(),
            logprobs: Vec::new(),
            cached_tokens: Some(completion.usage.cached_tokens),
            finished: Some(completion),
        }
    }
}
