//! Seeded random weights shaped by the config alone, as vLLM's `--load-format dummy`: lets
//! real architectures be benchmarked without downloading them.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::WeightSource;
use crate::error::Result;
use crate::matrix::{Matrix, WeightDtype};

/// Values per independently seeded chunk, so generation runs in parallel yet is reproducible.
const CHUNK: usize = 1 << 16;

#[derive(Debug, Clone)]
pub struct DummyWeights {
    seed: u64,
    dtype: WeightDtype,
}

impl DummyWeights {
    pub fn new(seed: u64, dtype: WeightDtype) -> Self {
        DummyWeights { seed, dtype }
    }

    pub fn dtype(&self) -> WeightDtype {
        self.dtype
    }

    fn values(&self, name: &str, len: usize, center: f32, spread: f32) -> Vec<f32> {
        let name_seed = name
            .bytes()
            .fold(self.seed ^ 0x9e37_79b9_7f4a_7c15, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
        let mut out = vec![0.0f32; len];
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| {
                let mut rng = SmallRng::seed_from_u64(name_seed.wrapping_add(i as u64));
                for v in chunk {
                    *v = center + spread * (rng.random::<f32>() * 2.0 - 1.0);
                }
            });
        out
    }
}

impl WeightSource for DummyWeights {
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
        // Uniform with standard deviation 0.02, the usual initializer range.
        let values = self.values(name, rows * cols, 0.0, 0.02 * 3f32.sqrt());
        Ok(Matrix::from_f32(rows, cols, values, self.dtype))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        Ok(if name.ends_with("norm.weight") {
            self.values(name, len, 1.0, 0.0)
        } else {
            self.values(name, len, 0.0, 0.02)
        })
    }

    fn contains(&self, _name: &str) -> bool {
        true
    }
}
