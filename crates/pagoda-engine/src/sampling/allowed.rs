//! The tokens a constraint (a grammar) allows next, as the sampler applies them.

use crate::ids::TokenId;

/// One bit per token id: bit `i % 32` of word `i / 32` (the layout of llguidance's masks).
/// Ids past the end are not allowed.
#[derive(Debug, Clone, Copy)]
pub struct AllowedTokens<'a> {
    words: &'a [u32],
}

impl<'a> AllowedTokens<'a> {
    pub fn new(words: &'a [u32]) -> Self {
        AllowedTokens { words }
    }

    pub fn allows(&self, token: TokenId) -> bool {
        let token = token as usize;
        self.words
            .get(token / 32)
            .is_some_and(|w| w & (1 << (token % 32)) != 0)
    }

    /// Whether no token at all is allowed.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Masks every token it does not allow.
    pub(super) fn apply(&self, logits: &mut [f32]) {
        for (chunk, word) in logits
            .chunks_mut(32)
            .zip(self.words.iter().copied().chain(std::iter::repeat(0)))
        {
            if word == u32::MAX {
                continue;
            }
            for (bit, x) in chunk.iter_mut().enumerate() {
                if word & (1 << bit) == 0 {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_follow_the_bit_layout_and_stop_at_the_end() {
        let words = [0b101u32, 1 << 1];
        let allowed = AllowedTokens::new(&words);
        assert!(allowed.allows(0) && !allowed.allows(1) && allowed.allows(2));
        assert!(allowed.allows(33) && !allowed.allows(32));
        assert!(!allowed.allows(64) && !allowed.allows(u32::MAX));
        let mut logits = vec![1.0f32; 70];
        allowed.apply(&mut logits);
        let kept: Vec<usize> = (0..70).filter(|&i| logits[i] == 1.0).collect();
        assert_eq!(kept, [0, 2, 33]);
        assert!(!allowed.is_empty() && AllowedTokens::new(&[0, 0]).is_empty());
    }
}
