//! Root-mean-square layer norm, computed in f32 as transformers does.

use crate::error::Result;
use crate::kernels::{for_each_row, for_each_row_with};
use crate::weights::WeightSource;

#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    pub fn load(src: &dyn WeightSource, name: &str, dim: usize, eps: f64) -> Result<Self> {
        Ok(RmsNorm {
            weight: src.vector(name, dim)?,
            eps: eps as f32,
        })
    }

    /// Normalises each `dim`-wide row of `x` in place.
    pub fn forward_inplace(&self, x: &mut [f32]) {
        for_each_row(x, self.weight.len(), |_, row| self.normalize_row(row));
    }

    /// Writes the normalised rows of `x` into `out`.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        for_each_row_with(out, x, self.weight.len(), |_, row, x| {
            row.copy_from_slice(x);
            self.normalize_row(row);
        });
    }

    fn normalize_row(&self, row: &mut [f32]) {
        let mean_square = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
        let scale = 1.0 / (mean_square + self.eps).sqrt();
        for (v, w) in row.iter_mut().zip(&self.weight) {
            *v = w * (*v * scale);
        }
    }
}
