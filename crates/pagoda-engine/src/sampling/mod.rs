//! Sampling: request parameters, a seeded per-request RNG, and the sampler that turns one
//! request's logits row into its next token.

pub mod allowed;
mod fast_exp;
pub mod params;
mod processors;
pub mod rng;
pub mod sampler;

pub use allowed::AllowedTokens;
pub use params::{InvalidParam, SamplingParams, MAX_LOGPROBS, MIN_SAMPLING_TEMPERATURE};
pub use rng::SamplerRng;
pub use sampler::{SampleInput, SampledToken, Sampler};
