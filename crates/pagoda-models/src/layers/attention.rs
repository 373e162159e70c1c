//! The self-attention block: fused q/k/v projection, optional per-head q/k norm (Qwen3),
//! rotary embedding, KV write at the batch's slots, paged attention, output projection.

use super::scratch::AttentionScratch;
use super::{Linear, RmsNorm, RotaryTable};
use crate::batch::ForwardBatch;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::kernels::{paged_attention_with, split_rows, AttentionDims, Isa};
use crate::kv_cache::LayerKv;
use crate::weights::WeightSource;

#[derive(Debug, Clone)]
pub struct SelfAttention {
    qkv: Linear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    o_proj: Linear,
    num_heads: usize,
    num_kv_heads: usize,
    head_dim: usize,
    sliding_window: Option<usize>,
}

impl SelfAttention {
    pub fn load(
        src: &dyn WeightSource,
        prefix: &str,
        cfg: &ModelConfig,
        qk_norm: bool,
    ) -> Result<Self> {
        let (h, q, kv) = (cfg.hidden_size, cfg.q_size(), cfg.kv_size());
        let bias = cfg.attention_bias;
        let q_proj = Linear::load(src, &format!("{prefix}.q_proj"), h, q, bias)?;
        let k_proj = Linear::load(src, &format!("{prefix}.k_proj"), h, kv, bias)?;
        let v_proj = Linear::load(src, &format!("{prefix}.v_proj"), h, kv, bias)?;
        let norm = |name: &str| {
            RmsNorm::load(
                src,
                &format!("{prefix}.{name}.weight"),
                cfg.head_dim,
                cfg.rms_norm_eps,
            )
        };
        Ok(SelfAttention {
            qkv: Linear::fuse(vec![q_proj, k_proj, v_proj]),
            q_norm: if qk_norm { Some(norm("q_norm")?) } else { None },
            k_norm: if qk_norm { Some(norm("k_norm")?) } else { None },
            o_proj: Linear::load(src, &format!("{prefix}.o_proj"), q, h, false)?,
            num_heads: cfg.num_heads,
            num_kv_heads: cfg.num_kv_heads,
            head_dim: cfg.head_dim,
            sliding_window: cfg.sliding_window,
        })
    }

    pub fn for_each_weight(&self, f: &mut dyn FnMut(&crate::weight_matrix::WeightMatrix)) {
        f(&self.qkv.weight);
        f(&self.o_proj.weight);
    }

    pub fn weight_bytes(&self) -> usize {
        self.qkv.weight.size_in_bytes() + self.o_proj.weight.size_in_bytes()
    }

    /// `x` is the normalised hidden state `[tokens, hidden]`; returns `[tokens, hidden]`,
    /// held in `scratch`.
    pub fn forward<'s>(
        &self,
        isa: Isa,
        x: &[f32],
        batch: &ForwardBatch,
        rotary: &RotaryTable,
        kv: &mut LayerKv,
        scratch: &'s mut AttentionScratch,
    ) -> &'s [f32] {
        let n = batch.num_tokens();
        let q_size = self.num_heads * self.head_dim;
        let kv_size = self.num_kv_heads * self.head_dim;
        let AttentionScratch {
            qkv,
            q,
            k,
            v,
            heads,
            out,
        } = scratch;
        let qkv = qkv.at_least(n * self.qkv.out_dim());
        self.qkv.forward(isa, x, n, qkv);
        let (q, k, v) = (
            q.at_least(n * q_size),
            k.at_least(n * kv_size),
            v.at_least(n * kv_size),
        );
        split_rows(qkv, n, &mut [&mut *q, &mut *k, &mut *v]);
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            qn.forward_inplace(q);
            kn.forward_inplace(k);
        }
        rotary.apply(q, self.num_heads);
        rotary.apply(k, self.num_kv_heads);
        kv.write(&batch.slot_mapping, k, v);
        let dims = AttentionDims {
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            block_size: batch.block_size,
            sliding_window: self.sliding_window,
        };
        let heads = heads.at_least(n * q_size);
        paged_attention_with(isa, q, kv, batch, dims, heads);
        let out = out.at_least(n * self.o_proj.out_dim());
        self.o_proj.forward(isa, heads, n, out);
        out
    }
}
