//! The one place where failures become HTTP statuses and OpenAI's error JSON.

use std::path::PathBuf;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pagoda_engine::EngineError;
use pagoda_gateway::GatewayError;
use pagoda_runtime::RuntimeError;
use serde_json::json;

/// Why a request failed, as the client should see it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON or a parameter out of range: 400, naming the parameter.
    #[error("{message}")]
    InvalidRequest {
        message: String,
        param: Option<String>,
    },
    /// Prompt plus requested output exceed the model's context: 400 with the numbers.
    #[error("{0}")]
    ContextLength(String),
    #[error("the model `{0}` does not exist")]
    ModelNotFound(String),
    #[error("no route for {0}")]
    RouteNotFound(String),
    /// The body is over `--max-body-bytes`: 413.
    #[error("the request body is too large")]
    BodyTooLarge,
    /// The body did not arrive within `--body-timeout`: 408.
    #[error("the request body did not arrive within the body timeout")]
    BodyTimeout,
    /// Admission queue full: 429 with `Retry-After`.
    #[error("the server is at capacity ({limit} requests in flight); retry later")]
    QueueFull { limit: usize },
    /// This tenant's share of the queue is full: 429 with `Retry-After`.
    #[error("too many sequences of yours are queued or running ({limit}); retry later")]
    TenantQueueFull { limit: usize },
    /// Loading, draining, or the engine stopped: 503.
    #[error("{0}")]
    Unavailable(&'static str),
    /// A bug or an engine failure: 500. The detail is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// Refused by the gateway: 401 (key), 403 (model, admin), 429 (limits, quota), or a
    /// gateway failure (500).
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The guardrail policy blocks these entity types (named, never their values): 400.
    #[error("the request contains data the policy does not allow: {}", .0.join(", "))]
    PiiDetected(Vec<&'static str>),
    /// The tenant's tool scope does not allow offering this function: 403.
    #[error("the function `{0}` is not allowed for this key")]
    ToolForbidden(String),
    /// The guardrails judged the request a prompt injection: 400.
    #[error("the request was refused as a likely prompt injection")]
    PromptInjection,
}

impl ApiError {
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        ApiError::InvalidRequest {
            message: message.into(),
            param: Some(param.to_string()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest { .. }
            | ApiError::ContextLength(_)
            | ApiError::PiiDetected(_)
            | ApiError::PromptInjection => StatusCode::BAD_REQUEST,
            ApiError::ModelNotFound(_) | ApiError::RouteNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::ToolForbidden(_) => StatusCode::FORBIDDEN,
            ApiError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::QueueFull { .. } | ApiError::TenantQueueFull { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Gateway(e) => match e {
                GatewayError::MissingKey | GatewayError::InvalidKey => StatusCode::UNAUTHORIZED,
                GatewayError::ModelForbidden { .. } | GatewayError::Forbidden(_) => {
                    StatusCode::FORBIDDEN
                }
                GatewayError::RateLimited { .. } | GatewayError::QuotaExhausted { .. } => {
                    StatusCode::TOO_MANY_REQUESTS
                }
                GatewayError::PromptTooLong { .. } | GatewayError::InvalidInput { .. } => {
                    StatusCode::BAD_REQUEST
                }
                GatewayError::MeteringUnavailable => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// OpenAI's `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> serde_json::Value {
        let (kind, code, param) = match self {
            ApiError::InvalidRequest { param, .. } => {
                ("invalid_request_error", None, param.clone())
            }
            ApiError::ContextLength(_) => (
                "invalid_request_error",
                Some("context_length_exceeded"),
                None,
            ),
            ApiError::ModelNotFound(_) => (
                "invalid_request_error",
                Some("model_not_found"),
                Some("model".into()),
            ),
            ApiError::RouteNotFound(_) => ("invalid_request_error", Some("not_found"), None),
            ApiError::BodyTooLarge => ("invalid_request_error", Some("request_too_large"), None),
            ApiError::BodyTimeout => ("invalid_request_error", Some("request_timeout"), None),
            ApiError::QueueFull { .. } | ApiError::TenantQueueFull { .. } => {
                ("rate_limit_error", Some("rate_limit_exceeded"), None)
            }
            ApiError::Unavailable(_) => ("service_unavailable", None, None),
            ApiError::Internal(_) => ("server_error", None, None),
            ApiError::PiiDetected(_) => ("invalid_request_error", Some("pii_detected"), None),
            ApiError::ToolForbidden(_) => (
                "permission_error",
                Some("tool_not_allowed"),
                Some("tools".into()),
            ),
            ApiError::PromptInjection => (
                "invalid_request_error",
                Some("prompt_injection_detected"),
                None,
            ),
            ApiError::Gateway(e) => match e {
                GatewayError::MissingKey | GatewayError::InvalidKey => {
                    ("invalid_request_error", Some("invalid_api_key"), None)
                }
                GatewayError::ModelForbidden { .. } => (
                    "permission_error",
                    Some("model_not_allowed"),
                    Some("model".into()),
                ),
                GatewayError::Forbidden(_) => ("permission_error", Some("forbidden"), None),
                GatewayError::RateLimited { .. } => {
                    ("rate_limit_error", Some("rate_limit_exceeded"), None)
                }
                // As OpenAI answers an exhausted quota.
                GatewayError::QuotaExhausted { .. } => {
                    ("insufficient_quota", Some("insufficient_quota"), None)
                }
                GatewayError::PromptTooLong { .. } => (
                    "invalid_request_error",
                    Some("prompt_too_long"),
                    Some("messages".into()),
                ),
                GatewayError::InvalidInput { what, .. } => {
                    ("invalid_request_error", None, Some(what.to_string()))
                }
                GatewayError::MeteringUnavailable => ("service_unavailable", None, None),
                _ => ("server_error", None, None),
            },
        };
        let message = match self {
            ApiError::Internal(_) => "the server failed to handle the request".to_string(),
            e @ ApiError::Gateway(_) if e.status() == StatusCode::INTERNAL_SERVER_ERROR => {
                "the server failed to handle the request".to_string()
            }
            other => other.to_string(),
        };
        json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "request failed");
        }
        if let ApiError::Gateway(e) = &self {
            if self.status() == StatusCode::INTERNAL_SERVER_ERROR {
                tracing::error!(error = %e, "gateway failed");
            }
        }
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        let retry_after = match &self {
            // Backpressure routers retry elsewhere (a draining or loading replica too).
            ApiError::QueueFull { .. }
            | ApiError::TenantQueueFull { .. }
            | ApiError::Unavailable(_) => Some(1),
            // Whole seconds, rounded up so a client that waits exactly this long gets in.
            ApiError::Gateway(e) => e.retry_after().map(|d| d.as_millis().div_ceil(1000).max(1)),
            _ => None,
        };
        if let Some(seconds) = retry_after {
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> ApiError {
        match err {
            RuntimeError::Engine(EngineError::InvalidSampling(p)) => {
                ApiError::invalid(p.field, p.to_string())
            }
            RuntimeError::Engine(e @ EngineError::EmptyPrompt) => {
                ApiError::invalid("prompt", e.to_string())
            }
            RuntimeError::Engine(e @ EngineError::PromptTooLong { .. }) => {
                ApiError::ContextLength(e.to_string())
            }
            e @ RuntimeError::ContextOverflow { .. } => ApiError::ContextLength(e.to_string()),
            e @ RuntimeError::TokenOutOfRange { .. } => ApiError::invalid("prompt", e.to_string()),
            RuntimeError::QueueFull { limit } => ApiError::QueueFull { limit },
            RuntimeError::TenantQueueFull { limit } => ApiError::TenantQueueFull { limit },
            RuntimeError::EngineStopped => ApiError::Unavailable("the engine is not running"),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// Why `pagoda serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid setting `{field}`: {reason}")]
    Setting { field: &'static str, reason: String },
    #[error("cannot read config file {path}: {reason}")]
    ConfigFile { path: PathBuf, reason: String },
    #[error("cannot load the model: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("cannot load the chat template: {0}")]
    ChatTemplate(#[from] pagoda_text::TextError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot start the gateway: {0}")]
    Gateway(#[from] GatewayError),
    #[error("cannot start the guardrails: {0}")]
    Guard(#[from] pagoda_guard::GuardError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
