//! Vectors a forward pass reuses from layer to layer.
//!
//! A 512-token prefill of a 0.5B model writes 30 MB of products per layer. Allocated fresh,
//! each was zeroed again for every layer, by the calling thread alone while the other kernel
//! threads waited (`memset` was 6-7% of the prefill's samples on the Xeon). Here each is
//! zeroed once per forward pass; after that the kernels that write into them assign every
//! value (their tests start from NaN outputs). Each starts on a cache line (`aligned.rs`).

use crate::aligned::AlignedVec;

/// The attention block's products.
#[derive(Default)]
pub struct AttentionScratch {
    pub(super) qkv: AlignedVec<f32>,
    pub(super) q: AlignedVec<f32>,
    pub(super) k: AlignedVec<f32>,
    pub(super) v: AlignedVec<f32>,
    pub(super) heads: AlignedVec<f32>,
    pub(super) out: AlignedVec<f32>,
}

/// The feed-forward block's products.
#[derive(Default)]
pub struct MlpScratch {
    pub(super) gate_up: AlignedVec<f32>,
    pub(super) act: AlignedVec<f32>,
    pub(super) out: AlignedVec<f32>,
}
