//! Counters in Redis, shared by every replica. Each admission is one Lua script that checks
//! all limits and takes them together, and Redis runs scripts one at a time, so N replicas
//! enforce one limit instead of N times it. Time comes from Redis' own clock (`TIME`), so
//! replicas with skewed clocks still agree on the token buckets.
//!
//! Money is kept as integer nanos of the currency (costs rounded up, budgets down, so
//! rounding can only make enforcement stricter). Lua compares them as doubles, which is
//! exact up to 2^53 nanos, about nine million currency units per tenant and period.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

use super::{hard_limit, Reservation, Spend};
use crate::clock::Period;
use crate::error::{GatewayError, Limit};
use crate::policy::TenantPolicy;

const RESERVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function level(key, limit)
  local v = redis.call('HMGET', key, 'level', 'ts')
  local lv, ts = tonumber(v[1]), tonumber(v[2])
  if lv == nil then return limit end
  return math.min(limit, lv + math.max(0, now - ts) * limit / 60000)
end
local rpm, tpm, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, cost = tonumber(ARGV[4]), tonumber(ARGV[5])
local day_limit, month_limit = tonumber(ARGV[6]), tonumber(ARGV[7])
local seqs = tonumber(ARGV[8])
-- A budgeted tenant's spend must have been seeded from the metering store this day (Redis
-- may have restarted empty): the caller seeds and comes back.
if ARGV[9] == '1' and redis.call('EXISTS', KEYS[8]) == 0 then return {7, 0} end
-- In-flight sequences are leases (KEYS[3]: lease -> expiry, KEYS[9]: lease -> sequences):
-- a lease its replica never gave back (it died) expires on its own.
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
for _, lease in ipairs(expired) do
  redis.call('ZREM', KEYS[3], lease)
  redis.call('HDEL', KEYS[9], lease)
end
local inflight = 0
for _, n in ipairs(redis.call('HVALS', KEYS[9])) do inflight = inflight + tonumber(n) end
if conc >= 0 and inflight + seqs > conc then return {3, 1000} end
local rl, tl
if rpm >= 0 then
  rl = level(KEYS[1], rpm)
  if rl < 1 then return {1, math.ceil((1 - rl) * 60000 / math.max(rpm, 1))} end
end
if tpm >= 0 then
  if tokens > tpm then return {2, 60000} end
  tl = level(KEYS[2], tpm)
  if tl < tokens then return {2, math.ceil((tokens - tl) * 60000 / math.max(tpm, 1))} end
end
local day = tonumber(redis.call('GET', KEYS[4]) or '0')
local month = tonumber(redis.call('GET', KEYS[5]) or '0')
local rday = tonumber(redis.call('GET', KEYS[6]) or '0')
local rmonth = tonumber(redis.call('GET', KEYS[7]) or '0')
if day_limit >= 0 and day + rday + cost > day_limit then return {4, 0} end
if month_limit >= 0 and month + rmonth + cost > month_limit then return {5, 0} end
-- Past 2^53 nanos the sums are no longer exact: refused before anything is written.
if month + rmonth + cost > 9007199254740992 then return {6, 0} end
if rpm >= 0 then
  redis.call('HSET', KEYS[1], 'level', tostring(rl - 1), 'ts', now)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
if tpm >= 0 then
  redis.call('HSET', KEYS[2], 'level', tostring(tl - tokens), 'ts', now)
  redis.call('PEXPIRE', KEYS[2], 120000)
end
local ttl = tonumber(ARGV[11])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[10])
redis.call('HSET', KEYS[9], ARGV[10], seqs)
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('PEXPIRE', KEYS[9], ttl)
rday = redis.call('INCRBY', KEYS[6], ARGV[5])
redis.call('EXPIRE', KEYS[6], 3 * 86400)
rmonth = redis.call('INCRBY', KEYS[7], ARGV[5])
redis.call('EXPIRE', KEYS[7], 40 * 86400)
return {0, 0, tostring(day), tostring(month), tostring(rday), tostring(rmonth)}
"#;

const SETTLE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tpm, refund, seqs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[6])
redis.call('HDEL', KEYS[7], ARGV[6])
if tpm >= 0 and refund > 0 then
  local v = redis.call('HMGET', KEYS[1], 'level', 'ts')
  local lv, ts = tonumber(v[1]), tonumber(v[2])
  if lv ~= nil then
    lv = math.min(tpm, lv + math.max(0, now - ts) * tpm / 60000 + refund)
    redis.call('HSET', KEYS[1], 'level', tostring(lv), 'ts', now)
  end
