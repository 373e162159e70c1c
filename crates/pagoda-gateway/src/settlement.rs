//! What a ticket needs of the gateway when it closes, and nothing more: the counters to
//! settle its reservation in, the alerts and per-tenant stats that follow settled spend, and
//! the sink its event goes to. The gateway holds it behind an `Arc` and hands tickets a
//! clone, so a ticket never reaches back into the gateway itself.

use std::sync::Arc;

use rust_decimal::Decimal;
use tokio::sync::oneshot;

use crate::alerts::Alerter;
use crate::clock::now_ms;
use crate::event::CostEvent;
use crate::limits::{Limiter, Reservation, Spend};
use crate::policy::TenantPolicy;
use crate::sink::Sink;
use crate::stats::TenantStats;

pub struct Settlement {
    pub(crate) limiter: Limiter,
    pub(crate) sink: Sink,
    pub(crate) alerts: Alerter,
    pub(crate) stats: TenantStats,
}

impl Settlement {
    /// Replaces `reservation` by what was used. In process this is done at once; with Redis
    /// it runs as a task of its own, which finishes even if its waiter goes away.
    pub(crate) fn settle(
        self: &Arc<Self>,
        policy: &TenantPolicy,
        reservation: &Reservation,
        used: u64,
        cost: Decimal,
        currency: &str,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match &self.limiter {
            Limiter::Local(l) => {
                let spend = l.settle(policy, reservation, used, cost, now_ms());
                self.settled(policy, reservation, spend, currency);
                None
            }
            Limiter::Redis(_) => {
                let Ok(handle) = tokio::runtime::Handle::try_current() else {
                    tracing::error!("no runtime to settle a reservation in Redis");
                    return None;
                };
                let (this, policy, reservation) =
                    (self.clone(), policy.clone(), reservation.clone());
                let currency = currency.to_string();
                Some(handle.spawn(async move {
                    match this
                        .limiter
                        .settle(&policy, &reservation, used, cost, now_ms())
                        .await
                    {
                        Ok(spend) => this.settled(&policy, &reservation, spend, &currency),
                        Err(e) => {
                            tracing::error!(error = %e, tenant = %reservation.tenant, "settling a reservation failed")
                        }
                    }
                }))
            }
        }
    }

    /// What follows settled spend: budget alerts and the budget gauges.
    fn settled(&self, policy: &TenantPolicy, r: &Reservation, spend: Spend, currency: &str) {
        self.alerts.check(policy, r, spend, currency);
        self.stats.budget(policy, r, spend, currency);
    }

    /// Counts the event in the per-tenant stats and queues it; `ack` is told once durable.
    pub(crate) fn record(&self, event: CostEvent, ack: Option<oneshot::Sender<()>>) {
        self.stats.observe(&event);
        self.sink.record(event, ack);
    }
}
