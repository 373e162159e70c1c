//! The crate's one error type.

use crate::ids::RequestId;
use crate::sampling::InvalidParam;

/// Why the engine core refused something. Messages are written for the API user; the server
/// maps each variant to an HTTP status in one place.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("request {0} already exists")]
    DuplicateRequest(RequestId),
    #[error("request {0} is unknown or already finished")]
    UnknownRequest(RequestId),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {num_tokens} tokens, but this model accepts at most {max_tokens} prompt tokens")]
    PromptTooLong {
        num_tokens: usize,
        max_tokens: usize,
    },
    #[error(transparent)]
    InvalidSampling(#[from] InvalidParam),
    #[error("invalid engine configuration `{field}`: {reason}")]
    InvalidConfig { field: &'static str, reason: String },
}
