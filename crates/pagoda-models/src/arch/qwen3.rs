//! `Qwen3ForCausalLM`: no q/k/v biases, a per-head RMSNorm on queries and keys, and an explicit
//! `head_dim` that need not equal `hidden_size / num_attention_heads`.

use super::ArchSpec;

pub const SPEC: ArchSpec = ArchSpec { qk_norm: true };
