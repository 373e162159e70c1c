//! Request parameters -> the engine's `SamplingParams`, with each bad value named.
//!
//! Defaults follow vLLM: temperature, top_p, top_k, min_p and repetition_penalty fall back
//! to the model's `generation_config.json` when the request omits them, then to OpenAI's
//! defaults. `max_tokens` falls back to the remaining context (chat) or to 16 (completions,
//! clamped to the remaining context), as in vLLM.

use std::collections::BTreeMap;

use pagoda_models::GenerationConfig;
use pagoda_runtime::{ModelInfo, SamplingParams};

use crate::error::ApiError;
use crate::wire::request::CommonParams;

/// Largest `n` one request may ask for.
pub const MAX_N: usize = 128;

/// What the endpoint adds to the shared parameters.
pub struct EndpointSampling {
    /// Alternatives per token, if logprobs were asked for.
    pub logprobs: Option<usize>,
    /// The name `logprobs` errors are reported under (`top_logprobs` for chat).
    pub logprobs_param: &'static str,
    /// `max_tokens` when the request gives none; `None` means the remaining context.
    pub default_max_tokens: Option<usize>,
}

/// What sampling needs to know about the model.
pub struct ModelFacts<'a> {
    pub defaults: &'a GenerationConfig,
    pub max_model_len: usize,
    pub vocab_size: usize,
}

impl<'a> From<&'a ModelInfo> for ModelFacts<'a> {
    fn from(info: &'a ModelInfo) -> Self {
        ModelFacts {
            defaults: &info.generation_config,
            max_model_len: info.max_model_len,
            vocab_size: info.vocab_size,
        }
    }
}

pub fn build<'a>(
    params: &CommonParams,
    endpoint: EndpointSampling,
    info: impl Into<ModelFacts<'a>>,
    prompt_tokens: usize,
) -> Result<SamplingParams, ApiError> {
    let info = info.into();
    let defaults = info.defaults;
    let remaining = info.max_model_len.saturating_sub(prompt_tokens);
    let (max_tokens, max_param) = match (params.max_completion_tokens, params.max_tokens) {
        (Some(m), _) => (Some(m), "max_completion_tokens"),
        (None, Some(m)) => (Some(m), "max_tokens"),
        (None, None) => (None, "max_tokens"),
    };
    if max_tokens == Some(0) {
        return Err(ApiError::invalid(
            max_param,
            format!("`{max_param}` must be at least 1"),
        ));
    }
    let max_tokens = max_tokens.unwrap_or_else(|| match endpoint.default_max_tokens {
        Some(d) => d.min(remaining.max(1)),
        None => remaining.max(1),
    });
    let n = params.n.unwrap_or(1);
    if n == 0 || n > MAX_N {
        return Err(ApiError::invalid(
            "n",
            format!("`n` must be between 1 and {MAX_N}, got {n}"),
        ));
    }
    let top_k = match params.top_k.or(defaults.top_k) {
        None | Some(0) | Some(-1) => None,
        Some(k) if k > 0 => Some(k as usize),
        Some(k) => {
            return Err(ApiError::invalid(
                "top_k",
                format!("`top_k` must be -1 (disabled) or at least 1, got {k}"),
            ))
        }
    };
    let sampling = SamplingParams {
        temperature: params.temperature.or(defaults.temperature).unwrap_or(1.0),
        top_k,
        top_p: params.top_p.or(defaults.top_p).unwrap_or(1.0),
        min_p: params.min_p.unwrap_or(0.0),
        repetition_penalty: params
            .repetition_penalty
            .or(defaults.repetition_penalty)
            .unwrap_or(1.0),
        presence_penalty: params.presence_penalty.unwrap_or(0.0),
        frequency_penalty: params.frequency_penalty.unwrap_or(0.0),
        logit_bias: logit_bias(params.logit_bias.as_ref())?,
        seed: params.seed.map(|s| s as u64),
        logprobs: endpoint.logprobs,
        n,
        max_tokens: Some(max_tokens),
        min_tokens: params.min_tokens.unwrap_or(0),
        stop_token_ids: params.stop_token_ids.clone().unwrap_or_default(),
        ignore_eos: params.ignore_eos.unwrap_or(false),
        stop: params
            .stop
            .clone()
            .map(|s| s.into_vec())
            .unwrap_or_default(),
    };
    check(
        &sampling,
        info.vocab_size,
        endpoint.logprobs_param,
        max_param,
    )?;
    Ok(sampling)
}

