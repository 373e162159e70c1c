use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error("cannot load tokenizer {path}: {reason}")]
    LoadTokenizer { path: PathBuf, reason: String },
    #[error("tokenizer failed: {0}")]
    Tokenize(String),
    #[error("cannot read {path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("chat template error: {0}")]
    Template(String),
    /// A GGUF file whose tokenizer metadata Pagoda cannot use.
    #[error("{path}: {reason}")]
    Gguf { path: PathBuf, reason: String },
}

pub type Result<T, E = TextError> = std::result::Result<T, E>;
