//! Prefill with integer products: a task's rows are decoded once per group of 16 chunks into
//! the activations' `wide` layout (four bytes of each chunk at a time), so one vector of
//! products holds a part of all 16 chunks' sums and adds to them in integers; the float step
//! runs once per group, not once per chunk. Tiles are rows x tokens.
//!
//! The arithmetic is the decode tiles' (`quant_int.rs`): the same exact integer sums and the
//! same `group_step`; each chain's accumulator is stored between groups and reloaded, so
//! blocking changes no bit.

use std::cell::RefCell;

use super::matmul::OutPtr;
use super::quant_int::{group_scales, group_step, QuantizedActs, TokenActs, GROUP, GROUP_BYTES};
use super::quant_matmul::{Call, Task};
use super::quant_prefill::{group_size, Line};
use super::simd::{multiversion, Simd16};
use crate::quant::formats::IntFormat;

/// Tokens per block: their accumulators for 64 rows (256 KiB) stay in L2.
const TOKEN_BLOCK: usize = 64;

/// One row's decoded group, in lines: the magnitudes (8 lines), the values (8), the integer
/// factors of values 0-15 and of 16-31 (i16 pairs per chunk), the scales and the offsets.
const ABS: usize = 0;
const VALUES: usize = 8;
const FACTORS: usize = 16;
const SCALES: usize = 18;
const OFFSETS: usize = 19;
const ROW_LINES: usize = 20;

pub(super) struct Scratch {
    decoded: Vec<Line>,
    acc: Vec<Line>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch { decoded: Vec::new(), acc: Vec::new() })
    };
}

#[derive(Clone, Copy)]
struct Block {
    decoded: *const Line,
    rows: usize,
    group: usize,
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
            .resize(task.num_rows * ROW_LINES, Line::ZERO);
        scratch.acc.resize(TOKEN_BLOCK * task.num_rows, Line::ZERO);
        int_prefill_on::<F>(isa, rows, row_bytes, call, acts, task, out, scratch)
    })
}

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
    assert!(scratch.decoded.len() >= task.num_rows * ROW_LINES);
    let chunks = call.cols / 32;
    let mut t0 = 0;
    while t0 < call.n {
        let tokens = TOKEN_BLOCK.min(call.n - t0);
        for g in 0..acts.groups {
            for r in 0..task.num_rows {
                let row = rows.as_ptr().add(r * row_bytes);
                let at = scratch.decoded.as_mut_ptr().add(r * ROW_LINES);
                decode_group::<S, F>(row, g, chunks, at as *mut u8);
            }
            let block = Block {
                decoded: scratch.decoded.as_ptr(),
                rows: task.num_rows,
                group: g,
                tokens: [t0, tokens],
                acc: scratch.acc.as_mut_ptr(),
                first: g == 0,
                last: g + 1 == acts.groups,
                out: out.0.wrapping_add(t0 * call.stride + task.col),
                out_stride: call.stride,
            };
            tiles::<S, F>(block, acts);
        }
        t0 += tokens;
    }
}

/// Group `g` of the row at `row` into the row's lines at `at`; chunks past the row are zeros.
#[inline(always)]
unsafe fn decode_group<S: Simd16, F: IntFormat>(
    row: *const u8,
    g: usize,
    chunks: usize,
    at: *mut u8,
) {
    let mut abs = [[0u8; 32]; GROUP];
    let mut values = [[0u8; 32]; GROUP];
    let mut factors = [[0i16; 2]; GROUP];
    for c in GROUP * g..chunks.min(GROUP * g + GROUP) {
        let k = c % GROUP;
        let w = S::prep(F::chunk_q::<S>(row, c), F::SIGNED);
        S::prep_store(w, abs[k].as_mut_ptr(), values[k].as_mut_ptr());
        factors[k] = F::factors(row, c);
    }
    let line = |l: usize| at.add(64 * l);
    for k in 0..GROUP {
        for v in 0..8 {
            let word = |bytes: &[u8; 32]| {
                std::ptr::read_unaligned(bytes.as_ptr().add(4 * v) as *const u32)
            };
            let to = 64 * v + 4 * k;
            std::ptr::write_unaligned(line(ABS).add(to) as *mut u32, word(&abs[k]));
            if F::SIGNED {
                std::ptr::write_unaligned(line(VALUES).add(to) as *mut u32, word(&values[k]));
            }
        }
        for (h, &f) in factors[k].iter().enumerate() {
            let pair = (f as u16 as u32) | ((f as u16 as u32) << 16);
            std::ptr::write_unaligned(line(FACTORS + h).add(4 * k) as *mut u32, pair);
        }
    }
    let (scale, offset) = group_scales::<S, F>(row, g, chunks);
    scale.store(line(SCALES) as *mut f32);
    offset.store(line(OFFSETS) as *mut f32);
}

#[inline(always)]
unsafe fn tiles<S: Simd16, F: IntFormat>(b: Block, acts: &QuantizedActs) {
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
                *out.add(r) = S::load(b.acc.add(t * b.rows + r) as *const f32).reduce();
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
    let tokens: [TokenActs; T] = std::array::from_fn(|j| acts.token(t_first + t + j));
    let lines: [*const u8; R] =
        std::array::from_fn(|i| b.decoded.add((r + i) * ROW_LINES) as *const u8);
    // Pair sums add in 16 bits over `F::SPAN` vectors, then widen once with the factors.
    let mut isum = [[S::ints_zero(); R]; T];
    for first in (0..8).step_by(F::SPAN) {
        let mut pairs = [[S::wide_zero(); R]; T];
        for v in first..first + F::SPAN {
            for (i, &row) in lines.iter().enumerate() {
                let w_abs = S::wide_load(row.add(64 * (ABS + v)));
                let w = if F::SIGNED {
                    S::wide_load(row.add(64 * (VALUES + v)))
                } else {
                    w_abs
                };
                for (sums, token) in pairs.iter_mut().zip(&tokens) {
                    let x = token.wide.add(GROUP_BYTES * b.group + 64 * v);
                    sums[i] = S::wide_add16(sums[i], S::wide_products(w_abs, w, x, F::SIGNED));
                }
            }
        }
        for (i, &row) in lines.iter().enumerate() {
            let factors = S::wide_load(row.add(64 * (FACTORS + first / 4)));
            for (sums, pair) in isum.iter_mut().zip(&pairs) {
                sums[i] = S::wide_widen(sums[i], pair[i], factors);
            }
        }
    }
    for (j, (sums, &token)) in isum.iter().zip(&tokens).enumerate() {
        for (i, (&row, &sum)) in lines.iter().zip(sums).enumerate() {
            let acc = b.acc.add((t + j) * b.rows + r + i) as *mut f32;
            let before = if FIRST { S::zero() } else { S::load(acc) };
            let scale = S::load(row.add(64 * SCALES) as *const f32);
            let offset = S::load(row.add(64 * OFFSETS) as *const f32);
            group_step::<S, F>(before, sum, scale, offset, token, b.group).store(acc);
        }
    }
}
