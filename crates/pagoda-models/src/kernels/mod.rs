//! CPU kernels: the shared dot-product tile, matmul over stored-dtype weights, paged attention.

mod dot;
mod matmul;
mod paged_attention;

pub use dot::{dot, WeightElem};
pub use matmul::matmul;
pub use paged_attention::{paged_attention, AttentionDims};
