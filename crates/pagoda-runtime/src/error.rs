/// Why the runtime refused or failed a request; the server maps each to an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Model(#[from] pagoda_models::ModelError),
    #[error(transparent)]
    Text(#[from] pagoda_text::TextError),
    #[error(transparent)]
    Gguf(#[from] pagoda_gguf::GgufError),
    #[error(transparent)]
    Engine(#[from] pagoda_engine::EngineError),
    #[error("this model's maximum context length is {limit} tokens, but the request has {prompt_tokens} prompt tokens and asks for up to {max_tokens} more")]
    ContextOverflow {
        prompt_tokens: usize,
        max_tokens: usize,
        limit: usize,
    },
    #[error("token id {token} is outside the vocabulary of {vocab_size}")]
    TokenOutOfRange { token: u32, vocab_size: usize },
    #[error("the engine is at capacity ({limit} requests in flight); retry later")]
    QueueFull { limit: usize },
    #[error(
        "too many requests in flight for this caller ({limit} sequences at most); retry later"
    )]
    TenantQueueFull { limit: usize },
    #[error("model not found: {0}")]
    ModelNotFound(String),
    #[error("structured outputs are not available for this model: {0}")]
    StructuredUnavailable(String),
    #[error("the engine is not running")]
    EngineStopped,
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
