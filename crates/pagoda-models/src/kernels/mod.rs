//! CPU kernels, chosen per process at run time (`isa.rs`) and written once over 16-lane
//! vectors (`simd.rs`): matmul over packed weights, paged attention, the dot products behind
//! attention scores.

mod activation;
mod attention_partitions;
mod dot;
mod isa;
mod matmul;
mod paged_attention;
mod pool;
mod quant_int;
#[cfg(target_arch = "x86_64")]
mod quant_int_amx;
#[cfg(target_arch = "x86_64")]
mod quant_int_decode256;
#[cfg(target_arch = "x86_64")]
mod quant_int_decode512;
mod quant_int_prefill;
mod quant_matmul;
mod quant_prefill;
mod rows;
#[cfg(target_arch = "x86_64")]
mod rows_ahead;
pub(crate) mod simd;

pub use activation::silu_mul;
pub use isa::{check_env, isa, Isa, ENV_VAR};
pub use matmul::{matmul, matmul_with};
pub use paged_attention::{paged_attention, paged_attention_with, AttentionDims};
pub use quant_int_prefill::SCALAR_DOT;
pub use quant_matmul::quant_matmul_with;
pub use rows::{for_each_row, for_each_row_with, split_rows};
pub use simd::Elem;

/// How many threads the kernels run on (`RAYON_NUM_THREADS` when set, else every core).
pub fn num_threads() -> usize {
    pool::threads()
}
