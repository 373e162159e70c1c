//! `out[n, rows] = x[n, cols] · Wᵀ` over weights in GGUF block formats (`quant::formats`),
//! read row-major straight from the file's map and decoded in registers, 32 values at a time.
//!
//! Each output keeps 16 partial sums in one vector, sum `l` taking `k = l, l + 16, ...` in
//! order by fused multiply-adds; one fixed tree adds the 16 lanes (`reduce_lanes`). Decode
//! (up to `DECODE_TOKENS` tokens) runs tiles of `R` rows x `T` tokens that decode each chunk
//! in registers once for their `T` tokens; prefill (`quant_prefill.rs`) decodes blocks of
//! rows to f32 once for many tokens. Neither changes how an output is summed, so results are
//! bitwise the same alone or batched, and on every kernel path.

use super::isa::Isa;
use super::matmul::OutPtr;
use super::quant_int::{int_rows_task, QuantizedActs};
use super::quant_prefill::{group_size, prefill_task};
pub use super::simd::reduce_lanes;
use super::simd::{multiversion, prefetch, Simd16};
use crate::quant::formats::{
    Bf16Rows, F16Rows, F32Rows, Format, IQ4NL, IQ4XS, Q2K, Q3K, Q4K, Q4_0, Q4_1, Q5K, Q5_0, Q5_1,
    Q6K, Q8_0,
};
use crate::quant::lattice::{IQ1M, IQ1S, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS};
use crate::quant::{QuantMatrix, QuantPart};
use pagoda_gguf::TensorType;

/// Batches up to this many tokens use the decode tiles (more rows, fewer tokens).
pub(super) const DECODE_TOKENS: usize = 3;
/// Rows per parallel task, at most: enough tasks to balance a few dozen cores, and in
/// prefill a task's decoded rows and accumulators fit in L2 (`quant_prefill.rs`).
const ROWS_PER_TASK: usize = 64;

/// One task: `num_rows` rows of part `part` from `first_row`, written to output columns
/// from `col`.
#[derive(Clone, Copy)]
pub(super) struct Task {
    part: usize,
    first_row: usize,
    pub(super) num_rows: usize,
    pub(super) col: usize,
}

/// The shapes a task needs besides its rows.
#[derive(Clone, Copy)]
pub(super) struct Call {
    pub(super) cols: usize,
    pub(super) n: usize,
    /// Output row stride: all parts' rows.
    pub(super) stride: usize,
}

pub fn quant_matmul_with(isa: Isa, w: &QuantMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    assert!(isa.is_supported(), "kernel path {isa} not supported here");
    assert_eq!(x.len(), n * w.cols, "matmul input shape");
    assert_eq!(out.len(), n * w.rows, "matmul output shape");
    let call = Call {
        cols: w.cols,
        n,
        stride: w.rows,
    };
    let tasks = plan(w, super::num_threads());
    let acts = w.parts.iter().any(|p| p.int_dot).then(|| {
        let tiles = QuantizedActs::tiles_for(isa, n);
        // The vector prefill's layout of the activations, unless every part uses the tiles.
        let lines = w.parts.iter().any(|p| p.int_dot && !(tiles && on_tiles(p)));
        QuantizedActs::padded(isa, x, n, w.cols, tiles, lines)
    });
    let out = OutPtr(out.as_mut_ptr());
    super::pool::for_each(tasks.len(), |t| {
        let task = tasks[t];
        let part = &w.parts[task.part];
        match &acts {
            Some(acts) if part.int_dot => run_int_task(isa, part, call, acts, task, out),
            _ => run_task(isa, part, call, x, task, out),
        }
    });
}

/// Whether the AMX path takes this part's format (given tiles for the token count).
fn on_tiles(part: &QuantPart) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::quant_int_amx::takes_type(part.tensor_type);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = part;
        false
    }
}

