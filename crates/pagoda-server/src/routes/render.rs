//! `POST /v1/completions/render` and `POST /v1/chat/completions/render`, as vLLM has them:
//! a generating request's body in, the token ids the engine would be given out, without
//! generating. Prefix-aware pickers (llm-d's precise prefix-cache scorer) call these to hash
//! a request's blocks as this server will. The body is validated exactly as for generation.
//! Guardrails are not applied: their rewrites and the per-request canary are not part of a
//! prompt a picker could match anyway.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::pipeline::{prepare, validate, Endpoint};
use crate::routes::read_body;
use crate::state::AppState;
use crate::wire::request::parse_json;

/// One object: `{"token_ids": [...], "model": ...}`.
pub async fn chat(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let mut prompts = render(&state, read_body(body)?, Endpoint::Chat).await?;
    Ok(Json(prompts.pop().unwrap_or(Value::Null)))
}

/// One object per prompt, in a list.
pub async fn completions(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let prompts = render(&state, read_body(body)?, Endpoint::Completions).await?;
    Ok(Json(Value::Array(prompts)))
}

async fn render(state: &AppState, body: Bytes, endpoint: Endpoint) -> Result<Vec<Value>, ApiError> {
    let work_state = state.clone();
    state
        .run_blocking(move || {
            let state = work_state;
            let loaded = state.ready()?;
            let json = parse_json(&body)?;
            let valid =
                validate::validate(&json, endpoint, state.limits(), loaded.engine.info().into())?;
            state.check_model(valid.params.model.as_deref())?;
            let prepared = prepare::prepare(loaded, None, None, "render", valid.input, false)?;
            let model = state.model_name();
            Ok(prepared
                .prompts
                .into_iter()
                .map(|p| json!({"token_ids": p.token_ids, "model": model}))
                .collect())
        })
        .await
}
