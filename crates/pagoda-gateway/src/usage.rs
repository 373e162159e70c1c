//! Usage queries: tokens and cost per tenant, optionally per model and per hour.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::clock::hour_label;
use crate::error::GatewayError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageQuery {
    pub tenant: Option<String>,
    /// Inclusive, milliseconds since the epoch.
    pub from_ms: Option<i64>,
    /// Exclusive.
    pub to_ms: Option<i64>,
    pub by_model: bool,
    pub by_hour: bool,
}

impl UsageQuery {
    /// "model,hour", "model", "hour", "" or "tenant" (tenants are always grouped).
    pub fn set_group_by(&mut self, text: &str) -> Result<(), GatewayError> {
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "model" => self.by_model = true,
                "hour" => self.by_hour = true,
                "tenant" => {}
                other => {
                    return Err(GatewayError::invalid(
                        "group_by",
                        format!("`{other}` is not one of tenant, model, hour"),
                    ))
                }
            }
        }
        Ok(())
    }

    pub fn matches(&self, tenant: &str, ts_ms: i64) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == tenant)
            && self.from_ms.is_none_or(|f| ts_ms >= f)
            && self.to_ms.is_none_or(|t| ts_ms < t)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    pub tenant: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Start of the hour, UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hour: Option<String>,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    #[serde(with = "rust_decimal::serde::str")]
    pub cost: Decimal,
    /// Accelerator time of the requests' forward passes, in milliseconds.
    pub compute_ms: f64,
}

/// Folds event rows into usage rows, for stores that cannot sum decimals themselves.
#[derive(Default)]
pub struct Aggregator {
    rows: BTreeMap<(String, Option<String>, Option<String>), UsageRow>,
}

/// The fields of one event a usage query needs.
pub struct EventFigures<'a> {
    pub tenant: &'a str,
    pub model: &'a str,
    pub ts_ms: i64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    pub cost: Decimal,
    pub compute_ms: f64,
}

impl Aggregator {
    pub fn add(&mut self, query: &UsageQuery, e: EventFigures<'_>) {
        if !query.matches(e.tenant, e.ts_ms) {
            return;
        }
        let model = query.by_model.then(|| e.model.to_string());
        let hour = query.by_hour.then(|| hour_label(e.ts_ms));
        let row = self
            .rows
            .entry((e.tenant.to_string(), model.clone(), hour.clone()))
            .or_insert_with(|| UsageRow {
                tenant: e.tenant.to_string(),
                model,
                hour,
                requests: 0,
                prompt_tokens: 0,
                cached_tokens: 0,
                completion_tokens: 0,
                cost: Decimal::ZERO,
                compute_ms: 0.0,
            });
        row.requests += 1;
        row.prompt_tokens += e.prompt_tokens;
        row.cached_tokens += e.cached_tokens;
        row.completion_tokens += e.completion_tokens;
        row.cost += e.cost;
        row.compute_ms += e.compute_ms;
    }

    /// Rows ordered by tenant, model, hour.
    pub fn finish(self) -> Vec<UsageRow> {
        self.rows.into_values().collect()
    }
}
