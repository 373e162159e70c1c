//! One forward pass over a flattened batch drawn from many sequences. Each sequence adds some
//! new tokens (a whole prompt, a prefill chunk or one decode token) at the end of what it has
//! already computed, and brings its own block table: the physical KV blocks holding its
//! positions in order. Blocks need not be contiguous or ordered.
//!
//! Block numbers are plain `u32` here, as in a kernel's argument list: they are the indices
//! the engine's block manager hands out, converted once at that boundary.

use crate::error::{ModelError, Result};

/// Which logits a sequence wants back from this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsWanted {
    None,
    /// The row of its last new token (to sample the next token).
    Last,
    /// Every new token's row (prompt logprobs).
    All,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceSlice {
    /// Index of the sequence's first new token in the flattened batch.
    pub query_start: usize,
    pub query_len: usize,
    /// Tokens in the KV cache once this pass has written the new ones.
    pub context_len: usize,
    pub block_table: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct ForwardBatch {
    pub block_size: usize,
    pub token_ids: Vec<u32>,
    pub positions: Vec<usize>,
    /// KV slot (`block * block_size + offset`) each new token's K and V are written to.
    pub slot_mapping: Vec<usize>,
    /// The sequence each new token belongs to.
    pub token_sequence: Vec<usize>,
    pub sequences: Vec<SequenceSlice>,
    /// Rows of the flattened batch whose logits are returned, in this order.
    pub logit_rows: Vec<usize>,
}

impl ForwardBatch {
    pub fn new(block_size: usize) -> Self {
        ForwardBatch {
            block_size,
            token_ids: Vec::new(),
            positions: Vec::new(),
            slot_mapping: Vec::new(),
            token_sequence: Vec::new(),
            sequences: Vec::new(),
            logit_rows: Vec::new(),
        }
    }

    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// Adds a sequence that has `num_computed` tokens in the cache and now runs `new_tokens`.
    pub fn push(
        &mut self,
        new_tokens: &[u32],
        num_computed: usize,
        block_table: &[u32],
        logits: LogitsWanted,
    ) -> Result<()> {
        if new_tokens.is_empty() {
            return Err(ModelError::InvalidBatch(
                "a sequence with no new tokens".into(),
            ));
        }
        let context_len = num_computed + new_tokens.len();
        let needed = context_len.div_ceil(self.block_size);
        if block_table.len() < needed {
            return Err(ModelError::InvalidBatch(format!(
                "{context_len} tokens need {needed} blocks but the block table has {}",
                block_table.len()
            )));
        }
        let query_start = self.token_ids.len();
        let seq_index = self.sequences.len();
        for (i, &token) in new_tokens.iter().enumerate() {
            let pos = num_computed + i;
            let block = block_table[pos / self.block_size] as usize;
            self.token_ids.push(token);
            self.positions.push(pos);
            self.slot_mapping
                .push(block * self.block_size + pos % self.block_size);
            self.token_sequence.push(seq_index);
        }
        match logits {
            LogitsWanted::None => {}
            LogitsWanted::Last => self.logit_rows.push(query_start + new_tokens.len() - 1),
            LogitsWanted::All => self
                .logit_rows
                .extend(query_start..query_start + new_tokens.len()),
        }
        self.sequences.push(SequenceSlice {
            query_start,
            query_len: new_tokens.len(),
            context_len,
            block_table: block_table[..needed].to_vec(),
        });
        Ok(())
    }

    /// Checks the batch against the cache and vocabulary, so kernels can index unchecked.
    pub fn validate(
        &self,
        num_blocks: usize,
        vocab_size: usize,
        max_positions: usize,
    ) -> Result<()> {
        let bad = |msg: String| Err(ModelError::InvalidBatch(msg));
        if let Some(&t) = self.token_ids.iter().find(|&&t| t as usize >= vocab_size) {
            return bad(format!(
                "token id {t} is outside the vocabulary of {vocab_size}"
            ));
        }
        for seq in &self.sequences {
            if let Some(&b) = seq.block_table.iter().find(|&&b| b as usize >= num_blocks) {
                return bad(format!(
                    "block {b} is outside the cache of {num_blocks} blocks"
                ));
            }
            if seq.context_len > max_positions {
                return bad(format!(
                    "a sequence of {} tokens exceeds the model's {max_positions} positions",
                    seq.context_len
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_scattered_block_tables() {
        let mut batch = ForwardBatch::new(4);
        batch
            .push(&[1, 2, 3], 3, &[7, 2], LogitsWanted::Last)
            .unwrap();
        batch.push(&[9], 0, &[5], LogitsWanted::All).unwrap();
        assert_eq!(batch.positions, vec![3, 4, 5, 0]);
        assert_eq!(batch.slot_mapping, vec![7 * 4 + 3, 2 * 4, 2 * 4 + 1, 5 * 4]);
        assert_eq!(batch.logit_rows, vec![2, 3]);
        assert_eq!(batch.sequences[0].context_len, 6);
    }

    #[test]
    fn short_block_table_is_refused() {
        let mut batch = ForwardBatch::new(4);
        assert!(batch.push(&[1, 2], 3, &[0], LogitsWanted::Last).is_err());
    }
}
