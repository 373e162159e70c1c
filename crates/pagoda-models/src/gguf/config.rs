//! A `ModelConfig` from GGUF metadata (`{arch}.embedding_length` and friends), checked by the
//! same code as a `config.json`.

use pagoda_gguf::GgufFile;

use crate::config::{ModelConfig, RawConfig, RopeScaling, RopeScalingConfig, TokenIds};
use crate::error::{ModelError, Result};

/// GGUF architecture names and the Hugging Face class each corresponds to.
const ARCHITECTURES: [(&str, &str); 3] = [
    ("llama", "LlamaForCausalLM"),
    ("qwen2", "Qwen2ForCausalLM"),
    ("qwen3", "Qwen3ForCausalLM"),
];

pub fn config_from_gguf(file: &GgufFile) -> Result<ModelConfig> {
    let arch = file.architecture().ok_or_else(|| {
        ModelError::field("general.architecture", "is missing from the GGUF metadata")
    })?;
    let hf_class = ARCHITECTURES
        .iter()
        .find(|(name, _)| *name == arch)
        .map(|(_, class)| *class)
        .ok_or_else(|| ModelError::UnsupportedGgufArchitecture(arch.to_string()))?;
    let key = |k: &str| format!("{arch}.{k}");
    let int = |k: &str| file.get_u64(&key(k)).map(|v| v as usize);
    let float = |k: &str| file.get_f64(&key(k));
    let token_id = |k: &str| {
        file.get_u64(&format!("tokenizer.ggml.{k}"))
            .and_then(|v| u32::try_from(v).ok())
    };
    let vocab_size = int("vocab_size")
        .or_else(|| file.get_array("tokenizer.ggml.tokens").map(<[_]>::len))
        .or_else(|| {
            file.tensor("token_embd.weight")
                .and_then(|t| t.dims.get(1).map(|&d| d as usize))
        });
    let hidden = int("embedding_length");
    let heads = int("attention.head_count");
    let head_dim = int("attention.key_length");
    let rope_scaling = match file.get_str(&key("rope.scaling.type")) {
        None | Some("none") => None,
        Some(kind) => Some(RopeScalingConfig {
            rope_type: Some(kind.to_string()),
            legacy_type: None,
            factor: float("rope.scaling.factor"),
            low_freq_factor: None,
            high_freq_factor: None,
            original_max_position_embeddings: int("rope.scaling.original_context_length"),
        }),
    };
    let mut eos: Vec<u32> = ["eos_token_id", "eot_token_id"]
        .iter()
        .filter_map(|k| token_id(k))
        .collect();
    eos.dedup();
    let raw = RawConfig {
        architectures: Some(vec![hf_class.to_string()]),
        hidden_size: hidden,
        intermediate_size: int("feed_forward_length"),
        num_hidden_layers: int("block_count"),
        num_attention_heads: heads,
        num_key_value_heads: int("attention.head_count_kv"),
        head_dim,
        vocab_size,
        max_position_embeddings: int("context_length"),
        rms_norm_eps: float("attention.layer_norm_rms_epsilon"),
        rope_theta: float("rope.freq_base"),
        rope_scaling,
        rope_parameters: None,
        tie_word_embeddings: file.tensor("output.weight").is_none(),
        hidden_act: None,
        attention_bias: Some(file.tensor("blk.0.attn_q.bias").is_some()),
        sliding_window: None,
        use_sliding_window: None,
        torch_dtype: None,
        dtype: None,
        bos_token_id: token_id("bos_token_id").map(TokenIds::One),
        eos_token_id: Some(TokenIds::Many(eos)),
    };
    let mut config = ModelConfig::from_raw(raw).map_err(|e| match e {
        ModelError::ConfigField { field, problem } => ModelError::field(
            field,
            format!(
                "{problem} (from the GGUF metadata of {})",
                file.path.display()
            ),
        ),
        other => other,
    })?;
    // Llama 3.x files carry their long-context frequency divisors as a tensor.
    if let Some(info) = file.tensor("rope_freqs.weight") {
        let factors = super::weights::float_values(file, info)?;
        if factors.len() != config.head_dim / 2 || factors.iter().any(|f| f.is_nan() || *f <= 0.0) {
            return Err(ModelError::field(
                "rope_freqs",
                format!(
                    "needs {} positive values, got {}",
                    config.head_dim / 2,
                    factors.len()
                ),
            ));
        }
        config.rope_scaling = RopeScaling::Factors(factors);
    }
    Ok(config)
}
