//! Counters in Redis, shared by every replica. Each admission is one Lua script that checks
//! all limits and takes them together, and Redis runs scripts one at a time, so N replicas
//! enforce one limit instead of N times it. Time comes from Redis' own clock (`TIME`), so
//! replicas with skewed clocks still agree on the token buckets.
//!
//! Money is kept as integer nanos of the currency (costs rounded up, budgets down, so
//! rounding can only make enforcement stricter). Lua compares them as doubles, which is
//! exact up to 2^53 nanos, about nine million currency units per tenant and period.

use redis::aio::ConnectionManager;
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
local inflight = tonumber(redis.call('GET', KEYS[3]) or '0')
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
if day_limit >= 0 and day + cost > day_limit then return {4, 0} end
if month_limit >= 0 and month + cost > month_limit then return {5, 0} end
if rpm >= 0 then
  redis.call('HSET', KEYS[1], 'level', tostring(rl - 1), 'ts', now)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
if tpm >= 0 then
  redis.call('HSET', KEYS[2], 'level', tostring(tl - tokens), 'ts', now)
  redis.call('PEXPIRE', KEYS[2], 120000)
end
redis.call('INCRBY', KEYS[3], seqs)
redis.call('EXPIRE', KEYS[3], 86400)
day = redis.call('INCRBY', KEYS[4], ARGV[5])
redis.call('EXPIRE', KEYS[4], 3 * 86400)
month = redis.call('INCRBY', KEYS[5], ARGV[5])
redis.call('EXPIRE', KEYS[5], 40 * 86400)
return {0, 0, tostring(day), tostring(month)}
"#;

const SETTLE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tpm, refund, seqs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
if inflight > 0 then redis.call('DECRBY', KEYS[2], math.min(inflight, seqs)) end
if tpm >= 0 and refund > 0 then
  local v = redis.call('HMGET', KEYS[1], 'level', 'ts')
  local lv, ts = tonumber(v[1]), tonumber(v[2])
  if lv ~= nil then
    lv = math.min(tpm, lv + math.max(0, now - ts) * tpm / 60000 + refund)
    redis.call('HSET', KEYS[1], 'level', tostring(lv), 'ts', now)
  end
end
local day = redis.call('INCRBY', KEYS[3], ARGV[3])
local month = redis.call('INCRBY', KEYS[4], ARGV[3])
return {tostring(day), tostring(month)}
"#;

pub struct RedisLimiter {
    conn: ConnectionManager,
    reserve: Script,
    settle: Script,
    prefix: String,
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

impl RedisLimiter {
    pub async fn connect(url: &str) -> Result<RedisLimiter, GatewayError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(RedisLimiter {
            conn,
            reserve: Script::new(RESERVE),
            settle: Script::new(SETTLE),
            prefix: "pagoda:gw".into(),
        })
    }

    /// Keys of one tenant, in one hash slot (the braces) so a Redis Cluster can run the
    /// script.
    fn key(&self, r: &Reservation, what: &str) -> String {
        format!("{}:{{{}}}:{what}", self.prefix, r.tenant)
    }

    fn spend_keys(&self, r: &Reservation) -> (String, String) {
        (
            self.key(r, &format!("spend:d{}", r.day)),
            self.key(r, &format!("spend:m{}", r.month)),
        )
    }

    pub async fn reserve(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
    ) -> Result<Spend, GatewayError> {
        let (day_key, month_key) = self.spend_keys(r);
        let limit = |p| hard_limit(policy, p).map_or(-1, nanos_down);
        let mut conn = self.conn.clone();
        let reply: Vec<redis::Value> = self
            .reserve
            .key(self.key(r, "rpm"))
            .key(self.key(r, "tpm"))
            .key(self.key(r, "inflight"))
            .key(day_key)
            .key(month_key)
            .arg(limit_arg(policy.requests_per_minute))
            .arg(limit_arg(policy.tokens_per_minute))
            .arg(limit_arg(policy.max_concurrent))
            .arg(r.tokens)
            .arg(nanos_up(r.cost))
            .arg(limit(Period::Day))
            .arg(limit(Period::Month))
            .arg(r.sequences)
            .invoke_async(&mut conn)
            .await?;
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
            }),
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
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .settle
            .key(self.key(r, "tpm"))
            .key(self.key(r, "inflight"))
            .key(day_key)
            .key(month_key)
            .arg(limit_arg(policy.tokens_per_minute))
            .arg(r.tokens.saturating_sub(tokens))
            .arg(nanos_up(cost) - nanos_up(r.cost))
            .arg(r.sequences)
            .invoke_async(&mut conn)
            .await?;
        Ok(Spend {
            day: reply.first().map_or(Decimal::ZERO, |s| from_nanos(s)),
            month: reply.get(1).map_or(Decimal::ZERO, |s| from_nanos(s)),
        })
    }
}
