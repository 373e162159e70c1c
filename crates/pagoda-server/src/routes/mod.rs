//! One file per endpoint.

pub mod chat;
pub mod completions;
pub mod models;
pub mod ops;
pub mod tokenize;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;

use crate::error::ApiError;

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

/// What every response of one request shares.
#[derive(Clone)]
pub struct ResponseMeta {
    pub id: String,
    pub created: u64,
    pub model: String,
}
