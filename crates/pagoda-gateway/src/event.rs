//! The CostEvent: one per request, whatever its end.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, KeyId, RequestId, TenantId};

/// How a metered request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every choice finished (stop or length).
    Completed,
    /// The engine failed it.
    Failed,
    /// The client went away first; tokens produced so far are billed.
    Aborted,
    /// Admitted, then refused before it ran (e.g. the engine queue was full); free.
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Aborted => "aborted",
            Status::Rejected => "rejected",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        [
            Status::Completed,
            Status::Failed,
            Status::Aborted,
            Status::Rejected,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostEvent {
    pub event_id: EventId,
    pub request_id: RequestId,
    pub tenant: TenantId,
    pub key_id: KeyId,
    pub model: String,
    pub prompt_tokens: u64,
    /// Part of `prompt_tokens`.
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// The request's share of engine step time.
    pub compute_ms: f64,
    pub queue_ms: f64,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: f64,
    pub status: Status,
    pub finish_reason: Option<String>,
    #[serde(with = "rust_decimal::serde::str")]
    pub cost: Decimal,
    pub currency: String,
    /// When the request ended, milliseconds since the epoch.
    pub ts_ms: i64,
}

/// An event with only its numbers set, for tests of what stores and queues do with events.
#[cfg(test)]
pub(crate) fn test_event(i: u64) -> CostEvent {
    CostEvent {
        event_id: EventId::new(format!("e{i}")),
        request_id: RequestId::new(format!("r{i}")),
        tenant: TenantId::new("t"),
        key_id: KeyId::new("k"),
        model: "m".into(),
        prompt_tokens: i,
        cached_tokens: 0,
        completion_tokens: 0,
        compute_ms: 0.0,
        queue_ms: 0.0,
        ttft_ms: None,
        e2e_ms: 0.0,
        status: Status::Completed,
        finish_reason: None,
        cost: Decimal::ZERO,
        currency: "USD".into(),
        ts_ms: 0,
    }
}
