//! `out[n, rows] = x[n, cols] · Wᵀ` over packed weights (`packed.rs`), on all cores.
//!
//! Work is split over panels of 16 weight rows, so each weight byte is read from memory once
//! per call (decode is bound by those bytes). A tile holds `P` panels x `T` tokens of
//! accumulators; each k step loads one vector per panel, broadcasts one activation per token
//! and issues `P * T` fused multiply-adds. The tile shapes only change how many outputs are
//! computed at once, never how one is summed, so a token's result is bitwise the same alone
//! or in any batch, and on every kernel path.

use super::isa::{isa, Isa};
use super::simd::{multiversion, Elem, Simd16, LANES};
use crate::matrix::MatrixData;
use crate::packed::{PackedMatrix, PANEL};

/// Batches up to this many tokens use the decode tiles (many panels, few tokens).
const DECODE_TOKENS: usize = 3;
/// Panels per parallel task in decode: 128 rows, enough tasks to balance a few dozen cores.
const DECODE_PANELS_PER_TASK: usize = 8;

/// Raw output pointer shared by tasks that write disjoint elements (matmul: ranges of output
/// columns; attention: (token, KV head group) rows).
#[derive(Clone, Copy)]
pub(super) struct OutPtr(pub(super) *mut f32);
// SAFETY: every user gives each task elements no other task writes.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// The shapes of one call, shared by its tasks.
#[derive(Clone, Copy)]
struct Geometry {
    rows: usize,
    cols: usize,
    n: usize,
}

pub fn matmul(w: &PackedMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    matmul_with(isa(), w, x, n, out);
}

/// `matmul` on a given kernel path (tests and benchmarks compare paths).
pub fn matmul_with(isa: Isa, w: &PackedMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    assert!(isa.is_supported(), "kernel path {isa} not supported here");
    assert_eq!(x.len(), n * w.cols, "matmul input shape");
    assert_eq!(out.len(), n * w.rows, "matmul output shape");
    let g = Geometry {
        rows: w.rows,
        cols: w.cols,
        n,
    };
    match &w.data {
        MatrixData::F32(v) => run(isa, v, g, x, out),
        MatrixData::F16(v) => run(isa, v, g, x, out),
        MatrixData::BF16(v) => run(isa, v, g, x, out),
    }
}

fn run<W: Elem>(isa: Isa, w: &[W], g: Geometry, x: &[f32], out: &mut [f32]) {
    let panels = g.rows.div_ceil(PANEL);
    debug_assert_eq!(w.len(), panels * PANEL * g.cols);
    let tasks = num_tasks(panels, g.n, isa, super::num_threads());
    let out = OutPtr(out.as_mut_ptr());
    let order = super::pool::far_apart(tasks, super::num_threads());
    super::pool::for_each(tasks, |i| {
        let task = order[i];
        // Near-equal ranges (they differ by one panel at most).
        let p0 = task * panels / tasks;
        let p1 = (task + 1) * panels / tasks;
        panels_task(isa, w, g, x, p0, p1, out);
    });
}

/// Decode: a multiple of the thread count, each task at most `DECODE_PANELS_PER_TASK`
/// panels, so no thread waits while another sweeps one more task (7 tasks on 2 threads
/// idled one for a seventh of each 896-row projection). Prefill: a task is one tile's
/// panels, swept over every token while they stay in cache.
fn num_tasks(panels: usize, n: usize, isa: Isa, threads: usize) -> usize {
    if n <= DECODE_TOKENS {
        let threads = threads.max(1);
        (threads * panels.div_ceil(threads * DECODE_PANELS_PER_TASK)).min(panels)
    } else {
        panels.div_ceil(gemm_panels(isa))
    }
}

fn gemm_panels(isa: Isa) -> usize {
    match isa.vector() {
        Isa::Avx512 => 2,
        _ => 1,
    }
}

multiversion!(fn panels_task<W: Elem>(
    w: &[W], g: Geometry, x: &[f32], p0: usize, p1: usize, out: OutPtr
) = sweep_panels);

