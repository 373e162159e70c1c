//! One output's constraint state, advanced token by token by the engine.

use llguidance::Matcher;
use toktrie::SimpleVob;

use crate::error::{Result, StructuredError};

/// A compiled constraint at some point of an output. Cloning gives an independent copy at the
/// same point (one per choice of `n`).
pub struct Constraint {
    matcher: Matcher,
    kind: &'static str,
    /// Applies only once the output has produced these tokens (the end of a reasoning
    /// model's thinking); `None` once it applies.
    deferred: Option<Trigger>,
}

#[derive(Clone, Debug)]
struct Trigger {
    tokens: Vec<u32>,
    recent: Vec<u32>,
}

impl Trigger {
    /// Whether `token` completes the trigger.
    fn push(&mut self, token: u32) -> bool {
        self.recent.push(token);
        if self.recent.len() > self.tokens.len() {
            self.recent.remove(0);
        }
        self.recent == self.tokens
    }
}

impl Clone for Constraint {
    fn clone(&self) -> Self {
        Constraint {
            matcher: self.matcher.deep_clone(),
            kind: self.kind,
            deferred: self.deferred.clone(),
        }
    }
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("kind", &self.kind)
            .field("finished", &self.matcher.is_stopped())
            .field("deferred", &self.deferred.is_some())
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
        Constraint {
            matcher,
            kind,
            deferred: None,
        }
    }

    /// The same constraint, applying only after the output has produced `trigger` (e.g. the
    /// tokens of `</think>`); an empty trigger applies at once.
    pub fn after(mut self, trigger: Vec<u32>) -> Self {
        self.deferred = (!trigger.is_empty()).then(|| Trigger {
            tokens: trigger,
            recent: Vec::new(),
        });
        self
    }

    /// Whether it constrains the next token.
    pub fn is_active(&self) -> bool {
        self.deferred.is_none()
    }

    /// What kind of spec it came from (`json_schema`, `regex`, ...).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The tokens that may come next (once the output is complete, only end-of-sequence);
    /// `None` while it does not apply yet.
    pub fn mask(&mut self) -> Result<Option<TokenMask>> {
        if !self.is_active() {
            return Ok(None);
        }
        self.matcher
            .compute_mask_or_eos()
            .map(|m| Some(TokenMask(m)))
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// Moves past `token`, which the last mask allowed.
    pub fn advance(&mut self, token: u32) -> Result<()> {
        if let Some(trigger) = self.deferred.as_mut() {
            if trigger.push(token) {
                self.deferred = None;
            }
            return Ok(());
        }
        self.matcher
            .consume_token(token)
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// Tokens the constraint forces next (a fixed key of a schema, say), already consumed: the
    /// engine appends them without sampling. Empty while deferred or when nothing is forced.
    pub fn fast_forward(&mut self) -> Result<Vec<u32>> {
        if !self.is_active() || self.matcher.is_stopped() {
            return Ok(Vec::new());
        }
        let forced = self.matcher.compute_ff_tokens();
        if let Some(e) = self.matcher.get_error() {
            return Err(StructuredError::Matcher(e));
        }
        if !forced.is_empty() {
            self.matcher
                .consume_tokens(&forced)
                .map_err(|e| StructuredError::Matcher(e.to_string()))?;
        }
        Ok(forced)
    }

    /// Whether the output is complete and nothing more may follow.
    pub fn is_finished(&self) -> bool {
        self.is_active() && self.matcher.is_stopped()
    }
}
