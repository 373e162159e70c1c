//! From a model directory to a loaded `CausalLm`.

use std::path::Path;
use std::sync::Arc;

use pagoda_gguf::GgufFile;

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::gguf::{config_from_gguf, GgufWeights};
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

/// Whether `path` is a GGUF file rather than a model directory.
pub fn is_gguf(path: &Path) -> bool {
    GgufFile::is_gguf(path)
}

/// The config of a model directory (`config.json`) or of a GGUF file (its metadata).
pub fn load_config(dir: &Path) -> Result<ModelConfig> {
    if is_gguf(dir) {
        return config_from_gguf(&GgufFile::open(dir)?);
    }
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
    if is_gguf(dir) && options.format == LoadFormat::Safetensors {
        return load_gguf(dir, options);
    }
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

/// A GGUF file's weights stay in their stored types (quantized ones in the file's map).
fn load_gguf(path: &Path, options: &LoadOptions) -> Result<(CausalLm, WeightDtype)> {
    if let Some(dtype) = options.dtype {
        return Err(ModelError::field(
            "dtype",
            format!(
                "{dtype} cannot be applied to a GGUF file, whose tensors keep their stored types"
            ),
        ));
    }
    let file = Arc::new(GgufFile::open(path)?);
    let config = config_from_gguf(&file)?;
    let weights = GgufWeights::new(file, &config);
    Ok((CausalLm::load(&config, &weights)?, weights.dtype()))
}
