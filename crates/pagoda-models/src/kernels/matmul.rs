//! `out[n, rows] = x[n, cols] · W[rows, cols]ᵀ` on all cores, reading 16-bit weights as they
//! are stored. Work is split over weight rows, so each weight byte is read from memory once
//! per call (decode is bound by those bytes); tokens are taken in blocks so a block of
//! activations stays in cache while the weight rows of a task are swept.

use rayon::prelude::*;

use super::dot::{tile, WeightElem};
use crate::matrix::{Matrix, MatrixData};

/// Weight rows per parallel task: enough tasks to balance two to a few dozen cores.
const ROWS_PER_TASK: usize = 32;
/// Tokens whose activations are swept together against one task's weight rows.
const TOKENS_PER_BLOCK: usize = 32;

/// Raw output pointer shared by tasks that write disjoint columns.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint elements (each owns a range of output columns).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

pub fn matmul(w: &Matrix, x: &[f32], n: usize, out: &mut [f32]) {
    assert_eq!(x.len(), n * w.cols, "matmul input shape");
    assert_eq!(out.len(), n * w.rows, "matmul output shape");
    match &w.data {
        MatrixData::F32(v) => matmul_typed(v, w.rows, w.cols, x, n, out),
        MatrixData::F16(v) => matmul_typed(v, w.rows, w.cols, x, n, out),
        MatrixData::BF16(v) => matmul_typed(v, w.rows, w.cols, x, n, out),
    }
}

fn matmul_typed<W: WeightElem>(
    w: &[W],
    rows: usize,
    cols: usize,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) {
    let out_ptr = OutPtr(out.as_mut_ptr());
    let tasks = rows.div_ceil(ROWS_PER_TASK);
    (0..tasks).into_par_iter().for_each(|task| {
        let r0 = task * ROWS_PER_TASK;
        let r1 = (r0 + ROWS_PER_TASK).min(rows);
        for t0 in (0..n).step_by(TOKENS_PER_BLOCK) {
            let t1 = (t0 + TOKENS_PER_BLOCK).min(n);
            let mut r = r0;
            while r < r1 {
                let rr = (r1 - r).min(4);
                let mut t = t0;
                while t < t1 {
                    let tt = (t1 - t).min(4);
                    // SAFETY: r + rr <= rows and t + tt <= n, so every row pointer has `cols`
                    // elements; this task alone writes columns r0..r1 of `out`.
                    unsafe { run_tile(w, cols, rows, x, r, rr, t, tt, out_ptr) };
                    t += tt;
                }
                r += rr;
            }
        }
    });
}

/// Dispatches one tile of `rr` weight rows by `tt` tokens to the monomorphised kernel.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn run_tile<W: WeightElem>(
    w: &[W],
    cols: usize,
    rows: usize,
    x: &[f32],
    r: usize,
    rr: usize,
    t: usize,
    tt: usize,
    out: OutPtr,
) {
    macro_rules! go {
        ($R:literal, $C:literal) => {{
            let wp: [*const W; $R] = std::array::from_fn(|i| w.as_ptr().add((r + i) * cols));
            let xp: [*const f32; $C] = std::array::from_fn(|j| x.as_ptr().add((t + j) * cols));
            let res = tile::<W, $R, $C>(wp, xp, cols);
            for i in 0..$R {
                for j in 0..$C {
                    *out.0.add((t + j) * rows + r + i) = res[i][j];
                }
            }
        }};
    }
    match (rr, tt) {
        (4, 4) => go!(4, 4),
        (4, 3) => go!(4, 3),
        (4, 2) => go!(4, 2),
        (4, 1) => go!(4, 1),
        (3, 4) => go!(3, 4),
        (3, 3) => go!(3, 3),
        (3, 2) => go!(3, 2),
        (3, 1) => go!(3, 1),
        (2, 4) => go!(2, 4),
        (2, 3) => go!(2, 3),
        (2, 2) => go!(2, 2),
        (2, 1) => go!(2, 1),
        (1, 4) => go!(1, 4),
        (1, 3) => go!(1, 3),
        (1, 2) => go!(1, 2),
        _ => go!(1, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::WeightDtype;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2246822519) ^ seed) % 997) as f32 / 498.0 - 1.0)
            .collect()
    }

    #[test]
    fn matmul_matches_naive_product() {
        let (rows, cols, n) = (37, 45, 11);
        let wv = values(rows * cols, 9);
        let x = values(n * cols, 10);
        for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::BF16] {
            let w = Matrix::from_f32(rows, cols, wv.clone(), dtype);
            let mut out = vec![0.0; n * rows];
            matmul(&w, &x, n, &mut out);
            let mut row = vec![0.0; cols];
            for r in 0..rows {
                w.row_to_f32(r, &mut row);
                for t in 0..n {
                    let want: f32 = row.iter().zip(&x[t * cols..]).map(|(a, b)| a * b).sum();
                    assert!(
                        (out[t * rows + r] - want).abs() < 1e-4,
                        "{dtype} r={r} t={t}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_token_gets_bitwise_the_same_result_in_any_batch() {
        let (rows, cols) = (70, 100);
        let w = Matrix::from_f32(rows, cols, values(rows * cols, 1), WeightDtype::BF16);
        let x = values(9 * cols, 2);
        let mut batched = vec![0.0; 9 * rows];
        matmul(&w, &x, 9, &mut batched);
        for t in 0..9 {
            let mut alone = vec![0.0; rows];
            matmul(&w, &x[t * cols..(t + 1) * cols], 1, &mut alone);
            assert_eq!(alone, batched[t * rows..(t + 1) * rows]);
        }
    }
}
