//! GGUF checkpoints (llama.cpp's single-file format): the config from the metadata and the
//! weights from the memory map, under the Hugging Face names the model code asks for.

mod config;
mod names;
mod weights;

pub use config::config_from_gguf;
pub use weights::GgufWeights;
