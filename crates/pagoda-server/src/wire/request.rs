//! Request bodies. A body is parsed once into JSON, then into the parameters every
//! generating endpoint shares (`CommonParams`) and the endpoint's own (`ChatFields`,
//! `CompletionFields`), so that a bad value is reported with its parameter's name. Unknown
//! fields are ignored, as OpenAI clients send some we do not use.

use std::collections::BTreeMap;

use axum::body::Bytes;
use pagoda_text::chat_template::ChatMessage;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// Sampling and stopping parameters of both generating endpoints, with vLLM's extensions.
#[derive(Debug, Default, Deserialize)]
pub struct CommonParams {
    pub model: Option<String>,
    pub max_tokens: Option<usize>,
    pub max_completion_tokens: Option<usize>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub n: Option<usize>,
    pub stop: Option<OneOrMany>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub logit_bias: Option<BTreeMap<String, f32>>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub min_tokens: Option<usize>,
    pub ignore_eos: Option<bool>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub priority: Option<i32>,
    /// The SLO class to run under (a server's `--slo-class`).
    pub slo_class: Option<String>,
    pub cache_salt: Option<String>,
    pub skip_special_tokens: Option<bool>,
}

impl CommonParams {
    pub fn streaming(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// `/v1/chat/completions`' own fields.
#[derive(Debug, Deserialize)]
pub struct ChatFields {
    pub messages: Vec<ChatMessage>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<usize>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub tools: Option<Value>,
}

/// `/v1/completions`' own fields.
#[derive(Debug, Deserialize)]
pub struct CompletionFields {
    pub prompt: PromptInput,
    pub logprobs: Option<usize>,
    pub echo: Option<bool>,
    pub suffix: Option<String>,
    pub best_of: Option<usize>,
    pub add_special_tokens: Option<bool>,
}

/// A completions prompt: text, texts, token ids, or lists of token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

/// `/tokenize`: a prompt, or messages rendered through the chat template.
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<ChatMessage>>,
    pub add_special_tokens: Option<bool>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub tools: Option<Value>,
    #[serde(default)]
    pub return_token_strs: bool,
}

#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

/// Deepest nesting of arrays and objects a body may have (the parser itself stops at 128).
const MAX_JSON_DEPTH: usize = 64;

/// Whether `value` nests arrays or objects more than `left` levels deep.
fn nested_deeper_than(value: &Value, left: usize) -> bool {
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(fields) => Box::new(fields.values()),
        _ => return false,
    };
    left == 0
        || children
            .into_iter()
            .any(|v| nested_deeper_than(v, left - 1))
}

/// The body as JSON: malformed or too deeply nested JSON is a 400 without a parameter.
pub fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::InvalidRequest {
        message: format!("the request body is not valid JSON: {e}"),
        param: None,
    })?;
    if !value.is_object() {
        return Err(ApiError::InvalidRequest {
            message: "the request body must be a JSON object".into(),
            param: None,
        });
    }
    if nested_deeper_than(&value, MAX_JSON_DEPTH) {
        return Err(ApiError::InvalidRequest {
            message: format!("the request body nests more than {MAX_JSON_DEPTH} levels deep"),
            param: None,
        });
    }
    Ok(value)
}

/// One typed view of the body; a bad value is a 400 naming its parameter's path.
pub fn parse_fields<T: DeserializeOwned>(body: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(body).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let param = if path == "." {
            missing_field(&inner).unwrap_or_default()
        } else {
            path
        };
        if param.is_empty() {
            return ApiError::InvalidRequest {
                message: format!("invalid request: {inner}"),
                param: None,
            };
        }
        ApiError::InvalidRequest {
            message: format!("invalid value for `{param}`: {inner}"),
            param: Some(param),
        }
    })
}

/// serde reports a missing field at the root as "missing field `name`".
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: DeserializeOwned>(json: &str) -> Result<T, ApiError> {
        parse_fields(&parse_json(&Bytes::from(json.to_string()))?)
    }

    fn param_of(err: ApiError) -> Option<String> {
        match err {
            ApiError::InvalidRequest { param, .. } => param,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_bad_value_names_its_parameter() {
        let err = parse::<CommonParams>(r#"{"temperature": "hot"}"#).unwrap_err();
        assert_eq!(param_of(err).as_deref(), Some("temperature"));
        let err = parse::<ChatFields>(r#"{"messages": [{"content": "hi"}]}"#).unwrap_err();
        assert_eq!(param_of(err).as_deref(), Some("messages[0]"));
    }

    #[test]
    fn a_missing_field_is_named() {
        let err = parse::<ChatFields>(r#"{"model": "m"}"#).unwrap_err();
        assert_eq!(param_of(err).as_deref(), Some("messages"));
    }

    #[test]
    fn malformed_json_is_refused_without_a_parameter() {
        let err = parse::<CommonParams>(r#"{"model": "#).unwrap_err();
        assert_eq!(param_of(err), None);
    }

    #[test]
    fn nesting_is_capped_below_the_parsers_own_limit() {
        let nested =
            |depth: usize| format!("{{\"x\": {}1{}}}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse_json(&Bytes::from(nested(MAX_JSON_DEPTH - 1))).is_ok());
        let err = parse_json(&Bytes::from(nested(MAX_JSON_DEPTH))).unwrap_err();
        assert!(err.to_string().contains("nests more than"), "{err}");
        // Far past the parser's limit: an error, not a stack overflow.
        assert!(parse_json(&Bytes::from(nested(100_000))).is_err());
    }

    #[test]
    fn prompts_take_every_openai_shape() {
        let f: CompletionFields = parse(r#"{"prompt": [[1, 2], [3]]}"#).unwrap();
        assert!(matches!(f.prompt, PromptInput::TokenLists(_)));
        let f: CompletionFields = parse(r#"{"prompt": [1, 2]}"#).unwrap();
        assert!(matches!(f.prompt, PromptInput::Tokens(_)));
        let f: CompletionFields = parse(r#"{"prompt": ["a", "b"]}"#).unwrap();
        assert!(matches!(f.prompt, PromptInput::Texts(_)));
    }
}