/// Computes output columns of panels `p0..p1` for every token.
#[inline(always)]
unsafe fn sweep_panels<S: Simd16, W: Elem>(
    w: &[W],
    g: Geometry,
    x: &[f32],
    p0: usize,
    p1: usize,
    out: OutPtr,
) {
    // Tile shapes by register budget: 32 vector registers with AVX-512, 16 with AVX2 (where
    // one `S` takes two).
    let wide = S::REGISTERS >= 32;
    let (max_p, max_t) = match (g.n <= DECODE_TOKENS, wide) {
        (true, true) => (4, DECODE_TOKENS),
        (true, false) => (if g.n == 1 { 4 } else { 2 }, DECODE_TOKENS),
        (false, true) => (2, 12),
        (false, false) => (1, 6),
    };
    let mut p = p0;
    while p < p1 {
        let step = match (p1 - p).min(max_p) {
            4 => 4,
            2 | 3 => 2,
            _ => 1,
        };
        match step {
            4 => tiles_over_tokens::<S, W, 4>(w, g, x, p, out, max_t),
            2 => tiles_over_tokens::<S, W, 2>(w, g, x, p, out, max_t),
            _ => tiles_over_tokens::<S, W, 1>(w, g, x, p, out, max_t),
        }
        p += step;
    }
}

