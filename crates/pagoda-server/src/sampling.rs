//! Request parameters -> the engine's `SamplingParams`, with each bad value named.
//!
//! Defaults follow vLLM: temperature, top_p, top_k, min_p and repetition_penalty fall back
//! to the model's `generation_config.json` when the request omits them, then to OpenAI's
//! defaults. `max_tokens` is resolved once the prompt's length is known (`MaxTokens`): it
//! falls back to the remaining context (chat) or to 16 (completions, clamped to the remaining
//! context), and a value the client sent that does not fit in the context left after the
//! prompt is a 400 `context_length_exceeded`, as vLLM and OpenAI answer. It is compared with
//! what is left, never added to the prompt, so no client number can overflow, and no
//! request ever reaches admission with more than the context reserved.

use std::collections::BTreeMap;

use pagoda_models::GenerationConfig;
use pagoda_runtime::{ModelInfo, SamplingParams};

use crate::error::ApiError;
use crate::wire::request::CommonParams;

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

/// A request's output length before its prompt is tokenized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxTokens {
    /// What the client asked for (`max_completion_tokens` over `max_tokens`).
    requested: Option<usize>,
    /// The endpoint's default; `None` means the remaining context.
    default: Option<usize>,
}

impl MaxTokens {
    /// The output budget for a prompt of `prompt_tokens`: what was asked, else the default
    /// clamped to the context left. Asking for more than is left is an error.
    pub fn resolve(self, prompt_tokens: usize, max_model_len: usize) -> Result<usize, ApiError> {
        let remaining = max_model_len.saturating_sub(prompt_tokens);
        if prompt_tokens >= max_model_len || self.requested.is_some_and(|m| m > remaining) {
            return Err(ApiError::ContextLength(format!(
                "this model's maximum context length is {max_model_len} tokens, but the request has {prompt_tokens} prompt tokens and asks for up to {} more",
                self.requested.unwrap_or(1)
            )));
        }
        Ok(self
            .requested
            .unwrap_or_else(|| self.default.map_or(remaining, |d| d.min(remaining))))
    }
}

/// Sampling parameters with `max_tokens` left unset, and how to set it per prompt.
pub fn build<'a>(
    params: &CommonParams,
    endpoint: EndpointSampling,
    info: impl Into<ModelFacts<'a>>,
) -> Result<(SamplingParams, MaxTokens), ApiError> {
    let info = info.into();
    let defaults = info.defaults;
    let (requested, max_param) = match (params.max_completion_tokens, params.max_tokens) {
        (Some(m), _) => (Some(m), "max_completion_tokens"),
        (None, Some(m)) => (Some(m), "max_tokens"),
        (None, None) => (None, "max_tokens"),
    };
    if requested == Some(0) {
        return Err(ApiError::invalid(
            max_param,
            format!("`{max_param}` must be at least 1"),
        ));
    }
    let min_tokens = params.min_tokens.unwrap_or(0);
    if let Some(max) = requested.filter(|&max| min_tokens > max) {
        return Err(ApiError::invalid(
            "min_tokens",
            format!("`min_tokens` must not exceed `{max_param}` ({max}), got {min_tokens}"),
        ));
    }
    let n = params.n.unwrap_or(1);
    if n == 0 {
        return Err(ApiError::invalid("n", "`n` must be at least 1"));
    }
    let top_k = match params.top_k.or(defaults.top_k) {
        None | Some(0) | Some(-1) => None,
        Some(k) if k > 0 => Some(usize::try_from(k).unwrap_or(usize::MAX)),
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
        max_tokens: None,
        min_tokens,
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
    let max_tokens = MaxTokens {
        requested,
        default: endpoint.default_max_tokens,
    };
    Ok((sampling, max_tokens))
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
        let (s, _) = build(&CommonParams::default(), chat(), facts(&defaults)).unwrap();
        assert_eq!((s.temperature, s.top_k, s.top_p), (0.7, Some(20), 1.0));
        let params = CommonParams {
            temperature: Some(0.0),
            top_k: Some(-1),
            ..CommonParams::default()
        };
        let (s, _) = build(&params, chat(), facts(&defaults)).unwrap();
        assert_eq!((s.temperature, s.top_k), (0.0, None));
    }

    #[test]
    fn max_tokens_defaults_to_the_remaining_context_or_the_endpoint_default() {
        let defaults = GenerationConfig::default();
        let (_, max) = build(&CommonParams::default(), chat(), facts(&defaults)).unwrap();
        assert_eq!(max.resolve(30, 100).unwrap(), 70);
        let completions = EndpointSampling {
            default_max_tokens: Some(16),
            ..chat()
        };
        let (_, max) = build(&CommonParams::default(), completions, facts(&defaults)).unwrap();
        assert_eq!(max.resolve(95, 100).unwrap(), 5);
        assert_eq!(max.resolve(30, 100).unwrap(), 16);
        let params = CommonParams {
            max_tokens: Some(10),
            max_completion_tokens: Some(3),
            ..CommonParams::default()
        };
        let (_, max) = build(&params, chat(), facts(&defaults)).unwrap();
        assert_eq!(max.resolve(30, 100).unwrap(), 3);
    }

    #[test]
    fn a_max_tokens_over_the_context_left_is_refused_without_overflow() {
        let defaults = GenerationConfig::default();
        let params = CommonParams {
            max_tokens: Some(usize::MAX),
            ..CommonParams::default()
        };
        let (_, max) = build(&params, chat(), facts(&defaults)).unwrap();
        for prompt in [30, 99, 100, usize::MAX] {
            assert!(matches!(
                max.resolve(prompt, 100),
                Err(ApiError::ContextLength(_))
            ));
        }
        let params = CommonParams {
            max_tokens: Some(70),
            ..CommonParams::default()
        };
        let (_, max) = build(&params, chat(), facts(&defaults)).unwrap();
        assert_eq!(max.resolve(30, 100).unwrap(), 70);
        assert!(max.resolve(31, 100).is_err());
    }

    #[test]
    fn engine_field_names_are_reported_as_the_client_spelled_them() {
        let defaults = GenerationConfig::default();
        let endpoint = EndpointSampling {
            logprobs: Some(99),
            ..chat()
        };
        let err = build(&CommonParams::default(), endpoint, facts(&defaults)).unwrap_err();
        assert_eq!(param_of(err), "top_logprobs");
        let params = CommonParams {
            max_completion_tokens: Some(0),
            ..CommonParams::default()
        };
        assert_eq!(
            param_of(build(&params, chat(), facts(&defaults)).unwrap_err()),
            "max_completion_tokens"
        );
        let params = CommonParams {
            stop_token_ids: Some(vec![50]),
            ..CommonParams::default()
        };
        assert_eq!(
            param_of(build(&params, chat(), facts(&defaults)).unwrap_err()),
            "stop_token_ids"
        );
        let params = CommonParams {
            max_tokens: Some(4),
            min_tokens: Some(5),
            ..CommonParams::default()
        };
        assert_eq!(
            param_of(build(&params, chat(), facts(&defaults)).unwrap_err()),
            "min_tokens"
        );
    }
}
