//! In-process counters: one mutex over every tenant's state, held for a few hundred
//! nanoseconds per admission, which is simpler and faster than finer locking at these rates.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rust_decimal::Decimal;

use super::bucket::Bucket;
use super::{hard_limit, Reservation, Spend};
use crate::clock::Period;
use crate::error::{GatewayError, Limit};
use crate::ids::TenantId;
use crate::policy::TenantPolicy;

/// One period's money: settled spend and open reservations.
#[derive(Debug, Default)]
struct Ledger {
    key: i64,
    spent: Decimal,
    reserved: Decimal,
}

impl Ledger {
    /// The ledger of period `key`, emptied if it was another period's.
    fn at(&mut self, key: i64) -> &mut Ledger {
        if self.key != key {
            self.key = key;
            self.spent = Decimal::ZERO;
            self.reserved = Decimal::ZERO;
        }
        self
    }

    fn committed(&self) -> Decimal {
        self.spent + self.reserved
    }
}

fn spend(state: &TenantState) -> Spend {
    Spend {
        day: state.day.spent,
        month: state.month.spent,
        reserved_day: state.day.reserved,
        reserved_month: state.month.reserved,
    }
}

#[derive(Debug, Default)]
struct TenantState {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
    in_flight: u64,
    day: Ledger,
    month: Ledger,
}

#[derive(Default)]
pub struct LocalLimiter {
    tenants: Mutex<HashMap<TenantId, TenantState>>,
}

impl LocalLimiter {
    pub fn new() -> LocalLimiter {
        LocalLimiter::default()
    }

