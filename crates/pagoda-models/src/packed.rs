//! Weights packed for the matmul kernel: panels of 16 output rows, each panel stored
//! k-major (`[panel][k][16]`), so one vector load takes 16 rows' values at one `k` and a panel
//! is one contiguous stream. Every output is then a single chain of fused multiply-adds over
//! `k` in order, whatever the vector width, tile or batch: batch invariant and the same on
//! every kernel path. Rows past the last multiple of 16 are zero padding.

use crate::kernels::Elem;
use crate::matrix::{Matrix, MatrixData, WeightDtype};

pub const PANEL: usize = 16;

#[derive(Debug, Clone)]
pub struct PackedMatrix {
    pub rows: usize,
    pub cols: usize,
    /// The values in panel order (the same dtypes as a row-major `Matrix`).
    pub data: MatrixData,
}

impl PackedMatrix {
    pub fn pack(m: &Matrix) -> PackedMatrix {
        let data = match &m.data {
            MatrixData::F32(v) => MatrixData::F32(pack_rows(v, m.rows, m.cols)),
            MatrixData::F16(v) => MatrixData::F16(pack_rows(v, m.rows, m.cols)),
            MatrixData::BF16(v) => MatrixData::BF16(pack_rows(v, m.rows, m.cols)),
        };
        PackedMatrix {
            rows: m.rows,
            cols: m.cols,
            data,
        }
    }

    pub fn num_panels(&self) -> usize {
        self.rows.div_ceil(PANEL)
    }

    pub fn dtype(&self) -> WeightDtype {
        self.data.dtype()
    }

    /// Bytes held, padding included.
    pub fn size_in_bytes(&self) -> usize {
        self.num_panels() * PANEL * self.cols * self.dtype().size_in_bytes()
    }

    /// Writes row `row` as f32 into `out` (embedding lookups read the packed head directly).
    pub fn row_to_f32(&self, row: usize, out: &mut [f32]) {
        assert!(
            row < self.rows && out.len() == self.cols,
            "packed row lookup"
        );
        match &self.data {
            MatrixData::F32(v) => gather_row(v, self.cols, row, out),
            MatrixData::F16(v) => gather_row(v, self.cols, row, out),
            MatrixData::BF16(v) => gather_row(v, self.cols, row, out),
        }
    }

    fn to_f32(&self) -> PackedMatrix {
        let mut values = vec![0.0; self.rows * self.cols];
        for (row, out) in values.chunks_exact_mut(self.cols).enumerate() {
            self.row_to_f32(row, out);
        }
        PackedMatrix::pack(&Matrix::from_f32(
            self.rows,
            self.cols,
            values,
            WeightDtype::F32,
        ))
    }

    /// Back to row-major (only for stacking matrices whose rows are not panel-aligned).
    pub fn unpack(&self) -> Matrix {
        let data = match &self.data {
            MatrixData::F32(v) => MatrixData::F32(unpack_rows(v, self.rows, self.cols)),
            MatrixData::F16(v) => MatrixData::F16(unpack_rows(v, self.rows, self.cols)),
            MatrixData::BF16(v) => MatrixData::BF16(unpack_rows(v, self.rows, self.cols)),
        };
        Matrix {
            rows: self.rows,
            cols: self.cols,
            data,
        }
    }

    /// Stacks matrices of one width (q/k/v, gate/up). Panel-aligned parts are concatenated
    /// as they are; otherwise the rows are unpacked, stacked and packed again.
    pub fn concat_rows(parts: &[PackedMatrix]) -> PackedMatrix {
        if parts.len() == 1 {
            return parts[0].clone();
        }
        if parts.iter().any(|p| p.dtype() != parts[0].dtype()) {
            // A GGUF file may store q in F32 and k in F16: f32 holds every f16 and bf16
            // value exactly, so the products are the same.
            let widened: Vec<PackedMatrix> = parts.iter().map(PackedMatrix::to_f32).collect();
            return PackedMatrix::concat_rows(&widened);
        }
        if parts[..parts.len() - 1].iter().any(|p| p.rows % PANEL != 0) {
            let rows: Vec<Matrix> = parts.iter().map(PackedMatrix::unpack).collect();
            return PackedMatrix::pack(&Matrix::concat_rows(&rows));
        }
        let cols = parts[0].cols;
        assert!(parts
            .iter()
            .all(|p| p.cols == cols && p.dtype() == parts[0].dtype()));
        let rows = parts.iter().map(|p| p.rows).sum();
        macro_rules! stack {
            ($variant:ident) => {
                MatrixData::$variant(
                    parts
                        .iter()
                        .flat_map(|p| match &p.data {
                            MatrixData::$variant(v) => v.iter().copied(),
                            _ => unreachable!("dtypes checked above"),
                        })
                        .collect(),
                )
            };
        }
        let data = match parts[0].data {
            MatrixData::F32(_) => stack!(F32),
            MatrixData::F16(_) => stack!(F16),
            MatrixData::BF16(_) => stack!(BF16),
        };
        PackedMatrix { rows, cols, data }
    }
}

