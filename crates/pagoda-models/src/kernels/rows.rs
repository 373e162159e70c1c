//! Row-wise steps of the forward pass (residual adds, norms, splitting the fused q/k/v rows,
//! rotary embedding) on the kernels' threads. On the calling thread alone they took about a
//! tenth of a two-thread prefill while the helpers waited, a share that grows with the
//! thread count. Each row is computed as on one thread, so no bit depends on the split.

use super::pool::{self, Chunks};

/// Rows per task: a 896-wide prefill row is 3.5 KiB, so a task moves tens of KiB, far more
/// than one loop's hand-off costs; decode's single row stays on the calling thread.
const ROWS_PER_TASK: usize = 16;

/// `f(t, row)` for each `width`-wide row `t` of `data`.
pub fn for_each_row(data: &mut [f32], width: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    assert!(
        width > 0 && data.len().is_multiple_of(width),
        "rows of {width}"
    );
    let tasks = Chunks::new(data, width * ROWS_PER_TASK);
    pool::for_each(tasks.count(), |i| {
        // SAFETY: task `i` alone takes chunk `i`.
        let rows = unsafe { tasks.get(i) };
        for (j, row) in rows.chunks_exact_mut(width).enumerate() {
            f(i * ROWS_PER_TASK + j, row);
        }
    });
}

/// `f(t, row, other_row)` for each `width`-wide row `t` of `data` and the same row of
/// `other`.
pub fn for_each_row_with(
    data: &mut [f32],
    other: &[f32],
    width: usize,
    f: impl Fn(usize, &mut [f32], &[f32]) + Sync,
) {
    assert_eq!(data.len(), other.len(), "rows of the same shape");
    for_each_row(data, width, |t, row| {
        f(t, row, &other[t * width..][..width])
    });
}

/// Each of the `rows` rows of `src` cut into consecutive pieces, one per part: piece `p` of
/// row `t` goes to row `t` of `parts[p]` (each part's rows as wide as its piece).
pub fn split_rows(src: &[f32], rows: usize, parts: &mut [&mut [f32]]) {
    if rows == 0 {
        assert!(
            src.is_empty() && parts.iter().all(|p| p.is_empty()),
            "no rows to split"
        );
        return;
    }
    let widths: Vec<usize> = parts.iter().map(|p| p.len() / rows).collect();
    let width: usize = widths.iter().sum();
    assert!(
        src.len() == rows * width && parts.iter().zip(&widths).all(|(p, w)| p.len() == rows * w),
        "parts cut from rows of {width}"
    );
    let mut offsets = Vec::with_capacity(widths.len());
    let mut at = 0;
    for w in &widths {
        offsets.push(at);
        at += w;
    }
    let outs: Vec<Chunks<'_, f32>> = parts
        .iter_mut()
        .zip(&widths)
        .map(|(p, &w)| Chunks::new(p, w * ROWS_PER_TASK))
        .collect();
    pool::for_each(rows.div_ceil(ROWS_PER_TASK), |i| {
        for ((out, &w), &offset) in outs.iter().zip(&widths).zip(&offsets) {
            // SAFETY: task `i` alone takes chunk `i` of each part.
            let out = unsafe { out.get(i) };
            for (j, row) in out.chunks_exact_mut(w).enumerate() {
                let t = i * ROWS_PER_TASK + j;
                row.copy_from_slice(&src[t * width + offset..][..w]);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_visited_once_with_its_index() {
        // 37 rows: two whole tasks and a short one.
        let (rows, width) = (37, 5);
        let mut data = vec![0.0f32; rows * width];
        let other: Vec<f32> = (0..rows * width).map(|i| i as f32).collect();
        for_each_row_with(&mut data, &other, width, |t, row, o| {
            for (v, x) in row.iter_mut().zip(o) {
                *v += x + (t * 1000) as f32;
            }
        });
        for (i, v) in data.iter().enumerate() {
            assert_eq!(*v, (i + (i / width) * 1000) as f32, "value {i}");
        }
    }

    #[test]
    fn split_rows_gives_each_part_its_columns() {
        let (rows, widths) = (35, [4, 2, 3]);
        let width: usize = widths.iter().sum();
        let src: Vec<f32> = (0..rows * width).map(|i| i as f32).collect();
        let (mut a, mut b, mut c) = (
            vec![f32::NAN; rows * 4],
            vec![f32::NAN; rows * 2],
            vec![f32::NAN; rows * 3],
        );
        split_rows(&src, rows, &mut [&mut a, &mut b, &mut c]);
        // An empty batch has nothing to split.
        split_rows(&[], 0, &mut [&mut [], &mut []]);
        for t in 0..rows {
            let row = &src[t * width..][..width];
            assert_eq!(&a[t * 4..][..4], &row[..4]);
            assert_eq!(&b[t * 2..][..2], &row[4..6]);
            assert_eq!(&c[t * 3..][..3], &row[6..]);
        }
    }
}