/// The engine's own range checks, reported under the names the client used.
fn check(
    sampling: &SamplingParams,
    vocab_size: usize,
    logprobs_param: &str,
    max_param: &str,
) -> Result<(), ApiError> {
    let err = match sampling.validate() {
        Ok(()) => sampling.validate_token_ids(vocab_size).err(),
        Err(e) => Some(e),
    };
    let Some(err) = err else { return Ok(()) };
    let param = match err.field {
        "logprobs" => logprobs_param,
        "max_tokens" => max_param,
        other => other,
    };
    Err(ApiError::invalid(
        param,
        format!("invalid value for `{param}`: {}", err.reason),
    ))
}

/// OpenAI sends logit_bias keyed by token id strings.
fn logit_bias(bias: Option<&BTreeMap<String, f32>>) -> Result<BTreeMap<u32, f32>, ApiError> {
    let mut out = BTreeMap::new();
    for (key, value) in bias.into_iter().flatten() {
        let token: u32 = key.trim().parse().map_err(|_| {
            ApiError::invalid(
                "logit_bias",
                format!("`logit_bias` keys must be token ids, got \"{key}\""),
            )
        })?;
        out.insert(token, *value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(defaults: &GenerationConfig) -> ModelFacts<'_> {
        ModelFacts {
            defaults,
            max_model_len: 100,
            vocab_size: 50,
        }
    }

    fn chat() -> EndpointSampling {
        EndpointSampling {
            logprobs: None,
            logprobs_param: "top_logprobs",
            default_max_tokens: None,
        }
    }

    fn param_of(err: ApiError) -> String {
        match err {
            ApiError::InvalidRequest { param, .. } => param.unwrap_or_default(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn omitted_values_come_from_the_generation_config_then_openai() {
        let defaults = GenerationConfig {
            temperature: Some(0.7),
            top_k: Some(20),
            ..GenerationConfig::default()
        };
        let s = build(&CommonParams::default(), chat(), facts(&defaults), 30).unwrap();
        assert_eq!((s.temperature, s.top_k, s.top_p), (0.7, Some(20), 1.0));
        let params = CommonParams {
            temperature: Some(0.0),
            top_k: Some(-1),
            ..CommonParams::default()
        };
        let s = build(&params, chat(), facts(&defaults), 30).unwrap();
        assert_eq!((s.temperature, s.top_k), (0.0, None));
    }

    #[test]
    fn max_tokens_defaults_to_the_remaining_context_or_the_endpoint_default() {
        let defaults = GenerationConfig::default();
        let s = build(&CommonParams::default(), chat(), facts(&defaults), 30).unwrap();
        assert_eq!(s.max_tokens, Some(70));
        let completions = EndpointSampling {
            default_max_tokens: Some(16),
            ..chat()
        };
        let s = build(&CommonParams::default(), completions, facts(&defaults), 95).unwrap();
        assert_eq!(s.max_tokens, Some(5));
        let params = CommonParams {
            max_tokens: Some(10),
            max_completion_tokens: Some(3),
            ..CommonParams::default()
        };
        assert_eq!(
            build(&params, chat(), facts(&defaults), 30)
                .unwrap()
                .max_tokens,
            Some(3)
        );
    }

    #[test]
    fn engine_field_names_are_reported_as_the_client_spelled_them() {
        let defaults = GenerationConfig::default();
        let endpoint = EndpointSampling {
            logprobs: Some(99),
            ..chat()
        };
        let err = build(&CommonParams::default(), endpoint, facts(&defaults), 3).unwrap_err();
        assert_eq!(param_of(err), "top_logprobs");
        let params = CommonParams {
            max_completion_tokens: Some(0),
            ..CommonParams::default()
        };
        assert_eq!(
            param_of(build(&params, chat(), facts(&defaults), 3).unwrap_err()),
            "max_completion_tokens"
        );
        let params = CommonParams {
            stop_token_ids: Some(vec![50]),
            ..CommonParams::default()
        };
        assert_eq!(
            param_of(build(&params, chat(), facts(&defaults), 3).unwrap_err()),
            "stop_token_ids"
        );
    }
}
