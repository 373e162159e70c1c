//! Pagoda's text side: tokenizer, incremental detokenization and chat templates.

pub mod chat_template;
pub mod detokenizer;
pub mod error;
pub mod gguf;
pub mod reasoning;
pub mod token_bytes;
pub mod tokenizer;
pub mod tool_calls;

pub use detokenizer::{IncrementalDetokenizer, MAX_HELD_TOKENS};
pub use error::{Result, TextError};
pub use gguf::GgufSpecialTokens;
pub use token_bytes::TokenText;
pub use tokenizer::Tokenizer;
