//! Pagoda's OpenAI-compatible HTTP server.
//!
//! `run_serve` is `pagoda serve`: it resolves the settings (flags, `PAGODA_*` environment
//! variables, an optional TOML file), binds the listener, loads the model and serves until
//! SIGTERM or Ctrl-C, then drains. Tests start the same server in-process with `serve` on a
//! listener of their own and an `AppState` built around an engine they started.
//!
//! The request path: `wire` parses the body into typed requests, `prompt` turns messages or
//! prompts into token ids, `sampling` turns the parameters into the engine's
//! `SamplingParams`, `generate` submits and follows the engine's streams, and the routes
//! format the results as JSON or as server-sent events. Every failure is an `ApiError`,
//! mapped to an HTTP status and OpenAI's error JSON in `error.rs` alone.

mod args;
mod error;
mod gateway;
mod generate;
mod guard;
mod http;
mod ids;
mod logprobs;
mod metrics;
mod prompt;
mod routes;
mod sampling;
mod server;
mod settings;
mod sse;
mod state;
mod wire;

pub use args::{parse_byte_size, parse_duration, ServeArgs};
pub use error::{ApiError, ServerError};
pub use gateway::Caller;
pub use guard::{start as start_guard, GuardSettings};
pub use metrics::Metrics;
pub use http::HttpLimits;
pub use server::{router, run_serve, serve, serve_with, shutdown_signal};
pub use settings::Settings;
pub use state::{load_chat_template, AppState, Loaded};
