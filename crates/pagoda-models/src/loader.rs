//! From a model directory to a loaded `CausalLm`.

use std::path::Path;

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::matrix::WeightDtype;
use crate::model::CausalLm;
use crate::weights::{DummyWeights, SafetensorsWeights};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadFormat {
    /// The directory's `*.safetensors`.
    #[default]
    Safetensors,
    /// Seeded random weights from `config.json` alone.
    Dummy,
}

#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub format: LoadFormat,
    /// The dtype weights are held in; `None` keeps the checkpoint's (`torch_dtype` for dummy
    /// weights, f32 if it names none).
    pub dtype: Option<WeightDtype>,
    /// Seed of dummy weights.
    pub seed: u64,
}

pub fn load_config(dir: &Path) -> Result<ModelConfig> {
    if !dir.is_dir() {
        return Err(ModelError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such model directory"),
        ));
    }
    ModelConfig::from_file(&dir.join("config.json"))
}

/// Loads the model in `dir` and returns it with the dtype its weights are held in.
pub fn load_model(dir: &Path, options: &LoadOptions) -> Result<(CausalLm, WeightDtype)> {
    let config = load_config(dir)?;
    match options.format {
        LoadFormat::Safetensors => {
            let weights = SafetensorsWeights::open(dir, options.dtype)?;
            Ok((CausalLm::load(&config, &weights)?, weights.dtype()))
        }
        LoadFormat::Dummy => {
            let dtype = options
                .dtype
                .or_else(|| config.torch_dtype.as_deref().and_then(WeightDtype::parse))
                .unwrap_or(WeightDtype::F32);
            let weights = DummyWeights::new(options.seed, dtype);
            Ok((CausalLm::load(&config, &weights)?, dtype))
        }
    }
}