/// Splits every part's rows into tasks: about a multiple of the thread count, each a
/// multiple of 4 rows and at most `ROWS_PER_TASK`.
fn plan(w: &QuantMatrix, threads: usize) -> Vec<Task> {
    let threads = threads.max(1);
    let tasks = threads * w.rows.div_ceil(threads * ROWS_PER_TASK);
    let per_task = w.rows.div_ceil(tasks).next_multiple_of(4);
    let mut tasks = Vec::new();
    let mut col = 0;
    for (index, part) in w.parts.iter().enumerate() {
        let mut first_row = 0;
        while first_row < part.rows {
            let num_rows = per_task.min(part.rows - first_row);
            tasks.push(Task {
                part: index,
                first_row,
                num_rows,
                col: col + first_row,
            });
            first_row += num_rows;
        }
        col += part.rows;
    }
    // Claimed together, tasks lie far apart in the columns (`pool::far_apart`).
    let order = super::pool::far_apart(tasks.len(), threads);
    order.into_iter().map(|i| tasks[i]).collect()
}

/// The bytes of a task's rows, and the bytes per row.
fn task_rows(part: &QuantPart, task: Task) -> (&[u8], usize) {
    let row_bytes = part.row_bytes();
    let start = task.first_row * row_bytes;
    (
        &part.bytes.as_slice()[start..start + task.num_rows * row_bytes],
        row_bytes,
    )
}

fn run_task(isa: Isa, part: &QuantPart, call: Call, x: &[f32], task: Task, out: OutPtr) {
    let (rows, row_bytes) = task_rows(part, task);
    macro_rules! run {
        ($F:ty) => {
            if call.n > DECODE_TOKENS {
                prefill_task::<$F>(isa, rows, row_bytes, call, x, task, out)
            } else {
                rows_task::<$F>(isa, rows, row_bytes, call, x, task, out)
            }
        };
    }
    match part.tensor_type {
        TensorType::F32 => run!(F32Rows),
        TensorType::F16 => run!(F16Rows),
        TensorType::BF16 => run!(Bf16Rows),
        TensorType::Q8_0 => run!(Q8_0),
        TensorType::Q4_0 => run!(Q4_0),
        TensorType::Q4_1 => run!(Q4_1),
        TensorType::Q5_0 => run!(Q5_0),
        TensorType::Q5_1 => run!(Q5_1),
        TensorType::Q2K => run!(Q2K),
        TensorType::Q3K => run!(Q3K),
        TensorType::Q4K => run!(Q4K),
        TensorType::Q5K => run!(Q5K),
        TensorType::Q6K => run!(Q6K),
        TensorType::IQ4NL => run!(IQ4NL),
        TensorType::IQ4XS => run!(IQ4XS),
        TensorType::IQ2XXS => run!(IQ2XXS),
        TensorType::IQ2XS => run!(IQ2XS),
        TensorType::IQ2S => run!(IQ2S),
        TensorType::IQ3XXS => run!(IQ3XXS),
        TensorType::IQ3S => run!(IQ3S),
        TensorType::IQ1S => run!(IQ1S),
        TensorType::IQ1M => run!(IQ1M),
        TensorType::Other(_) => unreachable!("QuantPart::new admits only supported types"),
    }
}

fn run_int_task(
    isa: Isa,
    part: &QuantPart,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    let (rows, row_bytes) = task_rows(part, task);
    macro_rules! run {
        ($F:ty) => {
            int_rows_task::<$F>(isa, rows, row_bytes, call, acts, task, out)
        };
    }
    match part.tensor_type {
        TensorType::Q8_0 => run!(Q8_0),
        TensorType::Q4_0 => run!(Q4_0),
        TensorType::Q4_1 => run!(Q4_1),
        TensorType::Q5_0 => run!(Q5_0),
        TensorType::Q5_1 => run!(Q5_1),
        TensorType::Q2K => run!(Q2K),
        TensorType::Q3K => run!(Q3K),
        TensorType::Q4K => run!(Q4K),
        TensorType::Q5K => run!(Q5K),
        TensorType::Q6K => run!(Q6K),
        TensorType::IQ4NL => run!(IQ4NL),
        TensorType::IQ4XS => run!(IQ4XS),
        TensorType::IQ2XXS => run!(IQ2XXS),
        TensorType::IQ2XS => run!(IQ2XS),
        TensorType::IQ2S => run!(IQ2S),
        TensorType::IQ3XXS => run!(IQ3XXS),
        TensorType::IQ3S => run!(IQ3S),
        TensorType::IQ1S => run!(IQ1S),
        TensorType::IQ1M => run!(IQ1M),
        other => unreachable!("QuantPart::with_int_dot admits no {other}"),
    }
}

