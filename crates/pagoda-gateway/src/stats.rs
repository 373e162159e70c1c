//! Prometheus counters of tokens, cost and requests per tenant, and gauges of each tenant's
//! settled spend against its budget in the current day and month.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use rust_decimal::Decimal;

use crate::clock::{now_ms, Period};
use crate::event::CostEvent;
use crate::limits::{Reservation, Spend};
use crate::policy::TenantPolicy;

#[derive(Default, Clone)]
struct Totals {
    prompt: u64,
    cached: u64,
    completion: u64,
    cost: Decimal,
    by_status: BTreeMap<&'static str, u64>,
}

#[derive(Default)]
pub struct TenantStats {
    tenants: Mutex<BTreeMap<(String, String), Totals>>,
    refused: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Per tenant and period: the period's key, settled spend, the limit and the currency,
    /// as of the tenant's last settled request.
    budgets: Mutex<BTreeMap<(String, Period), BudgetUse>>,
}

#[derive(Clone)]
struct BudgetUse {
    period_key: i64,
    spent: Decimal,
    limit: Decimal,
    currency: String,
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl TenantStats {
    pub fn observe(&self, e: &CostEvent) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let t = tenants
            .entry((e.tenant.to_string(), e.currency.clone()))
            .or_default();
        t.prompt += e.prompt_tokens;
        t.cached += e.cached_tokens;
        t.completion += e.completion_tokens;
        t.cost += e.cost;
        *t.by_status.entry(e.status.as_str()).or_default() += 1;
    }

    /// A request refused at admission (`reason`: rate_limit, quota, forbidden).
    pub fn refused(&self, tenant: &str, reason: &'static str) {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        *refused.entry((tenant.to_string(), reason)).or_default() += 1;
    }

    /// The settled spend of `r`'s tenant after one of its requests settled.
    pub fn budget(&self, policy: &TenantPolicy, r: &Reservation, spend: Spend, currency: &str) {
        let Some(budget) = &policy.budget else {
            return;
        };
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        for (period, key, limit, spent) in [
            (Period::Day, r.day, budget.daily, spend.day),
            (Period::Month, r.month, budget.monthly, spend.month),
        ] {
            let Some(limit) = limit.filter(|l| *l > Decimal::ZERO) else {
                continue;
            };
            budgets.insert(
                (r.tenant.to_string(), period),
                BudgetUse {
                    period_key: key,
                    spent,
                    limit,
                    currency: currency.to_string(),
                },
            );
        }
    }

    /// Budget gauges of the current periods only: a tenant idle since yesterday has spent
    /// nothing of today's budget, whatever it spent before.
    fn render_budgets(&self, out: &mut String) {
        let budgets = self
            .budgets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let now = now_ms();
        let current: Vec<_> = budgets
            .into_iter()
            .map(|((tenant, period), mut b)| {
                if b.period_key != period.key(now) {
                    b.spent = Decimal::ZERO;
                }
                (escape(&tenant), period.name(), b)
            })
            .collect();
        let _ = writeln!(out, "# HELP pagoda:gateway_budget_spent Settled spend of the current period, per tenant with a budget.");
        let _ = writeln!(out, "# TYPE pagoda:gateway_budget_spent gauge");
        for (tenant, period, b) in &current {
            let _ = writeln!(
                out,
                "pagoda:gateway_budget_spent{{tenant=\"{tenant}\",period=\"{period}\",currency=\"{}\"}} {}",
                escape(&b.currency),
                b.spent.normalize()
            );
        }
        let _ = writeln!(
            out,
            "# HELP pagoda:gateway_budget_limit The budget of the period, per tenant."
        );
        let _ = writeln!(out, "# TYPE pagoda:gateway_budget_limit gauge");
        for (tenant, period, b) in &current {
            let _ = writeln!(
                out,
                "pagoda:gateway_budget_limit{{tenant=\"{tenant}\",period=\"{period}\",currency=\"{}\"}} {}",
                escape(&b.currency),
                b.limit.normalize()
            );
        }
        let _ = writeln!(out, "# HELP pagoda:gateway_budget_used_ratio Settled spend over the budget (1 = all of it).");
        let _ = writeln!(out, "# TYPE pagoda:gateway_budget_used_ratio gauge");
        for (tenant, period, b) in &current {
            let ratio = (b.spent / b.limit).round_dp(6).normalize();
            let _ = writeln!(
                out,
                "pagoda:gateway_budget_used_ratio{{tenant=\"{tenant}\",period=\"{period}\"}} {ratio}"
            );
        }
    }

