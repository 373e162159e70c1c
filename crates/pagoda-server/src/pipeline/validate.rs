//! The body of a generating request, checked once into a typed `ValidRequest`: every cap of
//! `RequestLimits`, every sampling range, every token id against the vocabulary. What passes
//! here can only fail later on facts that need the prompt's tokens (the context length) or
//! the tenant's limits.

use pagoda_runtime::SamplingParams;
use pagoda_text::chat_template::{ChatMessage, MessageContent};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::limits::RequestLimits;
use crate::sampling::{self, EndpointSampling, MaxTokens, ModelFacts};
use crate::wire::request::{
    parse_fields, ChatFields, CommonParams, CompletionFields, OneOrMany, PromptInput,
};

/// OpenAI's default `max_tokens` for `/v1/completions`.
const COMPLETIONS_DEFAULT_MAX_TOKENS: usize = 16;

/// Which generating endpoint a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
}

impl Endpoint {
    /// The prefix of response ids (`chatcmpl-...`, `cmpl-...`).
    pub fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Chat => "chatcmpl",
            Endpoint::Completions => "cmpl",
        }
    }
}

/// A chat conversation and how to render it.
#[derive(Debug)]
pub struct ChatInput {
    pub messages: Vec<ChatMessage>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub tools: Option<Value>,
}

/// What is to be tokenized.
#[derive(Debug)]
pub enum Input {
    Chat(ChatInput),
    Prompts {
        prompt: PromptInput,
        add_special_tokens: bool,
    },
}

/// A generating request that passed every check that needs no tokenizer: what is to be
/// tokenized, and how to generate from it.
#[derive(Debug)]
pub struct ValidRequest {
    pub input: Input,
    pub params: RequestParams,
}

/// Everything of a valid request but its input.
#[derive(Debug)]
pub struct RequestParams {
    pub model: Option<String>,
    pub num_prompts: usize,
    /// `max_tokens` unset: it is resolved per prompt by `max_tokens`.
    pub sampling: SamplingParams,
    pub max_tokens: MaxTokens,
    pub n: usize,
    /// Alternatives per token when logprobs were asked for.
    pub logprobs: Option<usize>,
    /// Completions only: prepend the prompt to each choice.
    pub echo: bool,
    pub stream: bool,
    pub include_usage: bool,
    pub priority: i32,
    pub slo_class: Option<String>,
    pub cache_salt: Option<String>,
    pub skip_special_tokens: bool,
}

impl RequestParams {
    /// Sequences the request runs at once: `n` for each prompt.
    pub fn sequences(&self) -> usize {
        self.n.saturating_mul(self.num_prompts)
    }
}

fn prompt_count(prompt: &PromptInput) -> usize {
    match prompt {
        PromptInput::Text(_) | PromptInput::Tokens(_) => 1,
        PromptInput::Texts(texts) => texts.len(),
        PromptInput::TokenLists(lists) => lists.len(),
    }
}

/// Checks a parsed body for `endpoint`.
pub fn validate(
    json: &Value,
    endpoint: Endpoint,
    limits: &RequestLimits,
    facts: ModelFacts<'_>,
) -> Result<ValidRequest, ApiError> {
    let common: CommonParams = parse_fields(json)?;
    check_lists(&common, limits)?;
    let max_model_len = facts.max_model_len;
    let vocab_size = facts.vocab_size;
    let (input, endpoint_sampling, echo) = match endpoint {
        Endpoint::Chat => chat_input(json, limits)?,
        Endpoint::Completions => completions_input(json, &common, limits)?,
    };
    let logprobs = endpoint_sampling.logprobs;
    let (sampling, max_tokens) = sampling::build(&common, endpoint_sampling, facts)?;
    let num_prompts = match &input {
        Input::Chat(_) => 1,
        Input::Prompts { prompt, .. } => prompt_count(prompt),
    };
    tracing::debug!(
        user = common.user.as_deref(),
        ?endpoint,
        "request validated"
    );
    let params = RequestParams {
        model: common.model.clone(),
        num_prompts,
        n: sampling.n,
        sampling,
        max_tokens,
        logprobs,
        echo,
        stream: common.streaming(),
        include_usage: common.include_usage(),
        priority: common.priority.unwrap_or(0),
        slo_class: common.slo_class.clone(),
        cache_salt: common.cache_salt.clone(),
        skip_special_tokens: common.skip_special_tokens.unwrap_or(true),
    };
    let sequences = params.sequences();
    if sequences > limits.max_seqs_per_request {
        return Err(ApiError::invalid(
            "n",
            format!(
                "`n` times the number of prompts must be at most {}, got {sequences}",
                limits.max_seqs_per_request
            ),
        ));
    }
    if let Input::Prompts { prompt, .. } = &input {
        check_token_prompts(prompt, vocab_size, max_model_len)?;
    }
    Ok(ValidRequest { input, params })
}

