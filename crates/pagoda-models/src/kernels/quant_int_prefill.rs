//! Prefill with integer products: a task's rows are decoded once per group of 16 chunks into
//! the activations' `wide` layout (four bytes of each chunk at a time), so one vector of
//! products holds a part of all 16 chunks' sums and adds to them in integers; the float step
//! runs once per group, not once per chunk. Tiles are rows x tokens.
//!
//! The arithmetic is the decode tiles' (`quant_int.rs`): the same exact integer sums and the
//! same `group_step`; each chain's accumulator is stored between groups and reloaded, so
//! blocking changes no bit.
//!
//! On the `-vnni` paths one `vpdpbusd` adds four products of each of 16 chunks into their
//! 32-bit sums. It multiplies unsigned by signed bytes: unsigned formats' weights are the
//! unsigned side; signed formats' weights are the signed side against the activations plus
//! 128, whose share (`128 * sum(f * w)` per chunk, one per row and group) is taken off after.

use std::cell::RefCell;

use super::matmul::OutPtr;
use super::quant_int::{
    group_mins, group_scales_into, group_step, stored_span, QuantizedActs, TokenActs, GROUP,
    GROUP_BYTES,
};
use super::quant_matmul::{Call, Task};
use super::quant_prefill::{group_size, Line};
use super::simd::{multiversion, Simd16};
use super::Isa;
use crate::quant::formats::{Factors, IntFormat};

/// Tokens per block: their accumulators for 64 rows (256 KiB) stay in L2.
const TOKEN_BLOCK: usize = 64;

/// One row's decoded group, in lines: the magnitudes (8 lines), the values (8), the integer
/// factors of values 0-15 and of 16-31 (i16 pairs per chunk; i32 with dot products), the
/// scales, the offsets and, with dot products of a signed format, `128 * sum(f * w)`.
/// Formats with a `STORED_BIAS` keep their stored bytes in the magnitudes' lines when
/// multiplied without dot products, and their bias line holds `-STORED_BIAS * f` for
/// values 0-15 and 16-31 (an i16 pair per chunk, as the activations' `halves`). Formats
/// with `HALF_MINS` keep their mins as `group_step` takes them.
const ABS: usize = 0;
const VALUES: usize = 8;
const FACTORS: usize = 16;
const SCALES: usize = 18;
const OFFSETS: usize = 19;
const BIAS: usize = 20;
const MINS: usize = 21;
const ROW_LINES: usize = 22;

/// The factors of formats without any: i16 ones, one line.
static ONES16: [i16; 32] = [1; 32];

/// Tests set it to run the dot-product tiles on the scalar path (no CPU needed for them); a
/// relaxed load per product costs nothing beside it.
#[doc(hidden)]
pub static SCALAR_DOT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    /// Group 0: the chains start from zero.
    first: bool,
    last: bool,
    out: *mut f32,
    out_stride: usize,
}

pub(super) fn int_prefill_task<F: IntFormat>(
    isa: Isa,
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
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512Amx && super::quant_int_amx::takes::<F>() && acts.has_tiles() {
            return super::quant_int_amx::prefill_task::<F>(rows, row_bytes, call, acts, task, out);
        }
        assert!(
            acts.has_lines(),
            "the vector prefill reads the activations' lines"
        );
        // SAFETY: the `-vnni` paths are only chosen on CPUs that have them (`Isa`).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            match isa.without_amx() {
                Isa::Avx512Vnni => {
                    return prefill_avx512_vnni::<F>(
                        rows, row_bytes, call, acts, task, out, scratch,
                    )
                }
                Isa::Avx2Vnni => {
                    return prefill_avx2_vnni::<F>(rows, row_bytes, call, acts, task, out, scratch)
                }
                _ => {}
            }
        }
        if isa == Isa::Scalar && SCALAR_DOT.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: as below.
            return unsafe {
                prefill::<super::simd::Scalar, F, true>(
                    rows, row_bytes, call, acts, task, out, scratch,
                )
            };
        }
        int_prefill_on::<F>(isa, rows, row_bytes, call, acts, task, out, scratch)
    })
}

multiversion!(fn int_prefill_on<F: IntFormat>(
    rows: &[u8], row_bytes: usize, call: Call, acts: &QuantizedActs, task: Task, out: OutPtr,
    scratch: &mut Scratch
) = prefill_without_dot);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn prefill_avx512_vnni<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    prefill::<super::simd::Avx512, F, true>(rows, row_bytes, call, acts, task, out, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn prefill_avx2_vnni<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    prefill::<super::simd::Avx2, F, true>(rows, row_bytes, call, acts, task, out, scratch)
}

