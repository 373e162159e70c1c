//! A Hugging Face `tokenizer.json`, through the `tokenizers` crate.

use std::path::Path;

use pagoda_gguf::GgufFile;

use crate::error::{Result, TextError};

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner =
            tokenizers::Tokenizer::from_file(path).map_err(|e| TextError::LoadTokenizer {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        Ok(Tokenizer { inner })
    }

    /// The tokenizer in a GGUF file's metadata, built to tokenize as the model's original
    /// tokenizer.json does (see [`crate::gguf`]).
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let inner = crate::gguf::build_tokenizer(file)?;
        Ok(Tokenizer { inner })
    }

    /// Token ids of `text`. Special-token strings in the text are recognised; the
    /// tokenizer's own BOS/EOS wrapping is added only when `add_special_tokens`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| TextError::Tokenize(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| TextError::Tokenize(e.to_string()))
    }

    /// Ids including added special tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub(crate) fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }
}