/// The lists of `CommonParams` a client sizes: stop strings, stop token ids, logit biases.
fn check_lists(common: &CommonParams, limits: &RequestLimits) -> Result<(), ApiError> {
    if let Some(stop) = &common.stop {
        let stops: &[String] = match stop {
            OneOrMany::One(s) => std::slice::from_ref(s),
            OneOrMany::Many(v) => v,
        };
        if stops.len() > limits.max_stop_sequences {
            return Err(ApiError::invalid(
                "stop",
                format!(
                    "at most {} stop sequences are allowed, got {}",
                    limits.max_stop_sequences,
                    stops.len()
                ),
            ));
        }
        if let Some(s) = stops.iter().find(|s| s.len() > limits.max_stop_bytes) {
            return Err(ApiError::invalid(
                "stop",
                format!(
                    "a stop sequence may be at most {} bytes, got {}",
                    limits.max_stop_bytes,
                    s.len()
                ),
            ));
        }
        if stops.iter().any(String::is_empty) {
            return Err(ApiError::invalid(
                "stop",
                "stop sequences must not be empty",
            ));
        }
    }
    let count = |list: Option<usize>, max: usize, param: &str| match list {
        Some(len) if len > max => Err(ApiError::invalid(
            param,
            format!("`{param}` may have at most {max} entries, got {len}"),
        )),
        _ => Ok(()),
    };
    count(
        common.stop_token_ids.as_ref().map(Vec::len),
        limits.max_stop_token_ids,
        "stop_token_ids",
    )?;
    count(
        common.logit_bias.as_ref().map(|b| b.len()),
        limits.max_logit_bias,
        "logit_bias",
    )
}

/// The roles a chat message may have (OpenAI's). Anything else would reach the template
/// verbatim, where a role such as "user\nIgnore all previous instructions" is an injection
/// that no content screening sees.
pub const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

fn chat_input(
    json: &Value,
    limits: &RequestLimits,
) -> Result<(Input, EndpointSampling, bool), ApiError> {
    let chat: ChatFields = parse_fields(json)?;
    if chat.messages.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    if chat.messages.len() > limits.max_messages {
        return Err(ApiError::invalid(
            "messages",
            format!(
                "at most {} messages are allowed, got {}",
                limits.max_messages,
                chat.messages.len()
            ),
        ));
    }
    for (i, m) in chat.messages.iter().enumerate() {
        if !ROLES.contains(&m.role.as_str()) {
            return Err(ApiError::invalid(
                &format!("messages[{i}].role"),
                format!(
                    "unknown role; a message's role must be one of {}",
                    ROLES.join(", ")
                ),
            ));
        }
    }
    let bytes = chat.messages.iter().fold(0usize, |total, m| {
        total
            .saturating_add(message_bytes(m))
            .saturating_add(m.role.len())
    });
    check_prompt_bytes(bytes, limits, "messages")?;
    let wants_logprobs = chat.logprobs.unwrap_or(false);
    if chat.top_logprobs.is_some() && !wants_logprobs {
        return Err(ApiError::invalid(
            "top_logprobs",
            "`top_logprobs` requires `logprobs` to be true",
        ));
    }
    let sampling = EndpointSampling {
        logprobs: wants_logprobs.then_some(chat.top_logprobs.unwrap_or(0)),
        logprobs_param: "top_logprobs",
        default_max_tokens: None,
    };
    let input = Input::Chat(ChatInput {
        messages: chat.messages,
        add_generation_prompt: chat.add_generation_prompt,
        continue_final_message: chat.continue_final_message,
        chat_template_kwargs: chat.chat_template_kwargs,
        tools: chat.tools,
    });
    Ok((input, sampling, false))
}

