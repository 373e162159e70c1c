//! `config.json` of a Hugging Face checkpoint, read into one struct shared by every
//! Llama-family architecture, then checked so that later code can trust its numbers.

use std::path::Path;

use serde::Deserialize;

use crate::error::{ModelError, Result};

/// The architectures Pagoda runs; they differ only in a few switches (see `ArchSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Mistral,
    Qwen2,
    Qwen3,
}

impl Architecture {
    pub fn from_hf_name(name: &str) -> Result<Self> {
        match name {
            "LlamaForCausalLM" => Ok(Architecture::Llama),
            "MistralForCausalLM" => Ok(Architecture::Mistral),
            "Qwen2ForCausalLM" => Ok(Architecture::Qwen2),
            "Qwen3ForCausalLM" => Ok(Architecture::Qwen3),
            other => Err(ModelError::UnsupportedArchitecture(other.to_string())),
        }
    }
}

/// `rope_scaling` as written by transformers; older files say `type`, newer `rope_type`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct RopeScalingConfig {
    pub rope_type: Option<String>,
    /// The older spelling of `rope_type`; files may carry both.
    #[serde(rename = "type")]
    pub legacy_type: Option<String>,
    pub factor: Option<f64>,
    pub low_freq_factor: Option<f64>,
    pub high_freq_factor: Option<f64>,
    pub original_max_position_embeddings: Option<usize>,
}

/// A token id or a list of them (`eos_token_id` is written both ways).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    pub fn to_vec(&self) -> Vec<u32> {
        match self {
            TokenIds::One(id) => vec![*id],
            TokenIds::Many(ids) => ids.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RopeParameters {
    rope_theta: Option<f64>,
    #[serde(flatten)]
    scaling: RopeScalingConfig,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawConfig {
    pub(crate) architectures: Option<Vec<String>>,
    pub(crate) hidden_size: Option<usize>,
    pub(crate) intermediate_size: Option<usize>,
    pub(crate) num_hidden_layers: Option<usize>,
    pub(crate) num_attention_heads: Option<usize>,
    pub(crate) num_key_value_heads: Option<usize>,
    pub(crate) head_dim: Option<usize>,
    pub(crate) vocab_size: Option<usize>,
    pub(crate) max_position_embeddings: Option<usize>,
    pub(crate) rms_norm_eps: Option<f64>,
    pub(crate) rope_theta: Option<f64>,
    pub(crate) rope_scaling: Option<RopeScalingConfig>,
    /// transformers 5 writes `rope_theta` and the scaling here instead.
    pub(crate) rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    pub(crate) tie_word_embeddings: bool,
    pub(crate) hidden_act: Option<String>,
    pub(crate) attention_bias: Option<bool>,
    pub(crate) sliding_window: Option<usize>,
    pub(crate) use_sliding_window: Option<bool>,
    pub(crate) torch_dtype: Option<String>,
    /// transformers 5's name for `torch_dtype`; files may carry both.
    pub(crate) dtype: Option<String>,
    pub(crate) bos_token_id: Option<TokenIds>,
    pub(crate) eos_token_id: Option<TokenIds>,
}

/// How rotary frequencies are adjusted for long contexts.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    None,
    Linear {
        factor: f64,
    },
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: usize,
    },
    /// One divisor per frequency (GGUF files of Llama 3.x carry them as `rope_freqs`).
    Factors(Vec<f32>),
}

/// A validated model configuration.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub tie_word_embeddings: bool,
    pub attention_bias: bool,
    pub sliding_window: Option<usize>,
    /// The dtype the checkpoint says its weights are stored in, if it says.
    pub torch_dtype: Option<String>,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
}

fn required(value: Option<usize>, field: &'static str) -> Result<usize> {
    match value {
        None => Err(ModelError::field(field, "is missing")),
        Some(0) => Err(ModelError::field(field, "must be positive, got 0")),
        Some(v) => Ok(v),
    }
}

/// Far above any real model's width, depth or vocabulary (the largest are near 2^18), and small
/// enough that products of two or three of them cannot overflow.
const MAX_DIMENSION: usize = 1 << 22;

/// A required size of the network: positive and at most `MAX_DIMENSION`.
fn dimension(value: Option<usize>, field: &'static str) -> Result<usize> {
    let v = required(value, field)?;
    if v > MAX_DIMENSION {
        return Err(ModelError::field(
            field,
            format!("must be at most {MAX_DIMENSION}, got {v}"),
        ));
    }
    Ok(v)
}

