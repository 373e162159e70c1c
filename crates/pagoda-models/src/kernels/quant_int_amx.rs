//! Integer prefill on Intel's AMX tiles, for the signed formats without factors or offsets
//! (Q8_0, Q4_0, Q5_0): one `tdpbssd` multiplies 16 rows' chunk by 16 tokens' chunk, giving
//! each (row, token) pair its exact i32 chunk sum, `isum_c` of the definition in
//! `quant_int.rs`. The float step then runs as there, lane for lane, with vectors across 16
//! tokens instead of across 16 chunks: chain `k` of an output is the `k`-th accumulator of its
//! row, and the chains' final tree is the same adds, done across accumulators. So the outputs
//! are the bits of every other path.
//!
//! The rows of a task are decoded once into signed bytes, 16 rows at a time, each chunk's 32
//! bytes in order (the `A` tile: 16 rows x 32 bytes); the activations are laid out per block of
//! 16 tokens and chunk, four bytes of each token at a time (the `B` tile: 8 x 64 bytes, built
//! with `QuantizedActs`).
//!
//! Rust has no stable AMX intrinsics, so the five instructions are inline assembly. Tiles hold
//! state the compiler does not see: every kernel configures them on entry and releases them on
//! exit, and nothing between calls into this module touches them.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;
use std::sync::OnceLock;

use super::matmul::OutPtr;
use super::quant_int::{QuantizedActs, GROUP};
use super::quant_matmul::{Call, Task};
use super::quant_prefill::Line;
use super::simd::Avx512;
use crate::quant::formats::{Factors, IntFormat};

/// Rows per tile (of `A` and of the products) and tokens per tile (their columns).
pub(super) const TILE: usize = 16;
/// Bytes of one block of 16 tokens' chunk in the `B` layout.
pub(super) const TILE_CHUNK_BYTES: usize = 8 * 64;
/// Fewer tokens than this stay on the vector path: a tile's 16 token columns would be
/// mostly padding.
pub(super) const MIN_TOKENS: usize = 16;

/// Linux's `arch_prctl` request for a permission to use an extended state component, and
/// AMX tile data's component number.
const ARCH_REQ_XCOMP_PERM: libc::c_int = 0x1023;
const XFEATURE_XTILEDATA: libc::c_ulong = 18;

/// Whether the CPU has AMX-INT8 and the kernel lets this process use the tiles (Linux grants
/// their 8 KiB of state per process, on request).
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // CPUID leaf 7: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
        let leaf7 = __cpuid_count(7, 0);
        let has = (leaf7.edx >> 24) & 1 == 1 && (leaf7.edx >> 25) & 1 == 1;
        if !has || __cpuid(0).eax < 7 {
            return false;
        }
        // SAFETY: a system call with plain integer arguments; it fails cleanly where the
        // kernel lacks it or refuses.
        cfg!(target_os = "linux")
            && unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            } == 0
    })
}

/// Whether format `F` runs on the tiles: signed bytes whose chunk sums need no factors and
/// whose values have no offset (`tdpbssd` multiplies signed by signed).
pub(super) fn takes<F: IntFormat>() -> bool {
    F::SIGNED && !F::OFFSET && F::FACTORS == Factors::One
}

/// The tile configuration (palette 1): tile 0 the rows (16 x 32 bytes), tile 2 a token block
/// (8 x 64 bytes), tile 4 their products (16 x 16 i32).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    bytes_per_row: [u16; 16],
    rows: [u8; 16],
    reserved_end: [u8; 16],
}

const CONFIG: TileConfig = {
    let mut bytes_per_row = [0u16; 16];
    let mut rows = [0u8; 16];
    (bytes_per_row[0], rows[0]) = (32, 16);
    (bytes_per_row[2], rows[2]) = (64, 8);
    (bytes_per_row[4], rows[4]) = (64, 16);
    TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        bytes_per_row,
        rows,
        reserved_end: [0; 16],
    }
};

