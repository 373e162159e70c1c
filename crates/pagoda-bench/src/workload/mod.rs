//! What is sent: prompts, their lengths and how requests group into conversations.
//!
//! A workload hands out [`Conversation`]s. Single-turn workloads give one turn each; the
//! multi-turn workload gives several, which the runner sends one after another, each
//! resending the whole history including the replies actually received.

mod length;
mod multi_turn;
mod random;
mod shared_prefix;
mod sharegpt;
mod text;

pub use length::LengthSpec;
pub use multi_turn::MultiTurnWorkload;
pub use random::RandomWorkload;
pub use shared_prefix::SharedPrefixWorkload;
pub use sharegpt::ShareGptWorkload;
pub use text::{approximate_tokens, random_words};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// One request's worth of new input.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Messages this turn adds to the conversation (earlier turns are resent by the runner).
    pub new_messages: Vec<Message>,
    /// Output tokens asked for (`max_tokens`).
    pub max_tokens: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub turns: Vec<Turn>,
}

impl Conversation {
    pub fn single(messages: Vec<Message>, max_tokens: u32) -> Self {
        Self {
            turns: vec![Turn {
                new_messages: messages,
                max_tokens,
            }],
        }
    }
}

/// An endless, seeded source of conversations.
pub trait Workload: Send {
    fn next_conversation(&mut self) -> Conversation;
}

/// Renders a message history as one prompt for the plain completions endpoint.
///
/// A single user message is sent verbatim so that `--input-len` maps to the prompt length;
/// longer histories get role labels so the model can tell the speakers apart.
pub fn render_prompt(history: &[Message]) -> String {
    match history {
        [only] => only.content.clone(),
        [system, user] if system.role == Role::System && user.role == Role::User => {
            format!("{}\n\n{}", system.content, user.content)
        }
        _ => {
            let mut prompt = String::new();
            for message in history {
                prompt.push_str(message.role.as_str());
                prompt.push_str(": ");
                prompt.push_str(&message.content);
                prompt.push('\n');
            }
            prompt.push_str("assistant:");
            prompt
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_message_is_rendered_verbatim() {
        assert_eq!(
            render_prompt(&[Message::new(Role::User, "hi there")]),
            "hi there"
        );
    }

    #[test]
    fn history_is_rendered_with_roles() {
        let history = [
            Message::new(Role::User, "a"),
            Message::new(Role::Assistant, "b"),
            Message::new(Role::User, "c"),
        ];
        assert_eq!(
            render_prompt(&history),
            "user: a\nassistant: b\nuser: c\nassistant:"
        );
    }
}