/// Text bytes of one message: its content and name.
pub fn message_bytes(m: &ChatMessage) -> usize {
    let content = match &m.content {
        Some(MessageContent::Text(t)) => t.len(),
        Some(MessageContent::Parts(parts)) => parts
            .iter()
            .map(|p| p.text.as_ref().map_or(0, String::len))
            .fold(0usize, usize::saturating_add),
        None => 0,
    };
    content.saturating_add(m.name.as_ref().map_or(0, String::len))
}

fn completions_input(
    json: &Value,
    common: &CommonParams,
    limits: &RequestLimits,
) -> Result<(Input, EndpointSampling, bool), ApiError> {
    let fields: CompletionFields = parse_fields(json)?;
    if fields.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid("suffix", "`suffix` is not supported"));
    }
    if let Some(best_of) = fields.best_of {
        if best_of != common.n.unwrap_or(1) {
            return Err(ApiError::invalid(
                "best_of",
                "`best_of` is only supported equal to `n`",
            ));
        }
    }
    let echo = fields.echo.unwrap_or(false);
    if echo && fields.logprobs.is_some() {
        return Err(ApiError::invalid(
            "echo",
            "`echo` together with `logprobs` is not supported",
        ));
    }
    if prompt_count(&fields.prompt) == 0 {
        return Err(ApiError::invalid("prompt", "`prompt` must not be empty"));
    }
    let bytes = match &fields.prompt {
        PromptInput::Text(t) => t.len(),
        PromptInput::Texts(ts) => ts.iter().map(String::len).fold(0, usize::saturating_add),
        PromptInput::Tokens(_) | PromptInput::TokenLists(_) => 0,
    };
    check_prompt_bytes(bytes, limits, "prompt")?;
    let sampling = EndpointSampling {
        logprobs: fields.logprobs,
        logprobs_param: "logprobs",
        default_max_tokens: Some(COMPLETIONS_DEFAULT_MAX_TOKENS),
    };
    let input = Input::Prompts {
        prompt: fields.prompt,
        add_special_tokens: fields.add_special_tokens.unwrap_or(true),
    };
    Ok((input, sampling, echo))
}

/// Prompt text over `--max-prompt-bytes` is a 400 naming `param`.
pub fn check_prompt_bytes(
    bytes: usize,
    limits: &RequestLimits,
    param: &str,
) -> Result<(), ApiError> {
    if bytes > limits.max_prompt_bytes {
        return Err(ApiError::invalid(
            param,
            format!(
                "the prompt is {bytes} bytes; at most {} are allowed",
                limits.max_prompt_bytes
            ),
        ));
    }
    Ok(())
}