end
local function unreserve(key)
  local left = tonumber(redis.call('GET', key) or '0') - tonumber(ARGV[5])
  if left > 0 then redis.call('SET', key, left, 'KEEPTTL') else redis.call('DEL', key) end
  return math.max(left, 0)
end
local rday = unreserve(KEYS[5])
local rmonth = unreserve(KEYS[6])
local day = redis.call('INCRBY', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[3], 3 * 86400)
local month = redis.call('INCRBY', KEYS[4], ARGV[3])
redis.call('EXPIRE', KEYS[4], 40 * 86400)
return {tostring(day), tostring(month), tostring(rday), tostring(rmonth)}
"#;

/// Raises the settled spend to what the metering store holds (never lowers it: settlements
/// since a restart are counted in both), and marks the day as seeded.
const SEED: &str = r#"
for i = 1, 2 do
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0')
  local store = tonumber(ARGV[i])
  if store > cur then redis.call('SET', KEYS[i], ARGV[i]) end
  redis.call('EXPIRE', KEYS[i], i == 1 and 3 * 86400 or 40 * 86400)
end
redis.call('SET', KEYS[3], '1', 'EX', 3 * 86400)
return 0
"#;

/// How long one Redis round trip may take before admission fails closed (a 500), and how
/// long a connection attempt may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The whole of one call, reconnection attempts included.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub struct RedisLimiter {
    conn: ConnectionManager,
    reserve: Script,
    settle: Script,
    seed: Script,
    prefix: String,
    lease_ttl: Duration,
}

fn nanos_up(d: Decimal) -> i64 {
    (d * Decimal::from(1_000_000_000u64))
        .ceil()
        .to_i64()
        .unwrap_or(i64::MAX)
}

fn nanos_down(d: Decimal) -> i64 {
    (d * Decimal::from(1_000_000_000u64))
        .floor()
        .to_i64()
        .unwrap_or(i64::MAX)
}

fn from_nanos(text: &str) -> Decimal {
    text.parse::<i64>()
        .map_or(Decimal::ZERO, |n| Decimal::new(n, 9))
}

fn limit_arg(limit: Option<u64>) -> i64 {
    limit.map_or(-1, |l| l.min(i64::MAX as u64) as i64)
}

/// A Redis call that does not answer in `CALL_TIMEOUT` is an error, never a hang.
async fn bounded<T>(call: impl Future<Output = T>) -> Result<T, GatewayError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| GatewayError::RedisTimeout(CALL_TIMEOUT))
}

