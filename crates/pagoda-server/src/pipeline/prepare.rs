//! The CPU-heavy middle of a request: guard scans, chat-template rendering, tokenization.
//! It runs on the blocking pool (`AppState::run_blocking`), never on the I/O thread, and only
//! after the cheap checks passed.

use std::sync::Arc;

use crate::error::ApiError;
use crate::guard::{self, Guarded, ServerGuard};
use crate::pipeline::validate::Input;
use crate::prompt::{self, ChatRender, Prompt};
use crate::state::Loaded;
use pagoda_gateway::Caller;

/// The tokenized prompts of a request and its guardrail state.
pub struct Prepared {
    pub prompts: Vec<Prompt>,
    pub guarded: Option<Arc<Guarded>>,
}

/// Screens, renders and tokenizes a request's input; with `echo`, every prompt keeps its
/// text.
pub fn prepare(
    loaded: &Loaded,
    guard: Option<&Arc<ServerGuard>>,
    caller: Option<&Caller>,
    response_id: &str,
    input: Input,
    echo: bool,
) -> Result<Prepared, ApiError> {
    match input {
        Input::Chat(mut chat) => {
            let guarded = guard
                .map(|g| guard::screen_chat(g, caller, response_id, &mut chat))
                .transpose()?;
            let text = prompt::render_chat(
                loaded,
                &ChatRender {
                    messages: &chat.messages,
                    add_generation_prompt: chat.add_generation_prompt,
                    continue_final_message: chat.continue_final_message,
                    chat_template_kwargs: chat.chat_template_kwargs.as_ref(),
                    tools: chat.tools.as_ref(),
                },
            )?;
            let token_ids = prompt::encode_chat(loaded, &text)?;
            Ok(Prepared {
                // The rendered text says where a reasoning model's thinking starts.
                prompts: vec![Prompt {
                    token_ids,
                    text: Some(text),
                }],
                guarded,
            })
        }
        Input::Prompts {
            mut prompt,
            add_special_tokens,
        } => {
            let tokenizer = loaded.engine.tokenizer();
            let guarded = guard
                .map(|g| guard::screen_prompts(g, caller, response_id, tokenizer, &mut prompt))
                .transpose()?;
            let mut prompts = prompt::completion_prompts(loaded, prompt, add_special_tokens)?;
            if echo {
                for p in &mut prompts {
                    if p.text.is_none() {
                        p.text = Some(
                            tokenizer
                                .decode(&p.token_ids, false)
                                .map_err(|e| ApiError::Internal(e.to_string()))?,
                        );
                    }
                }
            }
            Ok(Prepared { prompts, guarded })
        }
    }
}
