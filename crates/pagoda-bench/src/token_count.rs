//! Counting tokens with the served model's own tokenizer (`--tokenizer tokenizer.json`).

use crate::error::BenchError;
use std::path::Path;
use tokenizers::Tokenizer;

pub struct TokenCounter {
    tokenizer: Tokenizer,
}

impl TokenCounter {
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        let tokenizer = Tokenizer::from_file(path).map_err(|e| BenchError::Tokenizer {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self { tokenizer })
    }

    /// Tokens in `text` without special tokens, as the server would count generated text.
    pub fn count(&self, text: &str) -> usize {
        // An encoding failure on generated text is not worth failing a benchmark for;
        // zero makes the caller fall back to counting stream chunks.
        self.tokenizer
            .encode_fast(text, false)
            .map(|encoding| encoding.len())
            .unwrap_or(0)
    }
}
