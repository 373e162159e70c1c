//! Budget alerts: logged, and POSTed to the tenant's webhook if it has one, once per
//! threshold and period on each replica. They follow settled spend, checked when a request
//! settles; what requests in flight have reserved is reported beside it.

use std::collections::HashMap;
use std::sync::Mutex;

use rust_decimal::Decimal;
use serde_json::json;

use crate::clock::Period;
use crate::ids::TenantId;
use crate::limits::{Reservation, Spend};
use crate::policy::TenantPolicy;

pub struct Alerter {
    /// The highest threshold already announced per tenant and period.
    fired: Mutex<HashMap<(TenantId, Period, i64), Decimal>>,
    http: reqwest::Client,
}

impl Default for Alerter {
    fn default() -> Self {
        // Alerts are rare: a fresh connection for each one, because a pooled connection the
        // receiver has since closed loses the alert when the POST is written into it.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Self {
            fired: Mutex::default(),
            http,
        }
    }
}

impl Alerter {
    pub fn check(&self, policy: &TenantPolicy, r: &Reservation, spend: Spend, currency: &str) {
        let Some(budget) = &policy.budget else {
            return;
        };
        for (period, key, limit, spent, reserved) in [
            (
                Period::Day,
                r.day,
                budget.daily,
                spend.day,
                spend.reserved_day,
            ),
            (
                Period::Month,
                r.month,
                budget.monthly,
                spend.month,
                spend.reserved_month,
            ),
        ] {
            let Some(limit) = limit.filter(|l| *l > Decimal::ZERO) else {
                continue;
            };
            let fraction = spent / limit;
            let Some(threshold) = budget
                .alerts
                .iter()
                .copied()
                .filter(|t| fraction >= *t)
                .max()
            else {
                continue;
            };
            {
                let mut fired = self.fired.lock().unwrap_or_else(|e| e.into_inner());
                let last = fired
                    .entry((r.tenant.clone(), period, key))
                    .or_insert(Decimal::MIN);
                if threshold <= *last {
                    continue;
                }
                *last = threshold;
            }
            tracing::warn!(
                tenant = %r.tenant,
                period = period.name(),
                %threshold,
                %spent,
                %reserved,
                %limit,
                currency,
                "budget alert"
            );
            if let (Some(url), Ok(handle)) =
                (&budget.webhook, tokio::runtime::Handle::try_current())
            {
                let body = json!({
                    "tenant": r.tenant.as_str(),
                    "period": period.name(),
                    "threshold": threshold.to_string(),
                    "spent": spent.to_string(),
                    "reserved": reserved.to_string(),
                    "budget": limit.to_string(),
                    "currency": currency,
                    "hard": budget.hard,
                });
                let request = self.http.post(url).json(&body);
                handle.spawn(async move {
                    if let Err(e) = request.send().await {
                        tracing::warn!(error = %e, "budget alert webhook failed");
                    }
                });
            }
        }
    }
}