#[inline(always)]
unsafe fn prefill_without_dot<S: Simd16, F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    prefill::<S, F, false>(rows, row_bytes, call, acts, task, out, scratch)
}

/// `DOT`: the tiles multiply with `Simd16::wide_dot`.
#[inline(always)]
unsafe fn prefill<S: Simd16, F: IntFormat, const DOT: bool>(
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
                decode_group::<S, F, DOT>(row, g, chunks, at as *mut u8);
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
            tiles::<S, F, DOT>(block, acts);
        }
        t0 += tokens;
    }
}

/// Group `g` of the row at `row` into the row's lines at `at`; chunks past the row are zeros.
#[inline(always)]
unsafe fn decode_group<S: Simd16, F: IntFormat, const DOT: bool>(
    row: *const u8,
    g: usize,
    chunks: usize,
    at: *mut u8,
) {
    // Without dot products a format with a stored bias multiplies its stored bytes.
    let stored = !DOT && F::STORED_BIAS != 0;
    let mut abs = [[0u8; 32]; GROUP];
    let mut values = [[0u8; 32]; GROUP];
    let mut factors = [[0i16; 2]; GROUP];
    for c in GROUP * g..chunks.min(GROUP * g + GROUP) {
        let k = c % GROUP;
        let w = if stored {
            S::prep(F::chunk_stored::<S>(row, c), false)
        } else {
            S::prep(F::chunk_q::<S>(row, c), F::SIGNED)
        };
        S::prep_store(w, abs[k].as_mut_ptr(), values[k].as_mut_ptr());
        factors[k] = F::factors(row, c);
        debug_assert!(match F::FACTORS {
            Factors::One => factors[k] == [1, 1],
            Factors::PerChunk => factors[k][0] == factors[k][1],
            Factors::PerHalf => true,
        });
    }
    let line = |l: usize| at.add(64 * l);
    S::chunks_to_lines(&abs, line(ABS));
    if F::SIGNED && !stored {
        S::chunks_to_lines(&values, line(VALUES));
    }
    if stored {
        // Zero past the row, where `factors` are.
        let bias = -i16::from(F::STORED_BIAS);
        for (k, [low, high]) in factors.iter().enumerate() {
            let word = ((bias * low) as u16 as u32) | (((bias * high) as u16 as u32) << 16);
            std::ptr::write_unaligned(line(BIAS).add(4 * k) as *mut u32, word);
        }
    }
    // Unit factors are read from these lines only by the 16-bit tiles that add several
    // vectors before widening (`tile`).
    if !(F::FACTORS == Factors::One && (DOT || F::SPAN == 1)) {
        for (k, chunk_factors) in factors.iter().enumerate() {
            for (h, &f) in chunk_factors.iter().enumerate() {
                let word = if DOT {
                    f as i32 as u32
                } else {
                    (f as u16 as u32) | ((f as u16 as u32) << 16)
                };
                std::ptr::write_unaligned(line(FACTORS + h).add(4 * k) as *mut u32, word);
            }
        }
    }
    if DOT && F::SIGNED {
        let bytes_128 = S::wide_bias(S::wide_zero());
        let (mut low, mut high) = (S::ints_zero(), S::ints_zero());
        for v in 0..4 {
            low = S::wide_dot(low, bytes_128, S::wide_load(line(VALUES + v)));
            high = S::wide_dot(high, bytes_128, S::wide_load(line(VALUES + 4 + v)));
        }
        let bias = with_factors::<S, F>(low, high, at as *const u8);
        S::ints_store(bias, line(BIAS) as *mut i32);
    }
    group_scales_into::<S, F>(
        row,
        g,
        chunks,
        line(SCALES) as *mut f32,
        line(OFFSETS) as *mut f32,
    );
    if F::HALF_MINS {
        let mins = group_mins::<S, F>(row, g, chunks);
        std::ptr::write_unaligned(line(MINS) as *mut S::Wide, mins);
    }
}

/// `f_low * low + f_high * high` per chunk, the factors from the row's lines at `lines`.
#[inline(always)]
unsafe fn with_factors<S: Simd16, F: IntFormat>(
    low: S::Ints,
    high: S::Ints,
    lines: *const u8,
) -> S::Ints {
    let factors = lines.add(64 * FACTORS) as *const i32;
    match F::FACTORS {
        Factors::One => S::ints_add(low, high),
        Factors::PerChunk => S::ints_mul(S::ints_add(low, high), S::ints_load(factors)),
        Factors::PerHalf => S::ints_add(
            S::ints_mul(low, S::ints_load(factors)),
            S::ints_mul(high, S::ints_load(factors.add(16))),
        ),
    }
}