/// A vector of `len` copies of `value` whose memory the kernel is asked to back with 2 MiB
/// pages before it is first touched. Decode streams every weight once per token; with 4 KiB
/// pages that is a TLB miss and a page walk every 4 KiB of the stream.
pub(crate) fn huge_page_vec<T: Copy>(len: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + len * std::mem::size_of::<T>();
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if last > first {
            // SAFETY: advice on whole pages inside this vector's own allocation; it changes
            // how they are backed, never their contents. A refusal (no THP) is harmless.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    v.resize(len, value);
    v
}

/// Whether the kernel backs memory with 2 MiB pages when `huge_page_vec` asks (transparent
/// huge pages `always` or `madvise`).
pub(crate) fn huge_pages_offered() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|mode| mode.contains("[always]") || mode.contains("[madvise]"))
}

fn pack_rows<T: Elem>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    let panels = rows.div_ceil(PANEL);
    let mut out = huge_page_vec(panels * PANEL * cols, T::from_f32(0.0));
    for (r, row) in v.chunks_exact(cols).enumerate().take(rows) {
        let base = (r / PANEL) * PANEL * cols + r % PANEL;
        for (k, &value) in row.iter().enumerate() {
            out[base + k * PANEL] = value;
        }
    }
    out
}

fn unpack_rows<T: Elem>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let base = (r / PANEL) * PANEL * cols + r % PANEL;
        out.extend((0..cols).map(|k| v[base + k * PANEL]));
    }
    out
}

fn gather_row<T: Elem>(v: &[T], cols: usize, row: usize, out: &mut [f32]) {
    let base = (row / PANEL) * PANEL * cols + row % PANEL;
    for (k, o) in out.iter_mut().enumerate() {
        *o = v[base + k * PANEL].to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: usize, cols: usize, dtype: WeightDtype) -> Matrix {
        let values = (0..rows * cols).map(|i| i as f32 * 0.25 - 3.0).collect();
        Matrix::from_f32(rows, cols, values, dtype)
    }

    #[test]
    fn rows_survive_packing_with_padding() {
        for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::BF16] {
            let m = matrix(37, 5, dtype);
            let p = PackedMatrix::pack(&m);
            assert_eq!(p.num_panels(), 3);
            let (mut a, mut b) = (vec![0.0; 5], vec![0.0; 5]);
            for r in 0..37 {
                m.row_to_f32(r, &mut a);
                p.row_to_f32(r, &mut b);
                assert_eq!(a, b, "{dtype} row {r}");
            }
            let back = p.unpack();
            for r in 0..37 {
                back.row_to_f32(r, &mut b);
                m.row_to_f32(r, &mut a);
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn stacking_packed_equals_packing_stacked() {
        for rows in [[32, 16, 16], [20, 7, 7]] {
            let parts: Vec<Matrix> = rows
                .iter()
                .map(|&r| matrix(r, 6, WeightDtype::F16))
                .collect();
            let want = PackedMatrix::pack(&Matrix::concat_rows(&parts));
            let packed: Vec<PackedMatrix> = parts.iter().map(PackedMatrix::pack).collect();
            let got = PackedMatrix::concat_rows(&packed);
            assert_eq!(got.rows, want.rows);
            let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
            for r in 0..got.rows {
                got.row_to_f32(r, &mut a);
                want.row_to_f32(r, &mut b);
                assert_eq!(a, b, "{rows:?} row {r}");
            }
        }
    }

    #[test]
    fn parts_of_mixed_dtypes_stack_as_f32_with_their_values() {
        for rows in [[32, 16, 16], [20, 7, 7]] {
            let dtypes = [WeightDtype::F16, WeightDtype::F32, WeightDtype::BF16];
            let parts: Vec<Matrix> = rows
                .iter()
                .zip(dtypes)
                .map(|(&r, dtype)| matrix(r, 6, dtype))
                .collect();
            let packed: Vec<PackedMatrix> = parts.iter().map(PackedMatrix::pack).collect();
            let got = PackedMatrix::concat_rows(&packed);
            assert_eq!(
                (got.rows, got.dtype()),
                (rows.iter().sum(), WeightDtype::F32)
            );
            let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
            let part_rows = parts.iter().flat_map(|m| (0..m.rows).map(move |r| (m, r)));
            for (r, (part, part_row)) in part_rows.enumerate() {
                got.row_to_f32(r, &mut a);
                part.row_to_f32(part_row, &mut b);
                assert_eq!(a, b, "{rows:?} row {r}");
            }
        }
    }
}