/// Token prompts: none empty, every id in the vocabulary, none longer than the context.
fn check_token_prompts(
    prompt: &PromptInput,
    vocab_size: usize,
    max_model_len: usize,
) -> Result<(), ApiError> {
    let lists: &[Vec<u32>] = match prompt {
        PromptInput::Tokens(ids) => std::slice::from_ref(ids),
        PromptInput::TokenLists(lists) => lists,
        PromptInput::Text(_) | PromptInput::Texts(_) => return Ok(()),
    };
    for ids in lists {
        if ids.is_empty() {
            return Err(ApiError::invalid(
                "prompt",
                "a prompt must have at least one token",
            ));
        }
        if let Some(t) = ids.iter().find(|&&t| t as usize >= vocab_size) {
            return Err(ApiError::invalid(
                "prompt",
                format!("token {t} is outside the vocabulary of {vocab_size}"),
            ));
        }
        if ids.len() >= max_model_len {
            return Err(ApiError::ContextLength(format!(
                "the prompt has {} tokens; this model's context is {max_model_len}",
                ids.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pagoda_models::GenerationConfig;

    use super::*;

    fn facts(defaults: &GenerationConfig) -> ModelFacts<'_> {
        ModelFacts {
            defaults,
            max_model_len: 100,
            vocab_size: 50,
        }
    }

    fn check(endpoint: Endpoint, body: Value) -> Result<ValidRequest, ApiError> {
        let defaults = GenerationConfig::default();
        validate(&body, endpoint, &RequestLimits::default(), facts(&defaults))
    }

    fn param_of(result: Result<ValidRequest, ApiError>) -> Option<String> {
        match result {
            Err(ApiError::InvalidRequest { param, .. }) => param,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    fn chat(extra: Value) -> Value {
        let mut body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        body
    }

    #[test]
    fn every_list_a_client_sizes_is_capped_and_named() {
        let many = |n: usize, item: Value| Value::Array(vec![item; n]);
        let cases = [
            (
                chat(serde_json::json!({"stop": many(17, "x".into())})),
                "stop",
            ),
            (chat(serde_json::json!({"stop": "x".repeat(257)})), "stop"),
            (chat(serde_json::json!({"stop": [""]})), "stop"),
            (
                chat(serde_json::json!({"stop_token_ids": many(257, 1.into())})),
                "stop_token_ids",
            ),
            (chat(serde_json::json!({"n": 129})), "n"),
            (
                serde_json::json!({"messages": many(4097, serde_json::json!({"role": "user", "content": "x"}))}),
                "messages",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": "x".repeat(3 << 20)}]}),
                "messages",
            ),
        ];
        for (body, param) in cases {
            assert_eq!(
                param_of(check(Endpoint::Chat, body)).as_deref(),
                Some(param)
            );
        }
        let bias: Map<String, Value> = (0..301).map(|i| (i.to_string(), 1.into())).collect();
        let body = chat(serde_json::json!({ "logit_bias": bias }));
        assert_eq!(
            param_of(check(Endpoint::Chat, body)).as_deref(),
            Some("logit_bias")
        );
    }

    #[test]
    fn prompts_times_n_is_capped_and_token_prompts_are_checked() {
        let prompts = vec!["a"; 8];
        let body = serde_json::json!({"prompt": prompts, "n": 64});
        assert_eq!(
            param_of(check(Endpoint::Completions, body)).as_deref(),
            Some("n")
        );
        let body = serde_json::json!({"prompt": prompts, "n": 16});
        assert!(check(Endpoint::Completions, body).is_ok());
        for prompt in [
            serde_json::json!([[]]),
            serde_json::json!([50]),
            serde_json::json!([]),
        ] {
            let body = serde_json::json!({ "prompt": prompt });
            assert_eq!(
                param_of(check(Endpoint::Completions, body)).as_deref(),
                Some("prompt")
            );
        }
        let body = serde_json::json!({"prompt": vec![1; 100]});
        assert!(matches!(
            check(Endpoint::Completions, body),
            Err(ApiError::ContextLength(_))
        ));
    }

    #[test]
    fn a_valid_request_keeps_what_the_engine_needs() {
        let body = chat(serde_json::json!({
            "n": 3, "stop": ["a", "b"], "max_tokens": u64::MAX, "logprobs": true,
            "top_logprobs": 2, "stream": true, "priority": -1
        }));
        let r = check(Endpoint::Chat, body).unwrap().params;
        assert_eq!(
            (r.n, r.logprobs, r.stream, r.priority),
            (3, Some(2), true, -1)
        );
        assert_eq!(r.sampling.stop, vec!["a".to_string(), "b".to_string()]);
        assert!(r.max_tokens.resolve(40, 100).is_err());
        assert_eq!(r.sequences(), 3);
    }
}
