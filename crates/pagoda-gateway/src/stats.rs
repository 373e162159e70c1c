//! Prometheus counters of tokens, cost and requests per tenant.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use rust_decimal::Decimal;

use crate::event::CostEvent;

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
    }
}
