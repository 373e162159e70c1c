//! Incremental detokenization: turns a growing list of token ids into text deltas without
//! ever emitting broken UTF-8. Byte-level BPE tokens can end in the middle of a character;
//! while the decoded tail ends in U+FFFD the delta is held back until more tokens complete it.
//!
//! Decoding a short window (a few tokens before the unsent ones) instead of the whole
//! sequence keeps each step O(window), and still lets the tokenizer's decoder apply its
//! context-dependent rules (leading-space handling) exactly as a full decode would.
//!
//! The window is bounded: a UTF-8 character is at most 4 bytes, so a tail still incomplete
//! after `MAX_HELD_TOKENS` tokens never will be (a model forcing stray continuation bytes, or
//! tokens that decode to nothing). It is then emitted as it decodes, lossily, and the window
//! moves on; otherwise every further token would re-decode an ever longer window.

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// Tokens of already-emitted context decoded along with the new ones.
const CONTEXT_TOKENS: usize = 5;

/// A tail still incomplete after this many tokens is emitted as it decodes.
pub const MAX_HELD_TOKENS: usize = 8;

pub struct IncrementalDetokenizer {
    /// A window of the sequence: emitted context, then the tokens not emitted yet.
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

    /// Tokens received but not emitted as text yet (fewer than `MAX_HELD_TOKENS`).
    pub fn num_held(&self) -> usize {
        self.ids.len() - self.read_offset
    }

    /// Adds tokens and returns the text that is now complete.
    pub fn push(&mut self, tokenizer: &Tokenizer, new_ids: &[u32]) -> Result<String> {
        self.ids.extend_from_slice(new_ids);
        let prefix = tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.skip_special_tokens,
        )?;
        let full = tokenizer.decode(&self.ids[self.prefix_offset..], self.skip_special_tokens)?;
        let complete = full.len() > prefix.len()
            && !full.ends_with('\u{FFFD}')
            && full.is_char_boundary(prefix.len());
        if !complete && self.num_held() < MAX_HELD_TOKENS {
            return Ok(String::new());
        }
        Ok(self.advance(&prefix, &full))
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
        Ok(self.advance(&prefix, &full))
    }

    /// Marks every token as emitted and returns the text they add to the window's prefix
    /// (nothing if the decoder rewrote the prefix itself). Only the last emitted tokens are
    /// kept, as the next window's context.
    fn advance(&mut self, prefix: &str, full: &str) -> String {
        let delta = if full.len() > prefix.len() && full.is_char_boundary(prefix.len()) {
            full[prefix.len()..].to_string()
        } else {
            String::new()
        };
        self.ids.drain(..self.read_offset);
        self.prefix_offset = 0;
        self.read_offset = self.ids.len();
        delta
    }
}