/// Halves with their own factors keep two sums per output with dot products: fewer outputs
/// per tile.
const fn has_halves<F: IntFormat, const DOT: bool>() -> bool {
    DOT && matches!(F::FACTORS, Factors::PerHalf)
}

#[inline(always)]
unsafe fn tiles<S: Simd16, F: IntFormat, const DOT: bool>(b: Block, acts: &QuantizedActs) {
    let (max_r, max_t) = match (S::REGISTERS >= 32, has_halves::<F, DOT>()) {
        (true, false) => (4, 4),
        (true, true) => (2, 4),
        (false, false) => (1, 4),
        (false, true) => (1, 2),
    };
    let [t_first, tokens] = b.tokens;
    let mut t = 0;
    while t < tokens {
        let tt = (tokens - t).min(max_t);
        let mut r = 0;
        while r < b.rows {
            let rr = group_size(b.rows - r, max_r);
            macro_rules! go {
                ($R:literal, $T:literal) => {
                    if const { DOT } {
                        tile_dot::<S, F, $R, $T>(b, acts, t_first, t, r)
                    } else {
                        tile::<S, F, $R, $T>(b, acts, t_first, t, r)
                    }
                };
            }
            // One row at a time with 16 registers; the `const` condition keeps the wider
            // tiles from being compiled at all there (each shape is a whole copy of the tile).
            macro_rules! rows {
                ($T:literal) => {
                    if const { S::REGISTERS >= 32 && !has_halves::<F, DOT>() } {
                        match rr {
                            4 => go!(4, $T),
                            2 => go!(2, $T),
                            _ => go!(1, $T),
                        }
                    } else if const { S::REGISTERS >= 32 } {
                        debug_assert!(rr <= 2);
                        match rr {
                            2 => go!(2, $T),
                            _ => go!(1, $T),
                        }
                    } else {
                        debug_assert_eq!(rr, 1);
                        go!(1, $T)
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

/// The activations of call tokens `first..first + T` and the lines of block rows `r..r + R`.
#[inline(always)]
unsafe fn tile_inputs<const R: usize, const T: usize>(
    b: Block,
    acts: &QuantizedActs,
    first: usize,
    r: usize,
) -> ([TokenActs; T], [*const u8; R]) {
    (
        std::array::from_fn(|j| acts.token(first + j)),
        std::array::from_fn(|i| b.decoded.add((r + i) * ROW_LINES) as *const u8),
    )
}

/// Rows `r..r + R` x tokens `t..t + T` of the block (token `t` is `t_first + t` of the call).
#[inline(always)]
unsafe fn tile<S: Simd16, F: IntFormat, const R: usize, const T: usize>(
    b: Block,
    acts: &QuantizedActs,
    t_first: usize,
    t: usize,
    r: usize,
) {
    let (tokens, lines) = tile_inputs::<R, T>(b, acts, t_first + t, r);
    let mut isum = [[S::ints_zero(); R]; T];
    // Stored bytes are unsigned; their bias's share comes off below.
    let stored = F::STORED_BIAS != 0;
    let signed = F::SIGNED && !stored;
    let span = if stored { stored_span::<F>() } else { F::SPAN };
    if span == 1 && F::FACTORS == Factors::One {
        // Every vector widens at once: no 16-bit sums held per output (they spilled), and
        // the factors are ones.
        let ones = S::wide_load(ONES16.as_ptr() as *const u8);
        for v in 0..8 {
            for (i, &row) in lines.iter().enumerate() {
                let (w_abs, w) = weight_vector::<S>(row, v, signed);
                for (sums, token) in isum.iter_mut().zip(&tokens) {
                    let x = token.wide.add(GROUP_BYTES * b.group + 64 * v);
                    let pairs = S::wide_products(w_abs, w, x, signed);
                    sums[i] = S::wide_widen(sums[i], pairs, ones);
                }
            }
        }
    } else {
        // Pair sums add in 16 bits over `span` vectors, then widen once with the factors.
        for first in (0..8).step_by(span) {
            let mut pairs = [[S::wide_zero(); R]; T];
            for v in first..first + span {
                for (i, &row) in lines.iter().enumerate() {
                    let (w_abs, w) = weight_vector::<S>(row, v, signed);
                    for (sums, token) in pairs.iter_mut().zip(&tokens) {
                        let x = token.wide.add(GROUP_BYTES * b.group + 64 * v);
                        sums[i] = S::wide_add16(sums[i], S::wide_products(w_abs, w, x, signed));
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
    }
    if stored {
        // `-STORED_BIAS * (f_low * sum(x_low) + f_high * sum(x_high))` per chunk.
        for (i, &row) in lines.iter().enumerate() {
            let bias = S::wide_load(row.add(64 * BIAS));
            for (sums, token) in isum.iter_mut().zip(&tokens) {
                let halves = S::wide_load(token.halves.add(GROUP * b.group) as *const u8);
                sums[i] = S::wide_widen(sums[i], halves, bias);
            }
        }
    }
    for (j, (sums, &token)) in isum.iter().zip(&tokens).enumerate() {
        for (i, (&row, &sum)) in lines.iter().zip(sums).enumerate() {
            step::<S, F>(b, t + j, r + i, row, sum, token);
        }
    }
}

/// Line `v` of a row's magnitudes and of its values (the magnitudes again when unsigned).
#[inline(always)]
unsafe fn weight_vector<S: Simd16>(row: *const u8, v: usize, signed: bool) -> (S::Wide, S::Wide) {
    let w_abs = S::wide_load(row.add(64 * (ABS + v)));
    let w = if signed {
        S::wide_load(row.add(64 * (VALUES + v)))
    } else {
        w_abs
    };
    (w_abs, w)
}

/// Adds row `r`'s group sums `sum` for block token `t` to its chains.
#[inline(always)]
unsafe fn step<S: Simd16, F: IntFormat>(
    b: Block,
    t: usize,
    r: usize,
    row: *const u8,
    sum: S::Ints,
    token: TokenActs,
) {
    let acc = b.acc.add(t * b.rows + r) as *mut f32;
    let before = if b.first { S::zero() } else { S::load(acc) };
    let scale = S::load(row.add(64 * SCALES) as *const f32);
    // Formats without offsets leave their line unwritten (`group_scales_into`).
    let offset = if F::OFFSET {
        S::load(row.add(64 * OFFSETS) as *const f32)
    } else {
        S::zero()
    };
    let mins = if F::HALF_MINS {
        S::wide_load(row.add(64 * MINS))
    } else {
        S::wide_zero()
    };
    group_step::<S, F>(before, sum, scale, offset, mins, token, b.group).store(acc);
}

/// `tile` with byte dot products: one accumulator per output (two when the halves have their
/// own factors), factors and the signed formats' bias applied once per group.
#[inline(always)]
unsafe fn tile_dot<S: Simd16, F: IntFormat, const R: usize, const T: usize>(
    b: Block,
    acts: &QuantizedActs,
    t_first: usize,
    t: usize,
    r: usize,
) {
    let (tokens, lines) = tile_inputs::<R, T>(b, acts, t_first + t, r);
    let weights = if F::SIGNED { VALUES } else { ABS };
    let halves = F::FACTORS == Factors::PerHalf;
    let mut low = [[S::ints_zero(); R]; T];
    let mut dots = [[S::ints_zero(); R]; T];
    for v in 0..8 {
        if halves && v == 4 {
            low = dots;
            dots = [[S::ints_zero(); R]; T];
        }
        let mut w = [S::wide_zero(); R];
        for (w, &row) in w.iter_mut().zip(&lines) {
            *w = S::wide_load(row.add(64 * (weights + v)));
        }
        for (sums, token) in dots.iter_mut().zip(&tokens) {
            let x = S::wide_load(token.wide.add(GROUP_BYTES * b.group + 64 * v) as *const u8);
            if F::SIGNED {
                let x = S::wide_bias(x);
                for (sum, &w) in sums.iter_mut().zip(&w) {
                    *sum = S::wide_dot(*sum, x, w);
                }
            } else {
                for (sum, &w) in sums.iter_mut().zip(&w) {
                    *sum = S::wide_dot(*sum, w, x);
                }
            }
        }
    }
    for (i, &row) in lines.iter().enumerate() {
        for (j, &token) in tokens.iter().enumerate() {
            let sum = if halves {
                with_factors::<S, F>(low[j][i], dots[j][i], row)
            } else {
                with_factors::<S, F>(S::ints_zero(), dots[j][i], row)
            };
            let sum = if F::SIGNED {
                S::ints_sub(sum, S::ints_load(row.add(64 * BIAS) as *const i32))
            } else {
                sum
            };
            step::<S, F>(b, t + j, r + i, row, sum, token);
        }
    }
}
