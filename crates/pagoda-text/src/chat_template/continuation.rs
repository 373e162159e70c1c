//! `continue_final_message`: a prompt that ends inside the final assistant message, so the
//! model continues it instead of starting a new turn.
//!
//! As transformers does: a marker is appended to the final message's text, the conversation
//! is rendered without a generation prompt, and everything from the marker's last occurrence
//! on (the end-of-turn tokens) is cut. A marker is more robust than searching for the message
//! text, which may also occur earlier in the prompt.
use serde_json::Value as Json;

use super::message::RenderOptions;
use crate::error::{Result, TextError};

const TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";

/// Where to cut a rendered prompt; made by [`mark_final_message`].
pub struct Cut {
    final_text: String,
}

/// Checks the conversation can be continued and marks the end of its final message's text
/// (the last text part, for multi-part content).
pub fn mark_final_message(
    messages: &mut [Json],
    options: &RenderOptions,
    source: &str,
) -> Result<Cut> {
    let refuse = |why: &str| {
        Err(TextError::Template(format!(
            "continue_final_message: {why}"
        )))
    };
    if options.add_generation_prompt {
        return refuse("cannot be combined with add_generation_prompt");
    }
    let Some(last) = messages.last_mut() else {
        return refuse("the conversation is empty");
    };
    if last.get("role").and_then(Json::as_str) != Some("assistant") {
        return refuse("the final message is not an assistant message");
    }
    if !source.contains("content") {
        return refuse("the chat template never reads a message's content");
    }
    let text = match last.get_mut("content") {
        Some(Json::String(text)) => text,
        Some(Json::Array(parts)) => match parts.iter_mut().rev().find_map(|p| p.get_mut("text")) {
            Some(Json::String(text)) => text,
            _ => return refuse("the final message has no text to continue"),
        },
        _ => return refuse("the final message has no content to continue"),
    };
    let final_text = text.clone();
    text.push_str(TAG);
    Ok(Cut { final_text })
}

impl Cut {
    /// Cuts the rendered prompt right after the final message's text.
    pub fn apply(&self, rendered: String) -> Result<String> {
        let marker = TAG.trim();
        let found = rendered.contains(self.final_text.trim()) && rendered.contains(marker);
        let Some(at) = rendered.rfind(marker).filter(|_| found) else {
            return Err(TextError::Template(
                "continue_final_message: the chat template dropped part of the final message, so the \
                 prompt cannot end inside it"
                    .into(),
            ));
        };
        let mut rendered = rendered;
        // The template kept the marker's trailing space: it keeps the text's spacing as is.
        // Otherwise it stripped the message, and what precedes the marker is stripped too.
        let keeps_spacing = rendered[at..].starts_with(TAG);
        rendered.truncate(at);
        if !keeps_spacing {
            rendered.truncate(rendered.trim_end().len());
        }
        Ok(rendered)
    }
}