    /// Starts a tenant's spend from what the metering store already holds, so a restart
    /// does not hand out a fresh budget.
    pub fn seed(
        &self,
        tenant: &TenantId,
        day: i64,
        day_spent: Decimal,
        month: i64,
        month_spent: Decimal,
    ) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let state = tenants.entry(tenant.clone()).or_default();
        state.day.at(day).spent = day_spent;
        state.month.at(month).spent = month_spent;
    }

    pub fn reserve(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
        now_ms: i64,
    ) -> Result<Spend, GatewayError> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let state = tenants.entry(r.tenant.clone()).or_default();
        if let Some(max) = policy.max_concurrent {
            if state.in_flight.saturating_add(r.sequences) > max {
                return Err(GatewayError::RateLimited {
                    limit: Limit::Concurrency,
                    retry_after: Duration::from_secs(1),
                });
            }
        }
        let requests = rate(&mut state.requests, policy.requests_per_minute, 1, now_ms)
            .map_err(|w| limited(Limit::RequestsPerMinute, w))?;
        let tokens = rate(
            &mut state.tokens,
            policy.tokens_per_minute,
            r.tokens,
            now_ms,
        )
        .map_err(|w| limited(Limit::TokensPerMinute, w))?;
        for (period, ledger, key) in [
            (Period::Day, &mut state.day, r.day),
            (Period::Month, &mut state.month, r.month),
        ] {
            if let Some(limit) = hard_limit(policy, period) {
                if ledger.at(key).committed() + r.cost > limit {
                    return Err(GatewayError::QuotaExhausted {
                        tenant: r.tenant.to_string(),
                        period: period.name(),
                        retry_after: period.until_end(now_ms),
                    });
                }
            }
        }
        // Every check passed: take it all at once.
        if let (Some(bucket), true) = (state.requests.as_mut(), requests) {
            bucket.take(1);
        }
        if let (Some(bucket), true) = (state.tokens.as_mut(), tokens) {
            bucket.take(r.tokens);
        }
        state.in_flight = state.in_flight.saturating_add(r.sequences);
        state.day.at(r.day).reserved += r.cost;
        state.month.at(r.month).reserved += r.cost;
        Ok(spend(state))
    }

    /// Whether `reserve` could pass for a request of `sequences` sequences, without taking
    /// anything: refuses a tenant that is already out of concurrency, request rate, token
    /// rate or hard budget before the server spends CPU on the request.
    pub fn precheck(
        &self,
        policy: &TenantPolicy,
        tenant: &TenantId,
        sequences: u64,
        now_ms: i64,
    ) -> Result<(), GatewayError> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = tenants.get_mut(tenant) else {
            return Ok(());
        };
        if let Some(max) = policy.max_concurrent {
            if state.in_flight.saturating_add(sequences) > max {
                return Err(limited(Limit::Concurrency, Duration::from_secs(1)));
            }
        }
        rate(&mut state.requests, policy.requests_per_minute, 1, now_ms)
            .map_err(|w| limited(Limit::RequestsPerMinute, w))?;
        // At least one token must be left; the request's own count is checked at admission.
        rate(&mut state.tokens, policy.tokens_per_minute, 1, now_ms)
            .map_err(|w| limited(Limit::TokensPerMinute, w))?;
        for (period, ledger) in [(Period::Day, &state.day), (Period::Month, &state.month)] {
            let current = ledger.key == period.key(now_ms);
            if let (Some(limit), true) = (hard_limit(policy, period), current) {
                if ledger.committed() >= limit {
                    return Err(GatewayError::QuotaExhausted {
                        tenant: tenant.to_string(),
                        period: period.name(),
                        retry_after: period.until_end(now_ms),
                    });
                }
            }
        }
        Ok(())
    }

    pub fn settle(
        &self,
        policy: &TenantPolicy,
        r: &Reservation,
        tokens: u64,
        cost: Decimal,
        now_ms: i64,
    ) -> Spend {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let state = tenants.entry(r.tenant.clone()).or_default();
        state.in_flight = state.in_flight.saturating_sub(r.sequences);
        if let (Some(bucket), Some(limit)) = (state.tokens.as_mut(), policy.tokens_per_minute) {
            bucket.give_back(limit, r.tokens.saturating_sub(tokens), now_ms);
        }
        // A request admitted in a period that has rolled over since is spent in the current
        // one (as its cost event is dated); its reservation went with the old period.
        for (ledger, key, period) in [
            (&mut state.day, r.day, Period::Day),
            (&mut state.month, r.month, Period::Month),
        ] {
            if ledger.key == key {
                ledger.reserved = (ledger.reserved - r.cost).max(Decimal::ZERO);
                ledger.spent += cost;
            } else {
                ledger.at(period.key(now_ms)).spent += cost;
            }
        }
        spend(state)
    }
}

fn limited(limit: Limit, retry_after: Duration) -> GatewayError {
    GatewayError::RateLimited { limit, retry_after }
}

