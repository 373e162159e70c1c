//! Prefill over GGUF blocks: a task's rows are decoded to f32 once per block of `KC` values
//! and `TOKEN_BLOCK` tokens, then multiplied in register tiles of rows x tokens.
//!
//! Each output is the same 16 in-order chains as in the decode tiles (`quant_matmul.rs`):
//! lane `l` of one vector accumulator takes `k = l, l + 16, ...` by fused multiply-adds.
//! Between `k` blocks a tile's accumulators are stored whole and reloaded, which continues
//! every chain exactly where it stopped, so blocking changes no bit of any result.

use std::cell::RefCell;

use super::matmul::OutPtr;
use super::quant_matmul::{reduce_lanes, Call, Task};
use super::simd::{multiversion, Simd16, LANES};
use crate::kernels::Isa;
use crate::quant::formats::Format;

/// Values of `k` per block: a tile's rows and activations (2 KiB each per row or token) stay
/// in L1 while it runs, whatever the matrix's width.
const KC: usize = 512;
/// Vectors of 16 values per row or token in a block.
const STEPS: usize = KC / LANES;
/// Tokens per block: the accumulators of a 64-row task for 64 tokens (256 KiB) and its
/// decoded rows (128 KiB) stay in L2.
const TOKEN_BLOCK: usize = 64;

/// One vector, aligned so that no load splits a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Line(pub(super) [f32; LANES]);

impl Line {
    pub(super) const ZERO: Line = Line([0.0; LANES]);
}

/// Per-thread buffers (a fresh 400 KiB per task would be mapped and faulted in each time).
struct Scratch {
    /// The task's rows for one block, decoded; each tile's group of rows interleaved (see
    /// `decode_rows_kernel`).
    rows: Vec<Line>,
    /// One token tile's activations for one block, interleaved.
    tokens: Vec<Line>,
    /// `TOKEN_BLOCK x rows` accumulators: the chains carried from block to block.
    acc: Vec<Line>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch { rows: Vec::new(), tokens: Vec::new(), acc: Vec::new() })
    };
}

/// Rows per tile: four accumulators per token fit the 32 registers of AVX-512 beside a 6-token
/// tile, two the 16 of AVX2 (where one `S` takes two) beside 3 tokens.
#[inline(always)]
fn tile_rows<S: Simd16>() -> usize {
    if S::REGISTERS >= 32 {
        4
    } else {
        2
    }
}

#[inline(always)]
fn tile_tokens<S: Simd16>() -> usize {
    if S::REGISTERS >= 32 {
        6
    } else {
        3
    }
}

/// The size of the group of rows that starts `remaining` rows before the end: whole tiles,
/// then halves down to a single row. Decoding and the tiles walk the same groups.
#[inline(always)]
pub(super) fn group_size(remaining: usize, max_rows: usize) -> usize {
    match remaining.min(max_rows) {
        8.. => 8,
        4..=7 => 4,
        2 | 3 => 2,
        _ => 1,
    }
}

/// One block of work for the tiles: the task's decoded rows times `tokens` tokens of `x`
/// (`x_stride` apart), over `steps` vectors of each.
#[derive(Clone, Copy)]
struct Block {
    w: *const Line,
    x: *const f32,
    x_stride: usize,
    /// Interleaved activations of the current token tile.
    x_tile: *mut Line,
    rows: usize,
    tokens: usize,
    steps: usize,
    acc: *mut Line,
    first: bool,
    last: bool,
    /// Where output `(token, row)` of this block goes: `out + token * out_stride + row`.
    out: *mut f32,
    out_stride: usize,
}

/// Multiplies rows `task` of one part (`rows` holds exactly them) by every token of `x`.
pub(super) fn prefill_task<F: Format>(
    isa: Isa,
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    x: &[f32],
    task: Task,
    out: OutPtr,
) {
    assert!(rows.len() == task.num_rows * row_bytes && x.len() == call.n * call.cols);
    let k_blocks = call.cols.div_ceil(KC);
    SCRATCH.with(|scratch| {
        let scratch = &mut *scratch.borrow_mut();
        scratch.rows.resize(task.num_rows * STEPS, Line::ZERO);
        scratch.tokens.resize(8 * STEPS, Line::ZERO);
        scratch.acc.resize(TOKEN_BLOCK * task.num_rows, Line::ZERO);
        let mut t0 = 0;
        while t0 < call.n {
            let tokens = TOKEN_BLOCK.min(call.n - t0);
            for kb in 0..k_blocks {
                let k0 = kb * KC;
                let chunks = KC.min(call.cols - k0) / 32;
                decode_rows_on::<F>(
                    isa,
                    rows,
                    row_bytes,
                    task.num_rows,
                    k0 / 32,
                    chunks,
                    &mut scratch.rows,
                );
                let block = Block {
                    w: scratch.rows.as_ptr(),
                    x: x[t0 * call.cols + k0..].as_ptr(),
                    x_stride: call.cols,
                    x_tile: scratch.tokens.as_mut_ptr(),
                    rows: task.num_rows,
                    tokens,
                    steps: 2 * chunks,
                    acc: scratch.acc.as_mut_ptr(),
                    first: kb == 0,
                    last: kb + 1 == k_blocks,
                    out: out.0.wrapping_add(t0 * call.stride + task.col),
                    out_stride: call.stride,
                };
                tiles(isa, block);
            }
            t0 += tokens;
        }
    });
}