impl ModelConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        Self::from_json(&text).map_err(|e| match e {
            ModelError::ConfigJson { source, .. } => ModelError::ConfigJson {
                path: path.to_path_buf(),
                source,
            },
            other => other,
        })
    }

    pub fn from_json(text: &str) -> Result<Self> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|source| ModelError::ConfigJson {
                path: "config.json".into(),
                source,
            })?;
        Self::from_raw(raw)
    }

    pub(crate) fn from_raw(raw: RawConfig) -> Result<Self> {
        let arch_name = raw
            .architectures
            .as_ref()
            .and_then(|a| a.first())
            .ok_or_else(|| ModelError::field("architectures", "is missing"))?;
        let architecture = Architecture::from_hf_name(arch_name)?;
        let hidden_size = dimension(raw.hidden_size, "hidden_size")?;
        let num_heads = dimension(raw.num_attention_heads, "num_attention_heads")?;
        let num_kv_heads = match raw.num_key_value_heads {
            None => num_heads,
            Some(n) => dimension(Some(n), "num_key_value_heads")?,
        };
        if num_heads % num_kv_heads != 0 {
            return Err(ModelError::field(
                "num_key_value_heads",
                format!("({num_kv_heads}) must divide num_attention_heads ({num_heads})"),
            ));
        }
        let head_dim = match raw.head_dim {
            Some(d) => dimension(Some(d), "head_dim")?,
            None => {
                if hidden_size % num_heads != 0 {
                    return Err(ModelError::field(
                        "hidden_size",
                        format!("({hidden_size}) is not divisible by num_attention_heads ({num_heads}) and head_dim is not given"),
                    ));
                }
                hidden_size / num_heads
            }
        };
        if head_dim % 2 != 0 {
            return Err(ModelError::field(
                "head_dim",
                format!("must be even for rotary embeddings, got {head_dim}"),
            ));
        }
        if let Some(act) = &raw.hidden_act {
            if act != "silu" {
                return Err(ModelError::field(
                    "hidden_act",
                    format!("{act:?} is not supported (only \"silu\")"),
                ));
            }
        }
        let rms_norm_eps = raw.rms_norm_eps.unwrap_or(1e-6);
        if !(rms_norm_eps > 0.0 && rms_norm_eps < 1.0) {
            return Err(ModelError::field(
                "rms_norm_eps",
                format!("must be in (0, 1), got {rms_norm_eps}"),
            ));
        }
        let rope_theta = raw
            .rope_theta
            .or(raw.rope_parameters.as_ref().and_then(|p| p.rope_theta))
            .unwrap_or(10_000.0);
        if !(rope_theta.is_finite() && rope_theta > 1.0) {
            return Err(ModelError::field(
                "rope_theta",
                format!("must be a finite number above 1, got {rope_theta}"),
            ));
        }
        let max_position_embeddings =
            required(raw.max_position_embeddings, "max_position_embeddings")?;
        let rope_scaling = parse_rope_scaling(
            raw.rope_scaling
                .as_ref()
                .or(raw.rope_parameters.as_ref().map(|p| &p.scaling)),
        )?;
        // Qwen2 always has q/k/v biases; Llama and Mistral only when `attention_bias` says so.
        let attention_bias = match architecture {
            Architecture::Qwen2 => true,
            _ => raw.attention_bias.unwrap_or(false),
        };
        let sliding_window = match architecture {
            Architecture::Mistral => raw.sliding_window,
            Architecture::Qwen2 | Architecture::Qwen3 if raw.use_sliding_window == Some(true) => {
                raw.sliding_window
            }
            _ => None,
        };
        if sliding_window == Some(0) {
            return Err(ModelError::field(
                "sliding_window",
                "must be positive, got 0",
            ));
        }
        Ok(ModelConfig {
            architecture,
            hidden_size,
            intermediate_size: dimension(raw.intermediate_size, "intermediate_size")?,
            num_layers: dimension(raw.num_hidden_layers, "num_hidden_layers")?,
            num_heads,
            num_kv_heads,
            head_dim,
            vocab_size: dimension(raw.vocab_size, "vocab_size")?,
            max_position_embeddings,
            rms_norm_eps,
            rope_theta,
            rope_scaling,
            tie_word_embeddings: raw.tie_word_embeddings,
            attention_bias,
            sliding_window,
            torch_dtype: raw.torch_dtype.or(raw.dtype),
            bos_token_id: raw
                .bos_token_id
                .and_then(|ids| ids.to_vec().first().copied()),
            eos_token_ids: raw.eos_token_id.map(|ids| ids.to_vec()).unwrap_or_default(),
        })
    }

    pub fn q_size(&self) -> usize {
        self.num_heads * self.head_dim
    }

    pub fn kv_size(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }
}

