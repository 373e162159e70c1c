//! GGUF files (llama.cpp's checkpoints, one file or a split set): the header, the typed
//! metadata and the tensor directory, read from memory maps. Tensor bytes stay in the map; what they mean
//! (dequantization, kernels) is the model crate's business, and the tokenizer and chat
//! template in the metadata are the text crate's.

mod error;
mod file;
mod reader;
mod split;
mod tensor_type;
mod value;
mod writer;

pub use error::{GgufError, Result};
pub use file::{GgufFile, TensorInfo};
pub use split::{parse_shard_name, shard_file_name, SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS_COUNT};
pub use tensor_type::TensorType;
pub use value::MetaValue;
pub use writer::{gguf_bytes, split_gguf_bytes, TensorToWrite};
