//! Where weights come from: a directory of safetensors files, or seeded random values shaped
//! by the config (`--load-format dummy`). Both hand out tensors by Hugging Face name, already
//! checked against the shape the config implies and converted to the dtype asked for.

mod dummy;
mod safetensors_dir;

pub use dummy::DummyWeights;
pub use safetensors_dir::SafetensorsWeights;

use crate::error::Result;
use crate::matrix::Matrix;

pub trait WeightSource: Sync {
    /// A `[rows, cols]` weight in the source's target dtype.
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix>;
    /// A 1-D weight (norm scale, bias) as f32.
    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>>;
    fn contains(&self, name: &str) -> bool;
}
