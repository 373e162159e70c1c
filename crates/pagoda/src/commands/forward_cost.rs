//! The work a forward pass must do, counted from the model's shape: bytes that must be read
//! and floating-point operations. `bench forward` divides them by the time taken, so its
//! tokens/s can be read against the machine's memory bandwidth (decode) and arithmetic peak
//! (prefill).

use pagoda_models::{KvCacheShape, ModelConfig, WeightDtype};

/// Per-token costs of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardCost {
    /// Weights every token multiplies with: attention and MLP projections and the LM head
    /// (embedding lookups read one row and are left out).
    matmul_params: u64,
    /// Bytes the LM head and projections take together (2 per weight for f16; about 1.06
    /// for Q8_0, mixed for Q4_K_M files).
    matmul_bytes: u64,
    /// KV bytes one token of context adds over all layers (keys and values).
    kv_bytes_per_token: u64,
    /// Query heads x head_dim x layers: what attention multiplies per token of context.
    attention_width: u64,
}

impl ForwardCost {
    /// `weight_bytes_per_param`: the bytes of the model's matrices over their weights.
    pub fn new(
        cfg: &ModelConfig,
        weight_bytes_per_param: f64,
        kv_dtype: WeightDtype,
    ) -> ForwardCost {
        let h = cfg.hidden_size as u64;
        let q = (cfg.num_heads * cfg.head_dim) as u64;
        let kv = (cfg.num_kv_heads * cfg.head_dim) as u64;
        let per_layer = h * q + 2 * h * kv + q * h + 3 * h * cfg.intermediate_size as u64;
        let layers = cfg.num_layers as u64;
        let matmul_params = layers * per_layer + cfg.vocab_size as u64 * h;
        ForwardCost {
            matmul_params,
            matmul_bytes: (matmul_params as f64 * weight_bytes_per_param) as u64,
            kv_bytes_per_token: KvCacheShape::bytes_per_block(cfg, 1, kv_dtype),
            attention_width: layers * q,
        }
    }

    /// Bytes per weight of a model holding `weight_bytes` of matrices (untied embeddings
    /// counted besides the head).
    pub fn bytes_per_param(cfg: &ModelConfig, weight_bytes: usize) -> f64 {
        let probe = ForwardCost::new(cfg, 1.0, WeightDtype::F32);
        let embed = if cfg.tie_word_embeddings {
            0
        } else {
            (cfg.vocab_size * cfg.hidden_size) as u64
        };
        weight_bytes as f64 / (probe.matmul_params + embed) as f64
    }

    /// Decoding `steps` tokens for `batch` sequences that start at `context` tokens: the
    /// weights are read once per step, each sequence's KV once per step.
    pub fn decode(&self, batch: u64, context: u64, steps: u64) -> Work {
        // Sum over the steps of the context each step attends to.
        let attended = steps * context + steps * steps.saturating_sub(1) / 2 + steps;
        Work {
            bytes: steps * self.matmul_bytes + batch * attended * self.kv_bytes_per_token,
            flops: batch * (steps * 2 * self.matmul_params + 4 * self.attention_width * attended),
        }
    }

    /// Prefilling `batch` prompts of `len` tokens (causal attention: token i attends to i + 1).
    pub fn prefill(&self, batch: u64, len: u64, passes: u64) -> Work {
        let attended = len * (len + 1) / 2;
        Work {
            bytes: passes * self.matmul_bytes + batch * attended * self.kv_bytes_per_token,
            flops: batch * (len * 2 * self.matmul_params + 4 * self.attention_width * attended),
        }
    }
}

/// Bytes read and floating-point operations of some forward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub bytes: u64,
    pub flops: u64,
}

impl Work {
    /// (GB/s, GFLOP/s) when done in `seconds`.
    pub fn rates(self, seconds: f64) -> (f64, f64) {
        let s = seconds.max(f64::MIN_POSITIVE);
        (self.bytes as f64 / s / 1e9, self.flops as f64 / s / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen_05b() -> ModelConfig {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/configs/qwen2.5-0.5b/config.json"
        );
        ModelConfig::from_file(std::path::Path::new(path)).unwrap()
    }

    #[test]
    fn the_qwen_half_billion_shape_has_the_published_parameter_count() {
        let cfg = qwen_05b();
        let cost = ForwardCost::new(&cfg, 2.0, WeightDtype::F16);
        // 494M parameters: 358M in the layers' projections and 136M in the (tied) embedding,
        // less the norms and biases this count leaves out.
        let params = cost.matmul_params;
        assert!((490_000_000..=495_000_000).contains(&params), "{params}");
        // One decode step of one sequence at no context reads each f16 weight once.
        let one = cost.decode(1, 0, 1);
        assert_eq!(one.bytes, 2 * params + cost.kv_bytes_per_token);
        assert_eq!(one.flops, 2 * params + 4 * cost.attention_width);
    }

    #[test]
    fn attention_work_grows_with_the_context_and_the_batch() {
        let cost = ForwardCost::new(&qwen_05b(), 2.0, WeightDtype::F16);
        let short = cost.decode(1, 0, 64);
        let long = cost.decode(1, 4096, 64);
        assert_eq!(
            long.bytes - short.bytes,
            64 * 4096 * cost.kv_bytes_per_token
        );
        let wide = cost.decode(8, 0, 64);
        assert_eq!(
            wide.bytes - short.bytes,
            7 * (short.bytes - 64 * 2 * cost.matmul_params)
        );
        // A prefill of n tokens does the matmul work of n decode steps at no context.
        let prefill = cost.prefill(1, 512, 1);
        assert_eq!(
            prefill.flops - 4 * cost.attention_width * (512 * 513 / 2),
            512 * 2 * cost.matmul_params
        );
        assert_eq!(
            Work {
                bytes: 2_000_000_000,
                flops: 0
            }
            .rates(2.0)
            .0,
            1.0
        );
    }
}