fn parse_rope_scaling(raw: Option<&RopeScalingConfig>) -> Result<RopeScaling> {
    let Some(raw) = raw else {
        return Ok(RopeScaling::None);
    };
    let positive = |value: Option<f64>, name: &str| -> Result<f64> {
        match value {
            Some(v) if v.is_finite() && v > 0.0 => Ok(v),
            Some(v) => Err(ModelError::field(
                "rope_scaling",
                format!("{name} must be positive, got {v}"),
            )),
            None => Err(ModelError::field(
                "rope_scaling",
                format!("{name} is missing"),
            )),
        }
    };
    match raw.rope_type.as_deref().or(raw.legacy_type.as_deref()) {
        None | Some("default") => Ok(RopeScaling::None),
        Some("linear") => Ok(RopeScaling::Linear {
            factor: positive(raw.factor, "factor")?,
        }),
        Some("llama3") => {
            let low = positive(raw.low_freq_factor, "low_freq_factor")?;
            let high = positive(raw.high_freq_factor, "high_freq_factor")?;
            if high <= low {
                return Err(ModelError::field(
                    "rope_scaling",
                    format!("high_freq_factor ({high}) must exceed low_freq_factor ({low})"),
                ));
            }
            Ok(RopeScaling::Llama3 {
                factor: positive(raw.factor, "factor")?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_max_position_embeddings: raw
                    .original_max_position_embeddings
                    .filter(|v| *v > 0)
                    .ok_or_else(|| {
                        ModelError::field(
                            "rope_scaling",
                            "original_max_position_embeddings is missing",
                        )
                    })?,
            })
        }
        Some(other) => Err(ModelError::field(
            "rope_scaling",
            format!("type {other:?} is not supported (default, linear, llama3)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN2_05B: &str = r#"{"architectures":["Qwen2ForCausalLM"],"hidden_size":896,
        "intermediate_size":4864,"num_hidden_layers":24,"num_attention_heads":14,
        "num_key_value_heads":2,"vocab_size":151936,"max_position_embeddings":32768,
        "rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,
        "eos_token_id":151645,"sliding_window":32768,"use_sliding_window":false}"#;

    #[test]
    fn qwen2_config_derives_head_dim_and_forces_bias() {
        let cfg = ModelConfig::from_json(QWEN2_05B).unwrap();
        assert_eq!(cfg.architecture, Architecture::Qwen2);
        assert_eq!(cfg.head_dim, 64);
        assert!(cfg.attention_bias);
        assert_eq!(cfg.sliding_window, None);
        assert_eq!(cfg.eos_token_ids, vec![151645]);
    }

    #[test]
    fn missing_field_is_named() {
        let text = QWEN2_05B.replace("\"hidden_size\":896,", "");
        let err = ModelConfig::from_json(&text).unwrap_err().to_string();
        assert!(err.contains("hidden_size"), "{err}");
    }

    #[test]
    fn kv_heads_must_divide_heads() {
        let text = QWEN2_05B.replace("\"num_key_value_heads\":2", "\"num_key_value_heads\":3");
        let err = ModelConfig::from_json(&text).unwrap_err().to_string();
        assert!(err.contains("num_key_value_heads"), "{err}");
    }

    #[test]
    fn sizes_too_large_to_multiply_are_refused() {
        for (field, value) in [
            (
                "\"hidden_size\":896",
                "\"hidden_size\":18446744073709551615",
            ),
            (
                "\"num_attention_heads\":14",
                "\"num_attention_heads\":4194305",
            ),
            ("\"vocab_size\":151936", "\"vocab_size\":4294967296"),
        ] {
            let text = QWEN2_05B.replace(field, value);
            let err = ModelConfig::from_json(&text).unwrap_err().to_string();
            assert!(err.contains("must be at most 4194304"), "{err}");
        }
    }

    #[test]
    fn unknown_architecture_is_refused() {
        let text = QWEN2_05B.replace("Qwen2ForCausalLM", "GPT2LMHeadModel");
        let err = ModelConfig::from_json(&text).unwrap_err().to_string();
        assert!(err.contains("GPT2LMHeadModel"), "{err}");
    }

    #[test]
    fn transformers5_rope_parameters_are_read() {
        let text = QWEN2_05B.replace(
            "\"rope_theta\":1000000.0,",
            r#""rope_parameters":{"rope_theta":500000.0,"rope_type":"linear","factor":2.0},"dtype":"bfloat16","#,
        );
        let cfg = ModelConfig::from_json(&text).unwrap();
        assert_eq!(cfg.rope_theta, 500000.0);
        assert_eq!(cfg.rope_scaling, RopeScaling::Linear { factor: 2.0 });
        assert_eq!(cfg.torch_dtype.as_deref(), Some("bfloat16"));
    }

    #[test]
    fn llama3_rope_scaling_is_parsed_from_either_key() {
        let text = QWEN2_05B.replace(
            "\"tie_word_embeddings\":true",
            r#""rope_scaling":{"type":"llama3","factor":8.0,"low_freq_factor":1.0,
               "high_freq_factor":4.0,"original_max_position_embeddings":8192}"#,
        );
        let cfg = ModelConfig::from_json(&text).unwrap();
        assert!(matches!(
            cfg.rope_scaling,
            RopeScaling::Llama3 {
                original_max_position_embeddings: 8192,
                ..
            }
        ));
    }
}
