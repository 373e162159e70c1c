//! Pagoda's tensor side: loads Hugging Face Llama-family checkpoints (safetensors only), keeps
//! their weights in the stored dtype, and runs flattened batches from many sequences over a
//! paged KV cache on the CPU.

pub mod aligned;
pub mod arch;
pub mod batch;
pub mod config;
pub mod error;
pub mod generation_config;
pub mod gguf;
pub mod kernels;
pub mod kv_cache;
pub mod layers;
pub mod loader;
pub mod matrix;
pub mod model;
pub mod packed;
pub mod quant;
pub mod runner;
pub mod weight_matrix;
pub mod weights;

pub use batch::{ForwardBatch, LogitsWanted};
pub use config::{Architecture, ModelConfig};
pub use error::{ModelError, Result};
pub use generation_config::GenerationConfig;
pub use kernels::Isa;
pub use kv_cache::{KvCacheDtype, KvCacheShape};
pub use loader::{LoadFormat, LoadOptions, QuantDot, QuantPages, QuantRepack};
pub use matrix::WeightDtype;
pub use model::CausalLm;
pub use runner::{Logits, ModelRunner};