impl RedisLimiter {
    /// `lease_ttl`: how long an admitted request's concurrency lease lives if its replica
    /// never settles it.
    pub async fn connect(url: &str, lease_ttl: Duration) -> Result<RedisLimiter, GatewayError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(RESPONSE_TIMEOUT)
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_number_of_retries(2);
        let conn = bounded(ConnectionManager::new_with_config(client, config)).await??;
        Ok(RedisLimiter {
            conn,
            reserve: Script::new(RESERVE),
            settle: Script::new(SETTLE),
            seed: Script::new(SEED),
            prefix: "pagoda:gw".into(),
            lease_ttl,
        })
    }

    /// Sets the reservation's day and month spend from the metering store's figures.
    pub async fn seed(
        &self,
        r: &Reservation,
        day: Decimal,
        month: Decimal,
    ) -> Result<(), GatewayError> {
        let (day_key, month_key) = self.spend_keys(r);
        let mut conn = self.conn.clone();
        let mut call = self.seed.prepare_invoke();
        call.key(day_key)
            .key(month_key)
            .key(self.seeded_key(r))
            .arg(nanos_up(day))
            .arg(nanos_up(month));
        bounded(call.invoke_async::<i64>(&mut conn)).await??;
        Ok(())
    }

    fn seeded_key(&self, r: &Reservation) -> String {
        self.key(r, &format!("seeded:d{}", r.day))
    }

    /// Keys of one tenant, in one hash slot (the braces) so a Redis Cluster can run the
    /// script.
    fn key(&self, r: &Reservation, what: &str) -> String {
        format!("{}:{{{}}}:{what}", self.prefix, r.tenant)
    }

    /// Settled spend of the reservation's day and month.
    fn spend_keys(&self, r: &Reservation) -> (String, String) {
        (
            self.key(r, &format!("spend:d{}", r.day)),
            self.key(r, &format!("spend:m{}", r.month)),
        )
    }

    /// What requests in flight have reserved in the same periods.
    fn reserved_keys(&self, r: &Reservation) -> (String, String) {
        (
            self.key(r, &format!("reserved:d{}", r.day)),
            self.key(r, &format!("reserved:m{}", r.month)),
        )
    }

    pub async fn reserve(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
    ) -> Result<Spend, GatewayError> {
        let (day_key, month_key) = self.spend_keys(r);
        let (reserved_day, reserved_month) = self.reserved_keys(r);
        let limit = |p| hard_limit(policy, p).map_or(-1, nanos_down);
        let mut conn = self.conn.clone();
        let mut call = self.reserve.prepare_invoke();
        call.key(self.key(r, "rpm"))
            .key(self.key(r, "tpm"))
            .key(self.key(r, "leases"))
            .key(day_key)
            .key(month_key)
            .key(reserved_day)
            .key(reserved_month)
            .key(self.seeded_key(r))
            .key(self.key(r, "lease-seqs"))
            .arg(limit_arg(policy.requests_per_minute))
            .arg(limit_arg(policy.tokens_per_minute))
            .arg(limit_arg(policy.max_concurrent))
            .arg(r.tokens)
            .arg(nanos_up(r.cost))
            .arg(limit(Period::Day))
            .arg(limit(Period::Month))
            .arg(r.sequences)
            .arg(if policy.budget.is_some() { "1" } else { "0" })
            .arg(&r.lease)
            .arg(self.lease_ttl.as_millis() as u64);
        let reply: Vec<redis::Value> = bounded(call.invoke_async(&mut conn)).await??;
        let int = |i: usize| match reply.get(i) {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        };
        let text = |i: usize| match reply.get(i) {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let wait = std::time::Duration::from_millis(int(1).max(1) as u64);
        let now = crate::clock::now_ms();
        match int(0) {
            0 => Ok(Spend {
                day: from_nanos(&text(2)),
                month: from_nanos(&text(3)),
                reserved_day: from_nanos(&text(4)),
                reserved_month: from_nanos(&text(5)),
            }),
            7 => Err(GatewayError::Unseeded),
            6 => Err(GatewayError::invalid(
                "max_tokens",
                "the worst-case cost of this request is too large to account for",
            )),
            1 => Err(GatewayError::RateLimited {
                limit: Limit::RequestsPerMinute,
                retry_after: wait,
            }),
            2 => Err(GatewayError::RateLimited {
                limit: Limit::TokensPerMinute,
                retry_after: wait,
            }),
            3 => Err(GatewayError::RateLimited {
                limit: Limit::Concurrency,
                retry_after: wait,
            }),
            code => {
                let period = if code == 4 {
                    Period::Day
                } else {
                    Period::Month
                };
                Err(GatewayError::QuotaExhausted {
                    tenant: r.tenant.to_string(),
                    period: period.name(),
                    retry_after: period.until_end(now),
                })
            }
        }
    }

    pub async fn settle(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
        tokens: u64,
        cost: Decimal,
    ) -> Result<Spend, GatewayError> {
        let (day_key, month_key) = self.spend_keys(r);
        let (reserved_day, reserved_month) = self.reserved_keys(r);
        let mut conn = self.conn.clone();
        let mut call = self.settle.prepare_invoke();
        call.key(self.key(r, "tpm"))
            .key(self.key(r, "leases"))
            .key(day_key)
            .key(month_key)
            .key(reserved_day)
            .key(reserved_month)
            .key(self.key(r, "lease-seqs"))
            .arg(limit_arg(policy.tokens_per_minute))
            .arg(r.tokens.saturating_sub(tokens))
            .arg(nanos_up(cost))
            .arg(r.sequences)
            .arg(nanos_up(r.cost))
            .arg(&r.lease);
        let reply: Vec<String> = bounded(call.invoke_async(&mut conn)).await??;
        let at = |i: usize| reply.get(i).map_or(Decimal::ZERO, |s| from_nanos(s));
        Ok(Spend {
            day: at(0),
            month: at(1),
            reserved_day: at(2),
            reserved_month: at(3),
        })
    }
}
