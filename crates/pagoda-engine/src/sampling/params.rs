//! Per-request sampling parameters and their validation.

use crate::ids::TokenId;
use std::collections::BTreeMap;

/// Most alternatives a request may ask for per token (OpenAI's `top_logprobs` limit).
pub const MAX_LOGPROBS: usize = 20;

/// Temperatures below this sample greedily, as vLLM does: dividing logits by a smaller one
/// would overflow them to infinities and leave nothing to draw from.
pub const MIN_SAMPLING_TEMPERATURE: f32 = 1e-5;

/// A sampling parameter that is out of range, naming the field as the API spells it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid sampling parameter `{field}`: {reason}")]
pub struct InvalidParam {
    pub field: &'static str,
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> InvalidParam {
    InvalidParam {
        field,
        reason: reason.into(),
    }
}

/// How to pick each next token and when to stop.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 (or anything below `MIN_SAMPLING_TEMPERATURE`) means greedy (argmax).
    pub temperature: f32,
    /// Keep only the `k` most likely tokens; `None` keeps all.
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`; 1 keeps all.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Divides positive (multiplies negative) logits of tokens seen in prompt or output; 1 is off.
    pub repetition_penalty: f32,
    /// Subtracted once from the logit of every token already in the output.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per occurrence in the output.
    pub frequency_penalty: f32,
    /// Added to the given tokens' logits before anything else.
    pub logit_bias: BTreeMap<TokenId, f32>,
    /// Makes sampling reproducible whatever else shares the batch.
    pub seed: Option<u64>,
    /// Also return the `N` most likely alternatives of each token.
    pub logprobs: Option<usize>,
    /// Completions per prompt.
    pub n: usize,
    /// Most output tokens; `None` runs until a stop or the context limit.
    pub max_tokens: Option<usize>,
    /// EOS and stop tokens are masked out until this many tokens are out.
    pub min_tokens: usize,
    /// Tokens that end the output besides the model's EOS tokens.
    pub stop_token_ids: Vec<TokenId>,
    /// Keep going past EOS tokens.
    pub ignore_eos: bool,
    /// Strings that end the output; matched on the text side (`StopStringMatcher`).
    pub stop: Vec<String>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: None,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: BTreeMap::new(),
            seed: None,
            logprobs: None,
            n: 1,
            max_tokens: None,
            min_tokens: 0,
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            stop: Vec::new(),
        }
    }
}

impl SamplingParams {
    /// Greedy decoding of at most `max_tokens` tokens.
    pub fn greedy(max_tokens: usize) -> Self {
        Self {
            temperature: 0.0,
            max_tokens: Some(max_tokens),
            ..Self::default()
        }
    }

    /// Temperatures below `MIN_SAMPLING_TEMPERATURE` are greedy. A NaN temperature (which
    /// `validate` rejects) also counts as greedy, so the sampler never divides by it.
    pub fn is_greedy(&self) -> bool {
        self.temperature.is_nan() || self.temperature < MIN_SAMPLING_TEMPERATURE
    }

    /// Checks every field's range. Token ids are checked against the vocabulary by
    /// `validate_token_ids`, which needs the model.
    pub fn validate(&self) -> Result<(), InvalidParam> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(invalid(
                "temperature",
                format!("must be a finite number >= 0, got {}", self.temperature),
            ));
        }
        if self.top_k == Some(0) {
            return Err(invalid(
                "top_k",
                "must be at least 1 (omit it to keep all tokens)",
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid(
                "top_p",
                format!("must be in (0, 1], got {}", self.top_p),
            ));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(invalid(
                "min_p",
                format!("must be in [0, 1], got {}", self.min_p),
            ));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(invalid(
                "repetition_penalty",
                format!(
                    "must be a finite number > 0, got {}",
                    self.repetition_penalty
                ),
            ));
        }
        if !(-2.0..=2.0).contains(&self.presence_penalty) {
            return Err(invalid(
                "presence_penalty",
                format!("must be in [-2, 2], got {}", self.presence_penalty),
            ));
        }
        if !(-2.0..=2.0).contains(&self.frequency_penalty) {
            return Err(invalid(
                "frequency_penalty",
                format!("must be in [-2, 2], got {}", self.frequency_penalty),
            ));
        }
        if let Some((token, bias)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| !(-100.0..=100.0).contains(*b))
        {
            return Err(invalid(
                "logit_bias",
                format!("bias for token {token} must be in [-100, 100], got {bias}"),
            ));
        }
        if self.logprobs.is_some_and(|n| n > MAX_LOGPROBS) {
            return Err(invalid(
                "logprobs",
                format!("must be at most {MAX_LOGPROBS}"),
            ));
        }
        if self.n == 0 {
            return Err(invalid("n", "must be at least 1"));
        }
        if self.max_tokens == Some(0) {
            return Err(invalid("max_tokens", "must be at least 1"));
        }
        if let Some(max) = self.max_tokens {
            if self.min_tokens > max {
                return Err(invalid(
                    "min_tokens",
                    format!(
                        "must not exceed max_tokens ({max}), got {}",
                        self.min_tokens
                    ),
                ));
            }
        }
        if self.stop.iter().any(String::is_empty) {
            return Err(invalid("stop", "stop strings must not be empty"));
        }
        Ok(())
    }

    /// Checks that every token id named by the parameters is inside the vocabulary.
    pub fn validate_token_ids(&self, vocab_size: usize) -> Result<(), InvalidParam> {
        let out_of_vocab = |t: &TokenId| *t as usize >= vocab_size;
        if let Some(t) = self.logit_bias.keys().find(|t| out_of_vocab(t)) {
            return Err(invalid(
                "logit_bias",
                format!("token {t} is outside the vocabulary of {vocab_size}"),
            ));
        }
        if let Some(t) = self.stop_token_ids.iter().find(|t| out_of_vocab(t)) {
            return Err(invalid(
                "stop_token_ids",
                format!("token {t} is outside the vocabulary of {vocab_size}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(params: SamplingParams) -> &'static str {
        params.validate().unwrap_err().field
    }

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(SamplingParams::default().validate(), Ok(()));
        assert_eq!(SamplingParams::greedy(4).validate(), Ok(()));
    }

    #[test]
    fn temperatures_below_the_minimum_are_greedy() {
        let with = |temperature| SamplingParams {
            temperature,
            ..SamplingParams::default()
        };
        assert!(with(0.0).is_greedy());
        assert!(with(1e-39).is_greedy());
        assert!(with(9.9e-6).is_greedy());
        assert!(with(f32::NAN).is_greedy());
        assert!(!with(MIN_SAMPLING_TEMPERATURE).is_greedy());
        assert!(!with(1.0).is_greedy());
        assert_eq!(
            with(1e-39).validate(),
            Ok(()),
            "tiny temperatures stay valid"
        );
    }

    #[test]
    fn each_out_of_range_field_is_named_in_the_error() {
        let d = SamplingParams::default;
        assert_eq!(
            field_of(SamplingParams {
                temperature: -0.1,
                ..d()
            }),
            "temperature"
        );
        assert_eq!(
            field_of(SamplingParams {
                temperature: f32::NAN,
                ..d()
            }),
            "temperature"
        );
        assert_eq!(
            field_of(SamplingParams {
                top_k: Some(0),
                ..d()
            }),
            "top_k"
        );
        assert_eq!(field_of(SamplingParams { top_p: 0.0, ..d() }), "top_p");
        assert_eq!(field_of(SamplingParams { min_p: 1.5, ..d() }), "min_p");
        assert_eq!(
            field_of(SamplingParams {
                repetition_penalty: 0.0,
                ..d()
            }),
            "repetition_penalty"
        );
        assert_eq!(
            field_of(SamplingParams {
                presence_penalty: 2.5,
                ..d()
            }),
            "presence_penalty"
        );
        assert_eq!(
            field_of(SamplingParams {
                frequency_penalty: -3.0,
                ..d()
            }),
            "frequency_penalty"
        );
        let bias = BTreeMap::from([(3, 101.0)]);
        assert_eq!(
            field_of(SamplingParams {
                logit_bias: bias,
                ..d()
            }),
            "logit_bias"
        );
        assert_eq!(
            field_of(SamplingParams {
                logprobs: Some(21),
                ..d()
            }),
            "logprobs"
        );
        assert_eq!(field_of(SamplingParams { n: 0, ..d() }), "n");
        assert_eq!(
            field_of(SamplingParams {
                max_tokens: Some(0),
                ..d()
            }),
            "max_tokens"
        );
        assert_eq!(
            field_of(SamplingParams {
                max_tokens: Some(2),
                min_tokens: 3,
                ..d()
            }),
            "min_tokens"
        );
        assert_eq!(
            field_of(SamplingParams {
                stop: vec![String::new()],
                ..d()
            }),
            "stop"
        );
    }

    #[test]
    fn the_error_message_names_the_field() {
        let err = SamplingParams {
            top_p: 2.0,
            ..SamplingParams::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid sampling parameter `top_p`: must be in (0, 1], got 2"
        );
    }

    #[test]
    fn token_ids_outside_the_vocabulary_are_rejected() {
        let params = SamplingParams {
            stop_token_ids: vec![9],
            ..SamplingParams::default()
        };
        assert_eq!(params.validate_token_ids(10), Ok(()));
        assert_eq!(
            params.validate_token_ids(9).unwrap_err().field,
            "stop_token_ids"
        );
        let params = SamplingParams {
            logit_bias: BTreeMap::from([(10, 1.0)]),
            ..SamplingParams::default()
        };
        assert_eq!(
            params.validate_token_ids(10).unwrap_err().field,
            "logit_bias"
        );
    }
}
