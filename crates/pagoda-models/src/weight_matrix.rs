//! A weight matrix as the model holds it: packed panels (safetensors, float GGUF tensors) or
//! GGUF blocks read in place (quantized tensors). Layers see one type either way.

use crate::kernels::{matmul_with, quant_matmul_with, Isa};
use crate::packed::PackedMatrix;
use crate::quant::{QuantMatrix, QuantPart};

#[derive(Debug, Clone)]
pub enum WeightMatrix {
    Packed(PackedMatrix),
    Quant(QuantMatrix),
}

impl WeightMatrix {
    pub fn rows(&self) -> usize {
        match self {
            WeightMatrix::Packed(m) => m.rows,
            WeightMatrix::Quant(m) => m.rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            WeightMatrix::Packed(m) => m.cols,
            WeightMatrix::Quant(m) => m.cols,
        }
    }

    pub fn size_in_bytes(&self) -> usize {
        match self {
            WeightMatrix::Packed(m) => m.size_in_bytes(),
            WeightMatrix::Quant(m) => m.size_in_bytes(),
        }
    }

    /// Row `row` as f32 (embedding lookups).
    pub fn row_to_f32(&self, row: usize, out: &mut [f32]) {
        match self {
            WeightMatrix::Packed(m) => m.row_to_f32(row, out),
            WeightMatrix::Quant(m) => m.row_to_f32(row, out),
        }
    }

    /// `out[n, rows] = x[n, cols] · Wᵀ` on kernel path `isa`.
    pub fn matmul(&self, isa: Isa, x: &[f32], n: usize, out: &mut [f32]) {
        match self {
            WeightMatrix::Packed(m) => matmul_with(isa, m, x, n, out),
            WeightMatrix::Quant(m) => quant_matmul_with(isa, m, x, n, out),
        }
    }

    /// Stacks matrices by rows (fused q/k/v, gate/up). Packed parts stack as packed; a stack
    /// holding any GGUF part is read in place, float parts included.
    pub fn concat_rows(parts: Vec<WeightMatrix>) -> WeightMatrix {
        if parts.iter().all(|p| matches!(p, WeightMatrix::Packed(_))) {
            let packed: Vec<PackedMatrix> = parts
                .into_iter()
                .map(|p| match p {
                    WeightMatrix::Packed(m) => m,
                    WeightMatrix::Quant(_) => unreachable!("checked above"),
                })
                .collect();
            return WeightMatrix::Packed(PackedMatrix::concat_rows(&packed));
        }
        let quant = parts.into_iter().map(|p| match p {
            WeightMatrix::Quant(m) => m,
            WeightMatrix::Packed(m) => QuantMatrix::new(QuantPart::from_packed(&m)),
        });
        WeightMatrix::Quant(QuantMatrix::concat_rows(quant.collect()))
    }

    /// What the weights are stored as, for reports (`float16`, `Q4_K+Q6_K`).
    pub fn type_name(&self) -> String {
        match self {
            WeightMatrix::Packed(m) => m.dtype().to_string(),
            WeightMatrix::Quant(m) => m.type_names(),
        }
    }
}
