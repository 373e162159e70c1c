//! `out[n, rows] = x[n, cols] · Wᵀ` over weights in GGUF block formats (`quant::formats`),
//! read row-major straight from the file's map and decoded in registers, 32 values at a time.
//!
//! Each output keeps 32 partial sums, sum `l` taking `k = l, l + 32, ...` in order by fused
//! multiply-adds; sums `l` and `l + 16` are added, then one fixed tree adds the 16 lanes
//! (`reduce_lanes`). A tile of `R` rows x `T` tokens decodes each chunk once for its `T`
//! tokens; the tile shape never changes how an output is summed, so results are bitwise the
//! same alone or batched, and on every kernel path.

use rayon::prelude::*;

use super::isa::Isa;
use super::matmul::OutPtr;
use super::simd::{multiversion, prefetch, Simd16, LANES};
use crate::quant::formats::{
    Bf16Rows, F16Rows, F32Rows, Format, Q4K, Q4_0, Q4_1, Q5K, Q5_0, Q5_1, Q6K, Q8_0,
};
use crate::quant::{QuantMatrix, QuantPart};
use pagoda_gguf::TensorType;

/// Batches up to this many tokens use the decode tiles (more rows, fewer tokens).
const DECODE_TOKENS: usize = 3;
/// Rows per parallel task, at most: enough tasks to balance a few dozen cores, and in
/// prefill few enough tasks that the activations are not streamed again for each.
const ROWS_PER_TASK: usize = 128;
/// Tokens whose activations a task keeps in cache while its rows pass (64 x 896 f32 is
/// 224 KiB; a 128-row task's Q8_0 weights another 119 KiB).
const TOKEN_BLOCK: usize = 64;

/// One task: `num_rows` rows of part `part` from `first_row`, written to output columns
/// from `col`.
#[derive(Clone, Copy)]
struct Task {
    part: usize,
    first_row: usize,
    num_rows: usize,
    col: usize,
}

/// The shapes a task needs besides its rows.
#[derive(Clone, Copy)]
struct Call {
    cols: usize,
    n: usize,
    /// Output row stride: all parts' rows.
    stride: usize,
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
    let tasks = plan(w, rayon::current_num_threads());
    let out = OutPtr(out.as_mut_ptr());
    tasks.into_par_iter().for_each(|task| {
        let part = &w.parts[task.part];
        run_task(isa, part, call, x, task, out);
    });
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
    tasks
}

fn run_task(isa: Isa, part: &QuantPart, call: Call, x: &[f32], task: Task, out: OutPtr) {
    let bytes = part.bytes.as_slice();
    let row_bytes = part.row_bytes();
    let rows = &bytes[task.first_row * row_bytes..(task.first_row + task.num_rows) * row_bytes];
    match part.tensor_type {
        TensorType::F32 => rows_task::<F32Rows>(isa, rows, row_bytes, call, x, task, out),
        TensorType::F16 => rows_task::<F16Rows>(isa, rows, row_bytes, call, x, task, out),
        TensorType::BF16 => rows_task::<Bf16Rows>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q8_0 => rows_task::<Q8_0>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q4_0 => rows_task::<Q4_0>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q4_1 => rows_task::<Q4_1>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q5_0 => rows_task::<Q5_0>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q5_1 => rows_task::<Q5_1>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q4K => rows_task::<Q4K>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q5K => rows_task::<Q5K>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Q6K => rows_task::<Q6K>(isa, rows, row_bytes, call, x, task, out),
        TensorType::Other(_) => unreachable!("QuantPart::new admits only supported types"),
    }
}

multiversion!(fn rows_task<F: Format>(
    rows: &[u8], row_bytes: usize, call: Call, x: &[f32], task: Task, out: OutPtr
) = sweep_rows);

#[inline(always)]
unsafe fn sweep_rows<S: Simd16, F: Format>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    x: &[f32],
    task: Task,
    out: OutPtr,
) {
    // Tiles by register budget (two accumulators per row and token): 32 vector registers
    // with AVX-512, 16 with AVX2, where one `S` takes two. Several rows at once also keep
    // several streams of weights in flight. Prefill tiles measured (Q8_0, 0.5B shape, 1
    // thread): 2 x 6 at 63 tok/s, 4 x 3 at 54, 1 x 12 at 40.
    let wide = S::REGISTERS >= 32;
    let (max_r, max_t) = match (call.n <= DECODE_TOKENS, wide) {
        (true, true) => (4, DECODE_TOKENS),
        (true, false) => (if call.n == 1 { 2 } else { 1 }, DECODE_TOKENS),
        (false, true) => (2, 6),
        (false, false) => (1, 3),
    };
    if call.n > DECODE_TOKENS && !F::IS_F32 {
        return sweep_rows_decoded::<S, F>(rows, row_bytes, call, x, task, out, max_r, max_t);
    }
    // Token blocks outermost: a block's activations stay in cache while every row passes,
    // and the task's rows stay in cache from block to block.
    let mut t0 = 0;
    while t0 < call.n {
        let tokens = t0..(t0 + TOKEN_BLOCK).min(call.n);
        let mut r = 0;
        while r < task.num_rows {
            let step = match (task.num_rows - r).min(max_r) {
                4 => 4,
                2 | 3 => 2,
                _ => 1,
            };
            let tile = Tile {
                rows: rows.as_ptr().add(r * row_bytes),
                row_bytes,
                col: task.col + r,
            };
            match step {
                4 => over_tokens::<S, F, 4>(tile, call, x, out, tokens.clone(), max_t),
                2 => over_tokens::<S, F, 2>(tile, call, x, out, tokens.clone(), max_t),
                _ => over_tokens::<S, F, 1>(tile, call, x, out, tokens.clone(), max_t),
            }
            r += step;
        }
        t0 = tokens.end;
    }
}