/// Per-thread buffers: the task's decoded rows (`rows_padded x chunks_padded x 32` bytes),
/// their scales, one row tile's accumulators and one step's products.
struct Scratch {
    weights: Vec<Line>,
    scales: Vec<f32>,
    acc: Vec<Line>,
    products: Vec<Line>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch { weights: Vec::new(), scales: Vec::new(), acc: Vec::new(), products: Vec::new() })
    };
}

/// Rows `task` times every token on the tiles. Only called where `available()` and
/// `takes::<F>()` hold and the activations have their tile layout.
pub(super) fn prefill_task<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    assert!(available() && takes::<F>() && acts.has_tiles());
    SCRATCH.with(|scratch| {
        let scratch = &mut *scratch.borrow_mut();
        let chunks_padded = acts.groups * GROUP;
        let rows_padded = task.num_rows.next_multiple_of(TILE);
        scratch
            .weights
            .resize(rows_padded * chunks_padded * 32 / 64, Line::ZERO);
        scratch.scales.resize(rows_padded * chunks_padded, 0.0);
        // 16 chains of 16 tokens per row of a tile, and one tile of products.
        scratch.acc.resize(TILE * GROUP, Line::ZERO);
        scratch.products.resize(TILE, Line::ZERO);
        // SAFETY: the CPU has AVX-512 and AMX-INT8 with the tiles granted (`available`).
        unsafe { prefill::<F>(rows, row_bytes, call, acts, task, out, scratch) }
    })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn prefill<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    let chunks = call.cols / 32;
    let chunks_padded = acts.groups * GROUP;
    let row_stride = chunks_padded * 32;
    let weights = scratch.weights.as_mut_ptr() as *mut u8;
    let scales = scratch.scales.as_mut_ptr();
    // Padding rows and chunks are zeros: zero sums with zero scales, as the other paths'
    // chunks past a row's end (their `isum` and scale are 0 too).
    std::ptr::write_bytes(
        weights,
        0,
        task.num_rows.next_multiple_of(TILE) * row_stride,
    );
    std::ptr::write_bytes(
        scales,
        0,
        task.num_rows.next_multiple_of(TILE) * chunks_padded,
    );
    for r in 0..task.num_rows {
        let row = rows.as_ptr().add(r * row_bytes);
        for c in 0..chunks {
            let q = F::chunk_q::<Avx512>(row, c);
            _mm256_storeu_si256(weights.add(r * row_stride + 32 * c) as *mut __m256i, q);
        }
        let mut unused_offsets = [0.0f32; 0];
        F::scales_into::<Avx512>(
            row,
            0,
            chunks,
            scales.add(r * chunks_padded),
            unused_offsets.as_mut_ptr(),
        );
    }
    asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly));
    // Token blocks outer: a block's activations stay in L1/L2 while every row tile of the
    // task (in L2) passes over them. One block per step: with two (a second `B` and `C`
    // tile), the chains' 32 KiB crowd L1 and a C model of this loop ran 15% slower.
    for block in 0..call.n.div_ceil(TILE) {
        for row_tile in 0..task.num_rows.div_ceil(TILE) {
            row_tile_block(acts, call, task, out, scratch, row_tile, block);
        }
    }
    asm!("tilerelease", options(nostack, nomem));
}

