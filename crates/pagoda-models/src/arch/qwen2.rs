//! `Qwen2ForCausalLM`: biases on q, k and v (always; the config forces `attention_bias`),
//! usually tied input and output embeddings.

use super::ArchSpec;

pub const SPEC: ArchSpec = ArchSpec { qk_norm: false };
