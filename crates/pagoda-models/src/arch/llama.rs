//! `LlamaForCausalLM`: the baseline. Biases only when `attention_bias` is set; rotary scaling
//! (`linear`, `llama3`) comes from the config.

use super::ArchSpec;

pub const SPEC: ArchSpec = ArchSpec { qk_norm: false };
