//! Every way the gateway can refuse or fail. The server maps these to HTTP once, in its
//! `error.rs`. No variant ever carries a presented API key: a key in an error message would
//! end up in logs and in responses.

use std::time::Duration;

/// Which rate limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    RequestsPerMinute,
    TokensPerMinute,
    Concurrency,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::RequestsPerMinute => "requests per minute",
            Limit::TokensPerMinute => "tokens per minute",
            Limit::Concurrency => "concurrent requests",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("missing API key; send `Authorization: Bearer <key>`")]
    MissingKey,
    /// Unknown, malformed, revoked and expired keys all look the same to the client, so the
    /// answer tells an attacker nothing about which keys exist.
    #[error("invalid API key")]
    InvalidKey,
    #[error("tenant `{tenant}` may not use the model `{model}`")]
    ModelForbidden { tenant: String, model: String },
    #[error("{0}")]
    Forbidden(String),
    /// A server misconfiguration, not the client's fault: answered as a 500.
    #[error("the gateway policy has no price for the model `{model}`, so requests under a budget cannot be billed; add [pricing.\"{model}\"]")]
    Unpriced { model: String },
    #[error("rate limit reached ({}); retry after {}s", limit.as_str(), retry_after.as_secs().max(1))]
    RateLimited { limit: Limit, retry_after: Duration },
    #[error("the {period} budget of tenant `{tenant}` is exhausted; retry after {}s", retry_after.as_secs().max(1))]
    QuotaExhausted {
        tenant: String,
        period: &'static str,
        retry_after: Duration,
    },
    #[error("the prompt has {tokens} tokens; this tenant may send at most {limit}")]
    PromptTooLong { tokens: usize, limit: usize },
    #[error("invalid {what}: {reason}")]
    InvalidInput { what: &'static str, reason: String },
    #[error("gateway config {path}: {reason}")]
    Config { path: String, reason: String },
    #[error("gateway database: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis did not answer within {0:?}")]
    RedisTimeout(Duration),
    /// Redis holds no spend for this tenant and day yet (it restarted empty, or the day is
    /// new): the gateway seeds it from the metering store and tries again.
    #[error("the shared budget counters are not seeded")]
    Unseeded,
    #[error("metering sink: {0}")]
    Sink(String),
    /// Requests cannot be metered right now, so none is admitted (503).
    #[error("usage cannot be recorded right now; retry shortly")]
    MeteringUnavailable,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl GatewayError {
    pub fn invalid(what: &'static str, reason: impl Into<String>) -> GatewayError {
        GatewayError::InvalidInput {
            what,
            reason: reason.into(),
        }
    }

    /// How long a refused client should wait, for `Retry-After`.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GatewayError::RateLimited { retry_after, .. }
            | GatewayError::QuotaExhausted { retry_after, .. } => Some(*retry_after),
            GatewayError::MeteringUnavailable => Some(Duration::from_secs(5)),
            _ => None,
        }
    }
}
