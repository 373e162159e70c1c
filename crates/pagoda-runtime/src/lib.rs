//! Pagoda's engine loop. One OS thread owns the scheduler, the sampler, the model runner and
//! every request's text state, and runs `schedule -> forward -> sample -> update` for as long
//! as there is work. The async world talks to it through a cloneable `EngineHandle`: submit a
//! request, get a stream of outputs; drop the stream to abort.

mod config;
mod core;
mod error;
mod handle;
mod model_source;
mod request;
mod stats;

pub use config::EngineConfig;
pub use error::{Result, RuntimeError};
pub use handle::{start, EngineHandle, ModelInfo, RequestStream};
pub use model_source::resolve_model;
pub use request::{Completion, GenerateRequest, RequestOutput, Timings, TokenLogprob, Usage};
pub use stats::EngineStats;

pub use pagoda_engine::{CacheSalt, FinishReason, SamplingParams, TenantKey};
