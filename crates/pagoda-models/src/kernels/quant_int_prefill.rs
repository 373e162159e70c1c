//! Prefill with integer products: a task's rows are decoded once per block of `PAIRS` chunk
//! pairs (weights as ready-to-multiply bytes, scales and offsets as vectors) and then
//! multiplied by every token's 8-bit activations in register tiles of rows x tokens.
//!
//! The arithmetic is that of the decode tiles (`quant_int.rs`), step for step: each chain's
//! accumulator is stored between blocks and reloaded, so blocking changes no bit.

use std::cell::RefCell;

use super::matmul::OutPtr;
use super::quant_int::{accumulate, decode_pair, QuantizedActs};
use super::quant_matmul::{reduce_lanes, Call, Task};
use super::quant_prefill::{group_size, Line};
use super::simd::{multiversion, Simd16};
use crate::quant::formats::IntFormat;

/// Chunk pairs per block (512 values): a 64-row task's decoded block stays in L2.
const PAIRS: usize = 8;
/// Tokens per block: their accumulators for 64 rows (256 KiB) stay in L2.
const TOKEN_BLOCK: usize = 64;

pub(super) struct Scratch {
    decoded: Vec<Line>,
    acc: Vec<Line>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch { decoded: Vec::new(), acc: Vec::new() })
    };
}

/// One decoded pair of chunks of one row: what `dot_pair` takes, and the lanes' scales and
/// offsets.
#[derive(Clone, Copy)]
struct Decoded<S: Simd16> {
    w: S::Pair,
    scale: S,
    offset: S,
}

/// Lines one `Decoded<S>` takes.
#[inline(always)]
fn decoded_lines<S: Simd16>() -> usize {
    std::mem::size_of::<Decoded<S>>().div_ceil(64)
}

#[derive(Clone, Copy)]
struct Block {
    decoded: *const Line,
    stride: usize,
    rows: usize,
    pairs: usize,
    first_pair: usize,
    tokens: [usize; 2],
    acc: *mut Line,
    first: bool,
    last: bool,
    out: *mut f32,
    out_stride: usize,
}

pub(super) fn int_prefill_task<F: IntFormat>(
    isa: super::Isa,
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    // The scratch is taken here: code inside a closure is compiled without the path's
    // target features.
    SCRATCH.with(|scratch| {
        let scratch = &mut *scratch.borrow_mut();
        scratch
            .decoded
            .resize(task.num_rows * PAIRS * MAX_LINES, Line::ZERO);
        scratch.acc.resize(TOKEN_BLOCK * task.num_rows, Line::ZERO);
        int_prefill_on::<F>(isa, rows, row_bytes, call, acts, task, out, scratch)
    })
}

/// Lines of the largest `Decoded` (AVX-512's).
const MAX_LINES: usize = 4;

multiversion!(fn int_prefill_on<F: IntFormat>(
    rows: &[u8], row_bytes: usize, call: Call, acts: &QuantizedActs, task: Task, out: OutPtr,
    scratch: &mut Scratch
) = prefill);

#[inline(always)]
unsafe fn prefill<S: Simd16, F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    let chunks = call.cols / 32;
    let pairs = chunks.div_ceil(2);
    let lines = decoded_lines::<S>();
    assert!(lines <= MAX_LINES && scratch.decoded.len() >= task.num_rows * PAIRS * lines);
    {
        let mut t0 = 0;
        while t0 < call.n {
            let tokens = TOKEN_BLOCK.min(call.n - t0);
            let mut p0 = 0;
            while p0 < pairs {
                let block_pairs = PAIRS.min(pairs - p0);
                let decoded = scratch.decoded.as_mut_ptr() as *mut Decoded<S>;
                let stride = PAIRS * lines;
                for r in 0..task.num_rows {
                    let row = rows.as_ptr().add(r * row_bytes);
                    for h in 0..block_pairs {
                        let p = p0 + h;
                        let (w, scale, offset) = decode_pair::<S, F>(row, p, 2 * p + 1 < chunks);
                        let at =
                            (decoded as *mut Line).add(r * stride + h * lines) as *mut Decoded<S>;
                        at.write(Decoded { w, scale, offset });
                    }
                }
                let block = Block {
                    decoded: scratch.decoded.as_ptr(),
                    stride,
                    rows: task.num_rows,
                    pairs: block_pairs,
                    first_pair: p0,
                    tokens: [t0, tokens],
                    acc: scratch.acc.as_mut_ptr(),
                    first: p0 == 0,
                    last: p0 + block_pairs == pairs,
                    out: out.0.wrapping_add(t0 * call.stride + task.col),
                    out_stride: call.stride,
                };
                tiles::<S, F>(block, acts);
                p0 += block_pairs;
            }
            t0 += tokens;
        }
    }
}

#[inline(always)]
unsafe fn tiles<S: Simd16, F: IntFormat>(b: Block, acts: &QuantizedActs) {
    // Measured on an Intel Xeon (2 threads, Qwen2.5-0.5B shape): AVX2 1x4 90 tok/s
    // (2x2 73, 2x4 89, 1x6 88), AVX-512 4x4 160 (4x6 148, 2x6 141, 8x3 132).
    let (max_r, max_t) = if S::REGISTERS >= 32 { (4, 4) } else { (1, 4) };
    let [t_first, tokens] = b.tokens;
    let mut t = 0;
    while t < tokens {
        let tt = (tokens - t).min(max_t);
        let mut r = 0;
        while r < b.rows {
            let rr = group_size(b.rows - r, max_r);
            macro_rules! go {
                ($R:literal, $T:literal) => {
                    if b.first {
                        tile::<S, F, $R, $T, true>(b, acts, t_first, t, r)
                    } else {
                        tile::<S, F, $R, $T, false>(b, acts, t_first, t, r)
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
        for t in 0..tokens {
            let out = b.out.add(t * b.out_stride);
            for r in 0..b.rows {
                *out.add(r) = reduce_lanes(&(*b.acc.add(t * b.rows + r)).0);
            }
        }
    }
}

/// Rows `r..r + R` x tokens `t..t + T` of the block (token `t` is `t_first + t` of the call).
#[inline(always)]
unsafe fn tile<S: Simd16, F: IntFormat, const R: usize, const T: usize, const FIRST: bool>(
    b: Block,
    acts: &QuantizedActs,
    t_first: usize,
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
    let tokens: [(*const i8, *const f32, *const f32); T] =
        std::array::from_fn(|j| acts.token(t_first + t + j));
    let lines = decoded_lines::<S>();
    for h in 0..b.pairs {
        let p = b.first_pair + h;
        let mut d = [std::mem::MaybeUninit::<Decoded<S>>::uninit(); R];
        for (i, v) in d.iter_mut().enumerate() {
            let at = b.decoded.add((r + i) * b.stride + h * lines) as *const Decoded<S>;
            v.write(at.read());
        }
        for (row, &token) in acc.iter_mut().zip(&tokens) {
            for (a, v) in row.iter_mut().zip(&d) {
                let v = v.assume_init_ref();
                *a = accumulate::<S, F>(*a, v.w, v.scale, v.offset, token, p);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            a.store(b.acc.add((t + j) * b.rows + r + i) as *mut f32);
        }
    }
}
