//! Integer products for GGUF blocks: activations quantized to 8 bits per token and block of
//! 32 (`QuantizedActs`), multiplied by the blocks' small integers in integer registers, the
//! sums scaled in f32 (what llama.cpp does; several times fewer instructions per weight than
//! widening every weight to f32).
//!
//! The definition, on every path and for any number of tokens: per output, sixteen chains;
//! chain `8 (c % 2) + l` takes chunk `c`'s `fma(scale * dx, isum_l, acc)` (then, for formats
//! with an offset, `fma(offset * dx, xsum_l, acc)`), where `isum_l` is the exact integer sum
//! of weights times activations over values `4 l..4 l + 4` of the chunk and `xsum_l` that of
//! the activations; then the fixed tree of `reduce_lanes`. A chunk count that is odd ends
//! with a zero term in chains 8-15. Decode and prefill run the same tiles, so a token's
//! outputs are the same bits alone or batched.

use rayon::prelude::*;

use super::matmul::OutPtr;
use super::quant_matmul::{reduce_lanes, Call, Task, DECODE_TOKENS};
use super::quant_prefill::group_size;
use super::simd::{multiversion, prefetch, Simd16, LANES};
use crate::quant::formats::{IntChunk, IntFormat};

/// Activations as 8-bit integers: per token, `64 * pairs` bytes (chunks padded to an even
/// count with zeros) and, per pair of chunks, 16 lanes of scales (`dx` of the first chunk in
/// lanes 0-7, of the second in 8-15) and 16 lanes of sums of four values.
pub struct QuantizedActs {
    q: Vec<i8>,
    scales: Vec<f32>,
    sums: Vec<f32>,
    pairs: usize,
}

impl QuantizedActs {
    /// `x[n, cols]`, `cols` a multiple of 32. Per chunk: `dx = amax / 127`, values
    /// `round_ties_even(x * (127 / amax))` (0 when `amax` is 0); a chunk holding a NaN or an
    /// infinity gets `dx = NaN`, so the outputs it reaches are NaN as in float products.
    pub fn new(x: &[f32], n: usize, cols: usize) -> QuantizedActs {
        assert!(
            cols.is_multiple_of(32) && x.len() == n * cols,
            "activation shape"
        );
        let pairs = (cols / 32).div_ceil(2);
        let mut acts = QuantizedActs {
            q: vec![0; n * 64 * pairs],
            scales: vec![0.0; n * 16 * pairs],
            sums: vec![0.0; n * 16 * pairs],
            pairs,
        };
        acts.q
            .par_chunks_mut(64 * pairs)
            .zip(acts.scales.par_chunks_mut(16 * pairs))
            .zip(acts.sums.par_chunks_mut(16 * pairs))
            .zip(x.par_chunks(cols))
            .for_each(|(((q, scales), sums), x)| {
                for (c, xs) in x.chunks_exact(32).enumerate() {
                    let (dx, sum) = quantize_chunk(xs, &mut q[32 * c..32 * c + 32]);
                    let lanes = 16 * (c / 2) + 8 * (c % 2);
                    scales[lanes..lanes + 8].fill(dx);
                    sums[lanes..lanes + 8].copy_from_slice(&sum);
                }
            });
        acts
    }

    #[inline(always)]
    pub(super) fn token(&self, t: usize) -> (*const i8, *const f32, *const f32) {
        let p = self.pairs;
        (
            self.q[t * 64 * p..].as_ptr(),
            self.scales[t * 16 * p..].as_ptr(),
            self.sums[t * 16 * p..].as_ptr(),
        )
    }
}

