//! The model's vocabulary as llguidance indexes it.

use std::sync::Arc;

use pagoda_text::{TokenText, Tokenizer};
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

use crate::error::{Result, StructuredError};

/// A trie of every token's bytes. Special tokens carry llguidance's marker byte, so no text
/// grammar can produce them. Text the grammar forces is tokenized as the model's tokenizer
/// splits it (what the model saw in training), greedily over the trie if it is not UTF-8.
struct Vocabulary {
    trie: TokTrie,
    tokenizer: Arc<Tokenizer>,
}

impl TokenizerEnv for Vocabulary {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        std::str::from_utf8(s)
            .ok()
            .and_then(|text| self.tokenizer.encode(text, false).ok())
            .unwrap_or_else(|| self.trie.greedy_tokenize(s))
    }
}

/// `logits_size` is the width of the model's output rows, which may exceed the tokenizer's
/// vocabulary (padding ids are never allowed). The first of `eos` ends a grammar.
pub(crate) fn token_env(
    tokenizer: &Arc<Tokenizer>,
    logits_size: usize,
    eos: &[u32],
) -> Result<TokEnv> {
    let texts = tokenizer
        .token_texts()
        .map_err(|e| StructuredError::Vocabulary(e.to_string()))?;
    let size = logits_size.max(texts.len());
    let mut words: Vec<Vec<u8>> = vec![Vec::new(); size];
    for (word, text) in words.iter_mut().zip(texts) {
        *word = match text {
            Some(TokenText::Bytes(bytes)) => bytes,
            Some(TokenText::Special(name)) => {
                let mut marked = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                marked.extend_from_slice(name.as_bytes());
                marked
            }
            None => Vec::new(),
        };
    }
    let Some(&first_eos) = eos.first() else {
        return Err(StructuredError::Vocabulary(
            "the model has no end-of-sequence token".into(),
        ));
    };
    let size =
        u32::try_from(size).map_err(|_| StructuredError::Vocabulary("too many tokens".into()))?;
    let trie = TokTrie::from(&TokRxInfo::new(size, first_eos), &words).with_eos_tokens(eos);
    Ok(Arc::new(Vocabulary {
        trie,
        tokenizer: tokenizer.clone(),
    }))
}
