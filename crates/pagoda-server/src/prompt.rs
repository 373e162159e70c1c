//! Turning a request's messages or prompts into token ids.

use std::borrow::Cow;

use pagoda_text::chat_template::{ChatMessage, MessageContent, RenderOptions};
use pagoda_text::TextError;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::state::Loaded;
use crate::wire::request::PromptInput;

/// How a chat request wants its conversation rendered.
pub struct ChatRender<'a> {
    pub messages: &'a [ChatMessage],
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<&'a Map<String, Value>>,
    pub tools: Option<&'a Value>,
}

/// Renders the conversation through the chat template.
pub fn render_chat(loaded: &Loaded, chat: &ChatRender<'_>) -> Result<String, ApiError> {
    let template = loaded.chat_template.as_ref().ok_or_else(|| {
        ApiError::invalid(
            "messages",
            "this model has no chat template; start the server with --chat-template, or use /v1/completions",
        )
    })?;
    if chat.messages.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    let continue_final_message = chat.continue_final_message.unwrap_or(false);
    let add_generation_prompt = chat
        .add_generation_prompt
        .unwrap_or(!continue_final_message);
    if continue_final_message && add_generation_prompt {
        return Err(ApiError::invalid(
            "continue_final_message",
            "`continue_final_message` and `add_generation_prompt` cannot both be true",
        ));
    }
    let options = RenderOptions {
        add_generation_prompt,
        continue_final_message,
        tools: chat.tools.cloned(),
        extra: chat.chat_template_kwargs.cloned().unwrap_or_default(),
    };
    let messages = flatten_text_parts(chat.messages);
    template.render(&messages, &options).map_err(|e| match e {
        TextError::Template(message) => ApiError::invalid("messages", message),
        other => ApiError::Internal(other.to_string()),
    })
}

/// Multi-part content made only of text parts becomes one string (parts joined by "\n", as
/// vLLM does for templates that expect string content, which most do). Other parts are
/// left for the renderer, which refuses them by type.
fn flatten_text_parts(messages: &[ChatMessage]) -> Cow<'_, [ChatMessage]> {
    let all_text = |m: &ChatMessage| match &m.content {
        Some(MessageContent::Parts(parts)) => {
            parts.iter().all(|p| p.kind == "text" && p.text.is_some())
        }
        _ => false,
    };
    if !messages.iter().any(all_text) {
        return Cow::Borrowed(messages);
    }
    let flattened = messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if all_text(&m) {
                if let Some(MessageContent::Parts(parts)) = &m.content {
                    let text: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
                    m.content = Some(MessageContent::Text(text.join("\n")));
                }
            }
            m
        })
        .collect();
    Cow::Owned(flattened)
}

/// The token ids of a rendered chat: the template already placed any special tokens.
pub fn encode_chat(loaded: &Loaded, text: &str) -> Result<Vec<u32>, ApiError> {
    encode(loaded, text, false)
}

pub fn encode(loaded: &Loaded, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, ApiError> {
    loaded
        .engine
        .tokenizer()
        .encode(text, add_special_tokens)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// One prompt of a completions request: its ids and its text (for `echo`).
pub struct Prompt {
    pub token_ids: Vec<u32>,
    pub text: Option<String>,
}

/// The prompts of a completions request, each tokenized.
pub fn completion_prompts(
    loaded: &Loaded,
    input: PromptInput,
    add_special_tokens: bool,
) -> Result<Vec<Prompt>, ApiError> {
    let from_text = |text: String| -> Result<Prompt, ApiError> {
        Ok(Prompt {
            token_ids: encode(loaded, &text, add_special_tokens)?,
            text: Some(text),
        })
    };
    let from_ids = |token_ids: Vec<u32>| Prompt {
        token_ids,
        text: None,
    };
    let prompts = match input {
        PromptInput::Text(text) => vec![from_text(text)?],
        PromptInput::Texts(texts) => texts.into_iter().map(from_text).collect::<Result<_, _>>()?,
        PromptInput::Tokens(ids) => vec![from_ids(ids)],
        PromptInput::TokenLists(lists) => lists.into_iter().map(from_ids).collect(),
    };
    if prompts.is_empty() {
        return Err(ApiError::invalid("prompt", "`prompt` must not be empty"));
    }
    if prompts.iter().any(|p| p.token_ids.is_empty()) {
        return Err(ApiError::invalid(
            "prompt",
            "a prompt must have at least one token",
        ));
    }
    Ok(prompts)
}
