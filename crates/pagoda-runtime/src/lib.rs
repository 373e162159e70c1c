//! Pagoda's engine loop. One OS thread owns the scheduler, the sampler, the model runner and
//! every request's text state, and runs `schedule -> forward -> sample -> update` for as long
//! as there is work. The async world talks to it through a cloneable `EngineHandle`: submit a
//! request, get a stream of outputs; drop the stream to abort.
//!
//! `load` builds the engine from a model directory, `engine_loop` runs it (surviving a panic in
//! a step), `handle` is the async side, `pending` bounds the work in flight per tenant.

mod config;
mod core;
mod engine_loop;
mod error;
#[cfg(feature = "fault-injection")]
mod faults;
mod handle;
mod kv_events;
mod load;
mod model_source;
mod output_channel;
mod pending;
mod request;
mod stats;

pub use config::EngineConfig;
pub use error::{Result, RuntimeError};
#[cfg(feature = "fault-injection")]
pub use faults::FaultInjection;
pub use handle::{start, EngineHandle, RequestStream};
pub use kv_events::{KvEventBatch, KvEventSink};
pub use load::ModelInfo;
pub use model_source::resolve_model;
pub use request::{
    Completion, FailureCause, GenerateRequest, RequestOutput, Timings, TokenLogprob, Usage,
};
pub use stats::EngineStats;

pub use pagoda_engine::{
    BlockHash, CacheSalt, FinishReason, KvCacheEvent, SamplingParams, TenantKey,
};
pub use pagoda_structured::{Constraint, ConstraintSpec, Grammars, StructuredError};