multiversion!(fn decode_rows_on<F: Format>(
    rows: &[u8], row_bytes: usize, num_rows: usize, first_chunk: usize, chunks: usize,
    decoded: &mut [Line]
) = decode_rows_kernel);

/// Chunks `first_chunk..first_chunk + chunks` of every row into `decoded`: the group of `g`
/// rows starting at row `r` takes lines `r * STEPS..(r + g) * STEPS`, vector `h` of its row
/// `i` at `h * g + i`, so a tile reads its rows' vectors for one step side by side.
#[inline(always)]
unsafe fn decode_rows_kernel<S: Simd16, F: Format>(
    rows: &[u8],
    row_bytes: usize,
    num_rows: usize,
    first_chunk: usize,
    chunks: usize,
    decoded: &mut [Line],
) {
    assert!(rows.len() >= num_rows * row_bytes && decoded.len() >= num_rows * STEPS);
    assert!(chunks * 32 <= KC && (first_chunk + chunks) * 32 <= row_bytes / F::BYTES * F::VALUES);
    let max_rows = tile_rows::<S>();
    let mut r = 0;
    while r < num_rows {
        let g = group_size(num_rows - r, max_rows);
        let group = decoded.as_mut_ptr().add(r * STEPS) as *mut f32;
        for i in 0..g {
            let row = rows.as_ptr().add((r + i) * row_bytes);
            for c in 0..chunks {
                let (a, b) = F::decode32::<S>(row, first_chunk + c);
                a.store(group.add(((2 * c) * g + i) * LANES));
                b.store(group.add(((2 * c + 1) * g + i) * LANES));
            }
        }
        r += g;
    }
}

fn tiles(isa: Isa, block: Block) {
    // SAFETY: `prefill_task` builds blocks whose pointers cover every row, token and output
    // the tiles touch (its slices' bounds, checked by the caller's shape asserts).
    tiles_on(isa, block)
}

multiversion!(fn tiles_on<>(block: Block) = sweep_tiles);

/// Token tiles outermost: a tile's activations, copied side by side, stay in L1 while the
/// block's rows pass.
#[inline(always)]
unsafe fn sweep_tiles<S: Simd16>(b: Block) {
    let (max_r, max_t) = (tile_rows::<S>(), tile_tokens::<S>());
    let mut t = 0;
    while t < b.tokens {
        let tt = (b.tokens - t).min(max_t);
        let x_tile = b.x_tile as *mut f32;
        for h in 0..b.steps {
            for j in 0..tt {
                let v = S::load(b.x.add((t + j) * b.x_stride + h * LANES));
                v.store(x_tile.add((h * tt + j) * LANES));
            }
        }
        let mut r = 0;
        while r < b.rows {
            let rr = group_size(b.rows - r, max_r);
            // The first block starts from zero, the others from the stored chains.
            macro_rules! go {
                ($R:literal, $T:literal) => {
                    if b.first {
                        tile::<S, $R, $T, true>(b, t, r)
                    } else {
                        tile::<S, $R, $T, false>(b, t, r)
                    }
                };
            }
            macro_rules! rows {
                ($T:literal) => {
                    match rr {
                        4 => go!(4, $T),
                        2 => go!(2, $T),
                        _ => go!(1, $T),
                    }
                };
            }
            match tt {
                6 => rows!(6),
                5 => rows!(5),
                4 => rows!(4),
                3 => rows!(3),
                2 => rows!(2),
                _ => rows!(1),
            }
            r += rr;
        }
        t += tt;
    }
    if b.last {
        reduce_block(b);
    }
}

/// Rows `r..r + R` x tokens `t..t + T` over the block's steps. Its accumulators always end
/// in plain stores: a tile that could also end in the reduction, or that started from
/// loaded values another way, had LLVM keep them in memory and store every one at every
/// step.
#[inline(always)]
unsafe fn tile<S: Simd16, const R: usize, const T: usize, const FIRST: bool>(
    b: Block,
    t: usize,
    r: usize,
) {
    let mut acc = [[S::zero(); R]; T];
    if !FIRST {
        for (j, row) in acc.iter_mut().enumerate() {
            for (i, a) in row.iter_mut().enumerate() {
                *a = S::load(b.acc.add((t + j) * b.rows + r + i) as *const f32);
            }
        }
    }
    let w = b.w.add(r * STEPS) as *const f32;
    let x = b.x_tile as *const f32;
    // Plain loops, not closures: a closure is compiled without the path's target features.
    for h in 0..b.steps {
        let mut wv = [S::zero(); R];
        for (i, v) in wv.iter_mut().enumerate() {
            *v = S::load(w.add((h * R + i) * LANES));
        }
        for (j, row) in acc.iter_mut().enumerate() {
            let xv = S::load(x.add((h * T + j) * LANES));
            for (a, v) in row.iter_mut().zip(&wv) {
                *a = S::fma(*v, xv, *a);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            a.store(b.acc.add((t + j) * b.rows + r + i) as *mut f32);
        }
    }
}

/// Every output of the block from its stored chains (apart from the tiles, which keep all
/// their accumulators in registers only when they end in plain stores).
#[inline(always)]
unsafe fn reduce_block(b: Block) {
    for t in 0..b.tokens {
        let out = b.out.add(t * b.out_stride);
        for r in 0..b.rows {
            *out.add(r) = reduce_lanes(&(*b.acc.add(t * b.rows + r)).0);
        }
    }
}
