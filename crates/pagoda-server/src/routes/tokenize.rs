//! `POST /tokenize` and `POST /detokenize`, as vLLM has them.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;

use crate::error::ApiError;
use crate::pipeline::validate::{check_prompt_bytes, message_bytes};
use crate::prompt::{self, ChatRender};
use crate::routes::read_body;
use crate::state::AppState;
use crate::wire::request::{parse_fields, parse_json, DetokenizeRequest, TokenizeRequest};
use crate::wire::response::{DetokenizeResponse, TokenizeResponse};

pub async fn tokenize(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<TokenizeResponse>, ApiError> {
    let body = read_body(body)?;
    let work_state = state.clone();
    // Parsing, rendering and tokenizing are CPU work: off the I/O thread, like generation.
    let response = state
        .run_blocking(move || tokenize_body(&work_state, &body))
        .await?;
    Ok(Json(response))
}

fn tokenize_body(state: &AppState, body: &Bytes) -> Result<TokenizeResponse, ApiError> {
    let request: TokenizeRequest = parse_fields(&parse_json(body)?)?;
    state.check_model(request.model.as_deref())?;
    let loaded = state.ready()?;
    let limits = state.limits();
    let tokens = match (&request.prompt, &request.messages) {
        (Some(text), None) => {
            check_prompt_bytes(text.len(), limits, "prompt")?;
            prompt::encode(loaded, text, request.add_special_tokens.unwrap_or(true))?
        }
        (None, Some(messages)) => {
            if messages.len() > limits.max_messages {
                return Err(ApiError::invalid(
                    "messages",
                    format!("at most {} messages are allowed", limits.max_messages),
                ));
            }
            check_prompt_bytes(
                messages
                    .iter()
                    .map(message_bytes)
                    .fold(0, usize::saturating_add),
                limits,
                "messages",
            )?;
            let text = prompt::render_chat(
                loaded,
                &ChatRender {
                    messages,
                    add_generation_prompt: request.add_generation_prompt,
                    continue_final_message: request.continue_final_message,
                    chat_template_kwargs: request.chat_template_kwargs.as_ref(),
                    tools: request.tools.as_ref(),
                },
            )?;
            prompt::encode(loaded, &text, request.add_special_tokens.unwrap_or(false))?
        }
        _ => {
            return Err(ApiError::invalid(
                "prompt",
                "give either `prompt` or `messages`, not both or neither",
            ))
        }
    };
    let tokenizer = loaded.engine.tokenizer();
    let token_strs = request.return_token_strs.then(|| {
        tokens
            .iter()
            .map(|&t| tokenizer.id_to_token(t).unwrap_or_default())
            .collect()
    });
    Ok(TokenizeResponse {
        count: tokens.len(),
        max_model_len: loaded.engine.info().max_model_len,
        tokens,
        token_strs,
    })
}

pub async fn detokenize(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<DetokenizeResponse>, ApiError> {
    let request: DetokenizeRequest = parse_fields(&parse_json(&read_body(body)?)?)?;
    state.check_model(request.model.as_deref())?;
    let loaded = state.ready()?;
    let vocab_size = loaded.engine.info().vocab_size;
    if let Some(t) = request.tokens.iter().find(|&&t| t as usize >= vocab_size) {
        return Err(ApiError::invalid(
            "tokens",
            format!("token {t} is outside the vocabulary of {vocab_size}"),
        ));
    }
    let prompt = loaded
        .engine
        .tokenizer()
        .decode(&request.tokens, false)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(DetokenizeResponse { prompt }))
}
