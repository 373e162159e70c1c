//! What sets each supported architecture apart from the shared decoder. Everything else
//! (RMSNorm, rotary embedding, grouped-query attention, SwiGLU) is common to all four.

mod llama;
mod mistral;
mod qwen2;
mod qwen3;

use crate::config::Architecture;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchSpec {
    /// Per-head RMSNorm of queries and keys before the rotary embedding.
    pub qk_norm: bool,
}

pub fn spec(arch: Architecture) -> ArchSpec {
    match arch {
        Architecture::Llama => llama::SPEC,
        Architecture::Mistral => mistral::SPEC,
        Architecture::Qwen2 => qwen2::SPEC,
        Architecture::Qwen3 => qwen3::SPEC,
    }
}
