//! A 2-D weight kept in its storage dtype. Activations are always f32; weights stay 16-bit
//! in memory when the checkpoint is 16-bit, because decode speed is set by weight bytes.

use half::{bf16, f16};

/// The dtype weights are held in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightDtype {
    F32,
    F16,
    BF16,
}

impl WeightDtype {
    /// Parses the names used by `torch_dtype` and by vLLM's `--dtype`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "float32" | "f32" | "fp32" | "float" => Some(WeightDtype::F32),
            "float16" | "f16" | "fp16" | "half" => Some(WeightDtype::F16),
            "bfloat16" | "bf16" => Some(WeightDtype::BF16),
            _ => None,
        }
    }

    pub fn size_in_bytes(self) -> usize {
        match self {
            WeightDtype::F32 => 4,
            WeightDtype::F16 | WeightDtype::BF16 => 2,
        }
    }
}

impl std::fmt::Display for WeightDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightDtype::F32 => "float32",
            WeightDtype::F16 => "float16",
            WeightDtype::BF16 => "bfloat16",
        })
    }
}

#[derive(Debug, Clone)]
pub enum MatrixData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

/// Row-major `[rows, cols]`; for a linear layer, rows are output features.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: MatrixData,
}

impl MatrixData {
    pub fn dtype(&self) -> WeightDtype {
        match self {
            MatrixData::F32(_) => WeightDtype::F32,
            MatrixData::F16(_) => WeightDtype::F16,
            MatrixData::BF16(_) => WeightDtype::BF16,
        }
    }
}

impl Matrix {
    pub fn dtype(&self) -> WeightDtype {
        self.data.dtype()
    }

    pub fn size_in_bytes(&self) -> usize {
        self.rows * self.cols * self.dtype().size_in_bytes()
    }

    /// Writes row `row` as f32 into `out` (used for embedding lookups).
    pub fn row_to_f32(&self, row: usize, out: &mut [f32]) {
        let range = row * self.cols..(row + 1) * self.cols;
        match &self.data {
            MatrixData::F32(v) => out.copy_from_slice(&v[range]),
            MatrixData::F16(v) => {
                for (o, w) in out.iter_mut().zip(&v[range]) {
                    *o = w.to_f32();
                }
            }
            MatrixData::BF16(v) => {
                for (o, w) in out.iter_mut().zip(&v[range]) {
                    *o = w.to_f32();
                }
            }
        }
    }

    /// Stacks matrices of one dtype and width (fuses q/k/v or gate/up into one matmul).
    pub fn concat_rows(parts: &[Matrix]) -> Matrix {
        let cols = parts[0].cols;
        assert!(parts
            .iter()
            .all(|p| p.cols == cols && p.dtype() == parts[0].dtype()));
        let rows = parts.iter().map(|p| p.rows).sum();
        let data = match &parts[0].data {
            MatrixData::F32(_) => MatrixData::F32(concat(parts, |d| match d {
                MatrixData::F32(v) => v,
                _ => unreachable!(),
            })),
            MatrixData::F16(_) => MatrixData::F16(concat(parts, |d| match d {
                MatrixData::F16(v) => v,
                _ => unreachable!(),
            })),
            MatrixData::BF16(_) => MatrixData::BF16(concat(parts, |d| match d {
                MatrixData::BF16(v) => v,
                _ => unreachable!(),
            })),
        };
        Matrix { rows, cols, data }
    }

    /// Builds a matrix in `dtype` from f32 values (used by loaders and tests).
    pub fn from_f32(rows: usize, cols: usize, values: Vec<f32>, dtype: WeightDtype) -> Matrix {
        debug_assert_eq!(values.len(), rows * cols);
        let data = match dtype {
            WeightDtype::F32 => MatrixData::F32(values),
            WeightDtype::F16 => MatrixData::F16(values.into_iter().map(f16::from_f32).collect()),
            WeightDtype::BF16 => MatrixData::BF16(values.into_iter().map(bf16::from_f32).collect()),
        };
        Matrix { rows, cols, data }
    }
}

fn concat<T: Copy>(parts: &[Matrix], get: impl Fn(&MatrixData) -> &Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.rows * p.cols).sum());
    for part in parts {
        out.extend_from_slice(get(&part.data));
    }
    out
}
