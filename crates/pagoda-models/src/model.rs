//! The decoder-only causal language model shared by every supported architecture.

use std::sync::Arc;

use crate::aligned::AlignedVec;
use crate::arch;
use crate::batch::ForwardBatch;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::kernels::{for_each_row_with, Isa};
use crate::kv_cache::PagedKvCache;
use crate::layers::{AttentionScratch, GatedMlp, MlpScratch, RmsNorm, Rotary, SelfAttention};
use crate::weight_matrix::WeightMatrix;
use crate::weights::WeightSource;

#[derive(Debug, Clone)]
struct DecoderLayer {
    input_norm: RmsNorm,
    attention: SelfAttention,
    post_attention_norm: RmsNorm,
    mlp: GatedMlp,
}

#[derive(Debug, Clone)]
pub struct CausalLm {
    pub config: ModelConfig,
    embed_tokens: Arc<WeightMatrix>,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    /// The same matrix as `embed_tokens` when embeddings are tied.
    lm_head: Arc<WeightMatrix>,
    rotary: Rotary,
}

impl CausalLm {
    pub fn load(config: &ModelConfig, src: &dyn WeightSource) -> Result<Self> {
        let spec = arch::spec(config.architecture);
        let (h, eps) = (config.hidden_size, config.rms_norm_eps);
        // Packed even though it is looked up by row: tied, it is also the output head.
        let embed_tokens =
            Arc::new(src.weight("model.embed_tokens.weight", config.vocab_size, h)?);
        let layers = (0..config.num_layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                Ok(DecoderLayer {
                    input_norm: RmsNorm::load(src, &format!("{p}.input_layernorm.weight"), h, eps)?,
                    attention: SelfAttention::load(
                        src,
                        &format!("{p}.self_attn"),
                        config,
                        spec.qk_norm,
                    )?,
                    post_attention_norm: RmsNorm::load(
                        src,
                        &format!("{p}.post_attention_layernorm.weight"),
                        h,
                        eps,
                    )?,
                    mlp: GatedMlp::load(src, &format!("{p}.mlp"), config)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if config.tie_word_embeddings {
            embed_tokens.clone()
        } else {
            Arc::new(src.weight("lm_head.weight", config.vocab_size, h)?)
        };
        Ok(CausalLm {
            config: config.clone(),
            embed_tokens,
            layers,
            norm: RmsNorm::load(src, "model.norm.weight", h, eps)?,
            lm_head,
            rotary: Rotary::new(config),
        })
    }

    /// Bytes of weights held in memory (tied embeddings counted once).
    pub fn weight_bytes(&self) -> usize {
        let head = if Arc::ptr_eq(&self.embed_tokens, &self.lm_head) {
            0
        } else {
            self.lm_head.size_in_bytes()
        };
        self.embed_tokens.size_in_bytes() + head + self.layers_bytes()
    }

    /// What the matrices are stored as: `float16`, or GGUF types such as `Q5_0+Q8_0+Q4_K+Q6_K`.
    pub fn weight_types(&self) -> String {
        let mut names: Vec<String> = Vec::new();
        let mut add = |m: &WeightMatrix| {
            for name in m.type_name().split('+') {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        };
        add(&self.embed_tokens);
        for layer in &self.layers {
            layer.attention.for_each_weight(&mut add);
            layer.mlp.for_each_weight(&mut add);
        }
        add(&self.lm_head);
        names.join("+")
    }

    fn layers_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.attention.weight_bytes() + l.mlp.weight_bytes())
            .sum()
    }

    /// Runs the batch on kernel path `isa`, writing its K/V into `cache`, and returns the
    /// logits of `batch.logit_rows` as `[rows, vocab_size]`.
    pub fn forward(&self, isa: Isa, batch: &ForwardBatch, cache: &mut PagedKvCache) -> Vec<f32> {
        let h = self.config.hidden_size;
        let n = batch.num_tokens();
        let mut x = AlignedVec::<f32>::zeroed(n * h);
        for (row, &token) in x.chunks_exact_mut(h).zip(&batch.token_ids) {
            self.embed_tokens.row_to_f32(token as usize, row);
        }
        let rotary = self.rotary.table(&batch.positions);
        let mut normed = AlignedVec::<f32>::zeroed(n * h);
        let (mut attention, mut mlp) = (AttentionScratch::default(), MlpScratch::default());
        for (layer, kv) in self.layers.iter().zip(cache.layers.iter_mut()) {
            layer.input_norm.forward(&x, &mut normed);
            let attn = layer
                .attention
                .forward(isa, &normed, batch, &rotary, kv, &mut attention);
            add_inplace(&mut x, attn, h);
            layer.post_attention_norm.forward(&x, &mut normed);
            add_inplace(&mut x, layer.mlp.forward(isa, &normed, n, &mut mlp), h);
        }
        let rows = batch.logit_rows.len();
        let mut last = Vec::with_capacity(rows * h);
        for &r in &batch.logit_rows {
            last.extend_from_slice(&x[r * h..(r + 1) * h]);
        }
        self.norm.forward_inplace(&mut last);
        let mut logits = vec![0.0f32; rows * self.config.vocab_size];
        self.lm_head.matmul(isa, &last, rows, &mut logits);
        logits
    }
}

/// The residual add, `x += y`, row by row on the kernels' threads.
fn add_inplace(x: &mut [f32], y: &[f32], width: usize) {
    for_each_row_with(x, y, width, |_, x, y| {
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
    });
}