/// Panels `p..p + P` against all tokens, `max_t` tokens per tile.
#[inline(always)]
unsafe fn tiles_over_tokens<S: Simd16, W: Elem, const P: usize>(
    w: &[W],
    g: Geometry,
    x: &[f32],
    p: usize,
    out: OutPtr,
    max_t: usize,
) {
    let mut t = 0;
    while t < g.n {
        let tt = (g.n - t).min(max_t);
        macro_rules! go {
            ($T:literal) => {{
                debug_assert_eq!(tt, $T);
                tile::<S, W, P, $T>(w, g, x, p, t, out)
            }};
        }
        // Only the shapes `sweep_panels` chooses are written out, each a whole copy of the
        // tile: four panels come with decode's few tokens only, more than six tokens with
        // 32 registers only, and the `const` conditions keep the others from being compiled.
        if const { P < 4 && S::REGISTERS >= 32 } && tt > 6 {
            match tt {
                12 => go!(12),
                11 => go!(11),
                10 => go!(10),
                9 => go!(9),
                8 => go!(8),
                _ => go!(7),
            }
        } else if const { P < 4 } && tt > 3 {
            match tt {
                6 => go!(6),
                5 => go!(5),
                _ => go!(4),
            }
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

/// One tile: panels `p..p + P` x tokens `t..t + T`, every output summed over all of `k`.
#[inline(always)]
unsafe fn tile<S: Simd16, W: Elem, const P: usize, const T: usize>(
    w: &[W],
    g: Geometry,
    x: &[f32],
    p: usize,
    t: usize,
    out: OutPtr,
) {
    let panel_len = g.cols * PANEL;
    let wp = w.as_ptr().add(p * panel_len);
    let xp = x.as_ptr().add(t * g.cols);
    let mut acc = [[S::zero(); P]; T];
    // Plain loops, not closures: a closure is compiled without the path's target features.
    let mut wv = [S::zero(); P];
    for k in 0..g.cols {
        for (i, w) in wv.iter_mut().enumerate() {
            *w = W::load::<S>(wp.add(i * panel_len + k * PANEL));
        }
        for (j, row) in acc.iter_mut().enumerate() {
            let xv = S::splat(*xp.add(j * g.cols + k));
            for (a, wv) in row.iter_mut().zip(&wv) {
                *a = S::fma(*wv, xv, *a);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            let first_row = (p + i) * PANEL;
            let dst = out.0.add((t + j) * g.rows + first_row);
            let valid = g.rows - first_row;
            if valid >= LANES {
                a.store(dst);
            } else {
                // The padded last panel: only its real rows are outputs.
                let mut lanes = [0.0f32; LANES];
                a.store(lanes.as_mut_ptr());
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), dst, valid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{Matrix, WeightDtype};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2246822519) ^ seed) % 997) as f32 / 498.0 - 1.0)
            .collect()
    }

    /// The definition the kernels must meet exactly: per output, `fma` over k in order.
    fn reference(w: &Matrix, x: &[f32], n: usize) -> Vec<f32> {
        let mut row = vec![0.0; w.cols];
        let mut out = vec![0.0; n * w.rows];
        for r in 0..w.rows {
            w.row_to_f32(r, &mut row);
            for t in 0..n {
                let xs = &x[t * w.cols..(t + 1) * w.cols];
                out[t * w.rows + r] = row.iter().zip(xs).fold(0.0, |a, (w, x)| w.mul_add(*x, a));
            }
        }
        out
    }

    #[test]
    fn every_path_equals_the_in_order_fma_reference_bitwise() {
        for (rows, cols) in [(37, 45), (64, 16), (16, 1), (130, 33)] {
            let wv = values(rows * cols, 9);
            for n in [1, 2, 3, 4, 7, 8, 9, 17] {
                let x = values(n * cols, 10 + n as u32);
                for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::BF16] {
                    let m = Matrix::from_f32(rows, cols, wv.clone(), dtype);
                    let want = reference(&m, &x, n);
                    let packed = PackedMatrix::pack(&m);
                    for isa in Isa::supported() {
                        let mut out = vec![f32::NAN; n * rows];
                        matmul_with(isa, &packed, &x, n, &mut out);
                        let same = out
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{isa} {dtype} {rows}x{cols} n={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn decode_tasks_are_balanced_over_the_threads() {
        for (panels, threads) in [(56, 2), (72, 2), (9496, 2), (56, 16), (3, 8), (1, 1)] {
            let tasks = num_tasks(panels, 1, Isa::Scalar, threads);
            assert!(tasks <= panels && tasks >= 1);
            if panels >= threads {
                assert_eq!(tasks % threads, 0, "{panels} panels on {threads} threads");
            }
            let sizes: Vec<usize> = (0..tasks)
                .map(|t| (t + 1) * panels / tasks - t * panels / tasks)
                .collect();
            assert_eq!(sizes.iter().sum::<usize>(), panels);
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            assert!(*sizes.iter().max().unwrap() <= DECODE_PANELS_PER_TASK);
        }
    }

    #[test]
    fn matches_a_naive_product() {
        let (rows, cols, n) = (37, 45, 11);
        let wv = values(rows * cols, 9);
        let x = values(n * cols, 10);
        let m = Matrix::from_f32(rows, cols, wv.clone(), WeightDtype::F32);
        let mut out = vec![0.0; n * rows];
        matmul(&PackedMatrix::pack(&m), &x, n, &mut out);
        for r in 0..rows {
            for t in 0..n {
                let want: f64 = (0..cols)
                    .map(|k| wv[r * cols + k] as f64 * x[t * cols + k] as f64)
                    .sum();
                assert!(
                    (out[t * rows + r] as f64 - want).abs() < 1e-4,
                    "r={r} t={t}"
                );
            }
        }
    }

    #[test]
    fn a_token_gets_bitwise_the_same_result_in_any_batch() {
        let (rows, cols) = (70, 100);
        let m = Matrix::from_f32(rows, cols, values(rows * cols, 1), WeightDtype::BF16);
        let w = PackedMatrix::pack(&m);
        let x = values(19 * cols, 2);
        let mut batched = vec![0.0; 19 * rows];
        matmul(&w, &x, 19, &mut batched);
        for t in 0..19 {
            let mut alone = vec![0.0; rows];
            matmul(&w, &x[t * cols..(t + 1) * cols], 1, &mut alone);
            assert_eq!(alone, batched[t * rows..(t + 1) * rows]);
        }
    }
}