multiversion!(fn rows_task<F: Format>(
    rows: &[u8], row_bytes: usize, call: Call, x: &[f32], task: Task, out: OutPtr
) = sweep_rows);

/// Decode: every row's chunks decoded in registers, once for the tile's tokens.
#[inline(always)]
unsafe fn sweep_rows<S: Simd16, F: Format>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    x: &[f32],
    task: Task,
    out: OutPtr,
) {
    // Tiles by register budget (one accumulator per row and token): 32 vector registers
    // with AVX-512, 16 with AVX2, where one `S` takes two. Several rows at once also keep
    // several streams of weights in flight.
    let max_r = match (S::REGISTERS >= 32, call.n) {
        (true, 1) => 8,
        (true, _) => 4,
        (false, 1) => 4,
        (false, _) => 2,
    };
    let tokens = 0..call.n;
    let mut r = 0;
    while r < task.num_rows {
        let step = group_size(task.num_rows - r, max_r);
        let tile = Tile {
            rows: rows.as_ptr().add(r * row_bytes),
            row_bytes,
            col: task.col + r,
        };
        match step {
            8 if const { S::REGISTERS >= 32 } => {
                over_tokens::<S, F, 8>(tile, call, x, out, tokens.clone())
            }
            4 => over_tokens::<S, F, 4>(tile, call, x, out, tokens.clone()),
            2 => over_tokens::<S, F, 2>(tile, call, x, out, tokens.clone()),
            _ => over_tokens::<S, F, 1>(tile, call, x, out, tokens.clone()),
        }
        r += step;
    }
}

/// The first row of a tile and where its outputs go.
#[derive(Clone, Copy)]
struct Tile {
    rows: *const u8,
    row_bytes: usize,
    col: usize,
}

#[inline(always)]
unsafe fn over_tokens<S: Simd16, F: Format, const R: usize>(
    tile: Tile,
    call: Call,
    x: &[f32],
    out: OutPtr,
    tokens: std::ops::Range<usize>,
) {
    let mut t = tokens.start;
    while t < tokens.end {
        let tt = (tokens.end - t).min(DECODE_TOKENS);
        macro_rules! go {
            ($T:literal) => {{
                debug_assert_eq!(tt, $T);
                tile_kernel::<S, F, R, $T>(tile, call, x, t, out)
            }};
        }
        // The most rows (`sweep_rows`) come with one token only; the `const` condition keeps
        // their other shapes, each a whole copy of the tile, from being compiled at all.
        if const { R == 8 || (R == 4 && S::REGISTERS < 32) } {
            go!(1)
        } else {
            match tt {
                3 => go!(3),
                2 => go!(2),
                _ => go!(1),
            }
        }
        t += tt;
    }
}

