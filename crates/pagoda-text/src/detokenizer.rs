//! Incremental detokenization: turns a growing list of token ids into text deltas without
//! ever emitting broken UTF-8. Byte-level BPE tokens can end in the middle of a character;
//! while the decoded tail ends in U+FFFD the delta is held back until more tokens complete it.
//!
//! Decoding a short window (a few tokens before the unsent ones) instead of the whole
//! sequence keeps each step O(window), and still lets the tokenizer's decoder apply its
//! context-dependent rules (leading-space handling) exactly as a full decode would.

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// Tokens of already-emitted context decoded along with the new ones.
const CONTEXT_TOKENS: usize = 5;

pub struct IncrementalDetokenizer {
    ids: Vec<u32>,
    /// Start of the window whose text has been emitted up to `read_offset`.
    prefix_offset: usize,
    /// Ids before this have been emitted as text.
    read_offset: usize,
    skip_special_tokens: bool,
}

impl IncrementalDetokenizer {
    /// `prompt` gives the context the first output tokens are decoded against.
    pub fn new(prompt: &[u32], skip_special_tokens: bool) -> Self {
        let start = prompt.len().saturating_sub(CONTEXT_TOKENS);
        IncrementalDetokenizer {
            ids: prompt[start..].to_vec(),
            prefix_offset: 0,
            read_offset: prompt.len() - start,
            skip_special_tokens,
        }
    }

    /// Adds tokens and returns the text that is now complete.
    pub fn push(&mut self, tokenizer: &Tokenizer, new_ids: &[u32]) -> Result<String> {
        self.ids.extend_from_slice(new_ids);
        let prefix = tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.skip_special_tokens,
        )?;
        let full = tokenizer.decode(&self.ids[self.prefix_offset..], self.skip_special_tokens)?;
        if full.len() <= prefix.len()
            || full.ends_with('\u{FFFD}')
            || !full.is_char_boundary(prefix.len())
        {
            return Ok(String::new());
        }
        let delta = full[prefix.len()..].to_string();
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        Ok(delta)
    }

    /// Whatever is still held back (a sequence that ended mid-character), decoded lossily.
    pub fn flush(&mut self, tokenizer: &Tokenizer) -> Result<String> {
        if self.read_offset == self.ids.len() {
            return Ok(String::new());
        }
        let prefix = tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.skip_special_tokens,
        )?;
        let full = tokenizer.decode(&self.ids[self.prefix_offset..], self.skip_special_tokens)?;
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        Ok(
            if full.len() > prefix.len() && full.is_char_boundary(prefix.len()) {
                full[prefix.len()..].to_string()
            } else {
                String::new()
            },
        )
    }
}
