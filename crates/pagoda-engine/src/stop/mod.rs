//! When a request ends: token-level rules (`StopChecker`) and text-level stop strings
//! (`StopStringMatcher`).

mod checker;
mod strings;

pub use checker::StopChecker;
pub use strings::{StopHit, StopStringMatcher, StopStringOutput, StopStringSet};

/// Why a request ended, as OpenAI's `finish_reason` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// An EOS token, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the model's context length.
    Length,
    /// Cancelled: client gone, or the engine gave up on it.
    Abort,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
        }
    }
}
