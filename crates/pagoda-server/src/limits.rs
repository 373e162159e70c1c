//! Caps on what one request may ask for. Every list and size a client controls is bounded
//! here, before any of it is copied per choice or reaches the engine thread; over a cap is a
//! 400 naming the parameter. Defaults follow OpenAI's limits where it has them, a little
//! looser where vLLM users rely on more (stop strings).

/// The caps, set from `pagoda serve`'s flags (`--max-body-bytes`, `--max-prompt-bytes`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimits {
    /// Bytes of one request body; more is a 413.
    pub max_body_bytes: usize,
    /// Bytes of prompt text (all messages' text, or all prompts) before tokenization.
    pub max_prompt_bytes: usize,
    /// Entries of `messages`.
    pub max_messages: usize,
    /// Entries of `stop`.
    pub max_stop_sequences: usize,
    /// Bytes of one stop string.
    pub max_stop_bytes: usize,
    /// Entries of `stop_token_ids`.
    pub max_stop_token_ids: usize,
    /// Entries of `logit_bias` (OpenAI allows 300).
    pub max_logit_bias: usize,
    /// Sequences one request runs at once: `n` times the number of prompts.
    pub max_seqs_per_request: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_body_bytes: 8 << 20,
            max_prompt_bytes: 2 << 20,
            max_messages: 4096,
            max_stop_sequences: 16,
            max_stop_bytes: 256,
            max_stop_token_ids: 256,
            max_logit_bias: 300,
            max_seqs_per_request: 128,
        }
    }
}
