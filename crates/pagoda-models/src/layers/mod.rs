//! Building blocks shared by every architecture.

mod attention;
mod linear;
mod mlp;
mod rms_norm;
mod rotary;
mod scratch;

pub use attention::SelfAttention;
pub use linear::Linear;
pub use mlp::GatedMlp;
pub use rms_norm::RmsNorm;
pub use rotary::{Rotary, RotaryTable};
pub use scratch::{AttentionScratch, MlpScratch};
