//! GGUF files (llama.cpp's single-file checkpoints): the header, the typed metadata and the
//! tensor directory, read from a memory map. Tensor bytes stay in the map; what they mean
//! (dequantization, kernels) is the model crate's business, and the tokenizer and chat
//! template in the metadata are the text crate's.

mod error;
mod file;
mod reader;
mod tensor_type;
mod value;
mod writer;

pub use error::{GgufError, Result};
pub use file::{GgufFile, TensorInfo};
pub use tensor_type::TensorType;
pub use value::MetaValue;
pub use writer::{gguf_bytes, TensorToWrite};
