//! One output's constraint state, advanced token by token by the engine.

use llguidance::Matcher;
use toktrie::SimpleVob;

use crate::error::{Result, StructuredError};

/// A compiled constraint at some point of an output. Cloning gives an independent copy at the
/// same point (one per choice of `n`).
pub struct Constraint {
    matcher: Matcher,
    kind: &'static str,
}

impl Clone for Constraint {
    fn clone(&self) -> Self {
        Constraint {
            matcher: self.matcher.deep_clone(),
            kind: self.kind,
        }
    }
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("kind", &self.kind)
            .field("finished", &self.matcher.is_stopped())
            .finish()
    }
}

/// The tokens allowed next, one bit per token id (bit `i % 32` of word `i / 32`).
pub struct TokenMask(SimpleVob);

impl TokenMask {
    pub fn words(&self) -> &[u32] {
        self.0.as_slice()
    }

    pub fn num_allowed(&self) -> usize {
        self.0.num_set()
    }
}

impl Constraint {
    pub(crate) fn new(matcher: Matcher, kind: &'static str) -> Self {
        Constraint { matcher, kind }
    }

    /// What kind of spec it came from (`json_schema`, `regex`, ...).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The tokens that may come next: once the output is complete, only end-of-sequence.
    pub fn mask(&mut self) -> Result<TokenMask> {
        self.matcher
            .compute_mask_or_eos()
            .map(TokenMask)
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// Moves past `token`, which the last mask allowed.
    pub fn advance(&mut self, token: u32) -> Result<()> {
        self.matcher
            .consume_token(token)
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// Whether the output is complete and nothing more may follow.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }
}
