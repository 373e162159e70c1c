//! One file per endpoint.

pub mod chat;
pub mod completions;
pub mod models;
pub mod ops;
pub mod render;
pub mod tokenize;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;

use crate::error::ApiError;
use crate::state::AppState;

/// The raw body; a body we cannot read (too large, broken) is the client's fault.
pub fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::BodyTooLarge
        } else {
            ApiError::InvalidRequest {
                message: format!("cannot read the request body: {}", e.body_text()),
                param: None,
            }
        }
    })
}

/// Middleware: a body whose declared length is over `--max-body-bytes` gets 413 at once,
/// before a byte of it is read (the body limit itself still applies to bodies sent without
/// a length).
pub async fn refuse_oversized(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let limit = u64::try_from(state.limits().max_body_bytes).unwrap_or(u64::MAX);
    if declared.is_some_and(|len| len > limit) {
        return axum::response::IntoResponse::into_response(ApiError::BodyTooLarge);
    }
    next.run(req).await
}
