//! Admission counters: request and token rates, concurrency, and budget spend. Checking and
//! reserving happen in one atomic step (a mutex in process, a Lua script in Redis), so no
//! interleaving of concurrent requests can pass a limit that each alone would respect.

mod bucket;
mod local;
mod redis;

pub use local::LocalLimiter;
pub use redis::RedisLimiter;

use rust_decimal::Decimal;

use crate::clock::Period;
use crate::error::GatewayError;
use crate::ids::TenantId;
use crate::policy::TenantPolicy;

/// What one admitted request holds until it settles: its worst case.
#[derive(Debug, Clone)]
pub struct Reservation {
    pub tenant: TenantId,
    /// Prompt tokens plus every choice's max_tokens.
    pub tokens: u64,
    /// Sequences it runs at once (prompts x n): what the tenant's concurrency limit counts.
    pub sequences: u64,
    /// The most the request can cost.
    pub cost: Decimal,
    /// The budget periods it was admitted in; its cost is charged to these.
    pub day: i64,
    pub month: i64,
    /// Names its concurrency lease in Redis (the request id), so that a replica that dies
    /// mid-request leaks only its own lease, which expires.
    pub lease: String,
}

impl Reservation {
    /// The same reservation under the lease name `lease`.
    pub fn with_lease(mut self, lease: impl Into<String>) -> Reservation {
        self.lease = lease.into();
        self
    }

    /// The same reservation for a request that runs `sequences` sequences at once.
    pub fn with_sequences(mut self, sequences: u64) -> Reservation {
        self.sequences = sequences.max(1);
        self
    }

    pub fn new(tenant: TenantId, tokens: u64, cost: Decimal, now_ms: i64) -> Reservation {
        Reservation {
            tenant,
            tokens,
            sequences: 1,
            cost,
            day: Period::Day.key(now_ms),
            month: Period::Month.key(now_ms),
            lease: crate::ids::RequestId::random().to_string(),
        }
    }
}

/// A tenant's spend in the current periods: what settled requests cost, and apart from it
/// the worst cases still reserved by requests in flight (a hard budget counts both; alerts
/// only the settled spend, so one large reservation does not announce a crossing early).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    pub day: Decimal,
    pub month: Decimal,
    pub reserved_day: Decimal,
    pub reserved_month: Decimal,
}

pub enum Limiter {
    Local(LocalLimiter),
    Redis(RedisLimiter),
}

impl Limiter {
    pub async fn reserve(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
        now_ms: i64,
    ) -> Result<Spend, GatewayError> {
        match self {
            Limiter::Local(l) => l.reserve(policy, r, now_ms),
            Limiter::Redis(l) => l.reserve(policy, r).await,
        }
    }

    /// Replaces the reservation by what the request used: frees its concurrency slot,
    /// returns unused tokens to the token rate, and corrects the spend.
    pub async fn settle(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
        tokens: u64,
        cost: Decimal,
        now_ms: i64,
    ) -> Result<Spend, GatewayError> {
        match self {
            Limiter::Local(l) => Ok(l.settle(policy, r, tokens, cost, now_ms)),
            Limiter::Redis(l) => l.settle(policy, r, tokens, cost).await,
        }
    }
}

/// The budget limit of a period, if the tenant has a hard one there.
pub(crate) fn hard_limit(policy: &TenantPolicy, period: Period) -> Option<Decimal> {
    let budget = policy.budget.as_ref().filter(|b| b.hard)?;
    match period {
        Period::Day => budget.daily,
        Period::Month => budget.monthly,
    }
}