/// Rows decoded to f32 at once for prefill (8 rows of a 4864-wide matrix: 152 KiB).
const DECODED_ROWS: usize = 8;

/// Prefill: each group of rows is decoded once per token block into f32 rows, which the
/// f32 tiles then multiply, so the decoding is shared by a block's 64 tokens rather than a
/// tile's 6. The f32 values are the decoded weights bit for bit, summed in the same order:
/// results are the decode path's exactly.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn sweep_rows_decoded<S: Simd16, F: Format>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    x: &[f32],
    task: Task,
    out: OutPtr,
    max_r: usize,
    max_t: usize,
) {
    let chunks = call.cols / 32;
    let mut decoded = vec![0.0f32; DECODED_ROWS * call.cols];
    let decoded_row_bytes = call.cols * 4;
    let mut t0 = 0;
    while t0 < call.n {
        let tokens = t0..(t0 + TOKEN_BLOCK).min(call.n);
        let mut g = 0;
        while g < task.num_rows {
            let group = DECODED_ROWS.min(task.num_rows - g);
            for i in 0..group {
                let row = rows.as_ptr().add((g + i) * row_bytes);
                let dst = decoded.as_mut_ptr().add(i * call.cols);
                for c in 0..chunks {
                    let (a, b) = F::decode32::<S>(row, c);
                    a.store(dst.add(32 * c));
                    b.store(dst.add(32 * c + 16));
                }
            }
            let mut r = 0;
            while r < group {
                let step = if group - r >= 2 && max_r >= 2 { 2 } else { 1 };
                let tile = Tile {
                    rows: (decoded.as_ptr() as *const u8).add(r * decoded_row_bytes),
                    row_bytes: decoded_row_bytes,
                    col: task.col + g + r,
                };
                match step {
                    2 => over_tokens::<S, F32Rows, 2>(tile, call, x, out, tokens.clone(), max_t),
                    _ => over_tokens::<S, F32Rows, 1>(tile, call, x, out, tokens.clone(), max_t),
                }
                r += step;
            }
            g += group;
        }
        t0 = tokens.end;
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
    max_t: usize,
) {
    let mut t = tokens.start;
    while t < tokens.end {
        let tt = (tokens.end - t).min(max_t);
        macro_rules! go {
            ($T:literal) => {
                tile_kernel::<S, F, R, $T>(tile, call, x, t, out)
            };
        }
        match tt {
            6 => go!(6),
            5 => go!(5),
            4 => go!(4),
            3 => go!(3),
            2 => go!(2),
            _ => go!(1),
        }
        t += tt;
    }
}

/// Rows `R` x tokens `T`: each chunk of each row decoded once for its `T` tokens; two
/// accumulators per output (values 0-15 and 16-31 of each chunk).
#[inline(always)]
unsafe fn tile_kernel<S: Simd16, F: Format, const R: usize, const T: usize>(
    tile: Tile,
    call: Call,
    x: &[f32],
    t: usize,
    out: OutPtr,
) {
    let xp = x.as_ptr().add(t * call.cols);
    let mut acc = [[[S::zero(); 2]; R]; T];
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
                row[i][0] = S::fma(w0, S::load(xs), row[i][0]);
                row[i][1] = S::fma(w1, S::load(xs.add(16)), row[i][1]);
            }
        }
    }
    let mut lanes = [0.0f32; LANES];
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            S::add(a[0], a[1]).store(lanes.as_mut_ptr());
            *out.0.add((t + j) * call.stride + tile.col + i) = reduce_lanes(&lanes);
        }
    }
}

/// The fixed sum of 16 partial sums: halves added pairwise, four times.
#[inline(always)]
pub fn reduce_lanes(lanes: &[f32; LANES]) -> f32 {
    let mut v = *lanes;
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            v[l] += v[l + width];
        }
        width /= 2;
    }
    v[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, QuantBytes};
    use std::sync::Arc;

    /// The definition the kernels meet: per output, 32 in-order chains, halves added, the tree.
    fn reference(w: &QuantMatrix, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0.0; n * w.rows];
        let mut row = vec![0.0; w.cols];
        for r in 0..w.rows {
            w.row_to_f32(r, &mut row);
            for t in 0..n {
                let xs = &x[t * w.cols..(t + 1) * w.cols];
                let mut sums = [0.0f32; 2 * LANES];
                for (k, (wk, xk)) in row.iter().zip(xs).enumerate() {
                    sums[k % 32] = wk.mul_add(*xk, sums[k % 32]);
                }
                let lanes: [f32; LANES] = std::array::from_fn(|l| sums[l] + sums[l + LANES]);
                out[t * w.rows + r] = reduce_lanes(&lanes);
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
                TensorType::Q8_0 | TensorType::Q4_0 | TensorType::Q5_0 => {
                    scale(&mut bytes, 0, small(next()))
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

    const TYPES: [TensorType; 11] = [
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
        for tensor_type in TYPES {
            for rows in [1, 5, 37] {
                let w = QuantMatrix::new(random_part(tensor_type, rows, 512, rows as u64));
                for n in [1, 2, 3, 4, 9, 17] {
                    let x = activations(n * 512, n as u32);
                    let want = reference(&w, &x, n);
                    for isa in Isa::supported() {
                        let mut got = vec![f32::NAN; n * rows];
                        quant_matmul_with(isa, &w, &x, n, &mut got);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{isa} {tensor_type} rows={rows} n={n}");
                    }
                }
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
