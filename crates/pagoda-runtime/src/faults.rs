//! Deliberate failures, compiled in only with the `fault-injection` feature, so that tests can
//! check how the engine loop recovers from a panic (a bug) without a real bug to trigger it.

use pagoda_engine::TokenId;

/// Each fault but the slow forward fires for requests whose prompt contains the given token id.
#[derive(Debug, Clone, Default)]
pub struct FaultInjection {
    /// A step that schedules such a request panics before its forward pass: every request of
    /// that step fails.
    pub panic_step_on_token: Option<TokenId>,
    /// Sampling such a request panics: only that request fails.
    pub panic_sampling_on_token: Option<TokenId>,
    /// The engine loop itself panics, outside any step, once such a request is queued: the
    /// engine stops.
    pub kill_loop_on_token: Option<TokenId>,
    /// Every forward pass also sleeps this long per token it runs: a model slow enough on a
    /// tiny fixture that step sizing by time shows (not a fault, but the same hook).
    pub slow_forward_per_token: Option<std::time::Duration>,
}

impl FaultInjection {
    pub(crate) fn hits(token: Option<TokenId>, prompt: &[TokenId]) -> bool {
        token.is_some_and(|t| prompt.contains(&t))
    }
}
