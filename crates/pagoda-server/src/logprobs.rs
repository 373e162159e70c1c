//! The engine's per-token logprobs in the two OpenAI shapes.

use pagoda_runtime::TokenLogprob;
use pagoda_text::Tokenizer;
use serde_json::{Map, Value};

use crate::wire::response::{ChatLogprobs, ChatTokenLogprob, ChatTopLogprob, CompletionLogprobs};

/// JSON has no -inf; vLLM reports impossible tokens as -9999 too.
fn finite(logprob: f32) -> f32 {
    if logprob.is_finite() {
        logprob
    } else {
        -9999.0
    }
}

/// A token as text on its own (special tokens included).
fn token_text(tokenizer: &Tokenizer, id: u32) -> String {
    tokenizer
        .decode(&[id], false)
        .ok()
        .or_else(|| tokenizer.id_to_token(id))
        .unwrap_or_default()
}

pub fn chat(tokenizer: &Tokenizer, tokens: &[TokenLogprob], top_n: usize) -> ChatLogprobs {
    let content = tokens
        .iter()
        .map(|t| {
            let token = token_text(tokenizer, t.token_id);
            let top_logprobs = t
                .top
                .iter()
                .take(top_n)
                .map(|&(id, logprob)| {
                    let token = token_text(tokenizer, id);
                    ChatTopLogprob {
                        bytes: token.as_bytes().to_vec(),
                        token,
                        logprob: finite(logprob),
                    }
                })
                .collect();
            ChatTokenLogprob {
                bytes: token.as_bytes().to_vec(),
                token,
                logprob: finite(t.logprob),
                top_logprobs,
            }
        })
        .collect();
    ChatLogprobs { content }
}

/// `text_offset` counts from `offset`, the length of the choice's text before these tokens.
pub fn completion(
    tokenizer: &Tokenizer,
    tokens: &[TokenLogprob],
    top_n: usize,
    mut offset: usize,
) -> CompletionLogprobs {
    let mut out = CompletionLogprobs::default();
    for t in tokens {
        let token = token_text(tokenizer, t.token_id);
        let mut top = Map::new();
        for &(id, logprob) in t.top.iter().take(top_n) {
            top.insert(token_text(tokenizer, id), Value::from(finite(logprob)));
        }
        out.text_offset.push(offset);
        offset += token.len();
        out.tokens.push(token);
        out.token_logprobs.push(finite(t.logprob));
        out.top_logprobs.push(top);
    }
    out
}
