//! What one audit line says.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::entity::EntityKind;
use crate::inject::RuleId;

/// The `prev_hash` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Request,
    Response,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Screened, nothing to do.
    Allow,
    /// Values were redacted or masked (or restored, on output).
    Transform,
    /// The request was refused.
    Block,
    /// Injection suspected and let through, as the policy asks.
    Flag,
    /// The response was cut short (canary leak).
    End,
}

/// What the caller reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub request_id: String,
    pub tenant: Option<String>,
    pub stage: Stage,
    pub decision: Decision,
    /// Entity types found, with counts.
    pub entities: BTreeMap<EntityKind, usize>,
    /// Injection rules that matched.
    pub rules: Vec<RuleId>,
    pub injection_score: Option<f32>,
    pub canary_leaked: bool,
    /// The client went away before every choice finished; the record says what the
    /// filters had seen by then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
    /// The output recited the system prompt (absent when false, as in older records).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_leaked: bool,
    /// Tool calls the model made that were not returned (out of the tenant's scope, not
    /// offered, or arguments outside the narrowed schema), by function name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls_refused: Vec<String>,
}

/// An event as written: numbered, timed, chained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub seq: u64,
    pub ts_ms: u64,
    #[serde(flatten)]
    pub event: AuditEvent,
    pub prev_hash: String,
    /// `hmac-sha256` in a keyed chain; absent (plain SHA-256) otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    pub hash: String,
}