    pub fn render(&self, out: &mut String) {
        let tenants = self
            .tenants
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let _ = writeln!(
            out,
            "# HELP pagoda:gateway_tokens_total Tokens metered per tenant."
        );
        let _ = writeln!(out, "# TYPE pagoda:gateway_tokens_total counter");
        for ((tenant, _), t) in &tenants {
            let tenant = escape(tenant);
            for (kind, n) in [
                ("prompt", t.prompt),
                ("cached", t.cached),
                ("completion", t.completion),
            ] {
                let _ = writeln!(
                    out,
                    "pagoda:gateway_tokens_total{{tenant=\"{tenant}\",kind=\"{kind}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP pagoda:gateway_cost_total Cost metered per tenant."
        );
        let _ = writeln!(out, "# TYPE pagoda:gateway_cost_total counter");
        for ((tenant, currency), t) in &tenants {
            let _ = writeln!(
                out,
                "pagoda:gateway_cost_total{{tenant=\"{}\",currency=\"{}\"}} {}",
                escape(tenant),
                escape(currency),
                t.cost.normalize()
            );
        }
        let _ = writeln!(
            out,
            "# HELP pagoda:gateway_requests_total Metered requests per tenant and status."
        );
        let _ = writeln!(out, "# TYPE pagoda:gateway_requests_total counter");
        for ((tenant, _), t) in &tenants {
            for (status, n) in &t.by_status {
                let _ = writeln!(
                    out,
                    "pagoda:gateway_requests_total{{tenant=\"{}\",status=\"{status}\"}} {n}",
                    escape(tenant)
                );
            }
        }
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let _ = writeln!(out, "# HELP pagoda:gateway_refused_total Requests refused at admission per tenant and reason.");
        let _ = writeln!(out, "# TYPE pagoda:gateway_refused_total counter");
        for ((tenant, reason), n) in refused {
            let _ = writeln!(
                out,
                "pagoda:gateway_refused_total{{tenant=\"{}\",reason=\"{reason}\"}} {n}",
                escape(&tenant)
            );
        }
        self.render_budgets(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TenantId;
    use crate::policy::Policy;

    #[test]
    fn budget_gauges_follow_settled_spend_in_the_current_period_only() {
        let policy =
            Policy::from_toml("[tenants.acme]\nbudget = { daily = \"10\", monthly = \"100\" }\n")
                .unwrap();
        let acme = policy.tenant(&TenantId::new("acme"));
        let stats = TenantStats::default();
        let now = now_ms();
        let r = Reservation::new(TenantId::new("acme"), 1, Decimal::ONE, now);
        let spend = Spend {
            day: Decimal::new(25, 1),
            month: Decimal::new(50, 0),
            ..Spend::default()
        };
        stats.budget(acme, &r, spend, "USD");
        let mut out = String::new();
        stats.render(&mut out);
        for line in [
            "pagoda:gateway_budget_used_ratio{tenant=\"acme\",period=\"daily\"} 0.25",
            "pagoda:gateway_budget_used_ratio{tenant=\"acme\",period=\"monthly\"} 0.5",
            "pagoda:gateway_budget_spent{tenant=\"acme\",period=\"daily\",currency=\"USD\"} 2.5",
            "pagoda:gateway_budget_limit{tenant=\"acme\",period=\"monthly\",currency=\"USD\"} 100",
        ] {
            assert!(out.contains(line), "{line} not in {out}");
        }
        // Spend from yesterday is not today's.
        let yesterday = Reservation::new(TenantId::new("acme"), 1, Decimal::ONE, now - 86_400_000);
        stats.budget(acme, &yesterday, spend, "USD");
        let mut out = String::new();
        stats.render(&mut out);
        assert!(
            out.contains("pagoda:gateway_budget_used_ratio{tenant=\"acme\",period=\"daily\"} 0\n"),
            "{out}"
        );
        // A tenant without a budget has no gauges.
        let other = Reservation::new(TenantId::new("free"), 1, Decimal::ONE, now);
        stats.budget(policy.tenant(&TenantId::new("free")), &other, spend, "USD");
        let mut out = String::new();
        stats.render(&mut out);
        assert!(!out.contains("tenant=\"free\""), "{out}");
    }
}
