#[derive(Debug, thiserror::Error)]
pub enum StructuredError {
    /// The request's schema, regex or grammar cannot be used; `reason` says why.
    #[error("{reason}")]
    Invalid { reason: String },
    /// The model's vocabulary could not be indexed.
    #[error("cannot index the vocabulary for structured outputs: {0}")]
    Vocabulary(String),
    /// The constraint reached a state it cannot continue from (a bug, not bad input).
    #[error("the output constraint failed: {0}")]
    Matcher(String),
}

pub type Result<T, E = StructuredError> = std::result::Result<T, E>;
