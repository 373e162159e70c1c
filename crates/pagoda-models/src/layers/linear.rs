//! A linear layer `y = x Wᵀ + b` over the shared matmul kernel.

use crate::error::Result;
use crate::kernels::Isa;
use crate::weight_matrix::WeightMatrix;
use crate::weights::WeightSource;

#[derive(Debug, Clone)]
pub struct Linear {
    pub weight: WeightMatrix,
    pub bias: Option<Vec<f32>>,
}

impl Linear {
    /// Loads `{prefix}.weight` (and `{prefix}.bias` when `bias`) of shape `[out_dim, in_dim]`.
    pub fn load(
        src: &dyn WeightSource,
        prefix: &str,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
    ) -> Result<Self> {
        Ok(Linear {
            weight: src.weight(&format!("{prefix}.weight"), out_dim, in_dim)?,
            bias: if bias {
                Some(src.vector(&format!("{prefix}.bias"), out_dim)?)
            } else {
                None
            },
        })
    }

    /// Stacks several layers' outputs into one (q/k/v, gate/up), so one pass over the
    /// activations feeds them all.
    pub fn fuse(parts: Vec<Linear>) -> Linear {
        let bias = if parts.iter().all(|p| p.bias.is_some()) {
            Some(
                parts
                    .iter()
                    .flat_map(|p| p.bias.clone().unwrap_or_default())
                    .collect(),
            )
        } else {
            assert!(
                parts.iter().all(|p| p.bias.is_none()),
                "fused layers disagree on bias"
            );
            None
        };
        let weights: Vec<WeightMatrix> = parts.into_iter().map(|p| p.weight).collect();
        Linear {
            weight: WeightMatrix::concat_rows(weights),
            bias,
        }
    }

    pub fn out_dim(&self) -> usize {
        self.weight.rows()
    }

    /// `x` holds `n` rows of `in_dim`; `out` takes `n` rows of `out_dim` (every value
    /// assigned).
    pub fn forward(&self, isa: Isa, x: &[f32], n: usize, out: &mut [f32]) {
        self.weight.matmul(isa, x, n, out);
        if let Some(bias) = &self.bias {
            for row in out.chunks_exact_mut(bias.len()) {
                for (o, b) in row.iter_mut().zip(bias) {
                    *o += b;
                }
            }
        }
    }
}
