//! OpenAI (and vLLM extension) wire types.

pub mod request;
pub mod response;