/// Row tile `row_tile` of the task times token block `block`: every group's products and
/// steps, then the chains' tree and the outputs.
#[inline(always)]
unsafe fn row_tile_block(
    acts: &QuantizedActs,
    call: Call,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
    row_tile: usize,
    block: usize,
) {
    let chunks_padded = acts.groups * GROUP;
    let row_stride = chunks_padded * 32;
    let weights = (scratch.weights.as_ptr() as *const u8).add(row_tile * TILE * row_stride);
    let scales = scratch.scales.as_ptr().add(row_tile * TILE * chunks_padded);
    // Chain `k` of tile row `r`: 16 tokens at `acc + 16 (16 r + k)`.
    let acc = scratch.acc.as_mut_ptr() as *mut f32;
    let products = scratch.products.as_mut_ptr() as *mut i32;
    for g in 0..acts.groups {
        for k in 0..GROUP {
            let c = GROUP * g + k;
            asm!("tileloadd tmm0, [{a} + {s}*1]", a = in(reg) weights.add(32 * c),
                s = in(reg) row_stride, options(nostack, readonly));
            asm!("tileloadd tmm2, [{b} + {s}*1]", b = in(reg) acts.tile_chunk(block, c),
                s = in(reg) 64usize, options(nostack, readonly));
            asm!("tilezero tmm4", options(nostack, nomem));
            asm!("tdpbssd tmm4, tmm0, tmm2", options(nostack, nomem));
            asm!("tilestored [{p} + {s}*1], tmm4", p = in(reg) products, s = in(reg) 64usize,
                options(nostack));
            let dx = _mm512_loadu_ps(acts.tile_dx(block, c));
            for r in 0..TILE {
                let scale = _mm512_set1_ps(*scales.add(r * chunks_padded + c));
                let chain = acc.add((r * GROUP + k) * 16);
                let before = if g == 0 {
                    _mm512_setzero_ps()
                } else {
                    _mm512_load_ps(chain)
                };
                let isum = _mm512_load_si512(products.add(r * TILE) as *const _);
                let step =
                    _mm512_fmadd_ps(_mm512_mul_ps(scale, dx), _mm512_cvtepi32_ps(isum), before);
                _mm512_store_ps(chain, step);
            }
        }
    }
    // The chains' tree (`reduce_lanes`): chain k takes k + 8, then k + 4, k + 2, k + 1.
    let first = block * TILE;
    for r in 0..TILE.min(task.num_rows - row_tile * TILE) {
        let mut v: [__m512; GROUP] =
            std::array::from_fn(|k| _mm512_load_ps(acc.add((r * GROUP + k) * 16)));
        let mut width = GROUP / 2;
        while width > 0 {
            for l in 0..width {
                v[l] = _mm512_add_ps(v[l], v[l + width]);
            }
            width /= 2;
        }
        let mut sums = [0.0f32; TILE];
        _mm512_storeu_ps(sums.as_mut_ptr(), v[0]);
        for (j, &sum) in sums.iter().enumerate().take(call.n - first) {
            *out.0
                .add((first + j) * call.stride + task.col + row_tile * TILE + r) = sum;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Isa;

    #[test]
    fn token_blocks_hold_each_chunk_four_bytes_per_token_at_a_time() {
        // 33 tokens: three blocks, the last with one token; 224 values: 7 chunks of a group
        // of 16, the rest padding.
        let (n, cols) = (33, 224);
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 37) % 101) as f32 - 50.0)
            .collect();
        let mut acts = QuantizedActs::new(Isa::Scalar, &x, n, cols);
        assert!(!acts.has_tiles(), "only the AMX path lays them out");
        acts.lay_out_tiles(n);
        for t in 0..n {
            let token = acts.token(t);
            for c in 0..GROUP {
                let (block, j) = (t / TILE, t % TILE);
                let tile = acts.tile_chunk(block, c);
                for i in 0..32 {
                    // SAFETY: within the token's group and the block's tile.
                    let (want, got) = unsafe {
                        (
                            *token.q.add(32 * c + i),
                            *tile.add(64 * (i / 4) + 4 * j + i % 4),
                        )
                    };
                    assert_eq!(got, want, "token {t} chunk {c} value {i}");
                }
                // SAFETY: as above.
                unsafe { assert_eq!(*acts.tile_dx(block, c).add(j), *token.dx.add(c)) };
            }
        }
        // Past the last token: zeros.
        let tile = acts.tile_chunk(2, 0);
        // SAFETY: within the last block's tile.
        assert!((0..TILE_CHUNK_BYTES).all(|b| b % 64 < 4 || unsafe { *tile.add(b) } == 0));
    }
}