/// Checks a rate; `Ok(true)` when a bucket applies and has room.
fn rate(
    bucket: &mut Option<Bucket>,
    limit: Option<u64>,
    amount: u64,
    now_ms: i64,
) -> Result<bool, Duration> {
    let Some(limit) = limit else {
        return Ok(false);
    };
    let bucket = bucket.get_or_insert_with(|| Bucket::full(limit, now_ms));
    bucket.check(limit, amount, now_ms)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use std::str::FromStr;

    fn policy(toml: &str) -> TenantPolicy {
        Policy::from_toml(toml)
            .unwrap()
            .tenant(&TenantId::new("t"))
            .clone()
    }

    #[test]
    fn a_hard_budget_admits_until_the_worst_case_would_overspend() {
        let p = policy("[tenants.t]\nbudget = { daily = \"1.00\" }\n");
        let l = LocalLimiter::new();
        let r = Reservation::new(
            TenantId::new("t"),
            10,
            Decimal::from_str("0.30").unwrap(),
            0,
        );
        for _ in 0..3 {
            l.reserve(&p, &r, 0).unwrap();
        }
        assert!(matches!(
            l.reserve(&p, &r, 0),
            Err(GatewayError::QuotaExhausted {
                period: "daily",
                ..
            })
        ));
        // One request used only a third of its reservation: room for another.
        l.settle(&p, &r, 5, Decimal::from_str("0.10").unwrap(), 0);
        let spend = l.reserve(&p, &r, 0).unwrap();
        assert_eq!(spend.day, Decimal::from_str("0.10").unwrap());
        assert_eq!(spend.reserved_day, Decimal::from_str("0.90").unwrap());
        // The next day starts empty.
        let tomorrow = Reservation::new(TenantId::new("t"), 10, r.cost, 86_400_000);
        assert!(l.reserve(&p, &tomorrow, 86_400_000).is_ok());
    }

    #[test]
    fn concurrency_and_token_rates_are_enforced_and_released() {
        let p = policy("[tenants.t]\nmax_concurrent = 2\ntokens_per_minute = 100\n");
        let l = LocalLimiter::new();
        let r = Reservation::new(TenantId::new("t"), 40, Decimal::ZERO, 0);
        l.reserve(&p, &r, 0).unwrap();
        l.reserve(&p, &r, 0).unwrap();
        assert!(matches!(
            l.reserve(&p, &r, 0),
            Err(GatewayError::RateLimited {
                limit: Limit::Concurrency,
                ..
            })
        ));
        l.settle(&p, &r, 40, Decimal::ZERO, 0);
        // A slot is free but only 20 tokens are left this minute.
        assert!(matches!(
            l.reserve(&p, &r, 0),
            Err(GatewayError::RateLimited {
                limit: Limit::TokensPerMinute,
                ..
            })
        ));
        // Unused tokens flow back at settlement.
        l.settle(&p, &r, 0, Decimal::ZERO, 0);
        assert!(l.reserve(&p, &r, 0).is_ok());
    }

    #[test]
    fn concurrency_counts_sequences_not_requests() {
        let p = policy("[tenants.t]\nmax_concurrent = 8\n");
        let l = LocalLimiter::new();
        let wide = Reservation::new(TenantId::new("t"), 10, Decimal::ZERO, 0).with_sequences(6);
        l.reserve(&p, &wide, 0).unwrap();
        let three = Reservation::new(TenantId::new("t"), 10, Decimal::ZERO, 0).with_sequences(3);
        assert!(matches!(
            l.reserve(&p, &three, 0),
            Err(GatewayError::RateLimited {
                limit: Limit::Concurrency,
                ..
            })
        ));
        assert!(l.precheck(&p, &TenantId::new("t"), 3, 0).is_err());
        assert!(l.precheck(&p, &TenantId::new("t"), 2, 0).is_ok());
        l.settle(&p, &wide, 10, Decimal::ZERO, 0);
        l.reserve(&p, &three, 0).unwrap();
        assert!(l.precheck(&p, &TenantId::new("t"), 5, 0).is_ok());
        assert!(l.precheck(&p, &TenantId::new("t"), 6, 0).is_err());
    }

    #[test]
    fn precheck_refuses_a_tenant_already_out_of_rate_or_budget_and_takes_nothing() {
        let p = policy("[tenants.t]\nrequests_per_minute = 2\nbudget = { daily = \"1.00\" }\n");
        let l = LocalLimiter::new();
        let t = TenantId::new("t");
        let r = Reservation::new(t.clone(), 10, Decimal::from_str("0.60").unwrap(), 0);
        for _ in 0..5 {
            l.precheck(&p, &t, 1, 0).unwrap();
        }
        l.reserve(&p, &r, 0).unwrap();
        l.settle(&p, &r, 10, Decimal::from_str("1.00").unwrap(), 0);
        assert!(matches!(
            l.precheck(&p, &t, 1, 0),
            Err(GatewayError::QuotaExhausted { .. })
        ));
        let p = policy("[tenants.t]\nrequests_per_minute = 1\n");
        let l = LocalLimiter::new();
        l.reserve(&p, &r, 0).unwrap();
        assert!(matches!(
            l.precheck(&p, &t, 1, 0),
            Err(GatewayError::RateLimited {
                limit: Limit::RequestsPerMinute,
                ..
            })
        ));
    }
}
