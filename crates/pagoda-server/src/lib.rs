//! Pagoda's OpenAI-compatible HTTP server.
//!
//! `run_serve` is `pagoda serve`: it resolves the settings (flags, `PAGODA_*` environment
//! variables, an optional TOML file), binds the listener, loads the model and serves until
//! SIGTERM or Ctrl-C, then drains. Tests start the same server in-process with `serve` on a
//! listener of their own and an `AppState` built around an engine they started.
//!
//! The request path is one pipeline (`pipeline`) shared by both generating endpoints:
//! `wire` parses the body, `pipeline::validate` checks it once against `limits` into a typed
//! request (with `sampling` building the engine's `SamplingParams`), `gateway::precheck`
//! refuses a tenant out of rate or budget, `pipeline::prepare` screens (`guard`), renders and
//! tokenizes (`prompt`) on the blocking pool, `gateway::admit` reserves, and `generate`
//! submits and follows the engine's streams. The routes only format the results as JSON or
//! server-sent events. Every failure is an `ApiError`, mapped to an HTTP status and OpenAI's
//! error JSON in `error.rs` alone.

mod args;
mod audit_anchor;
mod chat_output;
mod console;
mod error;
mod gateway;
mod generate;
mod guard;
mod guard_metrics;
mod http;
mod ids;
pub mod kv_events;
mod limits;
mod logprobs;
mod metrics;
mod pipeline;
mod prompt;
mod routes;
mod sampling;
mod server;
mod settings;
mod slo;
mod slo_metrics;
mod sse;
mod state;
mod structured;
mod tools;
mod wire;

pub use args::{parse_byte_size, parse_duration, ServeArgs};
pub use audit_anchor::log_name as audit_log_name;
pub use chat_output::{ChatFeatures, ToolParser};
pub use error::{ApiError, ServerError};
pub use gateway::Caller;
pub use guard::GuardSettings;
pub use http::HttpLimits;
pub use limits::RequestLimits;
pub use metrics::Metrics;
pub use server::{router, run_serve, serve, serve_with, shutdown_signal, start_guard};
pub use settings::Settings;
pub use slo::{SloClass, SloClasses};
pub use state::{load_chat_template, AppState, Loaded};
