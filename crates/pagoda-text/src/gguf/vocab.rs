//! The token list of a GGUF file (`tokenizer.ggml.tokens`, `token_type`, `scores`), read
//! and checked, and typed access to the other `tokenizer.ggml.*` keys.

use std::collections::HashMap;

use pagoda_gguf::{GgufFile, MetaValue};

use crate::error::{Result, TextError};

pub const TOKENS: &str = "tokenizer.ggml.tokens";
pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const SCORES: &str = "tokenizer.ggml.scores";

/// llama.cpp's token types (SentencePiece's piece types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_number(n: i64) -> Option<TokenType> {
        Some(match n {
            // 0 is llama.cpp's "undefined", which it treats as normal.
            0 | 1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }

    /// Matched in raw text before the model sees it, as Hugging Face's added tokens are.
    pub fn is_added(self) -> bool {
        matches!(
            self,
            TokenType::Unknown | TokenType::Control | TokenType::UserDefined
        )
    }

    /// Added tokens that `decode(skip_special_tokens)` drops.
    pub fn is_special(self) -> bool {
        matches!(self, TokenType::Unknown | TokenType::Control)
    }
}

/// Metadata access that reports problems as errors naming the file.
#[derive(Clone, Copy)]
pub struct Meta<'a> {
    pub file: &'a GgufFile,
}

impl<'a> Meta<'a> {
    pub fn invalid(&self, reason: impl Into<String>) -> TextError {
        TextError::Gguf {
            path: self.file.path.clone(),
            reason: reason.into(),
        }
    }

    /// A string value; `Err` when the key holds something else.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>> {
        match self.file.get(key) {
            None => Ok(None),
            Some(MetaValue::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.invalid(format!("GGUF metadata `{key}` is not a string"))),
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.file.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.invalid(format!("GGUF metadata `{key}` is not a boolean"))),
        }
    }

    /// A token id that must name one of `n_tokens` tokens.
    pub fn token_id(&self, key: &str, n_tokens: usize) -> Result<Option<u32>> {
        let Some(value) = self.file.get(key) else {
            return Ok(None);
        };
        let id = value
            .as_u64()
            .ok_or_else(|| self.invalid(format!("GGUF metadata `{key}` is not a token id")))?;
        if id >= n_tokens as u64 {
            return Err(self.invalid(format!(
                "GGUF metadata `{key}` is {id}, out of range for {n_tokens} tokens"
            )));
        }
        Ok(Some(id as u32))
    }

    pub fn strings(&self, key: &str) -> Result<Option<Vec<&'a str>>> {
        self.file
            .get_strings(key)
            .map_err(|e| self.invalid(e.to_string()))
    }

    fn array(&self, key: &str, len: usize) -> Result<Option<&'a [MetaValue]>> {
        let Some(value) = self.file.get(key) else {
            return Ok(None);
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.invalid(format!("GGUF metadata `{key}` is not an array")))?;
        if items.len() != len {
            return Err(self.invalid(format!(
                "GGUF metadata `{key}` has {} entries for {len} tokens",
                items.len()
            )));
        }
        Ok(Some(items))
    }
}

/// The tokens by id, with their types and (SentencePiece) scores.
pub struct Vocab<'a> {
    pub tokens: Vec<&'a str>,
    pub types: Vec<TokenType>,
    /// All zero when the file has none.
    pub scores: Vec<f64>,
    /// Id of each token text. Empty texts are left out: no text encodes to them.
    pub ids: HashMap<&'a str, u32>,
}

impl<'a> Vocab<'a> {
    pub fn read(meta: Meta<'a>) -> Result<Vocab<'a>> {
        let tokens = meta
            .strings(TOKENS)?
            .filter(|tokens| !tokens.is_empty())
            .ok_or_else(|| meta.invalid(format!("GGUF metadata has no `{TOKENS}`")))?;
        if u32::try_from(tokens.len()).is_err() {
            return Err(meta.invalid(format!("`{TOKENS}` has more tokens than fit a u32 id")));
        }
        let n = tokens.len();
        let types = match meta.array(TOKEN_TYPE, n)? {
            None => vec![TokenType::Normal; n],
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_i64().and_then(TokenType::from_number).ok_or_else(|| {
                        meta.invalid(format!("`{TOKEN_TYPE}[{i}]` is not a token type (1-6)"))
                    })
                })
                .collect::<Result<_>>()?,
        };
        let scores = match meta.array(SCORES, n)? {
            None => vec![0.0; n],
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_f64()
                        .filter(|s| !s.is_nan())
                        .ok_or_else(|| meta.invalid(format!("`{SCORES}[{i}]` is not a number")))
                })
                .collect::<Result<_>>()?,
        };
        let mut ids = HashMap::with_capacity(n);
        for (id, &token) in tokens.iter().enumerate() {
            if token.is_empty() {
                continue;
            }
            if let Some(first) = ids.insert(token, id as u32) {
                // One text cannot map to two ids in a Hugging Face vocabulary (nor in llama.cpp).
                return Err(meta.invalid(format!(
                    "`{TOKENS}` holds {token:?} twice, at ids {first} and {id}"
                )));
            }
        }
        Ok(Vocab {
            tokens,
            types,
            scores,
            ids,
        })
    }

    /// The vocabulary a `tokenizers` model takes (every non-empty token, added ones too,
    /// so that each keeps its GGUF id).
    pub fn model_vocab(&self) -> tokenizers::models::bpe::Vocab {
        self.ids
            .iter()
            .map(|(&token, &id)| (token.to_string(), id))
            .collect()
    }
}