/// Rows `R` x tokens `T`: each chunk of each row decoded once for its `T` tokens; values
/// 0-15 and then 16-31 of each chunk go into the output's one accumulator.
#[inline(always)]
unsafe fn tile_kernel<S: Simd16, F: Format, const R: usize, const T: usize>(
    tile: Tile,
    call: Call,
    x: &[f32],
    t: usize,
    out: OutPtr,
) {
    let xp = x.as_ptr().add(t * call.cols);
    let mut acc = [[S::zero(); R]; T];
    // The next tile's rows are fetched while this one computes (its rows are short streams,
    // too short for the hardware prefetcher to get ahead of).
    let chunks = call.cols / 32;
    let tile_bytes = R * tile.row_bytes;
    let ahead_step = tile_bytes.div_ceil(chunks).next_multiple_of(64);
    // Plain loops, not closures: a closure is compiled without the path's target features.
    for c in 0..chunks {
        let ahead = tile.rows.wrapping_add(tile_bytes + c * ahead_step);
        let mut line = 0;
        while line < ahead_step {
            prefetch(ahead.wrapping_add(line));
            line += 64;
        }
        for i in 0..R {
            let (w0, w1) = F::decode32::<S>(tile.rows.add(i * tile.row_bytes), c);
            for (j, row) in acc.iter_mut().enumerate() {
                let xs = xp.add(j * call.cols + 32 * c);
                row[i] = S::fma(w0, S::load(xs), row[i]);
                row[i] = S::fma(w1, S::load(xs.add(16)), row[i]);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            *out.0.add((t + j) * call.stride + tile.col + i) = a.reduce();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::LANES;
    use crate::quant::{dequantize_row, QuantBytes};
    use std::sync::Arc;

    /// The definition the kernels meet: per output, 16 in-order chains, then the tree.
    fn reference(w: &QuantMatrix, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0.0; n * w.rows];
        let mut row = vec![0.0; w.cols];
        for r in 0..w.rows {
            w.row_to_f32(r, &mut row);
            for t in 0..n {
                let xs = &x[t * w.cols..(t + 1) * w.cols];
                let mut sums = [0.0f32; LANES];
                for (k, (wk, xk)) in row.iter().zip(xs).enumerate() {
                    sums[k % LANES] = wk.mul_add(*xk, sums[k % LANES]);
                }
                out[t * w.rows + r] = reduce_lanes(&sums);
            }
        }
        out
    }

    /// Random blocks with small finite f16 scales in every scale field.
    fn random_part(tensor_type: TensorType, rows: usize, cols: usize, seed: u64) -> QuantPart {
        let (values, block) = tensor_type.block().unwrap();
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let blocks = rows * cols / values;
        let mut bytes = Vec::with_capacity(blocks * block);
        for _ in 0..blocks {
            let start = bytes.len();
            bytes.extend((0..block).map(|_| next() as u8));
            let scale = |b: &mut Vec<u8>, at: usize, v: f32| {
                b[start + at..start + at + 2]
                    .copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
            };
            let small = |r: u32| (r % 2000) as f32 / 20000.0 - 0.05;
            match tensor_type {
                TensorType::Q8_0
                | TensorType::Q4_0
                | TensorType::Q5_0
                | TensorType::IQ4NL
                | TensorType::IQ4XS
                | TensorType::IQ2XXS
                | TensorType::IQ2XS
                | TensorType::IQ2S
                | TensorType::IQ3XXS
                | TensorType::IQ3S
                | TensorType::IQ1S => scale(&mut bytes, 0, small(next())),
                TensorType::IQ1M => {
                    // `d`'s f16 bits are the top nibbles of the four scale words.
                    let bits = half::f16::from_f32(small(next())).to_bits();
                    for i in 0..4 {
                        let at = start + 48 + 2 * i;
                        let word = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
                        let word = (word & 0x0FFF) | (((bits >> (4 * i)) & 15) << 12);
                        bytes[at..at + 2].copy_from_slice(&word.to_le_bytes());
                    }
                }
                TensorType::Q4_1 | TensorType::Q5_1 => {
                    scale(&mut bytes, 0, small(next()));
                    scale(&mut bytes, 2, small(next()));
                }
                TensorType::Q4K | TensorType::Q5K => {
                    scale(&mut bytes, 0, small(next()));
                    scale(&mut bytes, 2, small(next()));
                }
                TensorType::Q6K => scale(&mut bytes, 208, small(next())),
                TensorType::Q2K => {
                    scale(&mut bytes, 80, small(next()));
                    scale(&mut bytes, 82, small(next()));
                }
                TensorType::Q3K => scale(&mut bytes, 108, small(next())),
                TensorType::F16 | TensorType::BF16 | TensorType::F32 => {
                    // Whole values: replace the random bits (NaNs) with small numbers.
                    let size = block;
                    let v = small(next());
                    let b: Vec<u8> = match tensor_type {
                        TensorType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                        TensorType::BF16 => half::bf16::from_f32(v).to_le_bytes().to_vec(),
                        _ => v.to_le_bytes().to_vec(),
                    };
                    bytes[start..start + size].copy_from_slice(&b);
                }
                TensorType::Other(_) => unreachable!(),
            }
        }
        QuantPart::new(tensor_type, rows, cols, QuantBytes::Owned(Arc::new(bytes))).unwrap()
    }

    const TYPES: [TensorType; 22] = [
        TensorType::IQ2XXS,
        TensorType::IQ2XS,
        TensorType::IQ2S,
        TensorType::IQ3XXS,
        TensorType::IQ3S,
        TensorType::IQ1S,
        TensorType::IQ1M,
        TensorType::IQ4NL,
        TensorType::IQ4XS,
        TensorType::Q2K,
        TensorType::Q3K,
        TensorType::Q4_1,
        TensorType::Q5_0,
        TensorType::Q5_1,
        TensorType::F32,
        TensorType::F16,
        TensorType::BF16,
        TensorType::Q8_0,
        TensorType::Q4_0,
        TensorType::Q4K,
        TensorType::Q5K,
        TensorType::Q6K,
    ];

    fn activations(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2246822519) ^ seed) % 997) as f32 / 498.0 - 1.0)
            .collect()
    }

    #[test]
    fn every_path_equals_the_lane_chain_reference_bitwise() {
        // Widths of one and of three prefill k-blocks (the last one short), row counts off
        // the tiles' sizes, and token counts on both sides of a token block.
        let cases = [
            (512, [1, 5, 37].as_slice(), [1, 2, 3, 4, 9, 17].as_slice()),
            (1280, &[7, 66], &[1, 3, 7, 70]),
        ];
        for tensor_type in TYPES {
            for (cols, row_counts, token_counts) in cases {
                for &rows in row_counts {
                    let w = QuantMatrix::new(random_part(tensor_type, rows, cols, rows as u64));
                    for &n in token_counts {
                        let x = activations(n * cols, n as u32);
                        let want = reference(&w, &x, n);
                        for isa in Isa::supported() {
                            let mut got = vec![f32::NAN; n * rows];
                            quant_matmul_with(isa, &w, &x, n, &mut got);
                            let same = got
                                .iter()
                                .zip(&want)
                                .all(|(a, b)| a.to_bits() == b.to_bits());
                            assert!(same, "{isa} {tensor_type} {rows}x{cols} n={n}");
                        }
                    }
                }
            }
        }
    }

    /// The integer definition in f64: every chunk's dot product of the decoded weights with
    /// the activations' 8-bit values times their `dx`. The kernels differ from it only by the
    /// f32 rounding of scale products and of their 16 chains.
    fn int_reference(w: &QuantMatrix, x: &[f32], n: usize) -> Vec<f64> {
        let mut row = vec![0.0; w.cols];
        let mut out = vec![0.0; n * w.rows];
        for r in 0..w.rows {
            w.row_to_f32(r, &mut row);
            for t in 0..n {
                let xs = &x[t * w.cols..(t + 1) * w.cols];
                let mut sum = 0.0f64;
                for (wc, xc) in row.chunks(32).zip(xs.chunks(32)) {
                    let amax = xc.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                    let dx = amax / 127.0;
                    for (a, b) in wc.iter().zip(xc) {
                        let q = if amax == 0.0 {
                            0.0
                        } else {
                            (b * (127.0 / amax)).round_ties_even()
                        };
                        sum += *a as f64 * q as f64 * dx as f64;
                    }
                }
                out[t * w.rows + r] = sum;
            }
        }
        out
    }

    #[test]
    fn integer_products_are_the_same_bits_on_every_path_and_batch_and_near_their_definition() {
        // An odd chunk count (224 = 7 chunks) as well as even ones; with AMX, one and three
        // blocks of 16 tokens, the last one short, and chains of one to three chunks (40
        // chunks: chains 0-7 take three) on one to five row tiles (`quant_int_amx.rs`).
        let cases = [
            (224, [3, 9].as_slice(), [1, 2, 5, 16, 33].as_slice()),
            (512, &[1, 5, 37], &[1, 2, 3, 4, 9, 32]),
            (1280, &[7, 66], &[1, 3, 7, 17]),
        ];
        for tensor_type in TYPES {
            if !QuantPart::has_int_dot(tensor_type) {
                continue;
            }
            for (cols, row_counts, token_counts) in cases {
                if cols % tensor_type.block().unwrap().0 != 0 {
                    continue;
                }
                for &rows in row_counts {
                    let part = random_part(tensor_type, rows, cols, rows as u64).with_int_dot(true);
                    assert!(part.int_dot);
                    let w = QuantMatrix::new(part);
                    for &n in token_counts {
                        let x = activations(n * cols, n as u32);
                        let mut want = vec![f32::NAN; n * rows];
                        quant_matmul_with(Isa::Scalar, &w, &x, n, &mut want);
                        let exact = int_reference(&w, &x, n);
                        for (i, (g, e)) in want.iter().zip(&exact).enumerate() {
                            let scale: f64 = 1e-5 * (cols as f64).sqrt();
                            assert!(
                                (*g as f64 - e).abs() <= scale * (1.0 + e.abs()),
                                "{tensor_type} {rows}x{cols} n={n} output {i}: {g} vs {e}"
                            );
                        }
                        // Each token alone gives the bits it gets in the batch.
                        let (t, mut alone) = (n - 1, vec![f32::NAN; rows]);
                        quant_matmul_with(Isa::Scalar, &w, &x[t * cols..], 1, &mut alone);
                        assert!(
                            alone
                                .iter()
                                .zip(&want[t * rows..])
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{tensor_type} alone vs batched n={n}"
                        );
                        for isa in Isa::supported() {
                            let mut got = vec![f32::NAN; n * rows];
                            quant_matmul_with(isa, &w, &x, n, &mut got);
                            let same = got
                                .iter()
                                .zip(&want)
                                .all(|(a, b)| a.to_bits() == b.to_bits());
                            assert!(same, "{isa} {tensor_type} {rows}x{cols} n={n}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dot_product_tiles_give_the_bits_of_the_others_on_any_cpu() {
        // The `-vnni` paths' tiles (decode: 1 and 2 tokens; prefill: 19), run with the scalar
        // path's `wide_dot` and `quad_dots_vnni`, so that a CPU without VNNI checks them too.
        // Other tests running meanwhile may take them as well: they must give the same bits.
        use super::super::quant_int_prefill::SCALAR_DOT;
        use std::sync::atomic::Ordering;
        // 1312 values end in a quad of one chunk.
        for (tensor_type, cols) in TYPES.into_iter().flat_map(|t| [(t, 1280), (t, 1312)]) {
            let rows = 9;
            if !QuantPart::has_int_dot(tensor_type) || cols % tensor_type.block().unwrap().0 != 0 {
                continue;
            }
            for n in [1, 2, 19] {
                let w =
                    QuantMatrix::new(random_part(tensor_type, rows, cols, 3).with_int_dot(true));
                let x = activations(n * cols, 11);
                let mut want = vec![f32::NAN; n * rows];
                quant_matmul_with(Isa::Scalar, &w, &x, n, &mut want);
                SCALAR_DOT.store(true, Ordering::Relaxed);
                let mut got = vec![f32::NAN; n * rows];
                quant_matmul_with(Isa::Scalar, &w, &x, n, &mut got);
                SCALAR_DOT.store(false, Ordering::Relaxed);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{tensor_type}, {cols} values, {n} tokens");
            }
        }
    }

    #[test]
    fn integer_stacks_of_tile_and_vector_types_give_each_part_its_bits() {
        // A Q8_0 part (on the AMX tiles where the CPU has them) stacked with a Q4_K one (the
        // vector prefill, which reads the activations' second layout): 20 tokens, every path.
        let parts = vec![
            QuantMatrix::new(random_part(TensorType::Q8_0, 18, 256, 5).with_int_dot(true)),
            QuantMatrix::new(random_part(TensorType::Q4K, 11, 256, 6).with_int_dot(true)),
        ];
        let stacked = QuantMatrix::concat_rows(parts.clone());
        let n = 20;
        let x = activations(n * 256, 7);
        for isa in Isa::supported() {
            let mut got = vec![f32::NAN; n * stacked.rows];
            quant_matmul_with(isa, &stacked, &x, n, &mut got);
            let mut col = 0;
            for part in &parts {
                let mut alone = vec![f32::NAN; n * part.rows];
                quant_matmul_with(Isa::Scalar, part, &x, n, &mut alone);
                for t in 0..n {
                    let row = &got[t * stacked.rows + col..][..part.rows];
                    let same = row
                        .iter()
                        .zip(&alone[t * part.rows..])
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{isa} part at column {col}, token {t}");
                }
                col += part.rows;
            }
        }
    }

    #[test]
    fn stacked_parts_of_different_types_fill_their_own_columns() {
        let parts = vec![
            QuantMatrix::new(random_part(TensorType::Q4K, 20, 256, 1)),
            QuantMatrix::new(random_part(TensorType::Q6K, 7, 256, 2)),
            QuantMatrix::new(random_part(TensorType::F16, 9, 256, 3)),
        ];
        let stacked = QuantMatrix::concat_rows(parts.clone());
        let n = 5;
        let x = activations(n * 256, 4);
        let mut got = vec![0.0; n * stacked.rows];
        quant_matmul_with(Isa::Scalar, &stacked, &x, n, &mut got);
        let mut col = 0;
        for part in &parts {
            let mut alone = vec![0.0; n * part.rows];
            quant_matmul_with(Isa::Scalar, part, &x, n, &mut alone);
            for t in 0..n {
                assert_eq!(
                    &got[t * stacked.rows + col..t * stacked.rows + col + part.rows],
                    &alone[t * part.rows..(t + 1) * part.rows]
                );
            }
            col += part.rows;
        }
        assert_eq!(col, stacked.rows);
    }

    #[test]
    fn q4_0_and_q5_0_widened_to_q8_0_give_the_same_bits() {
        for tensor_type in [TensorType::Q4_0, TensorType::Q5_0] {
            let part = random_part(tensor_type, 13, 512, 5);
            let wide = part.widened_to_q8_0().unwrap();
            assert_eq!(wide.tensor_type, TensorType::Q8_0);
            let (narrow, wide) = (QuantMatrix::new(part), QuantMatrix::new(wide));
            for n in [1, 2, 9] {
                let x = activations(n * 512, 7);
                for isa in Isa::supported() {
                    let mut a = vec![f32::NAN; n * 13];
                    let mut b = vec![f32::NAN; n * 13];
                    quant_matmul_with(isa, &narrow, &x, n, &mut a);
                    quant_matmul_with(isa, &wide, &x, n, &mut b);
                    let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
                    assert!(same, "{isa} {tensor_type} n={n}");
                }
            }
        }
        assert!(random_part(TensorType::Q4K, 2, 256, 1)
            .widened_to_q8_0()
            .is_none());
    }

    #[test]
    fn decoded_weights_match_a_plain_product() {
        let w = QuantMatrix::new(random_part(TensorType::Q5K, 6, 256, 9));
        let x = activations(256, 1);
        let mut got = vec![0.0; 6];
        quant_matmul_with(Isa::Scalar, &w, &x, 1, &mut got);
        let mut row = vec![0.0; 256];
        for (r, g) in got.iter().enumerate() {
            dequantize_row(
                TensorType::Q5K,
                &w.parts[0].bytes.as_slice()[r * 176..(r + 1) * 176],
                &mut row,
            );
            let want: f64 = row.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert!(
                (*g as f64 - want).abs() < 1e-4 * (1.0 + want.abs()),
                "row {r}"
            );
        }
    }
}