/// One chunk of 32 into `q`; returns `dx` and the sums of values `4 l..4 l + 4`.
fn quantize_chunk(x: &[f32], q: &mut [i8]) -> (f32, [f32; 8]) {
    if x.iter().any(|v| !v.is_finite()) {
        q.fill(0);
        return (f32::NAN, [0.0; 8]);
    }
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        q.fill(0);
        return (0.0, [0.0; 8]);
    }
    let inverse = 127.0 / amax;
    // Adding and taking away 1.5 * 2^23 rounds to the nearest integer, ties to even, for
    // |v| < 2^22 (here |v| <= 127 and a rounding error).
    const ROUND: f32 = 12_582_912.0;
    for (o, v) in q.iter_mut().zip(x) {
        *o = (((v * inverse) + ROUND) - ROUND).clamp(-127.0, 127.0) as i8;
    }
    let sums = std::array::from_fn(|l| {
        q[4 * l..4 * l + 4]
            .iter()
            .map(|&v| i32::from(v))
            .sum::<i32>() as f32
    });
    (amax / 127.0, sums)
}

multiversion!(fn int_task<F: IntFormat>(
    rows: &[u8], row_bytes: usize, call: Call, acts: &QuantizedActs, task: Task, out: OutPtr
) = sweep);

/// Multiplies rows `task` of one part (`rows` holds exactly them) by every token.
pub(super) fn int_rows_task<F: IntFormat>(
    isa: super::Isa,
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    assert!(rows.len() == task.num_rows * row_bytes && acts.q.len() == call.n * 64 * acts.pairs);
    assert_eq!(
        acts.pairs,
        (call.cols / 32).div_ceil(2),
        "activations of another width"
    );
    if call.n > DECODE_TOKENS {
        super::quant_int_prefill::int_prefill_task::<F>(isa, rows, row_bytes, call, acts, task, out)
    } else {
        int_task::<F>(isa, rows, row_bytes, call, acts, task, out)
    }
}

/// Token tiles outermost (a tile's activations stay in L1 while the task's rows pass; the
/// rows, at most 64, stay in L2).
#[inline(always)]
unsafe fn sweep<S: Simd16, F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    // One accumulator per row and token: 32 vector registers with AVX-512, 16 with AVX2
    // (where one `S` takes two).
    let (max_r, max_t) = match (S::REGISTERS >= 32, call.n) {
        (true, 1) => (8, 1),
        (true, _) => (4, 3),
        (false, 1) => (4, 1),
        (false, _) => (1, 3),
    };
    let mut t = 0;
    while t < call.n {
        let tt = (call.n - t).min(max_t);
        let mut r = 0;
        while r < task.num_rows {
            let rr = group_size(task.num_rows - r, max_r);
            let tile = Tile {
                rows: rows.as_ptr().add(r * row_bytes),
                row_bytes,
                col: task.col + r,
            };
            macro_rules! go {
                ($R:literal) => {
                    match tt {
                        3 => tile_kernel::<S, F, $R, 3>(tile, call, acts, t, out),
                        2 => tile_kernel::<S, F, $R, 2>(tile, call, acts, t, out),
                        _ => tile_kernel::<S, F, $R, 1>(tile, call, acts, t, out),
                    }
                };
            }
            match rr {
                8 => go!(8),
                4 => go!(4),
                2 => go!(2),
                _ => go!(1),
            }
            r += rr;
        }
        t += tt;
    }
}

#[derive(Clone, Copy)]
struct Tile {
    rows: *const u8,
    row_bytes: usize,
    col: usize,
}

#[inline(always)]
unsafe fn tile_kernel<S: Simd16, F: IntFormat, const R: usize, const T: usize>(
    tile: Tile,
    call: Call,
    acts: &QuantizedActs,
    t: usize,
    out: OutPtr,
) {
    let mut acc = [[S::zero(); R]; T];
    let chunks = call.cols / 32;
    let tokens: [(*const i8, *const f32, *const f32); T] =
        std::array::from_fn(|j| acts.token(t + j));
    let tile_bytes = R * tile.row_bytes;
    let ahead_step = tile_bytes.div_ceil(chunks.div_ceil(2)).next_multiple_of(64);
    for p in 0..chunks / 2 {
        let ahead = tile.rows.wrapping_add(tile_bytes + p * ahead_step);
        let mut line = 0;
        while line < ahead_step {
            prefetch(ahead.wrapping_add(line));
            line += 64;
        }
        pair_step::<S, F, R, T>(tile, &tokens, p, true, &mut acc);
    }
    if chunks % 2 == 1 {
        pair_step::<S, F, R, T>(tile, &tokens, chunks / 2, false, &mut acc);
    }
    let mut lanes = [0.0f32; LANES];
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            a.store(lanes.as_mut_ptr());
            *out.0.add((t + j) * call.stride + tile.col + i) = reduce_lanes(&lanes);
        }
    }
}

