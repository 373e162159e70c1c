//! Where weights come from: a directory of safetensors files, or seeded random values shaped
//! by the config (`--load-format dummy`). Both hand out tensors by Hugging Face name, already
//! checked against the shape the config implies and converted to the dtype asked for.

mod dummy;
mod safetensors_dir;

pub use dummy::DummyWeights;
pub use safetensors_dir::SafetensorsWeights;

use crate::error::Result;
use crate::matrix::Matrix;
use crate::packed::PackedMatrix;
use crate::weight_matrix::WeightMatrix;

pub trait WeightSource: Sync {
    /// A `[rows, cols]` weight in the source's target dtype.
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix>;
    /// A 1-D weight (norm scale, bias) as f32.
    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>>;
    fn contains(&self, name: &str) -> bool;
    /// A `[rows, cols]` weight as the model holds it; sources of GGUF blocks override this.
    fn weight(&self, name: &str, rows: usize, cols: usize) -> Result<WeightMatrix> {
        Ok(WeightMatrix::Packed(PackedMatrix::pack(
            &self.matrix(name, rows, cols)?,
        )))
    }
}
