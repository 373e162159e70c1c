//! Pagoda's gateway: who may call (API keys, stored hashed), what they may do (tenant
//! policies from a reloadable TOML file), how much (request and token rates, concurrency,
//! daily and monthly budgets, reserved before a request runs and settled after), and what
//! every request cost (one CostEvent each, to SQLite, ClickHouse or a JSONL file).
//!
//! The server calls `Gateway::authenticate` for each request, `Gateway::admit` once the
//! prompt is tokenized, and feeds the returned `Ticket` the engine's outputs; the ticket
//! settles the reservation and records the event exactly once.

mod admin_log;
mod alerts;
mod anchors;
mod bill;
pub mod clock;
mod db;
mod error;
mod event;
mod gateway;
mod ids;
mod keys;
pub mod limits;
mod policy;
mod pricing;
mod secret;
mod settlement;
pub mod sink;
mod stats;
mod ticket;
mod usage;

pub use admin_log::AdminAction;
pub use anchors::AuditAnchors;
pub use error::{GatewayError, Limit};
pub use event::{CostEvent, Status};
pub use gateway::{
    open_sink, Admitted, Caller, Gateway, GatewayConfig, MeteringFailure, PlannedPrompt,
};
pub use ids::{random_hex, EventId, KeyId, RequestId, TenantId};
pub use keys::{KeyRecord, KeyStore};
pub use policy::{allows_tool, Budget, Policy, PolicyStore, TenantPolicy};
pub use pricing::{ModelPrice, TokenUsage};
pub use secret::ApiKey;
pub use sink::{Sink, SinkSpec};
pub use ticket::{ChoiceEnd, Ticket};
pub use usage::{UsageQuery, UsageRow};