/// Chunks `2 p` and (when `second`) `2 p + 1` of a row, ready for `dot_pair`, with their
/// lanes' scales and offsets; without a second chunk its lanes get zeros.
#[inline(always)]
pub(super) unsafe fn decode_pair<S: Simd16, F: IntFormat>(
    row: *const u8,
    p: usize,
    second: bool,
) -> (S::Pair, S, S) {
    let a = F::chunk_i8::<S>(row, 2 * p);
    let b = if second {
        F::chunk_i8::<S>(row, 2 * p + 1)
    } else {
        IntChunk {
            q: S::bytes_zero(),
            scale_lo: 0.0,
            scale_hi: 0.0,
            offset: 0.0,
        }
    };
    (
        S::pair(a.q, b.q),
        S::quads(a.scale_lo, a.scale_hi, b.scale_lo, b.scale_hi),
        S::quads(a.offset, a.offset, b.offset, b.offset),
    )
}

/// Chunks `2 p` and (when `second`) `2 p + 1` of the tile's rows into its accumulators.
#[inline(always)]
unsafe fn pair_step<S: Simd16, F: IntFormat, const R: usize, const T: usize>(
    tile: Tile,
    tokens: &[(*const i8, *const f32, *const f32); T],
    p: usize,
    second: bool,
    acc: &mut [[S; R]; T],
) {
    for i in 0..R {
        let (w, scale, offset) = decode_pair::<S, F>(tile.rows.add(i * tile.row_bytes), p, second);
        for (row, &token) in acc.iter_mut().zip(tokens) {
            row[i] = accumulate::<S, F>(row[i], w, scale, offset, token, p);
        }
    }
}

/// One output's chains after pair `p` of one token: the definition's step, shared by the
/// decode and the prefill tiles.
#[inline(always)]
pub(super) unsafe fn accumulate<S: Simd16, F: IntFormat>(
    acc: S,
    w: S::Pair,
    scale: S,
    offset: S,
    (xq, xd, xs): (*const i8, *const f32, *const f32),
    p: usize,
) -> S {
    let dx = S::load(xd.add(16 * p));
    let isum = S::dot_pair(w, xq.add(64 * p));
    let acc = S::fma(S::mul(scale, dx), isum, acc);
    if F::OFFSET {
        let xsum = S::load(xs.add(16 * p));
        S::fma(S::mul(offset, dx), xsum, acc)
    } else {
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_quantize_per_chunk_with_ties_to_even_and_nan_kept() {
        let mut x = vec![0.0f32; 96];
        // Chunk 0: amax 127 so values are themselves; 2.5 and -3.5 are ties.
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        x[3] = -127.0;
        // Chunk 1 all zero; chunk 2 holds a NaN.
        x[64] = 1.0;
        x[65] = f32::NAN;
        let acts = QuantizedActs::new(&x, 1, 96);
        assert_eq!(acts.pairs, 2);
        assert_eq!(&acts.q[..4], &[127, 2, -4, -127]);
        assert_eq!(acts.scales[0], 1.0);
        assert_eq!(acts.sums[0], (127 + 2 - 4 - 127) as f32);
        assert!(acts.q[32..64].iter().all(|&q| q == 0) && acts.scales[8] == 0.0);
        assert!(acts.scales[16].is_nan());
        // The padding chunk of the second pair is zero.
        assert!(acts.q[96..].iter().all(|&q| q == 0) && acts.scales[24] == 0.0);
    }

    #[test]
    fn quantized_values_stay_within_127() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 7919) % 1000) as f32 / 3.3 - 150.0)
            .collect();
        let acts = QuantizedActs::new(&x, 2, 32);
        assert!(acts.q.iter().all(|&q| (-127..=127).contains(&q)));
        assert!(acts.q.contains(&127) || acts.q.contains(&-127));
    }
}
