//! `MistralForCausalLM`: Llama's layers plus an optional sliding attention window, which the
//! config carries as `sliding_window` and the attention kernel honours.

use super::ArchSpec;

pub const SPEC: ArchSpec = ArchSpec { qk_norm: false };
